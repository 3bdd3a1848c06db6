package f16

import (
	"math"
	"testing"

	"github.com/x448/float16"
)

func TestToFloat32AllValues(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := ToFloat32(h)
		want := float16.Frombits(h).Float32()
		if math.IsNaN(float64(want)) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("ToFloat32(%#04x) = %v, want NaN", h, got)
			}
			continue
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("ToFloat32(%#04x) = %v, want %v", h, got, want)
		}
	}
}

func TestRoundTripFinite(t *testing.T) {
	finite := 0
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		if !IsFinite(h) {
			continue
		}
		finite++
		if got := FromFloat32(ToFloat32(h)); got != h {
			t.Fatalf("FromFloat32(ToFloat32(%#04x)) = %#04x", h, got)
		}
	}
	// 2 signs * 31 finite exponents * 1024 mantissas.
	if finite != 2*31*1024 {
		t.Fatalf("%d finite values, want %d", finite, 2*31*1024)
	}
}

func TestIsFinite(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		want := float16.Frombits(h).IsFinite()
		if IsFinite(h) != want {
			t.Fatalf("IsFinite(%#04x) = %v, want %v", h, !want, want)
		}
		f := float64(ToFloat32(h))
		if IsFinite(h) == (math.IsNaN(f) || math.IsInf(f, 0)) {
			t.Fatalf("IsFinite(%#04x) disagrees with value %v", h, f)
		}
	}
}

func TestFromFloat32Rounding(t *testing.T) {
	cases := []struct {
		f    float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},                       // max finite
		{65520, 0x7c00},                       // halfway to 2^16 rounds to +Inf
		{1e10, 0x7c00},                        // overflow
		{float32(math.Inf(-1)), 0xfc00},       // -Inf
		{1 + 1.0/2048, 0x3c00},                // tie, rounds to even (down)
		{1 + 3.0/2048, 0x3c02},                // tie, rounds to even (up)
		{5.960464477539063e-08, 0x0001},       // smallest subnormal
		{float32(math.Ldexp(1, -26)), 0x0000}, // half the smallest subnormal: tie to even (0)
	}
	for _, c := range cases {
		if got := FromFloat32(c.f); got != c.want {
			t.Errorf("FromFloat32(%v) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if h := FromFloat32(float32(math.NaN())); IsFinite(h) || h&0x3ff == 0 {
		t.Errorf("FromFloat32(NaN) = %#04x, not a NaN", h)
	}
}

func TestDecodeRow(t *testing.T) {
	src := []uint16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000}
	dst := make([]float32, len(src)+3)
	for i := range dst {
		dst[i] = 42
	}
	DecodeRow(dst, src)
	want := []float32{1, -2, 65504, 5.960464477539063e-08, 0, 42, 42, 42}
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("dst[%d] = %v, want %v", i, dst[i], want[i])
		}
	}
	if !math.Signbit(float64(dst[4])) {
		t.Fatalf("dst[4] lost the sign of -0")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("DecodeRow with short dst did not panic")
		}
	}()
	DecodeRow(dst[:2], src)
}

func BenchmarkDecodeRow(b *testing.B) {
	const dim = 1024
	src := make([]uint16, dim)
	for i := range src {
		src[i] = uint16(i * 37)
	}
	dst := make([]float32, dim)
	b.SetBytes(2 * dim)
	b.ResetTimer()
	for b.Loop() {
		DecodeRow(dst, src)
	}
}
