//go:build purego || !(amd64 || arm64) || (arm64 && noasm)

package vec

// Kernels names the implementation in use, for benchmarks and tools.
func Kernels() string { return "go" }

func panel4(x []float32, xstride int, panel []float32, d int, out []float32, ostride int) {
	panel4Go(x, xstride, panel, d, out, ostride)
}

func panel1(x, panel []float32, pstride, d int, out []float32) {
	panel1Go(x, panel, pstride, d, out)
}

func dotU8(q []float32, c []byte) float32 { return dotU8Go(q, c) }
func dotU4(q []float32, c []byte) float32 { return dotU4Go(q, c) }

func fastScan(lut, signs []byte, out *[32]uint32) { fastScanGo(lut, signs, out) }

func dotLevels(q []float32, signs, low []byte, w int) float32 {
	return dotLevelsGo(q, signs, low, w)
}

func diffStats(dst, a, b []float32, out *[3]float32) { diffStatsGo(dst, a, b, out) }

func quantize(q []float32, inv, delta float32, k []int32, out *[2]float32) {
	quantizeGo(q, inv, delta, k, out)
}

func tables(k []int32, lut []byte) int32 { return tablesGo(k, lut) }

func blockEstimate(sums *[32]uint32, scal []byte, c *[8]float32, est, bound *[32]float32) {
	blockEstimateGo(sums, scal, c, est, bound)
}

func prefetch(b []byte) {}
