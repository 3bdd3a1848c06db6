//go:build !purego && !noasm

package vec

import "unsafe"

// On arm64 the fast-scan kernels run on NEON, which every arm64 processor
// Go supports has (neon_arm64.s, transpiled from neon/neon_arm64.c); the
// others run their Go versions (kernels_noasm.go).

// Kernels names the implementation in use, for benchmarks and tools.
func Kernels() string { return "neon" }

// tablePicks are tables_neon's byte shuffles: pick i, entry v, is byte
// 4i of a lane (max(k, 0)) when bit i of v is set, else byte 4i+1
// (max(-k, 0)).
var tablePicks = func() (p [64]byte) {
	for i := range 4 {
		for v := range 16 {
			p[16*i+v] = byte(4*i + 1 - v>>i&1)
		}
	}
	return p
}()

// levelShifts are levels_neon's shifts for w low bits: the sign bits'
// then the low bits' (negative: to the right).
var levelShifts = func() (s [8][12]int32) {
	for w := range s {
		for i := range 8 {
			s[w][i] = -int32(i)
		}
		for i := range 4 {
			s[w][8+i] = -int32(w * i)
		}
	}
	return s
}()

func fastScan(lut, signs []byte, out *[32]uint32) {
	var s [32]uint16
	fast_scan_neon(unsafe.Pointer(&lut[0]), unsafe.Pointer(&signs[0]), int64(len(lut)/32), unsafe.Pointer(&s[0]))
	for v, x := range s {
		out[v] += uint32(x)
	}
}

func dotLevels(q []float32, signs, low []byte, w int) float32 {
	lp := unsafe.Pointer(nil)
	if w > 0 {
		lp = unsafe.Pointer(&low[0])
	}
	var sum float32
	levels_neon(unsafe.Pointer(&q[0]), unsafe.Pointer(&signs[0]), lp, int64(len(q)/8), int64(w), unsafe.Pointer(&levelShifts[w][0]), unsafe.Pointer(&sum))
	return sum
}

func tables(k []int32, lut []byte) int32 {
	var off int32
	tables_neon(unsafe.Pointer(&k[0]), int64(len(k)), unsafe.Pointer(&lut[0]), unsafe.Pointer(&off), unsafe.Pointer(&tablePicks[0]))
	return off
}

func blockEstimate(sums *[32]uint32, scal []byte, c *[8]float32, est, bound *[32]float32) {
	block_estimate_neon(unsafe.Pointer(&sums[0]), unsafe.Pointer(&scal[0]), unsafe.Pointer(&c[0]), unsafe.Pointer(&est[0]), unsafe.Pointer(&bound[0]))
}

func prefetch(b []byte) {}
