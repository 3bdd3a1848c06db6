package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/vlc-embed/vlc/vecfile"
)

// scaleFor gives the largest power of two that keeps limit * s <= 2^62.
func TestScaleFor(t *testing.T) {
	for _, limit := range []float64{1e-15, 0.3, 1, 1.5, 2, 1000, 3.3e6, 1 << 40, 1e15} {
		s := float64(scaleFor(limit))
		if frac, _ := math.Frexp(s); frac != 0.5 {
			t.Errorf("limit %g: scale %g is not a power of two", limit, s)
		}
		if limit*s > 1<<62 || limit*2*s <= 1<<62 {
			t.Errorf("limit %g: scale %g (limit*scale = %g, 2^62 = %g)", limit, s, limit*s, float64(1<<62))
		}
	}
	if s := scaleFor(1e-60); s != float32(math.Ldexp(1, 120)) {
		t.Errorf("tiny limit: scale %g, want 2^120 (clamped)", s)
	}
	if s := scaleFor(1e60); s != float32(math.Ldexp(1, -120)) {
		t.Errorf("huge limit: scale %g, want 2^-120 (clamped)", s)
	}
}

// The worst sums the bound allows fit in an int64, and a typical sum keeps
// far more precision than float32 would.
func TestFixScales(t *testing.T) {
	const n, d, bound = 1_000_000, 768, 0.2
	f := newFixScales(n, d, bound)
	r := 2 * bound // the largest residual under the bound
	for _, c := range []struct {
		name  string
		term  float64
		count float64
		scale float32
	}{{"sum", r, n, f.sum}, {"sq", r * r, n, f.sq}, {"w", 1, n, f.w}, {"energy", d * r * r, n, f.energy}} {
		if worst := c.count * math.Round(c.term*float64(c.scale)); worst >= math.MaxInt64 {
			t.Errorf("%s: %g terms of %g at scale %g overflow", c.name, c.count, c.term, c.scale)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var fixed int64
	var exact float64
	for range 10000 {
		v := float32((rng.Float64()*2 - 1) * r)
		fixed += int64(math.RoundToEven(float64(v * f.sum)))
		exact += float64(v)
	}
	if got := float64(fixed) / float64(f.sum); math.Abs(got-exact) > 1e-9 {
		t.Errorf("10,000 terms: fixed point %.12g, exact %.12g", got, exact)
	}
}

func TestMaxAbsHalf(t *testing.T) {
	const dim = 10
	data := make([]uint16, 3<<20+dim) // several chunks
	for i := range data {
		data[i] = float16.Fromfloat32(float32(i%7) * 0.25).Bits()
	}
	data[2<<20+3] = float16.Fromfloat32(-9.5).Bits()
	if m, err := maxAbsHalf(data, dim); err != nil || m != 9.5 {
		t.Fatalf("max %v, %v; want 9.5", m, err)
	}
	data[1<<20+11] = float16.Inf(-1).Bits()
	data[3<<20] = float16.NaN().Bits()
	_, err := maxAbsHalf(data, dim)
	if !errors.Is(err, vecfile.ErrNonFinite) {
		t.Fatalf("error %v, want vecfile.ErrNonFinite", err)
	}
	if want := "point 104858, dimension 7"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the first bad value (%s)", err, want)
	}
	if _, err := maxAbs32([]float32{1, 2, float32(math.NaN())}, 2); !errors.Is(err, vecfile.ErrNonFinite) || !strings.Contains(err.Error(), "anchor 1, dimension 0") {
		t.Errorf("anchors: error %v", err)
	}
}
