package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
)

// ref64 is the float64 oracle: exact squared distances of float16 points.
func ref64(pts anneal.Points, anchors []float32, m int) (assign []int, dist [][]float64) {
	d := pts.Dim
	assign = make([]int, pts.N)
	dist = make([][]float64, pts.N)
	for i := range pts.N {
		dist[i] = make([]float64, m)
		for a := range m {
			var s float64
			for j := range d {
				v := float64(f16.ToFloat32(pts.Data[i*d+j])) - float64(anchors[a*d+j])
				s += v * v
			}
			dist[i][a] = s
			if s < dist[i][assign[i]] {
				assign[i] = a
			}
		}
	}
	return assign, dist
}

// Assignments equal the float64 oracle's except near-ties, at sizes that
// straddle the assign block (256 points) and the 4-anchor, 4-lane unrolling.
func TestAssignParity(t *testing.T) {
	for _, n := range []int{1, 255, 256, 257, 600} {
		for _, m := range []int{1, 3, 4, 5, 9} {
			for _, d := range []int{1, 3, 4, 5, 17} {
				if m > n {
					continue
				}
				t.Run(fmt.Sprintf("n=%d/m=%d/d=%d", n, m, d), func(t *testing.T) {
					pts := synth.Clusters(n, d, 3, uint64(n*m*d))
					rng := rand.New(rand.NewPCG(uint64(m), uint64(d)))
					anchors := make([]float32, m*d)
					for i := range anchors {
						anchors[i] = float32(rng.NormFloat64() * 10)
					}
					ds, _ := New().Load(pts)
					if err := ds.SetAnchors(anchors, m); err != nil {
						t.Fatal(err)
					}
					st, err := ds.Assign()
					if err != nil {
						t.Fatal(err)
					}
					got := make([]int32, n)
					ds.Assignments(got)
					want, dist := ref64(pts, anchors, m)
					var energy float64
					for i := range n {
						energy += dist[i][want[i]]
						if int(got[i]) == want[i] {
							continue
						}
						gap := dist[i][got[i]] - dist[i][want[i]]
						if gap > 1e-4*(1+dist[i][want[i]]) {
							t.Errorf("point %d: anchor %d (%.6g), want %d (%.6g)", i, got[i], dist[i][got[i]], want[i], dist[i][want[i]])
						}
					}
					energy /= float64(n)
					if math.Abs(st.Energy-energy) > 1e-4*(1+energy) {
						t.Errorf("energy %.8g, oracle %.8g", st.Energy, energy)
					}
					if st.Changed != n {
						t.Errorf("first assign changed %d, want %d", st.Changed, n)
					}
					if st, _ := ds.Assign(); st.Changed != 0 {
						t.Errorf("second assign changed %d, want 0", st.Changed)
					}
				})
			}
		}
	}
}

// A Lloyd step (Tau=+Inf, Rate=1, MaxMove=+Inf) puts each anchor at the
// mean of its points; counts and variances match the oracle.
func TestLloydStep(t *testing.T) {
	const n, d, m = 777, 7, 6
	pts := synth.Clusters(n, d, m, 11)
	anchors := make([]float32, m*d)
	for a := range m {
		f16.DecodeRow(anchors[a*d:(a+1)*d], pts.Data[a*d:(a+1)*d])
	}
	ds, _ := New().Load(pts)
	ds.SetAnchors(anchors, m)
	inf := float32(math.Inf(1))
	if _, err := ds.Step(anneal.StepParams{Tau: inf, Rate: 1, MaxMove: inf}); err != nil {
		t.Fatal(err)
	}
	assign, _ := ref64(pts, anchors, m)
	got := make([]float32, m*d)
	counts := make([]int64, m)
	variance := make([]float32, m*d)
	ds.Anchors(got)
	ds.Stats(counts, variance)
	for a := range m {
		var c int64
		mean := make([]float64, d)
		sq := make([]float64, d)
		for i, x := range assign {
			if x != a {
				continue
			}
			c++
			for j := range d {
				v := float64(f16.ToFloat32(pts.Data[i*d+j]))
				mean[j] += v
				r := v - float64(anchors[a*d+j])
				sq[j] += r * r
			}
		}
		if counts[a] != c {
			t.Errorf("anchor %d: count %d, want %d", a, counts[a], c)
		}
		for j := range d {
			if c == 0 {
				continue
			}
			if w := mean[j] / float64(c); math.Abs(float64(got[a*d+j])-w) > 1e-5*(1+math.Abs(w)) {
				t.Errorf("anchor %d dim %d: %v, want mean %v", a, j, got[a*d+j], w)
			}
			if w := sq[j] / float64(c); math.Abs(float64(variance[a*d+j])-w) > 1e-5*(1+w) {
				t.Errorf("anchor %d dim %d: variance %v, want %v", a, j, variance[a*d+j], w)
			}
		}
	}
}

// With a small Huber threshold a far outlier pulls the anchor less than in
// the plain mean; Rate and MaxMove shorten the move as documented.
func TestRobustStep(t *testing.T) {
	const d = 2
	// Nine points at (1,0) and one outlier at (100,0), one anchor at origin.
	data := make([]uint16, 0, 20)
	for range 9 {
		data = append(data, f16.FromFloat32(1), 0)
	}
	data = append(data, f16.FromFloat32(100), 0)
	pts := anneal.Points{Data: data, N: 10, Dim: d}
	inf := float32(math.Inf(1))
	step := func(p anneal.StepParams) float32 {
		ds, _ := New().Load(pts)
		ds.SetAnchors([]float32{0, 0}, 1)
		ds.Step(p)
		a := make([]float32, d)
		ds.Anchors(a)
		return a[0]
	}
	plain := step(anneal.StepParams{Tau: inf, Rate: 1, MaxMove: inf})
	if math.Abs(float64(plain)-10.9) > 1e-4 {
		t.Errorf("plain mean %v, want 10.9", plain)
	}
	// Tau = 2: weights 1 for the nine, 2/100 for the outlier:
	// mean = (9*1 + 0.02*100) / 9.02.
	robust := step(anneal.StepParams{Tau: 2, Rate: 1, MaxMove: inf})
	if w := (9 + 2.0) / 9.02; math.Abs(float64(robust)-w) > 1e-4 {
		t.Errorf("Huber mean %v, want %v", robust, w)
	}
	if half := step(anneal.StepParams{Tau: inf, Rate: 0.5, MaxMove: inf}); math.Abs(float64(half)-5.45) > 1e-4 {
		t.Errorf("rate 0.5: %v, want 5.45", half)
	}
	if capped := step(anneal.StepParams{Tau: inf, Rate: 1, MaxMove: 3}); math.Abs(float64(capped)-3) > 1e-5 {
		t.Errorf("MaxMove 3: %v, want 3", capped)
	}
}

func BenchmarkAssign(b *testing.B) {
	for _, c := range []struct{ n, d, m int }{{10000, 96, 100}, {20000, 768, 256}} {
		b.Run(fmt.Sprintf("n=%d/d=%d/m=%d", c.n, c.d, c.m), func(b *testing.B) {
			pts := synth.Clusters(c.n, c.d, 10, 1)
			anchors := make([]float32, c.m*c.d)
			for i := range anchors {
				anchors[i] = float32(i%7) - 3
			}
			ds, _ := New().Load(pts)
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
