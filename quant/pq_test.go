package quant

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"

	"github.com/vlc-embed/vlc/internal/testenv"
)

// trainedPQ returns a PQ code of nsub subspaces trained on n random
// residuals, with the given anchors installed.
func trainedPQ(t testing.TB, d, nsub, n int, anchors []float32) (*PQ, []float32) {
	t.Helper()
	c := NewPQ(d, nsub, 0, 5)
	res := randomResiduals(n, d, uint64(d*nsub+n))
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

// encodeList codes the first n residuals as one list a, returning the
// codes and the list's parameters.
func encodeList(c Code, a int, res []float32, n int) (codes, params []byte) {
	codes, params = make([]byte, n*c.CodeBytes()), make([]byte, c.ParamBytes())
	c.EncodeList(codes, params, a, res, n)
	return codes, params
}

// Subspaces cover the dimensions in order, without gaps, their widths
// differing by at most one.
func TestPQSubspaces(t *testing.T) {
	for _, d := range []int{1, 7, 96, 100, 768} {
		for _, nsub := range []int{1, 2, 3, d / 8, d / 3, d - 1, d} {
			if nsub < 1 || nsub > d {
				continue
			}
			c := NewPQ(d, nsub, 0, 1)
			next, wMin, wMax := 0, d, 0
			for s := range nsub {
				lo, hi := c.sub(s)
				if lo != next || hi <= lo {
					t.Fatalf("d=%d nsub=%d: subspace %d is %d..%d after %d", d, nsub, s, lo, hi, next)
				}
				next, wMin, wMax = hi, min(wMin, hi-lo), max(wMax, hi-lo)
			}
			if next != d || wMax-wMin > 1 {
				t.Errorf("d=%d nsub=%d: subspaces end at %d, widths %d..%d", d, nsub, next, wMin, wMax)
			}
		}
	}
	if got := PQSubspaces(96, 1); got != 12 {
		t.Errorf("PQSubspaces(96, 1) = %d, want 12", got)
	}
	if got := PQSubspaces(100, 2); got != 25 {
		t.Errorf("PQSubspaces(100, 2) = %d, want 25", got)
	}
}

// Training is a function of the sample and the seed alone: the same bytes
// twice, and with one core or two.
func TestPQTrainDeterministic(t *testing.T) {
	for _, nsub := range []int{2, 4, 7, 13} {
		const n, d = 400, 13
		res := randomResiduals(n, d, 11)
		var got [][]byte
		for _, procs := range []int{1, 2, 2} {
			old := runtime.GOMAXPROCS(procs)
			got = append(got, NewPQ(d, nsub, 0, 9).Train(res, n))
			runtime.GOMAXPROCS(old)
		}
		for i := 1; i < len(got); i++ {
			if !bytes.Equal(got[0], got[i]) {
				t.Errorf("nsub=%d: training %d differs from training 0", nsub, i)
			}
		}
		if bytes.Equal(got[0], NewPQ(d, nsub, 0, 10).Train(res, n)) {
			t.Errorf("nsub=%d: another seed trains the same codebooks", nsub)
		}
	}
}

// Training on fewer residuals than centroids, or none, still gives valid
// codebooks.
func TestPQTrainSmall(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		c := NewPQ(5, 2, 0, 1)
		if err := c.SetGlobal(c.Train(randomResiduals(n, 5, 1), n)); err != nil {
			t.Errorf("n=%d: %v", n, err)
		}
	}
	c := NewPQ(4, 1, 0, 1)
	if err := c.SetGlobal(c.Train(make([]float32, 4*10), 10)); err != nil {
		t.Errorf("zero residuals: %v", err)
	}
	c.SetAnchors(make([]float32, 4))
	codes, params := encodeList(c, 0, make([]float32, 4*3), 3)
	if !bytes.Equal(codes, make([]byte, len(codes))) || math.IsNaN(float64(getF32(params, 0))) {
		t.Errorf("zero residuals coded as %v, params %v", codes, params)
	}
	encodeList(c, 0, nil, 0) // an empty list must not fail
}

func TestPQSetGlobalRejects(t *testing.T) {
	c := NewPQ(10, 3, 2, 1)
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
// B x̂ (for L2 and dot), at dimensions and subspace counts straddling the
// widths, for a list whose anchor is away from the origin and from the
// anchors' mean. C is on the list's grid of 256 levels: the L2 estimate
// may differ by half a step.
func TestPQScorerMatchesDecode(t *testing.T) {
	testenv.SkipLong(t)
	for _, d := range []int{1, 3, 7, 8, 9, 96, 100} {
		for _, nsub := range []int{1, (d + 7) / 8, (d + 3) / 4, (d + 1) / 2, d - 1, d} {
			if nsub < 1 || nsub > d {
				continue
			}
			t.Run(fmt.Sprintf("d=%d/nsub=%d", d, nsub), func(t *testing.T) {
				anchors := randomResiduals(3, d, 123)
				for j := range anchors {
					anchors[j] += 3
				}
				c, res := trainedPQ(t, d, nsub, 120, anchors)
				const n, a = 30, 1
				anchor := anchors[a*d : (a+1)*d]
				codes, params := encodeList(c, a, res, n)
				sc := c.NewScorer()
				cb := c.CodeBytes()
				dec := make([]float32, d)
				q := randomResiduals(1, d, 77)
				qa := make([]float32, d) // q - anchor
				for j := range q {
					q[j] += 3
					qa[j] = q[j] - anchor[j]
				}
				for i := range n {
					r, code := res[i*d:(i+1)*d], codes[i*cb:(i+1)*cb]
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
					tol := float64(getF32(params, 3))/2 + 1e-4*(1+dot64(qa, qa)+dot64(r, r)+2*math.Sqrt(dot64(anchor, anchor)*dot64(dec, dec)))
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
		c, res := trainedPQ(t, d, PQSubspaces(d, bits), 300, make([]float32, d))
		codes, params := encodeList(c, 0, res, n)
		sc := c.NewScorer()
		cb := c.CodeBytes()
		dec := make([]float32, d)
		q := make([]float32, d)
		var sum, sum2, plain, plain2 float64
		for i := range n {
			r, code := res[i*d:(i+1)*d], codes[i*cb:(i+1)*cb]
			c.Decode(dec, params, code)
			b, _ := c.scalars(params, code)
			beta := float64(b)
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

// EncodeList may run from many goroutines at once (run with -race) and
// gives the same codes as one goroutine.
func TestPQEncodeConcurrent(t *testing.T) {
	const d, n = 40, 64
	anchors := randomResiduals(2, d, 3)
	c, res := trainedPQ(t, d, 10, 300, anchors)
	want, wantP := encodeList(c, 1, res, n)
	got := make([][]byte, 16)
	var wg sync.WaitGroup
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes, params := encodeList(c, 1, res, n)
			got[g] = append(codes, params...)
		}()
	}
	wg.Wait()
	for g := range got {
		if !bytes.Equal(got[g], append(want, wantP...)) {
			t.Fatalf("goroutine %d encoded differently", g)
		}
	}
}

func TestPQNew(t *testing.T) {
	for _, b := range []int{1, 2, 4, 8} {
		c, err := New(Spec{Kind: KindPQ, Dim: 10, Bits: b, Seed: 1})
		if err != nil || c.Kind() != KindPQ || c.Spec().Bits != b || c.Spec().Subspaces != (10*b+7)/8 || c.CodeBytes() != (10*b+7)/8+2 {
			t.Errorf("New(PQ, %d bits): %v, %v", b, c, err)
		}
		if _, ok := c.(Trainer); !ok {
			t.Errorf("PQ is not a Trainer")
		}
	}
	for _, nsub := range []int{1, 3, 10} {
		c, err := New(Spec{Kind: KindPQ, Dim: 10, Subspaces: nsub})
		if err != nil || c.CodeBytes() != nsub+2 || math.Abs(c.Spec().BitsPerDim()-0.8*float64(nsub)) > 1e-12 {
			t.Errorf("New(PQ, %d subspaces): %v, %v", nsub, c, err)
		}
	}
	for _, s := range []Spec{
		{Kind: KindPQ, Dim: 10, Bits: 3},
		{Kind: KindPQ, Dim: 10},
		{Kind: KindPQ, Dim: 10, Subspaces: 11},
		{Kind: KindPQ, Dim: 10, Subspaces: -1},
		{Kind: KindPQ, Dim: 0, Bits: 4},
		{Kind: KindRotated, Dim: 10, Bits: 4, Subspaces: 5},
		{Kind: 3, Dim: 10, Bits: 4}, // the retired first pq layout
	} {
		if _, err := New(s); err == nil {
			t.Errorf("New(%+v): no error", s)
		}
	}
}

func BenchmarkTrainPQ(b *testing.B) {
	const d, n = 96, 4096
	res := randomResiduals(n, d, 1)
	for _, bits := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("b=%d", bits), func(b *testing.B) {
			for b.Loop() {
				NewPQ(d, PQSubspaces(d, bits), bits, 1).Train(res, n)
			}
		})
	}
}

func BenchmarkScorePQ(b *testing.B) {
	const d, n = 96, 1024
	for _, bits := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("b=%d", bits), func(b *testing.B) {
			c, res := trainedPQ(b, d, PQSubspaces(d, bits), 2048, make([]float32, d))
			codes, params := encodeList(c, 0, res, n)
			cb := c.CodeBytes()
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
