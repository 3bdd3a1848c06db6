package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
)

// The reduce adds its terms as 64-bit integers, each term t as
// rint(t * scale) for a power of two scale (kernels.cu: fixed point), so
// that its sums, and the anchors and energies made from them, do not
// depend on the order in which the GPU's atomics land. The scales are
// picked for a largest point distance smax: a point's terms are then at
// most smax (r^2, dist) and sqrt(smax) (w r), so no sum of n terms can
// overflow, and the rest of the 63 bits keep as much precision as they
// can. The first pass takes smax from a bound on the data (every |x| and
// |a| at most B: dist <= d (2B)^2); each later pass from the largest
// distance the pass before measured, with room to grow; a pass that
// meets a point beyond its smax moves nothing and is reduced again with
// scales for the distance it measured (dataset.pass). So the scales
// follow the data's real spread, not its worst case: one far outlier
// costs precision only while it sits far from its anchor.

// fixScales are the scales of the four kinds of terms, and the largest
// point distance they allow.
type fixScales struct {
	sum    float32 // w r, per anchor and dimension
	sq     float32 // r^2, per anchor and dimension
	w      float32 // the Huber weight w (<= 1), per anchor
	energy float32 // |x - a|^2, over all points
	smax   float32 // the largest |x - a|^2 of a point
}

// scalesFor returns the scales for n points none further than smax from
// its anchor: every sum of n terms stays below 2^62.
func scalesFor(n int, smax float64) fixScales {
	smax = min(max(smax, 1e-30), math.MaxFloat32)
	nf := float64(max(n, 1))
	return fixScales{
		sum:    scaleFor(nf * math.Sqrt(smax)),
		sq:     scaleFor(nf * smax),
		w:      scaleFor(2 * nf),
		energy: scaleFor(nf * smax),
		smax:   float32(smax),
	}
}

// boundDist is the largest distance of a point from an anchor when every
// value of both is at most bound in magnitude, twice over for rounding.
func boundDist(d int, bound float64) float64 {
	return 2 * float64(d) * (2 * bound) * (2 * bound)
}

// scaleFor is the largest power of two s (within float32's normal range,
// with room for its inverse) with limit * s <= 2^62.
func scaleFor(limit float64) float32 {
	e := 62 - int(math.Ceil(math.Log2(limit)))
	e = min(max(e, -120), 120)
	return float32(math.Ldexp(1, e))
}

// maxAbsHalf returns the largest magnitude among float16 values (raw
// bits), on all cores, or an error wrapping device.ErrNonFinite that names
// the first value (row and column of rows of dim values) that is not
// finite: an Inf or NaN would leave no bound for the fixed-point sums.
func maxAbsHalf(data []uint16, dim int) (float64, error) { return maxAbsHalfRows(data, dim, 0) }

// maxAbsHalfRows is maxAbsHalf for rows first, first+1, ... of a larger
// set: its error names the row in that set.
func maxAbsHalfRows(data []uint16, dim, first int) (float64, error) {
	const chunk = 1 << 20
	parts := (len(data) + chunk - 1) / chunk
	maxes := make([]uint16, parts)
	bad := make([]int, parts)
	par.For(len(data), chunk, func(lo, hi int) {
		p := lo / chunk
		m := maxMagnitude(data[lo:hi])
		maxes[p], bad[p] = m, -1
		if m >= 0x7c00 { // an exponent of all ones: Inf or NaN
			for i, h := range data[lo:hi] {
				if h&0x7fff >= 0x7c00 {
					bad[p] = lo + i
					break
				}
			}
		}
	})
	var m uint16
	for p := range parts {
		if bad[p] >= 0 {
			i := bad[p]
			return 0, fmt.Errorf("cuda: point %d, dimension %d: %v: %w", first+i/dim, i%dim, f16.ToFloat32(data[i]), device.ErrNonFinite)
		}
		m = max(m, maxes[p])
	}
	return float64(f16.ToFloat32(m)), nil
}

// maxAbs32 is maxAbsHalf for float32 values (anchors), on all cores.
func maxAbs32(data []float32, dim int) (float64, error) {
	const chunk = 1 << 16
	parts := (len(data) + chunk - 1) / chunk
	maxes := make([]float64, parts)
	bad := make([]int, parts)
	par.For(len(data), chunk, func(lo, hi int) {
		p := lo / chunk
		var m float64
		bad[p] = -1
		for i, v := range data[lo:hi] {
			a := math.Abs(float64(v))
			if math.IsInf(a, 0) || math.IsNaN(a) {
				bad[p] = lo + i
				break
			}
			m = max(m, a)
		}
		maxes[p] = m
	})
	var m float64
	for p := range parts {
		if i := bad[p]; i >= 0 {
			return 0, fmt.Errorf("cuda: anchor %d, dimension %d: %v: %w", i/dim, i%dim, data[i], device.ErrNonFinite)
		}
		m = max(m, maxes[p])
	}
	return m, nil
}

// maxMagnitude is the largest h&0x7fff of data. It takes four values a
// 64-bit word, four words at a time: a lane keeps its maximum by a
// subtraction whose top bit says which is larger (values below 2^15,
// so no lane borrows from the next). One core: 2.5x a value at a time.
func maxMagnitude(data []uint16) uint16 {
	const (
		low15 = 0x7fff7fff7fff7fff
		top   = 0x8000800080008000
	)
	// keep returns m with each lane raised to a's where a's is larger.
	keep := func(m, a uint64) uint64 {
		ge := ((a | top) - m) & top // lanes where a >= m
		mask := (ge >> 15) * 0xffff
		return m ^ ((m ^ a) & mask)
	}
	var m0, m1, m2, m3 uint64
	i := 0
	if len(data) >= 16 {
		words := unsafe.Slice((*uint64)(unsafe.Pointer(&data[0])), len(data)/4)
		for ; i+3 < len(words); i += 4 {
			w := words[i : i+4 : i+4]
			m0 = keep(m0, w[0]&low15)
			m1 = keep(m1, w[1]&low15)
			m2 = keep(m2, w[2]&low15)
			m3 = keep(m3, w[3]&low15)
		}
		i *= 4
	}
	m := keep(keep(m0, m1), keep(m2, m3))
	var out uint16
	for k := range 4 {
		out = max(out, uint16(m>>(16*k)))
	}
	for _, h := range data[i:] {
		out = max(out, h&0x7fff)
	}
	return out
}
