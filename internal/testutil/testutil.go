// Package testutil makes the synthetic data tests share: clustered float16
// points drawn from a seed.
package testutil

import (
	"math/rand/v2"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/internal/f16"
)

// Clusters returns n points of dimension d around k random centres (spread
// 10 per coordinate) with unit Gaussian noise, as float16, and the centre of
// each point. The same seed gives the same points.
func Clusters(n, d, k int, seed uint64) (anneal.Points, []int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	centres := make([]float32, k*d)
	for i := range centres {
		centres[i] = float32(rng.NormFloat64() * 10)
	}
	pts := make([]uint16, n*d)
	label := make([]int, n)
	for i := range n {
		c := rng.IntN(k)
		label[i] = c
		for j := range d {
			pts[i*d+j] = f16.FromFloat32(centres[c*d+j] + float32(rng.NormFloat64()))
		}
	}
	return anneal.Points{Data: pts, N: n, Dim: d}, label
}
