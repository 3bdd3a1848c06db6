//go:build purego || !amd64

package vec

// The kernels with no assembly outside amd64 run their Go versions on
// every other architecture (arm64 included) and under purego.

func panel4(x []float32, xstride int, panel []float32, d int, out []float32, ostride int) {
	panel4Go(x, xstride, panel, d, out, ostride)
}

func panel1(x, panel []float32, pstride, d int, out []float32) {
	panel1Go(x, panel, pstride, d, out)
}

func dotU8(q []float32, c []byte) float32      { return dotU8Go(q, c) }
func dotU4(q []float32, c []byte) float32      { return dotU4Go(q, c) }
func sumSquares(x []float32) float32           { return sumSquaresGo(x) }
func dotBits(q []float32, bits []byte) float32 { return dotBitsGo(q, bits) }
func fwht(x []float32, scale float32)          { fwhtGo(x, scale) }

func dotsU4I8(w []int8, data []byte, stride, rows int, ids []uint32, out []int32) int {
	return dotsU4I8Go(w, data, stride, rows, ids, out)
}

func diffStats(dst, a, b []float32, out *[3]float32) { diffStatsGo(dst, a, b, out) }
func l2Lanes(a, b []float32) float32                 { return l2LanesGo(a, b) }

func l2Lanes4(a, b0, b1, b2, b3 []float32, out *[4]float32) { l2Lanes4Go(a, b0, b1, b2, b3, out) }

func halfKernels() bool                 { return false }
func l2LanesHalf(a, b []uint16) float32 { return l2LanesHalfGo(a, b) }

func l2LanesHalf4(a, b0, b1, b2, b3 []uint16, out *[4]float32) {
	l2LanesHalf4Go(a, b0, b1, b2, b3, out)
}

func quantize(q []float32, inv, delta float32, k []int32, out *[2]float32) {
	quantizeGo(q, inv, delta, k, out)
}
