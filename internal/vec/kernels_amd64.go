//go:build !purego

package vec

import "golang.org/x/sys/cpu"

// hasAVX2 selects the assembly kernels; without AVX2 the Go ones run.
var hasAVX2 = cpu.X86.HasAVX2

// hasF16C selects the float16 kernels (VCVTPH2PS): CPUID leaf 1, ECX bit
// 29, which golang.org/x/sys/cpu does not report.
var hasF16C = hasAVX2 && cpuidECX1()&(1<<29) != 0

// Kernels names the implementation in use, for benchmarks and tools.
func Kernels() string {
	if hasAVX2 {
		return "avx2"
	}
	return "go"
}

func panel4(x []float32, xstride int, panel []float32, d int, out []float32, ostride int) {
	if !hasAVX2 || d == 0 {
		panel4Go(x, xstride, panel, d, out, ostride)
		return
	}
	_ = x[3*xstride+d-1]
	_ = panel[PanelWidth*d-1]
	_ = out[3*ostride+PanelWidth-1]
	panel4AVX2(&x[0], xstride, &panel[0], d, &out[0], ostride)
}

func panel1(x, panel []float32, pstride, d int, out []float32) {
	if !hasAVX2 || d == 0 {
		panel1Go(x, panel, pstride, d, out)
		return
	}
	_ = x[d-1]
	_ = panel[(panelGroup-1)*pstride+PanelWidth*d-1]
	_ = out[panelGroup*PanelWidth-1]
	panel1AVX2(&x[0], &panel[0], pstride, d, &out[0])
}

func dotU8(q []float32, c []byte) float32 {
	if !hasAVX2 || len(c) == 0 {
		return dotU8Go(q, c)
	}
	_ = q[len(c)-1]
	return dotU8AVX2(&q[0], &c[0], len(c))
}

func dotU4(q []float32, c []byte) float32 {
	if !hasAVX2 || len(c) == 0 {
		return dotU4Go(q, c)
	}
	_ = q[2*len(c)-1]
	return dotU4AVX2(&q[0], &c[0], len(c))
}

func dotsU4I8(w []int8, data []byte, stride, rows int, ids []uint32, out []int32) int {
	if !hasAVX2 {
		return dotsU4I8Go(w, data, stride, rows, ids, out)
	}
	return dotsU4I8AVX2(&w[0], len(w)/2, &data[0], stride, rows, &ids[0], len(ids), &out[0])
}

func dotBits(q []float32, bits []byte) float32 {
	if !hasAVX2 || len(bits) == 0 {
		return dotBitsGo(q, bits)
	}
	_ = q[8*len(bits)-1]
	return dotBitsAVX2(&q[0], &bits[0], len(bits))
}

func fwht(x []float32, scale float32) {
	if !hasAVX2 || len(x) < 8 {
		fwhtGo(x, scale)
		return
	}
	fwhtAVX2(&x[0], len(x), scale)
}

func sumSquares(x []float32) float32 {
	if !hasAVX2 || len(x) == 0 {
		return sumSquaresGo(x)
	}
	return sumSquaresAVX2(&x[0], len(x))
}

func fastScan(lut, signs []byte, out *[32]uint32) {
	if !hasAVX2 {
		fastScanGo(lut, signs, out)
		return
	}
	var s [32]uint16 // entries 0, 2, .. 30, then 1, 3, .. 31
	fastScanAVX2(&lut[0], &signs[0], len(lut)/32, &s[0])
	for i := range 16 {
		out[2*i] += uint32(s[i])
		out[2*i+1] += uint32(s[16+i])
	}
}

func dotLevels(q []float32, signs, low []byte, w int) float32 {
	if !hasAVX2 {
		return dotLevelsGo(q, signs, low, w)
	}
	chunks := len(q) / 8
	switch w {
	case 0:
		return dotLevels0AVX2(&q[0], &signs[0], nil, chunks)
	case 1:
		return dotLevels1AVX2(&q[0], &signs[0], &low[0], chunks)
	case 3:
		return dotLevels3AVX2(&q[0], &signs[0], &low[0], chunks)
	}
	return dotLevels7AVX2(&q[0], &signs[0], &low[0], chunks)
}

func diffStats(dst, a, b []float32, out *[3]float32) {
	if !hasAVX2 {
		diffStatsGo(dst, a, b, out)
		return
	}
	diffStatsAVX2(&dst[0], &a[0], &b[0], len(dst), &out[0])
}

func l2Lanes(a, b []float32) float32 {
	if !hasAVX2 {
		return l2LanesGo(a, b)
	}
	return l2LanesAVX2(&a[0], &b[0], len(a))
}

func l2Lanes4(a, b0, b1, b2, b3 []float32, out *[4]float32) {
	if !hasAVX2 {
		l2Lanes4Go(a, b0, b1, b2, b3, out)
		return
	}
	l2Lanes4AVX2(&a[0], &b0[0], &b1[0], &b2[0], &b3[0], len(a), &out[0])
}

func halfKernels() bool { return hasF16C }

func l2LanesHalf(a, b []uint16) float32 {
	if !hasF16C {
		return l2LanesHalfGo(a, b)
	}
	return l2LanesHalfAVX2(&a[0], &b[0], len(a))
}

func l2LanesHalf4(a, b0, b1, b2, b3 []uint16, out *[4]float32) {
	if !hasF16C {
		l2LanesHalf4Go(a, b0, b1, b2, b3, out)
		return
	}
	l2LanesHalf4AVX2(&a[0], &b0[0], &b1[0], &b2[0], &b3[0], len(a), &out[0])
}

func quantize(q []float32, inv, delta float32, k []int32, out *[2]float32) {
	if !hasAVX2 {
		quantizeGo(q, inv, delta, k, out)
		return
	}
	quantizeAVX2(&q[0], len(q), inv, delta, &k[0], &out[0])
}

func tables(k []int32, lut []byte) int32 {
	if !hasAVX2 {
		return tablesGo(k, lut)
	}
	return tablesAVX2(&k[0], len(k), &lut[0])
}

func blockEstimate(sums *[32]uint32, scal []byte, c *[8]float32, est, bound *[32]float32) {
	if !hasAVX2 {
		blockEstimateGo(sums, scal, c, est, bound)
		return
	}
	blockEstimateAVX2(&sums[0], &scal[0], &c[0], &est[0], &bound[0])
}

func prefetch(b []byte) {
	if hasAVX2 {
		prefetchLines(&b[0], len(b))
	}
}
