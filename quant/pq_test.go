package quant

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
)

// trainedPQ returns a PQ code trained on n random residuals, with the given
// anchors installed.
func trainedPQ(t testing.TB, d, bits, n int, anchors []float32) (*PQ, []float32) {
	t.Helper()
	c := NewPQ(d, bits, 5)
	res := randomResiduals(n, d, uint64(d*bits+n))
	g := c.Train(res, n)
	if len(g) != c.GlobalBytes() {
		t.Fatalf("Train returned %d bytes, GlobalBytes %d", len(g), c.GlobalBytes())
	}
	if err := c.SetGlobal(g); err != nil {
		t.Fatal(err)
	}
	c.SetAnchors(anchors)
	return c, res
}

// Training is a function of the sample and the seed alone: the same bytes
// twice, and with one core or two.
func TestPQTrainDeterministic(t *testing.T) {
	for _, bits := range []int{1, 2, 4} {
		const n, d = 400, 13
		res := randomResiduals(n, d, 11)
		var got [][]byte
		for _, procs := range []int{1, 2, 2} {
			old := runtime.GOMAXPROCS(procs)
			got = append(got, NewPQ(d, bits, 9).Train(res, n))
			runtime.GOMAXPROCS(old)
		}
		for i := 1; i < len(got); i++ {
			if !bytes.Equal(got[0], got[i]) {
				t.Errorf("bits=%d: training %d differs from training 0", bits, i)
			}
		}
		if bytes.Equal(got[0], NewPQ(d, bits, 10).Train(res, n)) {
			t.Errorf("bits=%d: another seed trains the same codebooks", bits)
		}
	}
}

// Training on fewer residuals than centroids, or none, still gives valid
// codebooks.
func TestPQTrainSmall(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		c := NewPQ(5, 2, 1)
		if err := c.SetGlobal(c.Train(randomResiduals(n, 5, 1), n)); err != nil {
			t.Errorf("n=%d: %v", n, err)
		}
	}
	c := NewPQ(4, 1, 1)
	if err := c.SetGlobal(c.Train(make([]float32, 4*10), 10)); err != nil {
		t.Errorf("zero residuals: %v", err)
	}
}

func TestPQSetGlobalRejects(t *testing.T) {
	c := NewPQ(10, 2, 1)
	good := c.Train(randomResiduals(50, 10, 1), 50)
	if err := c.SetGlobal(good); err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{
		"short": good[:len(good)-1],
		"long":  append(append([]byte(nil), good...), 0),
		"empty": nil,
	}
	for name, f := range map[string]func(b []byte){
		"rho NaN":      func(b []byte) { putF32(b, 0, float32(math.NaN())) },
		"rho Inf":      func(b []byte) { putF32(b, 0, float32(math.Inf(1))) },
		"rho zero":     func(b []byte) { putF32(b, 0, 0) },
		"rho negative": func(b []byte) { putF32(b, 0, -1) },
		"step NaN":     func(b []byte) { putF32(b[4:], 1, float32(math.NaN())) },
		"step Inf":     func(b []byte) { putF32(b[4:], 2, float32(math.Inf(-1))) },
		"step <0":      func(b []byte) { putF32(b[4:], 0, -0.5) },
	} {
		b := append([]byte(nil), good...)
		f(b)
		bad[name] = b
	}
	for name, b := range bad {
		if err := c.SetGlobal(b); err == nil {
			t.Errorf("%s: SetGlobal accepted it", name)
		}
	}
}

// The scorer's table sums equal the same estimates computed from Decode's
// B x̂ (for L2 and dot), at dimensions straddling the subspace widths, for
// a list whose anchor is away from the origin and from the anchors' mean.
func TestPQScorerMatchesDecode(t *testing.T) {
	for _, bits := range []int{1, 2, 4} {
		for _, d := range []int{1, 3, 7, 8, 9, 96, 100} {
			t.Run(fmt.Sprintf("b=%d/d=%d", bits, d), func(t *testing.T) {
				anchors := randomResiduals(3, d, 123)
				for j := range anchors {
					anchors[j] += 3
				}
				c, res := trainedPQ(t, d, bits, 120, anchors)
				const n, a = 30, 1
				anchor := anchors[a*d : (a+1)*d]
				params := make([]byte, c.ParamBytes())
				c.Fit(params, res, n)
				sc := c.NewScorer()
				code := make([]byte, c.CodeBytes())
				dec := make([]float32, d)
				q := randomResiduals(1, d, 77)
				qa := make([]float32, d) // q - anchor
				for j := range q {
					q[j] += 3
					qa[j] = q[j] - anchor[j]
				}
				for i := range n {
					r := res[i*d : (i+1)*d]
					c.Encode(code, a, params, r)
					c.Decode(dec, params, code)
					want := dot64(qa, dec) // <q - a, B x̂ rotated back>
					sc.SetQuery(qa)
					sc.ForDot(a, params)
					if got := float64(sc.Score(code)); math.Abs(got-want) > 1e-4*(1+math.Sqrt(dot64(qa, qa)*dot64(dec, dec))) {
						t.Fatalf("row %d: dot estimate %g, from decode %g", i, got, want)
					}
					wantL2 := dot64(qa, qa) + dot64(r, r) - 2*want
					sc.SetQuery(q)
					sc.ForL2(a, params)
					// C is float16: allow a few of its rounding steps.
					tol := 1e-3 * (1 + dot64(qa, qa) + float64(getF32(params, 0)) + 2*math.Sqrt(dot64(anchor, anchor)*dot64(dec, dec)))
					if got := float64(sc.Score(code)); math.Abs(got-wantL2) > tol {
						t.Fatalf("row %d: L2 estimate %g, want %g (tol %g)", i, got, wantL2, tol)
					}
				}
			})
		}
	}
}

// For queries around a vector (q - a = r + noise, the neighbours a search
// is after), the L2 estimate is unbiased: its mean error over the queries
// is within a few standard errors of zero (a z-test), where the plain
// reconstruction estimate (B = 1) is off by many.
func TestPQUnbiased(t *testing.T) {
	for _, bits := range []int{1, 2, 4} {
		const d, n, draws = 32, 100, 10
		c, res := trainedPQ(t, d, bits, 300, make([]float32, d))
		params := make([]byte, c.ParamBytes())
		c.Fit(params, res, n)
		sc := c.NewScorer()
		code := make([]byte, c.CodeBytes())
		dec := make([]float32, d)
		q := make([]float32, d)
		var sum, sum2, plain, plain2 float64
		for i := range n {
			r := res[i*d : (i+1)*d]
			c.Encode(code, 0, params, r)
			c.Decode(dec, params, code)
			beta := float64(c.beta(code))
			noise := randomResiduals(draws, d, uint64(1000+i))
			for k := range draws {
				for j := range q {
					q[j] = r[j] + 0.3*noise[k*d+j]
				}
				var trueD float64
				for j := range q {
					trueD += float64(q[j]-r[j]) * float64(q[j]-r[j])
				}
				sc.SetQuery(q)
				sc.ForL2(0, params)
				e := float64(sc.Score(code)) - trueD
				sum, sum2 = sum+e, sum2+e*e
				// B = 1: |q'|^2 + |r|^2 - 2<q', x̂>
				e = dot64(q, q) + dot64(r, r) - 2*dot64(q, dec)/beta - trueD
				plain, plain2 = plain+e, plain2+e*e
			}
		}
		const m = n * draws
		z := func(s, s2 float64) float64 {
			mean := s / m
			return mean / math.Sqrt((s2/m-mean*mean)/m)
		}
		t.Logf("bits=%d: mean error %.4g (z %.2f); plain estimate %.4g (z %.2f)", bits, sum/m, z(sum, sum2), plain/m, z(plain, plain2))
		if math.Abs(z(sum, sum2)) > 4 {
			t.Errorf("bits=%d: mean error %.4g is %.1f standard errors from zero", bits, sum/m, z(sum, sum2))
		}
	}
}

// Encode may run from many goroutines at once (run with -race) and gives
// the same codes as one goroutine.
func TestPQEncodeConcurrent(t *testing.T) {
	const d, n = 40, 64
	anchors := randomResiduals(2, d, 3)
	c, res := trainedPQ(t, d, 2, 300, anchors)
	params := make([]byte, c.ParamBytes())
	c.Fit(params, res, n)
	cb := c.CodeBytes()
	want := make([]byte, n*cb)
	for i := range n {
		c.Encode(want[i*cb:(i+1)*cb], i%2, params, res[i*d:(i+1)*d])
	}
	got := make([][]byte, 16)
	var wg sync.WaitGroup
	for g := range got {
		got[g] = make([]byte, n*cb)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range n {
				i := (k + g*5) % n
				c.Encode(got[g][i*cb:(i+1)*cb], i%2, params, res[i*d:(i+1)*d])
			}
		}()
	}
	wg.Wait()
	for g := range got {
		if !bytes.Equal(got[g], want) {
			t.Fatalf("goroutine %d encoded differently", g)
		}
	}
}

func TestPQNew(t *testing.T) {
	for _, b := range []int{1, 2, 4} {
		c, err := New(KindPQ, 10, b, 1)
		if err != nil || c.Kind() != KindPQ || c.Bits() != b || c.CodeBytes() != (10*b+7)/8+4 {
			t.Errorf("New(PQ, %d bits): %v, %v", b, c, err)
		}
		if _, ok := c.(Trainer); !ok {
			t.Errorf("PQ is not a Trainer")
		}
	}
	for _, b := range []int{3, 8} {
		if _, err := New(KindPQ, 10, b, 1); err == nil {
			t.Errorf("New(PQ, %d bits): no error", b)
		}
	}
}

func BenchmarkTrainPQ(b *testing.B) {
	const d, n = 96, 4096
	res := randomResiduals(n, d, 1)
	for _, bits := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("b=%d", bits), func(b *testing.B) {
			for b.Loop() {
				NewPQ(d, bits, 1).Train(res, n)
			}
		})
	}
}

func BenchmarkScorePQ(b *testing.B) {
	const d, n = 96, 1024
	for _, bits := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("b=%d", bits), func(b *testing.B) {
			c, res := trainedPQ(b, d, bits, 2048, make([]float32, d))
			params := make([]byte, c.ParamBytes())
			c.Fit(params, res, n)
			cb := c.CodeBytes()
			codes := make([]byte, n*cb)
			for i := range n {
				c.Encode(codes[i*cb:(i+1)*cb], 0, params, res[i*d:(i+1)*d])
			}
			sc := c.NewScorer()
			sc.SetQuery(res[:d])
			sc.ForL2(0, params)
			var sink float32
			for b.Loop() {
				for i := range n {
					sink += sc.Score(codes[i*cb : (i+1)*cb])
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "codes/s")
			_ = sink
		})
	}
}
