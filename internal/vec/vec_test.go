package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

func ref(a, b []float32) (dot, l2 float64) {
	for j := range a {
		dot += float64(a[j]) * float64(b[j])
		d := float64(a[j]) - float64(b[j])
		l2 += d * d
	}
	return
}

// Every length 0..40 (straddling the 4-lane unroll) against float64.
func TestAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 40; n++ {
		v := make([][]float32, 5)
		for i := range v {
			v[i] = make([]float32, n)
			for j := range v[i] {
				v[i][j] = float32(rng.NormFloat64())
			}
		}
		close := func(got float32, want float64) bool { return math.Abs(float64(got)-want) <= 1e-5*(1+math.Abs(want)) }
		dot, l2 := ref(v[0], v[1])
		if !close(Dot(v[0], v[1]), dot) || !close(L2(v[0], v[1]), l2) {
			t.Errorf("n=%d: Dot %v (want %v), L2 %v (want %v)", n, Dot(v[0], v[1]), dot, L2(v[0], v[1]), l2)
		}
		r0, r1, r2, r3 := Dot4(v[0], v[1], v[2], v[3], v[4])
		for k, r := range []float32{r0, r1, r2, r3} {
			if r != Dot(v[0], v[k+1]) {
				t.Errorf("n=%d: Dot4[%d] = %v, Dot = %v (must be bit-identical)", n, k, r, Dot(v[0], v[k+1]))
			}
		}
	}
}

func TestNearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const d = 7
	for _, m := range []int{1, 3, 4, 5, 9} {
		anchors := make([]float32, m*d)
		for i := range anchors {
			anchors[i] = float32(rng.NormFloat64())
		}
		norms := make([]float32, m)
		Norms(norms, anchors, d)
		for range 50 {
			x := make([]float32, d)
			for j := range x {
				x[j] = float32(rng.NormFloat64())
			}
			best, _ := Nearest(x, anchors, norms)
			want, wantD := 0, math.Inf(1)
			for a := range m {
				if _, l2 := ref(x, anchors[a*d:(a+1)*d]); l2 < wantD {
					want, wantD = a, l2
				}
			}
			if best != want {
				t.Errorf("m=%d: nearest %d, want %d", m, best, want)
			}
		}
	}
	// Ties go to the lowest index.
	if best, _ := Nearest([]float32{0}, []float32{1, -1, 1}, []float32{1, 1, 1}); best != 0 {
		t.Errorf("tie: %d, want 0", best)
	}
}

func TestNormalize(t *testing.T) {
	x := []float32{3, 4}
	Normalize(x)
	if x[0] != 0.6 || x[1] != 0.8 {
		t.Errorf("Normalize(3,4) = %v", x)
	}
	z := []float32{0, 0}
	Normalize(z)
	if z[0] != 0 || z[1] != 0 {
		t.Errorf("zero vector became %v", z)
	}
	// Every scale of (3, 4) across the float32 range, where |x|^2
	// overflows (1e19 and up) or underflows float32 (1e-20 and down, the
	// subnormals included), comes out as (0.6, 0.8).
	for _, scale := range []float64{8e37, 1e30, 1e19, 65504, 1, 6e-8, 1e-20, 1e-30, 1e-40, 1e-45} {
		x := []float32{float32(3 * scale), float32(4 * scale)}
		want := []float64{0.6, 0.8}
		if scale == 1e-45 { // 3e-45 and 4e-45 round to 2 and 3 times the smallest subnormal
			want = []float64{2 / math.Sqrt(13), 3 / math.Sqrt(13)}
		}
		Normalize(x)
		for j := range x {
			if math.Abs(float64(x[j])-want[j]) > 1e-6 {
				t.Errorf("Normalize of (3, 4) x %g = %v, want %v", scale, x, want)
				break
			}
		}
	}
}

// L2Below keeps exactly the pairs below the bound, with L2's bits, also at
// bounds equal to the distance and at lengths around its 16-value checks.
func TestL2Below(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 3, 4, 63, 64, 65, 67, 128, 130, 768} {
		for range 50 {
			a, b := make([]float32, n), make([]float32, n)
			for j := range a {
				a[j] = float32(rng.NormFloat64())
				b[j] = a[j] + float32(rng.NormFloat64()*0.1)
			}
			want := L2(a, b)
			for _, bound := range []float64{0, float64(want) * 0.5, float64(want), math.Nextafter(float64(want), 2e9), float64(want) * 2, math.Inf(1)} {
				got, ok := L2Below(a, b, bound)
				if ok != (float64(want) < bound) {
					t.Fatalf("n=%d, L2 %v, bound %v: ok %v", n, want, bound, ok)
				}
				if ok && math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("n=%d: L2Below %v, L2 %v", n, got, want)
				}
			}
		}
	}
}
