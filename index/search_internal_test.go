package index

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/internal/vec"
)

// TestMayEnterRefinesNaN: an entry whose first estimate is NaN (a float16
// scalar overflowed to infinity, times zero) is refined, not dropped, once
// the results are full; a finite estimate beyond the worst kept is not.
func TestMayEnterRefinesNaN(t *testing.T) {
	var top topK
	top.reset(1)
	top.push(Hit{ID: 0, Distance: 1})
	if !mayEnter(top.limit(), float32(math.NaN())) {
		t.Error("a NaN lower bound was ruled out")
	}
	if mayEnter(top.limit(), 2) {
		t.Error("a lower bound beyond the worst kept hit was not ruled out")
	}
	if !mayEnter(top.limit(), 0.5) {
		t.Error("a lower bound below the worst kept hit was ruled out")
	}
}

// nthSmallest agrees with sorting (cmp.Compare's order, NaN first) at every
// n, on values with many ties, infinities and NaNs, at lengths around the
// median of three's.
func TestNthSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0}
	for _, n := range []int{1, 2, 3, 4, 5, 17, 100, 1000} {
		for trial := range 20 {
			x := make([]float32, n)
			for i := range x {
				switch r := rng.IntN(10); {
				case r == 0 && trial%2 == 1:
					x[i] = specials[rng.IntN(len(specials))]
				case r < 5:
					x[i] = float32(rng.IntN(4)) // ties
				default:
					x[i] = float32(rng.NormFloat64())
				}
			}
			sorted := slices.Clone(x)
			slices.SortFunc(sorted, cmp.Compare[float32])
			for k := range n {
				if got := nthSmallest(slices.Clone(x), k); cmp.Compare(got, sorted[k]) != 0 {
					t.Fatalf("n=%d trial %d: element %d is %v, sorting gives %v (%v)", n, trial, k, got, sorted[k], x)
				}
			}
		}
	}
}

// probeLists chooses the lists a top-nprobe heap of (distance, list) keeps,
// in its order, ties included.
func TestProbeListsMatchesHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, m := range []int{1, 7, 64, 300} {
		for _, metric := range []Metric{L2, IP} {
			ix := &Index{m: m, norms: make([]float32, m)}
			ix.meta.Metric = metric
			s := &scratch{dots: make([]float32, m), dist: make([]float32, m), sel: make([]float32, m)}
			for i := range m {
				ix.norms[i] = float32(rng.IntN(3))
				s.dots[i] = float32(rng.IntN(5)) / 2 // many ties
			}
			for _, nprobe := range []int{1, 2, m / 2, m} {
				if nprobe < 1 || nprobe > m {
					continue
				}
				var ref topK
				ref.reset(nprobe)
				for a, qa := range s.dots {
					d := -qa
					if metric != IP {
						d = ix.norms[a] - 2*qa
					}
					if ref.accepts(d) {
						ref.push(Hit{ID: a, Distance: d})
					}
				}
				ix.probeLists(s, nprobe)
				if want := ref.sorted(); !slices.Equal(s.probe, want) {
					t.Fatalf("m=%d %v nprobe %d: %v, heap %v", m, metric, nprobe, s.probe, want)
				}
			}
		}
	}
}

// checkQuery answers as its plain definition does (every value finite,
// not all 0 under cosine, the squared length within float32 otherwise),
// error for error, on queries whose squared length straddles the ends of
// float32's range, and with NaN, infinities and zeros.
func TestCheckQueryEdges(t *testing.T) {
	plain := func(ix *Index, q []float32) error {
		zero := true
		for j, v := range q {
			if !finite(v) {
				return fmt.Errorf("%w: query value %d is %v", ErrArgument, j, v)
			}
			zero = zero && v == 0
		}
		if zero && ix.meta.Metric == Cosine {
			return fmt.Errorf("%w: every value of the query is 0, and a zero vector has no direction to compare", ErrZeroVector)
		}
		if s := vec.Dot(q, q); ix.meta.Metric != Cosine && math.IsInf(float64(s), 1) {
			return fmt.Errorf("%w: query too large (its squared length overflows float32)", ErrArgument)
		}
		return nil
	}
	rng := rand.New(rand.NewPCG(7, 8))
	big := math.Sqrt(math.MaxFloat32)
	failed, passed := 0, 0
	for _, n := range []int{1, 3, 31, 32, 33, 100, 768} {
		for trial := range 400 {
			q := make([]float32, n)
			// Scaled so that |q|^2 lands near MaxFloat32, near 2^-126, or
			// at 0.
			scale := []float64{big / math.Sqrt(float64(n)), 0x1p-63 / math.Sqrt(float64(n)), 1, 0}[trial%4]
			scale *= 1 + (rng.Float64()-0.5)/8
			for j := range q {
				q[j] = float32(scale * (0.9 + rng.Float64()/5))
			}
			if trial%17 == 0 {
				q[rng.IntN(n)] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0}[trial%4]
			}
			for _, metric := range []Metric{L2, Cosine, IP} {
				ix := &Index{}
				ix.meta.Metric = metric
				got, want := ix.checkQuery(q), plain(ix, q)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("n=%d trial %d %v: %v, the plain check %v (|q|^2 %v)", n, trial, metric, got, want, vec.Dot(q, q))
				}
				if want != nil {
					failed++
				} else {
					passed++
				}
			}
		}
	}
	if failed < 100 || passed < 100 {
		t.Fatalf("the queries do not straddle the edges: %d refused, %d taken", failed, passed)
	}
}
