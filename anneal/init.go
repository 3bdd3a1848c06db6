package anneal

import (
	"math/rand/v2"
	"slices"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/kmeans"
)

// initPlusPlus picks m starting anchors by k-means++ (D^2 sampling) on a
// seeded sample of s points. Duplicate points can leave fewer than m
// distinct candidates; the remaining anchors are then drawn uniformly. The
// random numbers of every round are drawn first, so that a device can run
// all the rounds (PlusPlusDrawer, the points on a GPU); otherwise they run
// on the host. Both give the same bits, so the same anchors.
func initPlusPlus(pts device.Points, m, s int, rng *rand.Rand, ds device.Dataset) ([]float32, error) {
	d := pts.Dim
	idx := sample(pts.N, s, rng)
	first, u, fallback := kmeans.Draws(s, m, rng)
	var picks []int
	var err error
	if dr, ok := ds.(device.PlusPlusDrawer); ok {
		picks, err = dr.DrawPlusPlus(idx, first, u, fallback)
	} else {
		dist := make([]float32, s)
		picks, err = kmeans.PlusPlusRounds(first, u, fallback, dist, kmeans.HostDistances(pts.Data, d, idx, dist))
	}
	if err != nil {
		return nil, err
	}
	anchors := make([]float32, m*d)
	for k, p := range append([]int{first}, picks...) {
		f16.DecodeRow(anchors[k*d:(k+1)*d], pts.Data[idx[p]*d:(idx[p]+1)*d])
	}
	return anchors, nil
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
