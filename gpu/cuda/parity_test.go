package cuda

import (
	"testing"

	"github.com/vlc-embed/vlc/internal/f16"
)

func TestNearTie(t *testing.T) {
	x := []float32{0, 0}
	// Exactly equal distances: a tie either way.
	if tie, gap, _ := NearTie(x, []float32{1, 0}, []float32{0, 1}); !tie || gap != 0 {
		t.Errorf("equal distances: tie %v gap %v", tie, gap)
	}
	// A clearly farther anchor is no tie.
	if tie, _, _ := NearTie(x, []float32{3, 0}, []float32{1, 0}); tie {
		t.Error("distance 9 against 1 counted as a near-tie")
	}
	// Within float16 rounding of the anchors: 1000 and 1000.25 round to
	// the same float16 (spacing 0.5 there).
	if f16.FromFloat32(1000.25) != f16.FromFloat32(1000) {
		t.Fatal("test premise: 1000.25 and 1000 differ in float16")
	}
	if tie, gap, slack := NearTie([]float32{0}, []float32{1000.25}, []float32{1000}); !tie {
		t.Errorf("float16-indistinguishable anchors: gap %v slack %v", gap, slack)
	}
	// A better anchor (negative gap) is never a failure.
	if tie, _, _ := NearTie(x, []float32{1, 0}, []float32{5, 0}); !tie {
		t.Error("a better choice counted as a mismatch")
	}
}

func TestCompare(t *testing.T) {
	pts := []uint16{f16.FromFloat32(0), f16.FromFloat32(10)}
	anchors := []float32{0, 1000, 1000.25}
	a := Compare(pts, 1, anchors, []int32{1, 2}, []int32{0, 1})
	if a.N != 2 || a.Equal != 0 || a.Mismatches != 1 || a.NearTies != 1 {
		t.Errorf("%+v, want one mismatch (point 0) and one near-tie (point 1)", a)
	}
}
