package devicetest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
)

// Trace is everything anneal.Train reports: the model and what Progress
// saw after every iteration.
type Trace struct {
	Model *anneal.Model
	Iters []anneal.Iteration
}

// TrainTrace trains pts on dev with cfg (its Progress replaced) and
// returns the trace.
func TrainTrace(t testing.TB, dev device.Device, pts device.Points, cfg anneal.Config) Trace {
	t.Helper()
	var tr Trace
	cfg.Progress = func(it anneal.Iteration) { tr.Iters = append(tr.Iters, it) }
	var err error
	if tr.Model, err = anneal.Train(t.Context(), dev, pts, cfg); err != nil {
		t.Fatal(err)
	}
	return tr
}

// SameTrace checks that two traces agree to the bit: every iteration's
// energy, temperature, changed, merged and split counts, and the
// model's every field.
func SameTrace(t testing.TB, label string, a, b Trace) {
	t.Helper()
	if len(a.Iters) != len(b.Iters) {
		t.Errorf("%s: %d iterations / %d", label, len(a.Iters), len(b.Iters))
	}
	for i := range min(len(a.Iters), len(b.Iters)) {
		x, y := a.Iters[i], b.Iters[i]
		if math.Float64bits(x.Energy) != math.Float64bits(y.Energy) || math.Float64bits(x.Temperature) != math.Float64bits(y.Temperature) ||
			x.Iter != y.Iter || x.Changed != y.Changed || x.Merged != y.Merged || x.Split != y.Split {
			t.Fatalf("%s: iteration %d: %+v / %+v", label, i+1, x, y)
		}
	}
	if d := ModelDiff(a.Model, b.Model); d != "" {
		t.Fatalf("%s: %s", label, d)
	}
}

// ModelDiff describes the first difference between two models, to the
// bit, or returns "".
func ModelDiff(a, b *anneal.Model) string {
	switch {
	case a.M != b.M || a.Dim != b.Dim:
		return fmt.Sprintf("%d x %d anchors / %d x %d", a.M, a.Dim, b.M, b.Dim)
	case a.Iterations != b.Iterations || a.Converged != b.Converged || a.Merged != b.Merged || a.Split != b.Split:
		return fmt.Sprintf("iterations %d / %d, converged %v / %v, merged %d / %d, split %d / %d",
			a.Iterations, b.Iterations, a.Converged, b.Converged, a.Merged, b.Merged, a.Split, b.Split)
	case math.Float64bits(a.Energy) != math.Float64bits(b.Energy) || math.Float64bits(a.InitEnergy) != math.Float64bits(b.InitEnergy):
		return fmt.Sprintf("energy %v / %v, initial %v / %v", a.Energy, b.Energy, a.InitEnergy, b.InitEnergy)
	case !slices.Equal(a.Counts, b.Counts):
		return "counts differ"
	case !slices.Equal(a.Assign, b.Assign):
		for i := range a.Assign {
			if a.Assign[i] != b.Assign[i] {
				return fmt.Sprintf("point %d: anchor %d / %d", i, a.Assign[i], b.Assign[i])
			}
		}
		return fmt.Sprintf("%d assignments / %d", len(a.Assign), len(b.Assign))
	}
	for _, f := range []struct {
		name string
		x, y []float32
	}{{"anchors", a.Anchors, b.Anchors}, {"variance", a.Variance, b.Variance}} {
		if len(f.x) != len(f.y) {
			return fmt.Sprintf("%d %s / %d", len(f.x), f.name, len(f.y))
		}
		for i := range f.x {
			if math.Float32bits(f.x[i]) != math.Float32bits(f.y[i]) {
				return fmt.Sprintf("%s, value %d (anchor %d): %v / %v", f.name, i, i/a.Dim, f.x[i], f.y[i])
			}
		}
	}
	return ""
}

// Sizes returns a split for device.MultiDevice.WithSplit that gives the
// devices these row counts: the last gets what the others leave (n minus
// their sum), and the others their count cut to what is left.
func Sizes(sizes ...int) func(n, k int) []int {
	return func(n, k int) []int {
		out := make([]int, k)
		left := n
		for i := range k - 1 {
			if i < len(sizes) {
				out[i] = min(sizes[i], left)
			}
			left -= out[i]
		}
		out[k-1] = left
		return out
	}
}

// Skewed splits n points over k devices in proportion 1 : 2 : ... : k,
// the last taking the remainder: uneven shares at any size.
func Skewed(n, k int) []int {
	out := make([]int, k)
	total, left := k*(k+1)/2, n
	for i := range k - 1 {
		out[i] = n * (i + 1) / total
		left -= out[i]
	}
	out[k-1] = left
	return out
}

// Scaled returns a copy of pts with row i scaled by scales[i mod
// len(scales)] (rounded to float16): groups of points at very different
// scales, whose float64 sums of distances are not exact, so that they
// depend on the order of the additions (a test of that order can fail).
func Scaled(pts device.Points, scales ...float32) device.Points {
	out := pts
	out.Data = make([]uint16, len(pts.Data))
	d := pts.Dim
	for i := range pts.N {
		s := scales[i%len(scales)]
		for j := i * d; j < (i+1)*d; j++ {
			out.Data[j] = f16.FromFloat32(f16.ToFloat32(pts.Data[j]) * s)
		}
	}
	return out
}
