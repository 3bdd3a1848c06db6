//go:build purego || !(amd64 || arm64) || (arm64 && noasm)

package vec

// Kernels names the implementation in use, for benchmarks and tools.
func Kernels() string { return "go" }

func fastScan(lut, signs []byte, out *[32]uint32) { fastScanGo(lut, signs, out) }

func dotLevels(q []float32, signs, low []byte, w int) float32 {
	return dotLevelsGo(q, signs, low, w)
}

func tables(k []int32, lut []byte) int32 { return tablesGo(k, lut) }

func blockEstimate(sums *[32]uint32, scal []byte, c *[8]float32, est, bound *[32]float32) {
	blockEstimateGo(sums, scal, c, est, bound)
}

func prefetch(b []byte) {}
