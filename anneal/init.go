package anneal

import (
	"math/rand/v2"
	"slices"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// initPlusPlus picks m starting anchors by k-means++ (D^2 sampling) on a
// seeded sample of s points. Duplicate points can leave fewer than m
// distinct candidates; the remaining anchors are then drawn uniformly.
func initPlusPlus(pts Points, m, s int, rng *rand.Rand) []float32 {
	d := pts.Dim
	idx := sample(pts.N, s, rng)
	x := make([]float32, s*d)
	for i, p := range idx {
		f16.DecodeRow(x[i*d:(i+1)*d], pts.Data[p*d:(p+1)*d])
	}
	anchors := make([]float32, m*d)
	dist := make([]float32, s)
	first := rng.IntN(s)
	copy(anchors[:d], x[first*d:(first+1)*d])
	par.For(s, 1024, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dist[i] = vec.L2(x[i*d:(i+1)*d], anchors[:d])
		}
	})
	for k := 1; k < m; k++ {
		var total float64
		for _, v := range dist {
			total += float64(v)
		}
		pick := rng.IntN(s) // all remaining points coincide with an anchor
		if total > 0 {
			// D^2 sampling; rounding can leave r >= 0 after the last point,
			// which then keeps the last point with a positive distance.
			r := rng.Float64() * total
			for i, v := range dist {
				if v > 0 {
					pick = i
					if r -= float64(v); r < 0 {
						break
					}
				}
			}
		}
		c := anchors[k*d : (k+1)*d]
		copy(c, x[pick*d:(pick+1)*d])
		par.For(s, 1024, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if v := vec.L2(x[i*d:(i+1)*d], c); v < dist[i] {
					dist[i] = v
				}
			}
		})
	}
	return anchors
}

// sample returns s distinct indices below n in ascending order, drawn with
// Floyd's algorithm (memory O(s), not O(n)).
func sample(n, s int, rng *rand.Rand) []int {
	if s >= n {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return all
	}
	seen := make(map[int]struct{}, s)
	out := make([]int, 0, s)
	for j := n - s; j < n; j++ {
		t := rng.IntN(j + 1)
		if _, ok := seen[t]; ok {
			t = j
		}
		seen[t] = struct{}{}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}
