package index

import (
	"math"

	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// Exact returns, for every query, the rows of the k nearest base vectors by
// exact distance under metric, nearest first (ties by ascending row): the
// ground truth that recall is measured against. It decodes base in blocks
// and scans every row, so it costs nq*n*dim multiply-adds.
//
// For l2 and ip, where base and queries are so small or so large that
// float32 squares and products would underflow or overflow (the largest
// |value| beyond 2^-30 .. 2^30), both are scaled by one power of two
// first, which leaves every ranking as it is; under ip each query is then
// scaled on its own (ScaleIPQuery).
func Exact(base, queries Rows, k int, metric Metric) [][]int {
	n, d, nq := base.Len(), base.Dim(), queries.Len()
	k = min(k, n)
	q := make([]float32, nq*d)
	for i := range nq {
		x := queries.Row(i, q[i*d:(i+1)*d])
		if metric == Cosine {
			vec.Normalize(x)
		}
	}
	scale := 0
	if metric != Cosine {
		scale = exactScale(base, q)
		for j := range q {
			q[j] = float32(math.Ldexp(float64(q[j]), scale))
		}
	}
	if metric == IP {
		// A query's length does not change its ranking under ip: each
		// is brought near 1 on its own, whatever the others' scale.
		for i := range nq {
			ScaleIPQuery(q[i*d : (i+1)*d])
		}
	}
	tops := make([]topK, nq)
	for i := range tops {
		tops[i].reset(k)
	}
	const block = 2048
	rows := make([]float32, block*d)
	for lo := 0; lo < n; lo += block {
		hi := min(lo+block, n)
		par.For(hi-lo, 256, func(a, b int) {
			for r := a; r < b; r++ {
				x := base.Row(lo+r, rows[r*d:(r+1)*d])
				if metric == Cosine {
					vec.Normalize(x)
				}
				if scale != 0 {
					for j, v := range x {
						x[j] = float32(math.Ldexp(float64(v), scale))
					}
				}
			}
		})
		par.For(nq, 16, func(a, b int) {
			for i := a; i < b; i++ {
				qi := q[i*d : (i+1)*d]
				for r := 0; r < hi-lo; r++ {
					var dist float32
					if metric == IP {
						dist = -vec.Dot(qi, rows[r*d:(r+1)*d])
					} else {
						dist = vec.L2(qi, rows[r*d:(r+1)*d])
					}
					if tops[i].accepts(dist) {
						tops[i].push(Hit{ID: lo + r, Distance: dist})
					}
				}
			}
		})
	}
	out := make([][]int, nq)
	for i := range tops {
		for _, h := range tops[i].sorted() {
			out[i] = append(out[i], h.ID)
		}
	}
	return out
}

// exactScale returns the power of two that brings the largest |value| of
// base and q to about 1 where it lies outside 2^-30 .. 2^30, else 0 (no
// scaling, so that normal inputs are computed as always).
func exactScale(base Rows, q []float32) int {
	var big float64
	for _, v := range q {
		big = max(big, math.Abs(float64(v)))
	}
	x := make([]float32, base.Dim())
	for i := range base.Len() {
		for _, v := range base.Row(i, x) {
			big = max(big, math.Abs(float64(v)))
		}
	}
	if big == 0 || (big >= 0x1p-30 && big <= 0x1p30) {
		return 0
	}
	_, e := math.Frexp(big)
	return -e
}
