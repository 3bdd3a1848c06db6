package parity

import (
	"testing"

	"github.com/vlc-embed/vlc/internal/f16"
)

func TestNearTie(t *testing.T) {
	x := []float32{0, 0}
	for _, f16Anchors := range []bool{false, true} {
		// Exactly equal distances: a tie either way.
		if tie, gap, _ := NearTie(x, []float32{1, 0}, []float32{0, 1}, f16Anchors); !tie || gap != 0 {
			t.Errorf("f16 %v: equal distances: tie %v gap %v", f16Anchors, tie, gap)
		}
		// A clearly farther anchor is no tie.
		if tie, _, _ := NearTie(x, []float32{3, 0}, []float32{1, 0}, f16Anchors); tie {
			t.Errorf("f16 %v: distance 9 against 1 counted as a near-tie", f16Anchors)
		}
		// A better anchor (negative gap) is never a failure.
		if tie, _, _ := NearTie(x, []float32{1, 0}, []float32{5, 0}, f16Anchors); !tie {
			t.Errorf("f16 %v: a better choice counted as a mismatch", f16Anchors)
		}
	}
	// 1000 and 1000.25 round to the same float16 (spacing 0.5 there): a
	// tie for a float16-anchor backend, not for a float32 one.
	if f16.FromFloat32(1000.25) != f16.FromFloat32(1000) {
		t.Fatal("test premise: 1000.25 and 1000 differ in float16")
	}
	if tie, gap, slack := NearTie([]float32{0}, []float32{1000.25}, []float32{1000}, true); !tie {
		t.Errorf("float16-indistinguishable anchors: gap %v slack %v", gap, slack)
	}
	if tie, _, _ := NearTie([]float32{0}, []float32{1000.25}, []float32{1000}, false); tie {
		t.Error("float32 anchors 0.25 apart at 1000 counted as a near-tie")
	}
	// Within float32 accumulation: 1000.001 against 1000.
	if tie, gap, slack := NearTie([]float32{0}, []float32{1000.001}, []float32{1000}, false); !tie {
		t.Errorf("float32 rounding: gap %v slack %v", gap, slack)
	}
}

func TestCompare(t *testing.T) {
	pts := []uint16{f16.FromFloat32(0), f16.FromFloat32(10), f16.FromFloat32(0)}
	anchors := []float32{0, 1000, 1000.25}
	a := Compare(pts, 1, anchors, []int32{1, 2, 7}, []int32{0, 1, 0}, true)
	if a.N != 3 || a.Equal != 0 || a.Mismatches != 2 || a.NearTies != 1 {
		t.Errorf("%+v, want two mismatches (point 0, and point 2 out of range) and one near-tie (point 1)", a)
	}
}
