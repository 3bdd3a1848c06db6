//go:build !purego

package vec

import "golang.org/x/sys/cpu"

// hasAVX2 selects the assembly kernels; without AVX2 the Go ones run.
var hasAVX2 = cpu.X86.HasAVX2

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
