package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
)

// The sums a split set carries from share to share are, to the bit, the
// float64 sums one dataset adds for each anchor (with Huber weights, whose
// terms are not exact), and the energy's sum is too. Sums made per share
// and added after would not be: the data is chosen so that they differ,
// which the test checks as well (else it could not fail).
func TestCarriedSums(t *testing.T) {
	const n, d, m = 3001, 24, 9
	pts := synth.Clusters(n, d, 6, 11)
	for i := range n {
		s := []float32{1.0 / 256, 1, 64}[i%3]
		for j := i * d; j < (i+1)*d; j++ {
			pts.Data[j] = f16.FromFloat32(f16.ToFloat32(pts.Data[j]) * s)
		}
	}
	anchors := synth.AnchorsNear(pts, m, 0.5, 1)
	p := device.StepParams{Tau: 3, Rate: 0.5, MaxMove: float32(math.Inf(1))}

	whole := newDataset(pts.Data, n, d)
	if err := whole.SetAnchors(anchors, m); err != nil {
		t.Fatal(err)
	}
	whole.assignRows()
	start, members := whole.byAnchor()
	want := sums{sum: make([]float64, m*d), sq: make([]float64, m*d), wsum: make([]float64, m)}
	x := make([]float32, d)
	for a := range m {
		want.wsum[a] = whole.addPoints(members[start[a]:start[a+1]], whole.anc[a*d:(a+1)*d], &p, x, want.sum[a*d:(a+1)*d], want.sq[a*d:(a+1)*d], 0)
	}
	want.energy = addDist(0, whole.dist)

	same := func(a, b []float64) bool {
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				return false
			}
		}
		return true
	}
	for _, split := range [][]int{{1, n - 1}, {1000, 1001, 1000}, {256, 257, 255, 2000, 233}} {
		t.Run(fmt.Sprint(split), func(t *testing.T) {
			var acc device.ShardSums
			apart := sums{sum: make([]float64, m*d), sq: make([]float64, m*d), wsum: make([]float64, m)}
			lo := 0
			for _, rows := range split {
				// sh is carried on; solo, the same rows, begins from zero.
				var shards [2]device.Shard
				for k := range shards {
					sh, err := New().LoadShard(pts, lo, lo+rows)
					if err != nil {
						t.Fatal(err)
					}
					if err := sh.SetAnchors(anchors, m); err != nil {
						t.Fatal(err)
					}
					if err := sh.Reduce(p, true, nil); err != nil {
						t.Fatal(err)
					}
					shards[k] = sh
				}
				lo += rows
				var err error
				if acc, err = shards[0].Fold(acc); err != nil {
					t.Fatal(err)
				}
				one, err := shards[1].Fold(nil)
				if err != nil {
					t.Fatal(err)
				}
				o := one.(*sums)
				for i := range apart.sum {
					apart.sum[i] += o.sum[i]
					apart.sq[i] += o.sq[i]
				}
				for a := range apart.wsum {
					apart.wsum[a] += o.wsum[a]
				}
				apart.energy += o.energy
			}
			got := acc.(*sums)
			if !same(got.sum, want.sum) || !same(got.sq, want.sq) || !same(got.wsum, want.wsum) || !same([]float64{got.energy}, []float64{want.energy}) {
				t.Fatal("the carried sums are not one dataset's")
			}
			if same(apart.sum, want.sum) && same(apart.sq, want.sq) && same([]float64{apart.energy}, []float64{want.energy}) {
				t.Fatal("sums added share by share match too: the data cannot tell the orders apart")
			}
		})
	}
}
