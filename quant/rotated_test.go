package quant

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

// bestLevelsRef is the first sweep (events sorted with a comparison
// function, every head's t recomputed per step): the reference that the
// faster one must match level for level.
func bestLevelsRef(c *Rotated, levels []uint8, r []float32) float64 {
	var evs []refEvent
	events := &evs
	L := 1<<c.bits - 1
	steps := (L - 1) / 2
	// At t -> 0 every |u_j| is 1/2: the sign code.
	var ua, uu float64
	for _, v := range r {
		ua += 0.5 * math.Abs(float64(v))
		uu += 0.25
	}
	bestT, bestCos := 0.0, ua/math.Sqrt(uu)
	if c.bits == 8 {
		// 127 steps per coordinate make the sweep costly, and at this
		// resolution the best scale is where the largest coordinate
		// just reaches the top level.
		var big float64
		for _, v := range r {
			big = math.Max(big, math.Abs(float64(v)))
		}
		if big > 0 {
			bestT = (float64(steps) + 0.5) / big * (1 - 1e-9)
		}
	} else if ua > 0 {
		// The steps of coordinate j come at t = k/|r_j|; with the
		// coordinates in decreasing |r_j| each k gives an increasing
		// sequence, and the sweep merges the (L-1)/2 sequences.
		order := (*events)[:0]
		for j, v := range r {
			if v != 0 {
				order = append(order, refEvent{a: math.Abs(float64(v)), j: int32(j)})
			}
		}
		slices.SortFunc(order, func(x, y refEvent) int { return cmp.Or(cmp.Compare(y.a, x.a), cmp.Compare(x.j, y.j)) })
		*events = order
		var next [64]int // next coordinate of each sequence k (steps <= 7 here)
		for {
			k := -1
			var t float64
			for kk := 1; kk <= steps; kk++ {
				if i := next[kk]; i < len(order) {
					if tt := float64(kk) / order[i].a; k < 0 || tt < t {
						k, t = kk, tt
					}
				}
			}
			if k < 0 {
				break
			}
			// Coordinate order[next[k]] steps from k-1/2 to k+1/2.
			ua += order[next[k]].a
			uu += float64(2 * k)
			next[k]++
			if cos := ua / math.Sqrt(uu); cos > bestCos {
				bestCos, bestT = cos, t
			}
		}
	}
	var ur float64
	for j, v := range r {
		m := min(int(math.Floor(bestT*math.Abs(float64(v)))), steps) // |u_j| - 1/2
		l := (L+1)/2 + m                                             // level for u_j = m + 1/2
		if v < 0 {
			l = (L-1)/2 - m // u_j = -(m + 1/2)
		}
		levels[j] = uint8(l)
		ur += (float64(l) - float64(L)/2) * float64(v)
	}
	return ur
}

type refEvent struct {
	a float64
	j int32
}

// The sweep returns the same levels as the reference, at dimensions and
// bits where it runs (1, 2 and 4 bits; 8 takes the largest coordinate),
// including ties in |r_j| and zeros.
func TestBestLevelsMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bits := range []int{1, 2, 4} {
		for _, d := range []int{1, 2, 7, 64, 96, 768} {
			c := NewRotated(d, bits, 1)
			r := make([]float32, d)
			got, want := make([]uint8, d), make([]uint8, d)
			var keys []uint64
			for trial := range 50 {
				for j := range r {
					switch {
					case trial%5 == 1 && j%3 == 0:
						r[j] = 0
					case trial%5 == 2:
						r[j] = float32(rng.IntN(5) - 2) // many ties
					default:
						r[j] = float32(rng.NormFloat64())
					}
				}
				gotUR := c.bestLevels(got, r, &keys)
				wantUR := bestLevelsRef(c, want, r)
				if !bytes.Equal(got, want) || gotUR != wantUR {
					t.Fatalf("bits=%d d=%d trial %d: levels differ from the reference", bits, d, trial)
				}
			}
		}
	}
}

func BenchmarkEncodeRotated(b *testing.B) {
	const d, n = 768, 256
	res := randomResiduals(n, d, 1)
	for _, bits := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("b=%d", bits), func(b *testing.B) {
			c := NewRotated(d, bits, 1)
			c.SetAnchors(make([]float32, d))
			codes, params := make([]byte, n*c.CodeBytes()), make([]byte, c.ParamBytes())
			for b.Loop() {
				c.EncodeList(codes, params, 0, res, n)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "vectors/s")
		})
	}
}

// Lists at the numeric extremes get finite scalars and scores at every
// bits: residuals whose squares underflow float32 (s would be 0 and the
// scalars Inf or NaN), and ip lists whose anchor is so much longer than
// the residuals that the slot -2<a, r>/s passes float16's range. The
// dot estimate still follows the residual's direction.
func TestRotatedExtremeLists(t *testing.T) {
	const d, n = 16, 20
	for _, c := range []struct {
		name         string
		scale, shift float64 // residuals scale*N(0,1); anchor shift in every dimension
		ip           bool
	}{
		{"residuals 1e-30", 1e-30, 0, false},
		{"residuals 1e-20", 1e-20, 0, false},
		{"residuals 1e-45 (subnormal)", 1e-45, 0, false},
		{"ip, residuals 1e-30, anchor 1", 1e-30, 1, true},
		{"ip, residuals 1e-3, anchor 1000", 1e-3, 1000, true},
		{"ip, residuals 1, anchor 65504", 1, 65504, true},
	} {
		for _, bits := range []int{1, 2, 4, 8} {
			t.Run(fmt.Sprintf("%s/b=%d", c.name, bits), func(t *testing.T) {
				code := NewRotated(d, bits, 3)
				code.ip = c.ip
				anchor := make([]float32, d)
				for j := range anchor {
					anchor[j] = float32(c.shift)
				}
				code.SetAnchors(anchor)
				res := randomResiduals(n, d, 9)
				for j := range res {
					res[j] = float32(float64(res[j]) * c.scale)
				}
				params := make([]byte, code.ParamBytes())
				codes := make([]byte, n*code.CodeBytes())
				code.EncodeList(codes, params, 0, res, n)
				if s := getF32(params, 0); !(s >= minScale) || math.IsInf(float64(s), 0) {
					t.Fatalf("s = %g", s)
				}
				sc := code.NewScorer()
				q := make([]float32, d)
				for i := range n {
					cd := codes[i*code.CodeBytes() : (i+1)*code.CodeBytes()]
					if code.NonFinite(cd) {
						t.Fatalf("row %d: scalars not finite", i)
					}
					copy(q, res[i*d:(i+1)*d])
					sc.SetQuery(q)
					for _, dot := range []bool{true, false} {
						if dot {
							sc.ForDot(0, params)
						} else {
							sc.ForL2(0, params)
						}
						if v := sc.Score(cd); math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
							t.Fatalf("row %d: score %v (dot %v)", i, v, dot)
						}
					}
					sc.ForDot(0, params)
					if c.scale >= 1e-3 && sc.Score(cd) <= 0 && dot64(q, q) > 0 {
						t.Errorf("row %d: <r, r> estimated as %g, want > 0", i, sc.Score(cd))
					}
				}
			})
		}
	}
}

// listScale keeps the largest |r|^2 wherever it is safe, so that codes of
// normal lists are unchanged.
func TestListScaleUnchangedInRange(t *testing.T) {
	for _, c := range []struct{ norm, slot float64 }{{0, 0}, {1, 0}, {1e-30, 0}, {1e10, 1e14}, {2, 100000}} {
		want := float32(c.norm)
		if c.norm == 0 {
			want = 1
		}
		if got := listScale(c.norm, c.slot); got != want {
			t.Errorf("listScale(%g, %g) = %g, want %g", c.norm, c.slot, got, want)
		}
	}
	if got := listScale(1e-60, 0); got != minScale {
		t.Errorf("listScale(1e-60, 0) = %g, want %g", got, minScale)
	}
	if got := listScale(1, 1e6); got != float32(1e6/maxSlotRatio) {
		t.Errorf("listScale(1, 1e6) = %g", got)
	}
}
