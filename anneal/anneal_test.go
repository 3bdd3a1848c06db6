package anneal_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/synth"
)

func train(t *testing.T, pts device.Points, cfg anneal.Config) *anneal.Model {
	t.Helper()
	m, err := anneal.Train(context.Background(), cpu.New(), pts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// On well-separated clusters with unit noise and twice as many anchors as
// clusters, training must give every cluster anchors of its own: the
// energy per point is then at most about d (the noise variance times d).
// With exactly as many anchors as clusters it does not reliably: in 40
// seeded runs (20 data seeds, 2 training seeds) 11 found all 20 clusters;
// the others kept two anchors on the halves of one cluster (too far apart
// to merge) while one anchor spanned two clusters.
func TestTrainFindsClusters(t *testing.T) {
	const n, d, k = 3000, 16, 20
	pts := synth.Clusters(n, d, k, 7)
	m := train(t, pts, anneal.Config{M: 2 * k, Seed: 1})
	if !m.Converged {
		t.Errorf("did not converge in %d iterations", m.Iterations)
	}
	if m.Energy > 1.05*d || m.Energy < 0.8*d {
		t.Errorf("energy %.3f, want at most about %d (unit noise in %d dimensions)", m.Energy, d, d)
	}
	if m.Energy >= m.InitEnergy {
		t.Errorf("energy rose from %.3f to %.3f", m.InitEnergy, m.Energy)
	}
	var total int64
	for _, c := range m.Counts {
		total += c
	}
	if total != n {
		t.Errorf("counts sum to %d, want %d", total, n)
	}
}

// Maintenance must rescue a bad start: with many more anchors than
// clusters' worth of seeds landing in one place it still ends near the
// optimum, and every anchor holds points.
func TestTrainNoEmptyAnchors(t *testing.T) {
	pts := synth.Clusters(4000, 8, 5, 3)
	m := train(t, pts, anneal.Config{M: 40, Seed: 2})
	for a, c := range m.Counts {
		if c == 0 {
			t.Errorf("anchor %d is empty", a)
		}
	}
}

func TestTrainDeterministic(t *testing.T) {
	pts := synth.Clusters(2000, 12, 10, 5)
	a := train(t, pts, anneal.Config{M: 17, Seed: 42})
	b := train(t, pts, anneal.Config{M: 17, Seed: 42})
	if !slices.Equal(a.Anchors, b.Anchors) || !slices.Equal(a.Assign, b.Assign) || a.Energy != b.Energy {
		t.Error("two runs with the same seed differ")
	}
	c := train(t, pts, anneal.Config{M: 17, Seed: 43})
	if slices.Equal(a.Anchors, c.Anchors) {
		t.Error("a different seed gave the same anchors")
	}
}

func TestTrainIdenticalPoints(t *testing.T) {
	pts := synth.Clusters(100, 4, 1, 1)
	for i := range pts.Data {
		pts.Data[i] = pts.Data[i%4]
	}
	m := train(t, pts, anneal.Config{M: 5, Seed: 1})
	if m.Energy != 0 {
		t.Errorf("energy %v for identical points, want 0", m.Energy)
	}
}

func TestTrainErrors(t *testing.T) {
	pts := synth.Clusters(10, 4, 2, 1)
	_, err := anneal.Train(context.Background(), cpu.New(), pts, anneal.Config{M: 11})
	if !errors.Is(err, anneal.ErrTooFewPoints) {
		t.Errorf("11 anchors for 10 points: got %v, want ErrTooFewPoints", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = anneal.Train(ctx, cpu.New(), pts, anneal.Config{M: 2})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v", err)
	}
}

func BenchmarkTrain(b *testing.B) {
	pts := synth.Clusters(10000, 96, 100, 1)
	for b.Loop() {
		if _, err := anneal.Train(context.Background(), cpu.New(), pts, anneal.Config{M: 100, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// In high dimensions Lloyd's Steps let one anchor near a Gaussian
// cluster's centre win the cluster from the other anchors seeded in it,
// which starve; search then scans a few large lists. With four anchors a
// cluster, maintenance must keep the lists near the mean size: the list a
// random point falls in (the sum of squared sizes over n) at most 1.6 times
// the mean (measured: 1.30 here, 1.21-1.47 over data seeds 1-6, and 2.34
// before crowded lists were split).
func TestTrainBalancesHighDimensionalClusters(t *testing.T) {
	const d, k = 768, 16
	n, m := 16000, 64
	if testing.Short() {
		// The race detector's pass, where 16,000 points in 64 lists
		// took 47 s: 4,000 in 32 (125 a list, as 8,000 in 64; 4.6 s).
		// Fewer a list fall short of the mark: 4,000 or 6,000 in 64
		// end at 1.98 and 2.10 times the mean.
		n, m = 4000, 32
	}
	pts := synth.Clusters(n, d, k, 5)
	model := train(t, pts, anneal.Config{M: m, Seed: 1})
	var sq float64
	for _, c := range model.Counts {
		sq += float64(c) * float64(c)
	}
	seen, mean := sq/float64(n), float64(n)/float64(m)
	t.Logf("seen %.0f mean %.0f ratio %.2f", seen, mean, seen/mean)
	if seen > 1.6*mean {
		counts := slices.Clone(model.Counts)
		slices.Sort(counts)
		t.Errorf("a point's list holds %.0f vectors on average, want at most 1.6 x the mean %.0f (sizes %v)", seen, mean, counts)
	}
}
