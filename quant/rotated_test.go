package quant

import (
	"fmt"
	"math"
	"testing"
)

// The scorer's table sums equal the same estimate computed from the decoded
// vector (for L2 and dot), at dimensions that straddle the packing of each
// bit width.
func TestRotatedScorerMatchesDecode(t *testing.T) {
	for _, bits := range []int{1, 2, 4, 8} {
		for _, d := range []int{1, 3, 7, 8, 9, 96, 100} {
			t.Run(fmt.Sprintf("b=%d/d=%d", bits, d), func(t *testing.T) {
				c := NewRotated(d, bits, 3)
				const n = 20
				res := randomResiduals(n, d, uint64(d*bits))
				params := make([]byte, c.ParamBytes())
				c.Fit(params, res, n)
				q := randomResiduals(1, d, 77)
				c.SetAnchors(make([]float32, c.Dim())) // one list, anchored at the origin
				sc := c.NewScorer()
				code := make([]byte, c.CodeBytes())
				dec := make([]float32, d)
				for i := range n {
					r := res[i*d : (i+1)*d]
					c.Encode(code, 0, params, r)
					c.Decode(dec, params, code)
					// Decode gives B*u rotated back: <q, dec> is the dot estimate.
					want := dot64(q, dec)
					sc.SetQuery(q)
					sc.ForDot(0, params)
					if got := float64(sc.Score(code)); math.Abs(got-want) > 1e-3*(1+math.Abs(want)) {
						t.Fatalf("row %d: dot estimate %g, from decode %g", i, got, want)
					}
					// |r|^2 is stored as float16 relative to the list's largest.
					wantL2 := dot64(q, q) + dot64(r, r) - 2*want
					sc.SetQuery(q)
					sc.ForL2(0, params)
					tol := 1e-3 * (1 + dot64(q, q) + float64(getF32(params, 0)))
					if got := float64(sc.Score(code)); math.Abs(got-wantL2) > tol {
						t.Fatalf("row %d: L2 estimate %g, want %g", i, got, wantL2)
					}
				}
			})
		}
	}
}

// The inner-product estimate is unbiased: over many random queries its mean
// error is near zero, and more bits give smaller errors.
func TestRotatedUnbiased(t *testing.T) {
	const d, n, nq = 64, 200, 50
	res := randomResiduals(n, d, 5)
	qs := randomResiduals(nq, d, 6)
	prev := math.Inf(1)
	for _, bits := range []int{1, 2, 4, 8} {
		c := NewRotated(d, bits, 9)
		params := make([]byte, c.ParamBytes())
		c.Fit(params, res, n)
		codes := make([]byte, n*c.CodeBytes())
		cb := c.CodeBytes()
		for i := range n {
			c.Encode(codes[i*cb:(i+1)*cb], 0, params, res[i*d:(i+1)*d])
		}
		c.SetAnchors(make([]float32, c.Dim())) // one list, anchored at the origin
		sc := c.NewScorer()
		var sum, sq, scale float64
		for k := range nq {
			q := qs[k*d : (k+1)*d]
			sc.SetQuery(q)
			sc.ForDot(0, params)
			for i := range n {
				r := res[i*d : (i+1)*d]
				e := float64(sc.Score(codes[i*cb:(i+1)*cb])) - dot64(q, r)
				sum += e
				sq += e * e
				scale += math.Sqrt(dot64(q, q) * dot64(r, r))
			}
		}
		m := float64(n * nq)
		bias, rms := sum/m, math.Sqrt(sq/m)
		if math.Abs(bias) > 3*rms/math.Sqrt(m)+1e-3*scale/m {
			t.Errorf("%d bits: mean error %.4g, rms %.4g: biased", bits, bias, rms)
		}
		if rms >= prev {
			t.Errorf("%d bits: rms error %.4g, not below %.4g of fewer bits", bits, rms, prev)
		}
		prev = rms
		t.Logf("%d bits: mean error %.3g, rms %.3g (relative %.3g)", bits, bias, rms, rms/(scale/m))
	}
}

// A zero residual encodes and scores without NaN.
func TestRotatedZero(t *testing.T) {
	c := NewRotated(8, 2, 1)
	params := make([]byte, c.ParamBytes())
	res := make([]float32, 8)
	c.Fit(params, res, 1)
	code := make([]byte, c.CodeBytes())
	c.Encode(code, 0, params, res)
	c.SetAnchors(make([]float32, c.Dim())) // one list, anchored at the origin
	sc := c.NewScorer()
	q := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	sc.SetQuery(q)
	sc.ForL2(0, params)
	if got := sc.Score(code); math.Abs(float64(got)-204) > 1e-3 {
		t.Errorf("zero residual: L2 %v, want |q|^2 = 204", got)
	}
}
