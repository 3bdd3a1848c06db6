package anneal

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestMaintain(t *testing.T) {
	const d = 2
	// Anchor 0 and 1 nearly coincide; anchor 2 is empty; anchor 3 carries
	// most of the distortion.
	anchors := []float32{0, 0, 0.01, 0, 5, 5, 10, 10}
	counts := []int64{50, 50, 0, 100}
	variance := []float32{1, 1, 1, 1, 0, 0, 9, 9}
	merged, split := maintain(anchors, counts, variance, d, 200, 0.05, rand.New(rand.NewPCG(1, 2)))
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
