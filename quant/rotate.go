package quant

import (
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/vlc-embed/vlc/internal/vec"
)

// Rotation is a seeded random orthogonal transform of R^d that costs
// O(d log d) to apply and needs only its seed to be stored: rounds of random
// sign flips, each followed by normalised Walsh-Hadamard transforms of the
// first p and the last p coordinates, p being the largest power of two not
// above d. When d is not a power of two the two blocks overlap, so over the
// rounds every coordinate mixes with every other, and no padding widens the
// codes.
type Rotation struct {
	d, p  int
	signs [rotationRounds][]float32
}

const rotationRounds = 3

// NewRotation returns the rotation of R^d drawn from seed.
func NewRotation(d int, seed uint64) *Rotation {
	r := &Rotation{d: d, p: 1 << (bits.Len(uint(d)) - 1)}
	rng := rand.New(rand.NewPCG(seed, 0x726f74)) // "rot"
	for k := range r.signs {
		r.signs[k] = make([]float32, d)
		for j := range r.signs[k] {
			r.signs[k][j] = float32(1 - 2*int(rng.Uint64()&1))
		}
	}
	return r
}

// Apply rotates x (length d) in place.
func (r *Rotation) Apply(x []float32) {
	x = x[:r.d]
	for k := range r.signs {
		for j, s := range r.signs[k] {
			x[j] *= s
		}
		fwht(x[:r.p])
		if r.p != r.d {
			fwht(x[r.d-r.p:])
		}
	}
}

// Invert undoes Apply in place.
func (r *Rotation) Invert(x []float32) {
	x = x[:r.d]
	for k := len(r.signs) - 1; k >= 0; k-- {
		if r.p != r.d {
			fwht(x[r.d-r.p:])
		}
		fwht(x[:r.p])
		for j, s := range r.signs[k] {
			x[j] *= s
		}
	}
}

// fwht is the orthonormal Walsh-Hadamard transform of x (length a power of
// two), in place; it is its own inverse. vec.FWHT's result is the same to
// the bit on every machine, so codes do not depend on the kernel.
func fwht(x []float32) {
	vec.FWHT(x, float32(1/math.Sqrt(float64(len(x)))))
}
