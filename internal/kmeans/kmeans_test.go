package kmeans

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// On four clusters far apart, four centroids land one on each cluster's
// mean (of the rows as drawn, to float32 rounding).
func TestTrainFindsClusters(t *testing.T) {
	const w, per = 3, 250
	centres := [][w]float32{{0, 0, 0}, {100, 0, 0}, {0, 100, 0}, {0, 0, 100}}
	rng := rand.New(rand.NewPCG(1, 2))
	var x []float32
	means := make([][w]float64, len(centres))
	for i := range per * len(centres) {
		c := i % len(centres)
		for j := range w {
			v := centres[c][j] + float32(rng.NormFloat64())
			x = append(x, v)
			means[c][j] += float64(v) / per
		}
	}
	cent := make([]float32, len(centres)*w)
	Train(cent, x, len(x)/w, w, 20, rand.New(rand.NewPCG(3, 4)))
	found := make([]bool, len(centres))
	for k := range len(centres) {
		got := cent[k*w : (k+1)*w]
		for c, m := range means {
			if math.Abs(float64(got[0])-m[0])+math.Abs(float64(got[1])-m[1])+math.Abs(float64(got[2])-m[2]) < 1e-3 {
				found[c] = true
			}
		}
	}
	if slices.Contains(found, false) {
		t.Errorf("centroids %v, want the cluster means %v", cent, means)
	}
}

// No rows give zero centroids; with fewer distinct rows than centroids
// every centroid is a row, or a copy of one nudged apart from it (an
// empty cluster splitting the largest: by 1/1024 of each value), and
// every row has one.
func TestTrainFewRows(t *testing.T) {
	cent := []float32{9, 9, 9, 9}
	Train(cent, nil, 0, 2, 10, rand.New(rand.NewPCG(1, 1)))
	if !slices.Equal(cent, make([]float32, 4)) {
		t.Errorf("no rows: centroids %v, want zeros", cent)
	}
	x := []float32{1, 2, 3, 4, 1, 2, 3, 4, 1, 2}
	cent = make([]float32, 8*2)
	Train(cent, x, 5, 2, 10, rand.New(rand.NewPCG(1, 1)))
	seen := map[int]bool{}
	for k := range 8 {
		near := -1
		for r := range 2 {
			if math.Abs(float64(cent[2*k]-x[2*r]))+math.Abs(float64(cent[2*k+1]-x[2*r+1])) <= 0.01 {
				near = r
			}
		}
		if near < 0 {
			t.Fatalf("centroid %d is %v, not near a row", k, cent[2*k:2*k+2])
		}
		seen[near] = true
	}
	if len(seen) != 2 {
		t.Errorf("centroids %v miss a row", cent)
	}
}
