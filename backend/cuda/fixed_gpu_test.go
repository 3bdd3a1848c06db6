//go:build cuda

package cuda

import (
	"math"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
)

// One value at float16's largest must not cost the other points their
// precision once it has an anchor of its own: the scales follow the
// distances (fixed.go), not the largest |x|. The energy and variances of
// the final Assign match a float64 oracle, by points and by runs.
func TestOutlierPrecision(t *testing.T) {
	dev := gpuDevice(t)
	for _, n := range []int{3000, runMinPoints + 1000} {
		const d, m, outlier = 32, 20, 7
		pts := synth.Clusters(n, d, 10, 5)
		for i, h := range pts.Data {
			pts.Data[i] = f16.FromFloat32(f16.ToFloat32(h) * 0.001)
		}
		pts.Data[outlier*d+3] = 0x7bff // 65504
		anchors := synth.AnchorsNear(pts, m, 0.01, 9)
		f16.DecodeRow(anchors[:d], pts.Data[outlier*d:(outlier+1)*d])
		ds, err := dev.Load(pts)
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.SetAnchors(anchors, m); err != nil {
			t.Fatal(err)
		}
		inf := float32(math.Inf(1))
		for range 3 {
			if _, err := ds.Step(device.StepParams{Tau: inf, Rate: 1, MaxMove: inf}); err != nil {
				t.Fatal(err)
			}
		}
		st, err := ds.Assign()
		if err != nil {
			t.Fatal(err)
		}
		a, assign := make([]float32, m*d), make([]int32, n)
		counts, variance := make([]int64, m), make([]float32, m*d)
		if err := ds.Anchors(a); err != nil {
			t.Fatal(err)
		}
		if err := ds.Assignments(assign); err != nil {
			t.Fatal(err)
		}
		if err := ds.Stats(counts, variance); err != nil {
			t.Fatal(err)
		}
		ds.Close()
		energy := 0.0
		sq := make([]float64, m*d)
		for i, c := range assign {
			for j := range d {
				r := float64(f16.ToFloat32(pts.Data[i*d+j])) - float64(a[int(c)*d+j])
				energy += r * r
				sq[int(c)*d+j] += r * r
			}
		}
		energy /= float64(n)
		if math.IsNaN(st.Energy) || math.Abs(st.Energy-energy) > 1e-4*energy {
			t.Errorf("n=%d: energy %v, float64 oracle %v", n, st.Energy, energy)
		}
		bad := 0
		for k, v := range sq {
			c := counts[k/d]
			if c == 0 {
				continue
			}
			want := v / float64(c)
			if got := float64(variance[k]); math.IsNaN(got) || math.Abs(got-want) > 1e-3*want+1e-12 {
				if bad++; bad <= 3 {
					t.Errorf("n=%d, anchor %d dim %d: variance %v, float64 oracle %v", n, k/d, k%d, got, want)
				}
			}
		}
	}
}

// A pass that meets a point beyond the scales its predecessor chose
// reduces again with scales for it, and its update waits for that: the
// anchors and energy of a fresh dataset whose first pass starts from the
// bound, to rounding.
func TestRescaledPass(t *testing.T) {
	dev := gpuDevice(t)
	const n, d, m = 3000, 24, 15
	pts := synth.Clusters(n, d, 8, 3)
	anchors := synth.AnchorsNear(pts, m, 0.1, 2)
	far := make([]float32, len(anchors))
	for i, v := range anchors {
		far[i] = v + 30
	}
	inf := float32(math.Inf(1))
	p := device.StepParams{Tau: inf, Rate: 1, MaxMove: inf}
	run := func(warm bool) (device.StepStats, []float32, int) {
		ds, err := dev.Load(pts)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		if warm { // a first pass near the points sets tight scales
			if err := ds.SetAnchors(anchors, m); err != nil {
				t.Fatal(err)
			}
			if _, err := ds.Step(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := ds.SetAnchors(far, m); err != nil {
			t.Fatal(err)
		}
		st, err := ds.Step(p)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, m*d)
		if err := ds.Anchors(out); err != nil {
			t.Fatal(err)
		}
		return st, out, ds.(*dataset).rescaled
	}
	st1, a1, rescaled := run(true)
	st2, a2, _ := run(false)
	if rescaled != 1 {
		t.Errorf("passes reduced again: %d, want 1", rescaled)
	}
	if math.Abs(st1.Energy-st2.Energy) > 1e-6*st2.Energy {
		t.Errorf("energy %v after a second reduce, %v fresh", st1.Energy, st2.Energy)
	}
	for i := range a1 {
		if math.Abs(float64(a1[i]-a2[i])) > 1e-5*(1+math.Abs(float64(a2[i]))) {
			t.Fatalf("anchor %d dim %d: %v after a second reduce, %v fresh", i/d, i%d, a1[i], a2[i])
		}
	}
}
