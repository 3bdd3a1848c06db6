package anneal

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vlc-embed/vlc/internal/vec"
)

func TestMaintain(t *testing.T) {
	const d = 2
	// Anchor 0 and 1 nearly coincide; anchor 2 is empty; anchor 3 carries
	// most of the distortion.
	anchors := []float32{0, 0, 0.01, 0, 5, 5, 10, 10}
	counts := []int64{50, 50, 0, 300}
	variance := []float32{1, 1, 1, 1, 0, 0, 9, 9}
	merged, split := maintain(anchors, counts, variance, d, 400, 0.05, rand.New(rand.NewPCG(1, 2)))
	if merged != 1 || split != 2 {
		t.Fatalf("merged %d, split %d; want 1 and 2", merged, split)
	}
	// Slots are refilled in order (empty 2, then merged 1) by splitting the
	// most distorted anchors (3, then the merged 0), symmetrically: each
	// pair's midpoint is where the split anchor was.
	mid := func(a, b int) [2]float32 {
		return [2]float32{(anchors[a*d] + anchors[b*d]) / 2, (anchors[a*d+1] + anchors[b*d+1]) / 2}
	}
	if got := mid(3, 2); got != [2]float32{10, 10} {
		t.Errorf("split of anchor 3 centred at %v, want (10, 10)", got)
	}
	if got := mid(0, 1); math.Abs(float64(got[0])-0.005) > 1e-6 || got[1] != 0 {
		t.Errorf("split of the merged anchor centred at %v, want (0.005, 0), the count-weighted mean", got)
	}
	if anchors[3*d] == anchors[2*d] {
		t.Error("split halves coincide")
	}
}

// nearestOther with bounds finds what the full search finds wherever the
// nearest other anchor is within the bound, and nothing elsewhere; ties go
// to the lower index.
func TestNearestOtherBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const m, d = 300, 70
	anchors := make([]float32, m*d)
	for i := range anchors {
		anchors[i] = float32(rng.NormFloat64())
	}
	copy(anchors[7*d:8*d], anchors[3*d:4*d])  // exact ties: 3 and 7 coincide,
	copy(anchors[9*d:10*d], anchors[3*d:4*d]) // and 9 too
	for i := 20; i < 40; i++ {                // close pairs
		for j := range d {
			anchors[(i+20)*d+j] = anchors[i*d+j] + float32(rng.NormFloat64()*0.05)
		}
	}
	skip := make([]bool, m)
	skip[11], skip[25] = true, true
	bound := make([]float64, m)
	for i := range bound {
		bound[i] = []float64{0, 0.2, 1, 50, math.Inf(1)}[i%5]
	}
	got := nearestOther(anchors, d, skip, bound)
	for i := range m {
		want := neighbour{j: -1}
		if !skip[i] {
			for j := range m {
				if j == i || skip[j] {
					continue
				}
				if v := vec.L2(anchors[i*d:(i+1)*d], anchors[j*d:(j+1)*d]); want.j < 0 || v < want.dist {
					want = neighbour{j, v}
				}
			}
			if want.j >= 0 && float64(want.dist) >= bound[i] {
				want = neighbour{j: -1}
			}
		}
		if got[i] != want {
			t.Errorf("anchor %d (bound %v): %+v, want %+v", i, bound[i], got[i], want)
		}
	}
	if got[3].j != 7 && bound[3] > 0 {
		t.Errorf("anchor 3: nearest %d, want 7 (a tie with 9, the lower index)", got[3].j)
	}
}

// BenchmarkMaintain: one maintenance pass over 4096 anchors of dimension
// 768 (the size of a 1M x 768 training), where the merge search dominates.
func BenchmarkMaintain(b *testing.B) {
	const m, d, n = 4096, 768, 1_000_000
	rng := rand.New(rand.NewPCG(1, 1))
	anchors := make([]float32, m*d)
	for i := range anchors {
		anchors[i] = float32(rng.NormFloat64())
	}
	counts := make([]int64, m)
	variance := make([]float32, m*d)
	for i := range counts {
		counts[i] = n / m
	}
	for i := range variance {
		variance[i] = 0.5
	}
	work := make([]float32, m*d)
	b.ResetTimer()
	for range b.N {
		copy(work, anchors)
		maintain(work, append([]int64(nil), counts...), variance, d, n, 0.05, rand.New(rand.NewPCG(2, 2)))
	}
}

// A crowded anchor (more than crowdFactor x the mean count) takes a starved
// anchor's slot even when no distortion is overloaded, and two nearly
// coincident anchors are not merged into a crowded list.
func TestMaintainCrowded(t *testing.T) {
	const d, n = 2, 1000
	anchors := []float32{0, 0, 0.01, 0, 5, 5, 10, 10}
	counts := []int64{200, 200, 5, 595}               // mean 250: crowded above 375
	variance := []float32{1, 1, 1, 1, 1, 1, 1.2, 1.2} // no distortion over 4x the mean
	merged, split := maintain(anchors, counts, variance, d, n, 0.05, rand.New(rand.NewPCG(1, 2)))
	if merged != 0 || split != 1 {
		t.Fatalf("merged %d, split %d; want 0 and 1", merged, split)
	}
	if got := [2]float32{(anchors[2*d] + anchors[3*d]) / 2, (anchors[2*d+1] + anchors[3*d+1]) / 2}; got != [2]float32{10, 10} {
		t.Errorf("the starved slot holds a half of %v, want the crowded anchor's split about (10, 10)", got)
	}
	if anchors[0] != 0 || anchors[d] != 0.01 {
		t.Error("the coincident pair was merged into a crowded list")
	}
}

// nearestOther's first test on the heads drops only pairs that L2Below
// drops: against a plain scan with vec.L2Below, the same neighbour and
// the same distance bits, for dimensions below, at and past the heads'
// 16 and 32 values, with anchors in tight groups and bounds that put many
// pairs just on either side of them.
func TestNearestOtherMatchesPlainScan(t *testing.T) {
	for _, d := range []int{3, 15, 16, 17, 31, 32, 33, 100} {
		const m = 300
		rng := rand.New(rand.NewPCG(uint64(d), 9))
		anchors := make([]float32, m*d)
		for i := range m {
			g := i / 4 // groups of four near one centre
			for j := range d {
				anchors[i*d+j] = float32(math.Sin(float64(g*d+j))) + float32(rng.NormFloat64()*0.05)
			}
		}
		skip := make([]bool, m)
		bound := make([]float64, m)
		for i := range m {
			skip[i] = i%37 == 5
			bound[i] = float64(d) * rng.Float64() * 0.02 // around the groups' squared spread
		}
		got := nearestOther(anchors, d, skip, bound)
		kept, live := 0, 0
		for i := range m {
			want := neighbour{j: -1}
			if !skip[i] {
				live++
				for j := range m {
					if j == i || skip[j] {
						continue
					}
					limit := bound[i]
					if want.j >= 0 {
						limit = min(limit, float64(want.dist))
					}
					if v, ok := vec.L2Below(anchors[i*d:(i+1)*d], anchors[j*d:(j+1)*d], limit); ok {
						want = neighbour{j, v}
					}
				}
			}
			if got[i].j != want.j || math.Float32bits(got[i].dist) != math.Float32bits(want.dist) {
				t.Fatalf("d=%d: anchor %d: nearest %d at %v, the plain scan finds %d at %v", d, i, got[i].j, got[i].dist, want.j, want.dist)
			}
			if want.j >= 0 {
				kept++
			}
		}
		if kept == 0 || kept == live {
			t.Fatalf("d=%d: %d of %d anchors have a neighbour within the bound: the bounds test nothing", d, kept, m)
		}
	}
}
