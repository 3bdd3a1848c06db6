//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/cpu"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/parity"
	"github.com/vlc-embed/vlc/internal/synth"
)

var (
	devOnce sync.Once
	testDev *Device
	devErr  error
)

// device opens the GPU once for the whole test binary, or skips the test
// when this machine has no CUDA driver or device.
func device(t *testing.T) *Device {
	t.Helper()
	devOnce.Do(func() {
		testDev, devErr = open()
		if devErr == nil {
			t.Logf("device: %s, PTX %s", testDev.Name(), testDev.info.PTXSource)
		}
	})
	if devErr != nil {
		if strings.HasPrefix(devErr.Error(), "no CUDA") {
			t.Skip(devErr)
		}
		t.Fatal(devErr)
	}
	return testDev
}

// anchorsNear returns m anchors: random points moved by Gaussian noise of
// standard deviation noise, so that some points sit near two anchors.
func anchorsNear(pts anneal.Points, m int, noise float64, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	d := pts.Dim
	a := make([]float32, m*d)
	for k := range m {
		i := rng.IntN(pts.N)
		f16.DecodeRow(a[k*d:(k+1)*d], pts.Data[i*d:(i+1)*d])
		for j := range d {
			a[k*d+j] += float32(rng.NormFloat64() * noise)
		}
	}
	return a
}

type result struct {
	st       anneal.StepStats
	assign   []int32
	anchors  []float32
	counts   []int64
	variance []float32
}

// runBackend loads pts on dev, sets the anchors and runs step (Assign when
// p is nil), returning everything the Dataset reports.
func runBackend(t *testing.T, dev anneal.Device, variant string, pts anneal.Points, anchors []float32, m int, p *anneal.StepParams) result {
	t.Helper()
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if variant != "" {
		v, ok := dev.(*Device).variantNamed(variant)
		if !ok {
			t.Fatalf("no variant %q", variant)
		}
		ds.(*dataset).variant = v
	}
	if err := ds.SetAnchors(anchors, m); err != nil {
		t.Fatal(err)
	}
	var r result
	if p == nil {
		r.st, err = ds.Assign()
	} else {
		r.st, err = ds.Step(*p)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.assign = make([]int32, pts.N)
	r.anchors = make([]float32, m*pts.Dim)
	r.counts = make([]int64, m)
	r.variance = make([]float32, m*pts.Dim)
	for _, err := range []error{ds.Assignments(r.assign), ds.Anchors(r.anchors), ds.Stats(r.counts, r.variance)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// checkOptimal checks, in float64, that every GPU assignment is a nearest
// float16-rounded anchor up to float32 accumulation: the kernel's own
// contract, independent of the CPU.
func checkOptimal(t *testing.T, pts anneal.Points, anchors []float32, m int, got []int32) {
	t.Helper()
	d := pts.Dim
	a16 := make([]float64, m*d)
	for i, v := range anchors[:m*d] {
		a16[i] = float64(f16.ToFloat32(f16.FromFloat32(v)))
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
				r := x[j] - a16[a*d+j]
				s += r * r
				n2 += a16[a*d+j] * a16[a*d+j]
			}
			if s < best {
				best, bestA = s, a
			}
			if a == int(got[i]) {
				gotD, aa = s, n2
			}
		}
		if gotD-best > 1e-5*(xx+aa) {
			if bad++; bad <= 5 {
				t.Errorf("point %d: anchor %d at %.6g (float16 anchors), nearest is %d at %.6g", i, got[i], gotD, bestA, best)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%d points in all not at a nearest float16 anchor", bad)
	}
}

func relDiff(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(b), 1e-30) }

// checkEnergy compares the energies of an assign: the GPU's against the
// float64 energy of its own assignment (it sums (x-a)^2 directly, so within
// 1e-5), and against the CPU's within 1e-3 relative, plus the absolute
// error of the CPU's expanded float32 form |a|^2 - 2x.a + |x|^2, about
// 1e-6 of |x|^2 + |a|^2 (which is what counts when points sit on anchors).
func checkEnergy(t *testing.T, pts anneal.Points, anchors []float32, g, c result) {
	t.Helper()
	d := pts.Dim
	var e64, norms float64
	for i, a := range g.assign {
		for j := range d {
			x, v := float64(f16.ToFloat32(pts.Data[i*d+j])), float64(anchors[int(a)*d+j])
			e64 += (x - v) * (x - v)
			norms += x*x + v*v
		}
	}
	e64 /= float64(pts.N)
	norms /= float64(pts.N)
	if math.Abs(g.st.Energy-e64) > 1e-5*e64+1e-7*norms {
		t.Errorf("energy %.8g, float64 energy of the same assignment %.8g", g.st.Energy, e64)
	}
	if math.Abs(g.st.Energy-c.st.Energy) > 1e-3*c.st.Energy+1e-6*norms {
		t.Errorf("energy %.8g, cpu %.8g (rel %.2g; |x|^2+|a|^2 %.3g)", g.st.Energy, c.st.Energy, relDiff(g.st.Energy, c.st.Energy), norms)
	}
}

// Assignments equal the CPU's except near-ties, energies agree within 1e-3,
// counts are exact, at sizes straddling the tiles (128 points, 128/256
// anchors, 32 dimensions), for every assign variant.
func TestAssignParity(t *testing.T) {
	dev := device(t)
	ref := cpu.New()
	for _, variant := range dev.variantNames() {
		for _, n := range []int{1, 127, 128, 129, 1000, 4099} {
			for _, m := range []int{1, 7, 64, 65, 300} {
				for _, d := range []int{1, 8, 15, 16, 17, 96, 130} {
					t.Run(fmt.Sprintf("%s/n=%d/m=%d/d=%d", variant, n, m, d), func(t *testing.T) {
						pts := synth.Clusters(n, d, 5, uint64(n*1000+m*10+d))
						anchors := anchorsNear(pts, m, 0.5, uint64(m*d))
						g := runBackend(t, dev, variant, pts, anchors, m, nil)
						c := runBackend(t, ref, "", pts, anchors, m, nil)
						agr := parity.Compare(pts.Data, d, anchors, g.assign, c.assign, true)
						if agr.Mismatches > 0 {
							t.Errorf("assignments: %+v", agr)
						}
						checkOptimal(t, pts, anchors, m, g.assign)
						checkEnergy(t, pts, anchors, g, c)
						if g.st.Changed != n {
							t.Errorf("first assign changed %d, want %d", g.st.Changed, n)
						}
						hist := make([]int64, m)
						for _, a := range g.assign {
							hist[a]++
						}
						for a := range m {
							if g.counts[a] != hist[a] {
								t.Errorf("anchor %d: count %d, assignments give %d", a, g.counts[a], hist[a])
							}
						}
						if agr.Equal == n {
							for a := range m {
								if g.counts[a] != c.counts[a] {
									t.Errorf("anchor %d: count %d, cpu %d", a, g.counts[a], c.counts[a])
								}
								for j := range d {
									gv, cv := float64(g.variance[a*d+j]), float64(c.variance[a*d+j])
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
	}
}

// meanOracle computes in float64 what a Step with p makes of anchors given
// the assignment assign: the CPU backend's formula, on the GPU's own
// assignment, so that near-ties cannot blur the comparison.
func meanOracle(pts anneal.Points, anchors []float32, m int, assign []int32, p anneal.StepParams) []float64 {
	d := pts.Dim
	sum := make([]float64, m*d)
	wsum := make([]float64, m)
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
		for j := range d {
			sum[int(a)*d+j] += w * x[j]
		}
	}
	out := make([]float64, m*d)
	for a := range m {
		var norm float64
		for j := range d {
			if wsum[a] > 0 {
				sum[a*d+j] = float64(p.Rate) * sum[a*d+j] / wsum[a]
			}
			norm += sum[a*d+j] * sum[a*d+j]
		}
		scale := 1.0
		if norm = math.Sqrt(norm); norm > float64(p.MaxMove) {
			scale = float64(p.MaxMove) / norm
		}
		for j := range d {
			out[a*d+j] = float64(anchors[a*d+j]) + scale*sum[a*d+j]
		}
	}
	return out
}

// A Step puts each anchor where the float64 oracle does (within 1e-4
// relative), for a Lloyd step and a robust one (Huber weights, Rate,
// MaxMove), and matches the CPU where the assignments agree.
func TestStepParity(t *testing.T) {
	dev := device(t)
	ref := cpu.New()
	inf := float32(math.Inf(1))
	for _, c := range []struct{ n, m, d int }{{129, 7, 96}, {1000, 64, 17}, {4099, 65, 130}, {4099, 300, 16}, {128, 1, 1}} {
		for _, p := range []anneal.StepParams{{Tau: inf, Rate: 1, MaxMove: inf}, {Tau: 3, Rate: 0.5, MaxMove: 1}} {
			t.Run(fmt.Sprintf("n=%d/m=%d/d=%d/tau=%g", c.n, c.m, c.d, p.Tau), func(t *testing.T) {
				pts := synth.Clusters(c.n, c.d, 5, uint64(c.n+c.m+c.d))
				anchors := anchorsNear(pts, c.m, 1, uint64(c.m))
				g := runBackend(t, dev, "", pts, anchors, c.m, &p)
				want := meanOracle(pts, anchors, c.m, g.assign, p)
				scale := 0.0
				for _, v := range want {
					scale = max(scale, math.Abs(v))
				}
				bad := 0
				for i, w := range want {
					if math.Abs(float64(g.anchors[i])-w) > 1e-4*(1+scale) {
						if bad++; bad <= 5 {
							t.Errorf("anchor %d dim %d: %v, oracle %v", i/c.d, i%c.d, g.anchors[i], w)
						}
					}
				}
				cp := runBackend(t, ref, "", pts, anchors, c.m, &p)
				if agr := parity.Compare(pts.Data, c.d, anchors, g.assign, cp.assign, true); agr.Mismatches > 0 {
					t.Errorf("assignments: %+v", agr)
				} else if agr.Equal == c.n {
					for i := range cp.anchors {
						if math.Abs(float64(g.anchors[i]-cp.anchors[i])) > 1e-4*(1+scale) {
							if bad++; bad <= 10 {
								t.Errorf("anchor %d dim %d: %v, cpu %v", i/c.d, i%c.d, g.anchors[i], cp.anchors[i])
							}
						}
					}
				}
				checkEnergy(t, pts, anchors, g, cp)
				hist := make([]int64, c.m)
				for _, a := range g.assign {
					hist[a]++
				}
				for a := range c.m {
					if g.counts[a] != hist[a] {
						t.Errorf("anchor %d: count %d, assignments give %d", a, g.counts[a], hist[a])
					}
				}
			})
		}
	}
}

// The CPU backend's hand-checked robust step: nine points at (1,0), one at
// (100,0), one anchor at the origin.
func TestRobustStep(t *testing.T) {
	dev := device(t)
	data := make([]uint16, 0, 20)
	for range 9 {
		data = append(data, f16.FromFloat32(1), 0)
	}
	data = append(data, f16.FromFloat32(100), 0)
	pts := anneal.Points{Data: data, N: 10, Dim: 2}
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		p    anneal.StepParams
		want float64
	}{
		{anneal.StepParams{Tau: inf, Rate: 1, MaxMove: inf}, 10.9},
		{anneal.StepParams{Tau: 2, Rate: 1, MaxMove: inf}, (9 + 2.0) / 9.02},
		{anneal.StepParams{Tau: inf, Rate: 0.5, MaxMove: inf}, 5.45},
		{anneal.StepParams{Tau: inf, Rate: 1, MaxMove: 3}, 3},
	} {
		r := runBackend(t, dev, "", pts, []float32{0, 0}, 1, &c.p)
		if math.Abs(float64(r.anchors[0])-c.want) > 1e-4 || r.anchors[1] != 0 {
			t.Errorf("%+v: anchor %v, want (%v, 0)", c.p, r.anchors, c.want)
		}
	}
}

// Anchors that get no points stay where they are, with zero counts and
// variance; the second assign changes nothing.
func TestEmptyAnchorAndChanged(t *testing.T) {
	dev := device(t)
	pts := synth.Clusters(500, 24, 3, 5)
	anchors := anchorsNear(pts, 4, 0.1, 9)
	for j := range 24 {
		anchors[3*24+j] = 1e4 // far from every point
	}
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ds.SetAnchors(anchors, 4)
	inf := float32(math.Inf(1))
	st, err := ds.Step(anneal.StepParams{Tau: inf, Rate: 1, MaxMove: inf})
	if err != nil || st.Changed != 500 {
		t.Fatalf("first step: %+v, %v", st, err)
	}
	got := make([]float32, 4*24)
	counts := make([]int64, 4)
	variance := make([]float32, 4*24)
	ds.Anchors(got)
	ds.Stats(counts, variance)
	if counts[3] != 0 {
		t.Errorf("far anchor has %d points", counts[3])
	}
	for j := range 24 {
		if got[3*24+j] != 1e4 || variance[3*24+j] != 0 {
			t.Fatalf("far anchor moved or has variance: %v %v", got[3*24+j], variance[3*24+j])
		}
	}
	ds.SetAnchors(got, 4)
	st1, _ := ds.Assign()
	st2, _ := ds.Assign()
	if st2.Changed != 0 || st1.Energy != st2.Energy {
		t.Errorf("repeated assign: %+v then %+v", st1, st2)
	}
}

// A steady-state Step moves 16 bytes to the host (energy, changed) and
// none to the device; loading moves the padded points once.
func TestTransferBytes(t *testing.T) {
	dev := device(t)
	const n, d, m = 1000, 128, 64 // d a multiple of 64: no column padding
	pts := synth.Clusters(n, d, 8, 3)
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if up, down := ds.Transfer(); up != n*d*2 || down != 0 {
		t.Errorf("after Load: %d bytes up, %d down; want %d, 0", up, down, n*d*2)
	}
	if err := ds.SetAnchors(anchorsNear(pts, m, 0.5, 1), m); err != nil {
		t.Fatal(err)
	}
	up0, down0 := ds.Transfer()
	if up0 != n*d*2+m*d*4 {
		t.Errorf("after SetAnchors: %d bytes up, want %d", up0, n*d*2+m*d*4)
	}
	inf := float32(math.Inf(1))
	const steps = 7
	for i := range steps {
		var err error
		if i%3 == 2 {
			_, err = ds.Assign()
		} else {
			_, err = ds.Step(anneal.StepParams{Tau: 10, Rate: 0.5, MaxMove: inf})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	up, down := ds.Transfer()
	if up != up0 || down-down0 != steps*scalarSize {
		t.Errorf("%d steps moved %d bytes up and %d down; want 0 and %d", steps, up-up0, down-down0, steps*scalarSize)
	}
}

// A point set larger than the device's free memory streams in batches of
// a multiple of 128 rows; one whose single batch cannot fit is refused with
// a clear error before anything is allocated.
func TestTooLarge(t *testing.T) {
	dev := device(t)
	n, d := int(dev.info.TotalMem/2048+1024), 1024
	var rows int
	err := dev.run(func() (err error) { rows, err = dev.residentRows(n, d); return err })
	if err != nil || rows >= n || rows%tileM != 0 || rows < tileM {
		t.Fatalf("%d x %d points: %d resident rows, %v", n, d, rows, err)
	}
	t.Logf("%d x %d points: batches of %d rows", n, d, rows)
	err = dev.run(func() (err error) { _, err = dev.residentRows(1000, 1<<30); return err })
	if err == nil || !strings.Contains(err.Error(), "even one batch") {
		t.Fatalf("rows of 2 GiB: %v", err)
	}
	t.Log(err)
}

// Points streamed in batches (a partial last batch, padded columns) give
// the same bits as resident points, through robust Steps and a final
// Assign; each pass moves the points up once.
func TestBatchedParity(t *testing.T) {
	dev := device(t)
	const n, d, m = 5000, 130, 70
	pts := synth.Clusters(n, d, 40, 21)
	anchors := anchorsNear(pts, m, 0.1, 4)
	run := func(batch int) (res []result, up int64) {
		dev.batchRows = batch
		defer func() { dev.batchRows = 0 }()
		ds, err := dev.Load(pts)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		if got := ds.(*dataset).batch; got != batch {
			t.Fatalf("batch rows %d, want %d", got, batch)
		}
		if err := ds.SetAnchors(anchors, m); err != nil {
			t.Fatal(err)
		}
		up0, _ := ds.Transfer()
		res = passes(t, ds, n, m, d, 3, 5)
		up1, _ := ds.Transfer()
		return res, up1 - up0
	}
	whole, _ := run(0)
	batched, up := run(1024)
	sameResults(t, "resident / batched", whole, batched)
	if want := int64(4) * n * int64(roundUp(d, tileK)) * 2; up != want {
		t.Errorf("4 batched passes moved %d bytes up, want %d (the points, once a pass)", up, want)
	}
}

// The reduce by runs of sorted points gives the one-atomic-per-value
// reduce's bits (the same fixed-point terms in another order), through
// robust Steps and an Assign, at dimensions around the 32-lane registers
// and for each of its 1 to 4 groups of 256; beyond maxRunDim the dataset
// keeps the per-point reduce.
func TestReduceRunsParity(t *testing.T) {
	dev := device(t)
	for _, c := range []struct{ n, d, m int }{{1, 1, 1}, {5000, 130, 70}, {2000, 300, 20}, {3000, 768, 40}, {1500, 1000, 10}, {700, 33, 300}} {
		pts := synth.Clusters(c.n, c.d, max(1, c.m/2), 31)
		anchors := anchorsNear(pts, c.m, 0.1, 6)
		run := func(runs bool) []result {
			ds, err := dev.Load(pts)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if ds.(*dataset).perm == 0 || ds.(*dataset).runs != (c.n >= runMinPoints) {
				t.Fatalf("d=%d, n=%d: perm %x, runs %v", c.d, c.n, ds.(*dataset).perm, ds.(*dataset).runs)
			}
			ds.(*dataset).runs = runs
			if err := ds.SetAnchors(anchors, c.m); err != nil {
				t.Fatal(err)
			}
			return passes(t, ds, c.n, c.m, c.d, 2, 3)
		}
		sameResults(t, fmt.Sprintf("%+v per point / runs", c), run(false), run(true))
	}
	pts := synth.Clusters(300, 1100, 4, 1)
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.(*dataset).runs || ds.(*dataset).perm != 0 {
		t.Error("d = 1100 reduces by runs, beyond maxRunDim")
	}
}

// passes runs steps robust Steps (Huber threshold tau, half rate) and an
// Assign on ds, returning what the Dataset reports after each.
func passes(t *testing.T, ds anneal.Dataset, n, m, d, steps int, tau float32) []result {
	t.Helper()
	inf := float32(math.Inf(1))
	var res []result
	for k := range steps + 1 {
		var r result
		var err error
		if k < steps {
			r.st, err = ds.Step(anneal.StepParams{Tau: tau, Rate: 0.5, MaxMove: inf})
		} else {
			r.st, err = ds.Assign()
		}
		if err != nil {
			t.Fatal(err)
		}
		r.assign, r.anchors = make([]int32, n), make([]float32, m*d)
		r.counts, r.variance = make([]int64, m), make([]float32, m*d)
		if err := ds.Assignments(r.assign); err != nil {
			t.Fatal(err)
		}
		if err := ds.Anchors(r.anchors); err != nil {
			t.Fatal(err)
		}
		if err := ds.Stats(r.counts, r.variance); err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	return res
}

// sameResults checks two runs of passes that differ only in the order in
// which the reduce adds its terms: with fixed-point sums the same bits,
// assignments, counts, energies, anchors and variances alike.
func sameResults(t *testing.T, label string, a, b []result) {
	t.Helper()
	for k := range a {
		x, y := a[k], b[k]
		if x.st != y.st {
			t.Errorf("%s, pass %d: %+v / %+v", label, k, x.st, y.st)
		}
		if !slices.Equal(x.assign, y.assign) || !slices.Equal(x.counts, y.counts) {
			t.Fatalf("%s, pass %d: assignments or counts differ", label, k)
		}
		for i := range x.anchors {
			if math.Float32bits(x.anchors[i]) != math.Float32bits(y.anchors[i]) || math.Float32bits(x.variance[i]) != math.Float32bits(y.variance[i]) {
				t.Fatalf("%s, pass %d, value %d: anchors %v / %v, variance %v / %v", label, k, i, x.anchors[i], y.anchors[i], x.variance[i], y.variance[i])
			}
		}
	}
}

// Two runs of the same Steps from the same start give the same bits, at a
// size that takes the reduce by runs (many atomics landing in a different
// order each time) and at one that takes the per-point reduce.
func TestDeterministicSteps(t *testing.T) {
	dev := device(t)
	for _, c := range []struct{ n, d, m int }{{runMinPoints + 4000, 96, 200}, {3000, 130, 50}} {
		pts := synth.Clusters(c.n, c.d, 60, 17)
		anchors := anchorsNear(pts, c.m, 0.1, 3)
		run := func() []result {
			ds, err := dev.Load(pts)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if err := ds.SetAnchors(anchors, c.m); err != nil {
				t.Fatal(err)
			}
			return passes(t, ds, c.n, c.m, c.d, 3, 2)
		}
		sameResults(t, fmt.Sprintf("%+v, run 1 / run 2", c), run(), run())
	}
}
