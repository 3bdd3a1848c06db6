package index

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
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
