package webgpu

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
	// Within float32 accumulation: 1000 and 1000+1e-3 at x = 0.
	if tie, gap, slack := NearTie([]float32{0}, []float32{1000.001}, []float32{1000}); !tie {
		t.Errorf("anchors 1e-6 apart relatively: gap %v slack %v", gap, slack)
	}
	// Float16 rounding is no excuse here: 1000.25 and 1000 are 500 apart
	// in squared distance, far beyond float32 accumulation.
	if tie, _, _ := NearTie([]float32{0}, []float32{1000.25}, []float32{1000}); tie {
		t.Error("a float16-sized difference counted as a near-tie")
	}
	// A better anchor (negative gap) is never a failure.
	if tie, _, _ := NearTie(x, []float32{1, 0}, []float32{5, 0}); !tie {
		t.Error("a better choice counted as a mismatch")
	}
}

func TestCompare(t *testing.T) {
	pts := []uint16{f16.FromFloat32(0), f16.FromFloat32(10), f16.FromFloat32(0)}
	anchors := []float32{0, 1000, 1000.001}
	a := Compare(pts, 1, anchors, []int32{1, 2, 7}, []int32{0, 1, 0})
	if a.N != 3 || a.Equal != 0 || a.Mismatches != 2 || a.NearTies != 1 {
		t.Errorf("%+v, want two mismatches (points 0 and 2: out of range) and one near-tie (point 1)", a)
	}
}
