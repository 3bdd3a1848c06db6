package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
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

// The worst sums the scales allow fit in an int64, and a typical sum keeps
// far more precision than float32 would.
func TestScalesFor(t *testing.T) {
	const n, smax = 1_000_000, 3.5
	f := scalesFor(n, smax)
	for _, c := range []struct {
		name  string
		term  float64 // the largest term, twice over for w (the weights' room)
		scale float32
	}{{"sum", math.Sqrt(smax), f.sum}, {"sq", smax, f.sq}, {"w", 2, f.w}, {"energy", smax, f.energy}} {
		if worst := n * math.Round(c.term*float64(c.scale)); worst >= math.MaxInt64 {
			t.Errorf("%s: %d terms of %g at scale %g overflow", c.name, n, c.term, c.scale)
		}
		if worst := n * math.Round(c.term*float64(c.scale)*2); worst < 1<<62 {
			t.Errorf("%s: scale %g is not the largest that fits", c.name, c.scale)
		}
	}
	if f.smax != smax {
		t.Errorf("smax %v, want %v", f.smax, smax)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var fixed int64
	var exact float64
	for range 10000 {
		v := float32((rng.Float64()*2 - 1) * math.Sqrt(smax) * 0.1)
		fixed += int64(math.RoundToEven(float64(v * f.sum)))
		exact += float64(v)
	}
	if got := float64(fixed) / float64(f.sum); math.Abs(got-exact) > 1e-9 {
		t.Errorf("10,000 terms: fixed point %.12g, exact %.12g", got, exact)
	}
	// The bound holds for any point and anchor within it.
	const d, b = 5, 2.0
	x, a := []float64{b, -b, b, -b, b}, []float64{-b, b, -b, b, -b}
	var dist float64
	for j := range d {
		dist += (x[j] - a[j]) * (x[j] - a[j])
	}
	if bd := boundDist(d, b); dist > bd {
		t.Errorf("distance %v beyond boundDist %v", dist, bd)
	}
}

func TestMaxAbsHalf(t *testing.T) {
	const dim = 10
	data := make([]uint16, 3<<20+dim) // several chunks
	for i := range data {
		data[i] = f16.FromFloat32(float32(i%7) * 0.25)
	}
	data[2<<20+3] = f16.FromFloat32(-9.5)
	if m, err := maxAbsHalf(data, dim); err != nil || m != 9.5 {
		t.Fatalf("max %v, %v; want 9.5", m, err)
	}
	data[1<<20+11] = 0xfc00 // -Inf
	data[3<<20] = 0x7e00    // NaN
	_, err := maxAbsHalf(data, dim)
	if !errors.Is(err, device.ErrNonFinite) {
		t.Fatalf("error %v, want device.ErrNonFinite", err)
	}
	if want := "point 104858, dimension 7"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the first bad value (%s)", err, want)
	}
	if _, err := maxAbs32([]float32{1, 2, float32(math.NaN())}, 2); !errors.Is(err, device.ErrNonFinite) || !strings.Contains(err.Error(), "anchor 1, dimension 0") {
		t.Errorf("anchors: error %v", err)
	}
}

func TestMaxMagnitude(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for n := range 70 {
		for trial := range 20 {
			data := make([]uint16, n)
			for i := range data {
				switch trial % 4 {
				case 0:
					data[i] = uint16(rng.Uint32())
				case 1:
					data[i] = uint16(rng.IntN(3)) | 0x8000*uint16(rng.IntN(2))
				case 2:
					data[i] = 0x7fff - uint16(rng.IntN(2)) | 0x8000*uint16(rng.IntN(2))
				default:
					data[i] = uint16(rng.IntN(0x7c00))
				}
			}
			var want uint16
			for _, h := range data {
				want = max(want, h&0x7fff)
			}
			if got := maxMagnitude(data); got != want {
				t.Fatalf("%d values (trial %d): got %#x, want %#x", n, trial, got, want)
			}
		}
	}
}
