package webgpu

import (
	"math"

	"github.com/vlc-embed/vlc/internal/f16"
)

// NearTie reports whether choosing anchor ag instead of ac for point x is
// within what float32 accumulation explains: with D(a) = |x - a|^2 in
// float64, it is when
//
//	D(ag) - D(ac) <= 1e-5 (|x|^2 + max(|ag|^2, |ac|^2))
//
// (float32 sums of d products on either side, computed as |a|^2 - 2 x.a).
// This backend keeps the anchors in float32, so unlike gpu/cuda's NearTie
// there is no float16 rounding term. gap is D(ag) - D(ac), slack the
// right-hand side; a negative gap means ag is the better anchor.
func NearTie(x, ag, ac []float32) (tie bool, gap, slack float64) {
	var dg, dc, xx, gg, cc float64
	for j, v := range x {
		xv, g, c := float64(v), float64(ag[j]), float64(ac[j])
		dg += (xv - g) * (xv - g)
		dc += (xv - c) * (xv - c)
		xx += xv * xv
		gg += g * g
		cc += c * c
	}
	gap = dg - dc
	slack = 1e-5 * (xx + max(gg, cc))
	return gap <= slack, gap, slack
}

// Agreement compares two backends' assignments of the same points to the
// same anchors.
type Agreement struct {
	N          int     // points compared
	Equal      int     // same anchor
	NearTies   int     // different anchor, NearTie holds
	Mismatches int     // different anchor beyond a near-tie
	WorstGap   float64 // largest gap/slack among the differences (<= 1 for near-ties)
}

// NonTieFraction is Mismatches / N.
func (a Agreement) NonTieFraction() float64 { return float64(a.Mismatches) / float64(max(a.N, 1)) }

// Compare checks got against want for the first len(want) points of pts
// (float16, dim d) and anchors (m x d float32).
func Compare(pts []uint16, d int, anchors []float32, got, want []int32) Agreement {
	ag := Agreement{N: len(want)}
	x := make([]float32, d)
	m := len(anchors) / max(d, 1)
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
		tie, gap, slack := NearTie(x, anchors[int(g)*d:int(g+1)*d], anchors[int(w)*d:int(w+1)*d])
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
