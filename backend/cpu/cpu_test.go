package cpu_test

import (
	"fmt"
	"testing"

	"github.com/vlc-embed/vlc/anneal/devicetest"
	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/synth"
)

// The conformance suite of training backends, which the reference must
// pass too: its checks against float64 oracles are the CPU's own tests.
// The assign sizes straddle its blocks (256 points a goroutine, two points
// and four anchors a step of the inner loop).
func TestConformance(t *testing.T) {
	var sizes []devicetest.Size
	for _, n := range []int{1, 255, 256, 257, 600} {
		for _, m := range []int{1, 3, 4, 5, 9} {
			for _, d := range []int{1, 3, 4, 5, 17} {
				if m <= n {
					sizes = append(sizes, devicetest.Size{N: n, M: m, D: d})
				}
			}
		}
	}
	none := func(device.Dataset, int, int) int64 { return 0 }
	devicetest.Run(t, cpu.New(), devicetest.Options{
		Deterministic: true,
		AssignSizes:   sizes,
		Transfers: &devicetest.Transfers{
			Load:       none,
			SetAnchors: func(int, int) int64 { return 0 },
		},
	})
}

func BenchmarkAssign(b *testing.B) {
	for _, c := range []struct{ n, d, m int }{{10000, 96, 100}, {20000, 768, 256}} {
		b.Run(fmt.Sprintf("n=%d/d=%d/m=%d", c.n, c.d, c.m), func(b *testing.B) {
			pts := synth.Clusters(c.n, c.d, 10, 1)
			anchors := make([]float32, c.m*c.d)
			for i := range anchors {
				anchors[i] = float32(i%7) - 3
			}
			ds, _ := cpu.New().Load(pts)
			ds.SetAnchors(anchors, c.m)
			b.SetBytes(int64(2 * c.n * c.d))
			for b.Loop() {
				ds.Assign()
			}
			flops := 2 * float64(c.n) * float64(c.m) * float64(c.d) * float64(b.N)
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
