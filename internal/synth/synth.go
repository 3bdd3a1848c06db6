// Package synth makes seeded synthetic data for tests, benchmarks and the
// backend checks of the CLI: float16 points in Gaussian clusters, and
// anchors drawn from them. The same arguments give the same values on any
// machine and core count.
package synth

import (
	"math/rand/v2"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
)

// block is how many rows one generator draws: each block of rows has its
// own generator, seeded by the seed and the block's number, so the rows
// can be drawn on all cores and still depend on the seed alone.
const block = 4096

// Clusters returns n float16 points of dimension d around k random centres
// (each coordinate of a centre drawn with standard deviation 10) with unit
// Gaussian noise.
func Clusters(n, d, k int, seed uint64) device.Points {
	rng := rand.New(rand.NewPCG(seed, 1))
	centres := make([]float32, k*d)
	for i := range centres {
		centres[i] = float32(rng.NormFloat64() * 10)
	}
	data := make([]uint16, n*d)
	par.For(n, block, func(lo, hi int) {
		r := rand.New(rand.NewPCG(seed, 2+uint64(lo/block)))
		for i := lo; i < hi; i++ {
			c := centres[r.IntN(k)*d:]
			for j := range d {
				data[i*d+j] = f16.FromFloat32(c[j] + float32(r.NormFloat64()))
			}
		}
	})
	return device.Points{Data: data, N: n, Dim: d}
}

// PickAnchors returns m distinct points of pts, chosen at random, as float32
// anchors (m <= pts.N).
func PickAnchors(pts device.Points, m int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	d := pts.Dim
	a := make([]float32, m*d)
	for k, i := range rng.Perm(pts.N)[:m] {
		f16.DecodeRow(a[k*d:(k+1)*d], pts.Data[i*d:(i+1)*d])
	}
	return a
}

// AnchorsNear returns m anchors: points of pts chosen at random (with
// repeats) and moved by Gaussian noise of standard deviation noise, so that
// some points sit near two anchors.
func AnchorsNear(pts device.Points, m int, noise float64, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	d := pts.Dim
	a := make([]float32, m*d)
	for k := range m {
		i := rng.IntN(pts.N)
		f16.DecodeRow(a[k*d:(k+1)*d], pts.Data[i*d:(i+1)*d])
		for j := range d {
			a[k*d+j] += float32(rng.NormFloat64() * noise)
		}
	}
	return a
}
