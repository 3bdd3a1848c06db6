// Package parity judges whether a GPU backend's assignments agree with the
// CPU reference's: equal, or different only where the two anchors are
// within rounding of each other (a near-tie). Shared by the backends' tests
// and `vlc test-cuda` / `vlc test-webgpu`; the backends themselves never
// import each other.
package parity

import (
	"math"

	"github.com/vlc-embed/vlc/internal/f16"
)

// NearTie reports whether choosing anchor ag instead of ac for point x is
// within what the backend's arithmetic can explain: with D(a) = |x - a|^2
// in float64 it is when
//
//	D(ag) - D(ac) <= r + 1e-5 (|x|^2 + max(|ag|^2, |ac|^2))
//
// where the last term covers float32 sums of d products on either side and
// r, for a backend that rounds the anchors to float16 (f16Anchors, as the
// CUDA tensor-core assign does), is |D(ag16) - D(ag)| + |D(ac16) - D(ac)|,
// how far rounding moved the two distances (0 otherwise). gap is
// D(ag) - D(ac), slack the right-hand side; a negative gap means ag is the
// better anchor.
func NearTie(x, ag, ac []float32, f16Anchors bool) (tie bool, gap, slack float64) {
	var dg, dc, dg16, dc16, xx, gg, cc float64
	for j, v := range x {
		xv, g, c := float64(v), float64(ag[j]), float64(ac[j])
		dg += (xv - g) * (xv - g)
		dc += (xv - c) * (xv - c)
		xx += xv * xv
		gg += g * g
		cc += c * c
		if f16Anchors {
			g16, c16 := float64(f16.ToFloat32(f16.FromFloat32(ag[j]))), float64(f16.ToFloat32(f16.FromFloat32(ac[j])))
			dg16 += (xv - g16) * (xv - g16)
			dc16 += (xv - c16) * (xv - c16)
		}
	}
	gap = dg - dc
	slack = 1e-5 * (xx + max(gg, cc))
	if f16Anchors {
		slack += math.Abs(dg16-dg) + math.Abs(dc16-dc)
	}
	return gap <= slack, gap, slack
}

// Agreement compares two backends' assignments of the same points to the
// same anchors.
type Agreement struct {
	N          int     // points compared
	Equal      int     // same anchor
	NearTies   int     // different anchor, NearTie holds
	Mismatches int     // different anchor beyond a near-tie, or out of range
	WorstGap   float64 // largest gap/slack among the differences (<= 1 for near-ties)
}

// NonTieFraction is Mismatches / N.
func (a Agreement) NonTieFraction() float64 { return float64(a.Mismatches) / float64(max(a.N, 1)) }

// Compare checks got against want for the first len(want) points of pts
// (float16, dim d) and anchors (m x d float32).
func Compare(pts []uint16, d int, anchors []float32, got, want []int32, f16Anchors bool) Agreement {
	ag := Agreement{N: len(want)}
	m := len(anchors) / max(d, 1)
	x := make([]float32, d)
	for i, w := range want {
		g := got[i]
		if g == w {
			ag.Equal++
			continue
		}
		if g < 0 || int(g) >= m {
			ag.Mismatches++
			ag.WorstGap = math.Inf(1)
			continue
		}
		f16.DecodeRow(x, pts[i*d:(i+1)*d])
		tie, gap, slack := NearTie(x, anchors[int(g)*d:int(g+1)*d], anchors[int(w)*d:int(w+1)*d], f16Anchors)
		if tie {
			ag.NearTies++
		} else {
			ag.Mismatches++
		}
		if r := gap / slack; r > ag.WorstGap {
			ag.WorstGap = r
		}
	}
	return ag
}

// RelDiff is |a - b| / |b|: how far a backend's figure a is from the
// reference's b, relatively.
func RelDiff(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(b), 1e-300) }
