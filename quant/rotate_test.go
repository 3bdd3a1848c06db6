package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The rotation preserves norms and inner products, Invert undoes it, and it
// mixes: a unit basis vector spreads over many coordinates.
func TestRotation(t *testing.T) {
	for _, d := range []int{1, 2, 3, 7, 8, 96, 100, 128, 768, 1000} {
		r := NewRotation(d, 5)
		rng := rand.New(rand.NewPCG(uint64(d), 1))
		x := make([]float32, d)
		y := make([]float32, d)
		for j := range x {
			x[j], y[j] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		dot0, nx0 := dot64(x, y), dot64(x, x)
		x0 := append([]float32(nil), x...)
		r.Apply(x)
		r.Apply(y)
		if math.Abs(dot64(x, y)-dot0) > 1e-4*math.Sqrt(nx0*dot64(y, y)) || math.Abs(dot64(x, x)-nx0) > 1e-5*nx0 {
			t.Errorf("d=%d: not orthogonal: |x|^2 %v -> %v, <x,y> %v -> %v", d, nx0, dot64(x, x), dot0, dot64(x, y))
		}
		r.Invert(x)
		for j := range x {
			if math.Abs(float64(x[j]-x0[j])) > 1e-5 {
				t.Fatalf("d=%d: Invert(Apply(x))[%d] = %v, want %v", d, j, x[j], x0[j])
			}
		}
		if d >= 8 {
			e := make([]float32, d)
			e[0] = 1
			r.Apply(e)
			var big float64
			for _, v := range e {
				big = math.Max(big, math.Abs(float64(v)))
			}
			if big > 0.75 {
				t.Errorf("d=%d: basis vector keeps %.2f in one coordinate after rotation", d, big)
			}
		}
	}
}
