package quant

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randomResiduals(n, d int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 9))
	r := make([]float32, n*d)
	for i := range r {
		r[i] = float32(rng.NormFloat64()) * float32(1+i%d)
	}
	return r
}

// Decoding an SQ8 code is within half a step of the residual in every
// dimension, and the scorer's estimates equal the distances to the decoded
// residual (the scorer never decodes, so this checks its algebra).
func TestSQ8(t *testing.T) {
	for _, d := range []int{1, 3, 4, 5, 96} {
		t.Run(fmt.Sprintf("d=%d", d), func(t *testing.T) {
			const n = 50
			c := NewSQ8(d)
			res := randomResiduals(n, d, uint64(d))
			params := make([]byte, c.ParamBytes())
			c.Fit(params, res, n)
			code := make([]byte, c.CodeBytes())
			dec := make([]float32, d)
			q := randomResiduals(1, d, 99)
			c.SetAnchors(make([]float32, c.Dim())) // one list, anchored at the origin
			sc := c.NewScorer()
			for i := range n {
				r := res[i*d : (i+1)*d]
				c.Encode(code, 0, params, r)
				c.Decode(dec, params, code)
				var l2, dot float64
				for j := range d {
					step := getF32(params, d+j)
					if e := math.Abs(float64(dec[j] - r[j])); e > float64(step)/2*1.0001+1e-7 {
						t.Fatalf("row %d dim %d: error %g over half step %g", i, j, e, step/2)
					}
					l2 += float64(q[j]-dec[j]) * float64(q[j]-dec[j])
					dot += float64(q[j]) * float64(dec[j])
				}
				sc.SetQuery(q)
				sc.ForL2(0, params)
				if got := sc.Score(code); math.Abs(float64(got)-l2) > 1e-4*(1+l2) {
					t.Errorf("row %d: L2 estimate %g, decoded %g", i, got, l2)
				}
				sc.SetQuery(q)
				sc.ForDot(0, params)
				if got := sc.Score(code); math.Abs(float64(got)-dot) > 1e-4*(1+math.Abs(dot)) {
					t.Errorf("row %d: dot estimate %g, decoded %g", i, got, dot)
				}
			}
		})
	}
}

// A dimension where every residual is equal has step 0 and decodes exactly.
func TestSQ8Constant(t *testing.T) {
	c := NewSQ8(2)
	res := []float32{3, 1, 3, 2, 3, 5}
	params := make([]byte, c.ParamBytes())
	c.Fit(params, res, 3)
	code := make([]byte, 2)
	dec := make([]float32, 2)
	c.Encode(code, 0, params, res[2:4])
	c.Decode(dec, params, code)
	if dec[0] != 3 {
		t.Errorf("constant dimension decodes to %v, want 3", dec[0])
	}
	c.Fit(params, nil, 0) // an empty list must not fail
}

func TestForBits(t *testing.T) {
	for _, b := range []int{1, 2, 4, 8} {
		if c, err := ForBits(KindRotated, b, 10, 1); err != nil || c.Spec() != (Spec{Kind: KindRotated, Dim: 10, Bits: b, Seed: 1}) || c.CodeBytes() != (10*b+7)/8+4 {
			t.Errorf("ForBits(%d): %v, %v", b, c, err)
		}
	}
	for _, b := range []int{0, 3, 16} {
		if _, err := ForBits(KindRotated, b, 10, 1); !errors.Is(err, ErrBits) {
			t.Errorf("ForBits(%d): %v, want ErrBits", b, err)
		}
	}
	if _, err := New(Spec{Kind: Kind(99), Dim: 4, Bits: 8}); err == nil {
		t.Error("New(99): no error")
	}
	if _, err := New(Spec{Kind: KindSQ8, Dim: 4, Bits: 4}); err == nil {
		t.Error("New(SQ8, 4 bits): no error")
	}
}

func BenchmarkScoreSQ8(b *testing.B) {
	const d, n = 96, 1024
	c := NewSQ8(d)
	res := randomResiduals(n, d, 1)
	params := make([]byte, c.ParamBytes())
	c.Fit(params, res, n)
	codes := make([]byte, n*d)
	for i := range n {
		c.Encode(codes[i*d:(i+1)*d], 0, params, res[i*d:(i+1)*d])
	}
	c.SetAnchors(make([]float32, c.Dim())) // one list, anchored at the origin
	sc := c.NewScorer()
	sc.SetQuery(res[:d])
	sc.ForL2(0, params)
	b.SetBytes(int64(len(codes)))
	var sink float32
	for b.Loop() {
		for i := range n {
			sink += sc.Score(codes[i*d : (i+1)*d])
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "codes/s")
	_ = sink
}

func BenchmarkEncodeSQ8(b *testing.B) {
	const d, n = 96, 1024
	c := NewSQ8(d)
	res := randomResiduals(n, d, 1)
	params := make([]byte, c.ParamBytes())
	code := make([]byte, d)
	b.SetBytes(int64(4 * n * d))
	for b.Loop() {
		c.Fit(params, res, n)
		for i := range n {
			c.Encode(code, 0, params, res[i*d:(i+1)*d])
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "vectors/s")
}
