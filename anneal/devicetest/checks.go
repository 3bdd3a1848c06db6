package devicetest

import (
	"math"
	"testing"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/parity"
	"github.com/vlc-embed/vlc/internal/synth"
)

// AssignParity checks one Assign from the same anchors on dev and on the
// CPU, for every variant and size: the assignments are equal but for
// near-ties (parity.NearTie), each is a nearest anchor in float64 up to
// float32 accumulation, the energies agree, the first assign changes
// every point, the counts are those of the assignments, and where every
// assignment is equal the counts equal the CPU's and the variances agree
// within 1e-4.
func AssignParity(t *testing.T, dev device.Device, opt Options) {
	ref := cpu.New()
	sizes := opt.AssignSizes
	if sizes == nil {
		sizes = DefaultAssignSizes
	}
	for _, v := range opt.variants() {
		for _, c := range sizes {
			t.Run(sizeName(v, c), func(t *testing.T) {
				pts := synth.Clusters(c.N, c.D, 5, uint64(c.N*1000+c.M*10+c.D))
				anchors := synth.AnchorsNear(pts, c.M, 0.5, uint64(c.M*c.D))
				g := Once(t, dev, pts, anchors, c.M, nil, opt.use(t, v))
				r := Once(t, ref, pts, anchors, c.M, nil, nil)
				agr := parity.Compare(pts.Data, c.D, anchors, g.Assign, r.Assign, opt.F16Anchors)
				if agr.Mismatches > 0 {
					t.Errorf("assignments: %+v", agr)
				}
				checkNearest(t, pts, anchors, c.M, g.Assign, opt.F16Anchors)
				checkEnergy(t, pts, anchors, g, r, opt.DirectEnergy)
				if g.Stats.Changed != c.N {
					t.Errorf("first assign changed %d, want %d", g.Stats.Changed, c.N)
				}
				CheckCounts(t, c.M, g)
				if agr.Equal == c.N {
					for a := range c.M {
						if g.Counts[a] != r.Counts[a] {
							t.Errorf("anchor %d: count %d, cpu %d", a, g.Counts[a], r.Counts[a])
						}
						for j := range c.D {
							gv, cv := float64(g.Variance[a*c.D+j]), float64(r.Variance[a*c.D+j])
							if math.Abs(gv-cv) > 1e-4*(1+math.Abs(cv)) {
								t.Errorf("anchor %d dim %d: variance %v, cpu %v", a, j, gv, cv)
							}
						}
					}
				}
			})
		}
	}
}

// StepParity checks Steps, a Lloyd step and a robust one (Huber weights,
// Rate, MaxMove): each anchor lands where the float64 oracle puts it given
// the backend's own assignment (within 1e-4 of the largest coordinate),
// and the variances are the oracle's; where the assignments equal the
// CPU's, the anchors equal the CPU's within the same bound.
func StepParity(t *testing.T, dev device.Device, opt Options) {
	ref := cpu.New()
	sizes := opt.StepSizes
	if sizes == nil {
		sizes = DefaultStepSizes
	}
	for _, c := range sizes {
		for _, p := range []device.StepParams{{Tau: inf, Rate: 1, MaxMove: inf}, {Tau: 3, Rate: 0.5, MaxMove: 1}} {
			t.Run(sizeName("", c)+"/"+tauName(p.Tau), func(t *testing.T) {
				pts := synth.Clusters(c.N, c.D, 5, uint64(c.N+c.M+c.D))
				anchors := synth.AnchorsNear(pts, c.M, 1, uint64(c.M))
				g := Once(t, dev, pts, anchors, c.M, &p, nil)
				want, variance := meanOracle(pts, anchors, c.M, g.Assign, p)
				scale := 0.0
				for _, v := range want {
					scale = max(scale, math.Abs(v))
				}
				bad := 0
				for i, w := range want {
					if math.Abs(float64(g.Anchors[i])-w) > 1e-4*(1+scale) {
						if bad++; bad <= 5 {
							t.Errorf("anchor %d dim %d: %v, oracle %v", i/c.D, i%c.D, g.Anchors[i], w)
						}
					}
					if v := variance[i]; math.Abs(float64(g.Variance[i])-v) > 1e-4*(1+v) {
						if bad++; bad <= 5 {
							t.Errorf("anchor %d dim %d: variance %v, oracle %v", i/c.D, i%c.D, g.Variance[i], v)
						}
					}
				}
				r := Once(t, ref, pts, anchors, c.M, &p, nil)
				if agr := parity.Compare(pts.Data, c.D, anchors, g.Assign, r.Assign, opt.F16Anchors); agr.Mismatches > 0 {
					t.Errorf("assignments: %+v", agr)
				} else if agr.Equal == c.N {
					for i := range r.Anchors {
						if math.Abs(float64(g.Anchors[i]-r.Anchors[i])) > 1e-4*(1+scale) {
							if bad++; bad <= 10 {
								t.Errorf("anchor %d dim %d: %v, cpu %v", i/c.D, i%c.D, g.Anchors[i], r.Anchors[i])
							}
						}
					}
				}
				checkEnergy(t, pts, anchors, g, r, opt.DirectEnergy)
				CheckCounts(t, c.M, g)
			})
		}
	}
}

func tauName(tau float32) string {
	if math.IsInf(float64(tau), 1) {
		return "lloyd"
	}
	return "robust"
}

// RobustStep checks a hand-computed case: nine points at (1, 0), one at
// (100, 0), one anchor at the origin; the plain mean, the Huber mean at
// tau 2, half a step, and a capped step.
func RobustStep(t *testing.T, dev device.Device) {
	data := make([]uint16, 0, 20)
	for range 9 {
		data = append(data, f16.FromFloat32(1), 0)
	}
	data = append(data, f16.FromFloat32(100), 0)
	pts := device.Points{Data: data, N: 10, Dim: 2}
	for _, c := range []struct {
		p    device.StepParams
		want float64
	}{
		{device.StepParams{Tau: inf, Rate: 1, MaxMove: inf}, 10.9},
		// Weights 1 for the nine, 2/100 for the outlier.
		{device.StepParams{Tau: 2, Rate: 1, MaxMove: inf}, (9 + 2.0) / 9.02},
		{device.StepParams{Tau: inf, Rate: 0.5, MaxMove: inf}, 5.45},
		{device.StepParams{Tau: inf, Rate: 1, MaxMove: 3}, 3},
	} {
		r := Once(t, dev, pts, []float32{0, 0}, 1, &c.p, nil)
		if math.Abs(float64(r.Anchors[0])-c.want) > 1e-4 || r.Anchors[1] != 0 {
			t.Errorf("%+v: anchor %v, want (%v, 0)", c.p, r.Anchors, c.want)
		}
	}
}

// EmptyAnchor checks that an anchor no point is assigned to stays where
// it is, with zero count and variance, and that an Assign repeated with
// the same anchors changes nothing.
func EmptyAnchor(t *testing.T, dev device.Device) {
	const n, d, m = 500, 24, 4
	pts := synth.Clusters(n, d, 3, 5)
	anchors := synth.AnchorsNear(pts, m, 0.1, 9)
	for j := range d {
		anchors[3*d+j] = 1e4 // far from every point
	}
	ds := Load(t, dev, pts)
	if err := ds.SetAnchors(anchors, m); err != nil {
		t.Fatal(err)
	}
	st, err := ds.Step(device.StepParams{Tau: inf, Rate: 1, MaxMove: inf})
	if err != nil || st.Changed != n {
		t.Fatalf("first step: %+v, %v", st, err)
	}
	r := Read(t, ds, st, n, m, d)
	if r.Counts[3] != 0 {
		t.Errorf("far anchor has %d points", r.Counts[3])
	}
	for j := range d {
		if r.Anchors[3*d+j] != 1e4 || r.Variance[3*d+j] != 0 {
			t.Fatalf("far anchor moved or has variance: %v %v", r.Anchors[3*d+j], r.Variance[3*d+j])
		}
	}
	if err := ds.SetAnchors(r.Anchors, m); err != nil {
		t.Fatal(err)
	}
	st1, err1 := ds.Assign()
	st2, err2 := ds.Assign()
	if err1 != nil || err2 != nil || st2.Changed != 0 || st1.Energy != st2.Energy {
		t.Errorf("repeated assign: %+v then %+v (%v, %v)", st1, st2, err1, err2)
	}
}

// CheckTransfers checks the bytes Load, SetAnchors and steady-state Steps
// and Assigns move, as opt.Transfers gives them (skipped without).
func CheckTransfers(t *testing.T, dev device.Device, opt Options) {
	tr := opt.Transfers
	if tr == nil {
		t.Skip("no transfer contract given")
	}
	const n, d, m = 1000, 128, 64
	pts := synth.Clusters(n, d, 8, 3)
	ds := Load(t, dev, pts)
	load := tr.Load(ds, n, d)
	if up, down := ds.Transfer(); up != load || down != 0 {
		t.Errorf("after Load: %d bytes up, %d down; want %d, 0", up, down, load)
	}
	if err := ds.SetAnchors(synth.AnchorsNear(pts, m, 0.5, 1), m); err != nil {
		t.Fatal(err)
	}
	up0, down0 := ds.Transfer()
	if want := load + tr.SetAnchors(m, d); up0 != want || down0 != 0 {
		t.Errorf("after SetAnchors: %d bytes up, %d down; want %d, 0", up0, down0, want)
	}
	const steps = 7
	for i := range steps {
		var err error
		if i%3 == 2 {
			_, err = ds.Assign()
		} else {
			_, err = ds.Step(device.StepParams{Tau: 10, Rate: 0.5, MaxMove: inf})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	up, down := ds.Transfer()
	if up-up0 != steps*tr.StepUp || down-down0 != steps*tr.StepDown {
		t.Errorf("%d steps moved %d bytes up and %d down; want %d and %d", steps, up-up0, down-down0, steps*tr.StepUp, steps*tr.StepDown)
	}
}

// Train checks anneal.Train end to end (k-means++, the annealed Steps,
// maintenance): on clustered points with twice as many anchors as
// clusters it converges to an energy within 1% of the CPU's.
func Train(t *testing.T, dev device.Device) {
	pts := synth.Clusters(2000, 32, 10, 4)
	cfg := anneal.Config{M: 20, Seed: 1, MaxIter: 40}
	g, err := anneal.Train(t.Context(), dev, pts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := anneal.Train(t.Context(), cpu.New(), pts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d iterations, energy %.6g; cpu: %d iterations, energy %.6g", dev.Name(), g.Iterations, g.Energy, c.Iterations, c.Energy)
	if parity.RelDiff(g.Energy, c.Energy) > 0.01 {
		t.Errorf("energy %v, cpu %v", g.Energy, c.Energy)
	}
}

// Deterministic checks that the same robust Steps and Assign from the same
// anchors give the same bits twice.
func Deterministic(t *testing.T, dev device.Device, c Size) {
	pts := synth.Clusters(c.N, c.D, 60, 17)
	anchors := synth.AnchorsNear(pts, c.M, 0.1, 3)
	run := func() []Result {
		ds := Load(t, dev, pts)
		if err := ds.SetAnchors(anchors, c.M); err != nil {
			t.Fatal(err)
		}
		return Passes(t, ds, c.N, c.M, c.D, 3, 2)
	}
	SameBits(t, sizeName("run 1 / run 2", c), run(), run())
}

// checkNearest checks, in float64, that every assignment is a nearest
// anchor (rounded to float16 when f16Anchors) up to float32 accumulation:
// the assign's own contract, independent of the CPU's choices.
func checkNearest(t *testing.T, pts device.Points, anchors []float32, m int, got []int32, f16Anchors bool) {
	t.Helper()
	d := pts.Dim
	a64 := make([]float64, m*d)
	for i, v := range anchors[:m*d] {
		if f16Anchors {
			v = f16.ToFloat32(f16.FromFloat32(v))
		}
		a64[i] = float64(v)
	}
	x := make([]float64, d)
	bad := 0
	for i := range pts.N {
		var xx float64
		for j := range d {
			x[j] = float64(f16.ToFloat32(pts.Data[i*d+j]))
			xx += x[j] * x[j]
		}
		best, bestA, gotD, aa := math.Inf(1), 0, 0.0, 0.0
		for a := range m {
			var s, n2 float64
			for j := range d {
				r := x[j] - a64[a*d+j]
				s += r * r
				n2 += a64[a*d+j] * a64[a*d+j]
			}
			if s < best {
				best, bestA = s, a
			}
			if a == int(got[i]) {
				gotD, aa = s, n2
			}
		}
		if got[i] < 0 || int(got[i]) >= m || gotD-best > 1e-5*(xx+aa) {
			if bad++; bad <= 5 {
				t.Errorf("point %d: anchor %d at %.6g, nearest is %d at %.6g", i, got[i], gotD, bestA, best)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%d points in all not at a nearest anchor", bad)
	}
}

// checkEnergy checks the energy of an assign against the float64 energy
// of the backend's own assignment, within 1e-5 relative plus the absolute
// error of the float32 sums: about 1e-6 of |x|^2 + |a|^2 for the expanded
// form |a|^2 - 2 x.a + |x|^2 (what counts when points sit on anchors),
// 1e-7 for a direct sum of (x_j - a_j)^2; and against the CPU's within
// 1e-3 relative plus the same 1e-6.
func checkEnergy(t *testing.T, pts device.Points, anchors []float32, g, c Result, direct bool) {
	t.Helper()
	d := pts.Dim
	var e64, norms float64
	for i, a := range g.Assign {
		for j := range d {
			x, v := float64(f16.ToFloat32(pts.Data[i*d+j])), float64(anchors[int(a)*d+j])
			e64 += (x - v) * (x - v)
			norms += x*x + v*v
		}
	}
	e64 /= float64(pts.N)
	norms /= float64(pts.N)
	abs := 1e-6
	if direct {
		abs = 1e-7
	}
	if math.Abs(g.Stats.Energy-e64) > 1e-5*e64+abs*norms {
		t.Errorf("energy %.8g, float64 energy of the same assignment %.8g", g.Stats.Energy, e64)
	}
	if math.Abs(g.Stats.Energy-c.Stats.Energy) > 1e-3*c.Stats.Energy+1e-6*norms {
		t.Errorf("energy %.8g, cpu %.8g (rel %.2g; |x|^2+|a|^2 %.3g)", g.Stats.Energy, c.Stats.Energy, parity.RelDiff(g.Stats.Energy, c.Stats.Energy), norms)
	}
}

// CheckCounts checks the counts against the assignments (exact).
func CheckCounts(t *testing.T, m int, g Result) {
	t.Helper()
	hist := make([]int64, m)
	for i, a := range g.Assign {
		if a < 0 || int(a) >= m {
			t.Fatalf("point %d assigned to %d of %d anchors", i, a, m)
		}
		hist[a]++
	}
	for a := range m {
		if g.Counts[a] != hist[a] {
			t.Errorf("anchor %d: count %d, assignments give %d", a, g.Counts[a], hist[a])
		}
	}
}

// meanOracle computes in float64 what a Step with p makes of anchors given
// the assignment assign (the CPU backend's formula, on the backend's own
// assignment, so that near-ties cannot blur the comparison), and the
// variances the Step reports: per anchor and dimension, the mean of
// (x_j - a_j)^2 over its points, a the anchor before the move.
func meanOracle(pts device.Points, anchors []float32, m int, assign []int32, p device.StepParams) (moved, variance []float64) {
	d := pts.Dim
	sum := make([]float64, m*d)
	sq := make([]float64, m*d)
	wsum := make([]float64, m)
	count := make([]float64, m)
	x := make([]float64, d)
	for i, a := range assign {
		var dist float64
		for j := range d {
			x[j] = float64(f16.ToFloat32(pts.Data[i*d+j])) - float64(anchors[int(a)*d+j])
			dist += x[j] * x[j]
		}
		w := 1.0
		if r := math.Sqrt(dist); !math.IsInf(float64(p.Tau), 1) && r > float64(p.Tau) {
			w = float64(p.Tau) / r
		}
		wsum[a] += w
		count[a]++
		for j := range d {
			sum[int(a)*d+j] += w * x[j]
			sq[int(a)*d+j] += x[j] * x[j]
		}
	}
	moved = make([]float64, m*d)
	variance = make([]float64, m*d)
	for a := range m {
		var norm float64
		for j := range d {
			if wsum[a] > 0 {
				sum[a*d+j] = float64(p.Rate) * sum[a*d+j] / wsum[a]
				variance[a*d+j] = sq[a*d+j] / count[a]
			}
			norm += sum[a*d+j] * sum[a*d+j]
		}
		scale := 1.0
		if norm = math.Sqrt(norm); norm > float64(p.MaxMove) {
			scale = float64(p.MaxMove) / norm
		}
		for j := range d {
			moved[a*d+j] = float64(anchors[a*d+j]) + scale*sum[a*d+j]
		}
	}
	return moved, variance
}
