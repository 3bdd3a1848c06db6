//go:build webgpu

package webgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/cpu"
	"github.com/vlc-embed/vlc/gpu/shaders"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/parity"
	"github.com/vlc-embed/vlc/internal/synth"
)

var (
	devOnce sync.Once
	testDev *Device
	devErr  error
)

// device opens the adapter once for the whole test binary, or skips the
// test when this machine has no WebGPU adapter (no Vulkan driver: install
// mesa-vulkan-drivers for lavapipe; make test does so where it can). With
// VLC_WEBGPU_REQUIRE set (make test sets it once lavapipe is installed) a
// missing adapter fails the test instead.
func device(t *testing.T) *Device {
	t.Helper()
	devOnce.Do(func() {
		testDev, devErr = open(true)
		if devErr == nil {
			i := testDev.info
			t.Logf("device: %s; max storage binding %d bytes, max buffer %d", testDev.Name(), i.MaxBinding, i.MaxBuffer)
		}
	})
	if devErr != nil {
		if strings.HasPrefix(devErr.Error(), "no WebGPU adapter") && os.Getenv("VLC_WEBGPU_REQUIRE") == "" {
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

// runBackend loads pts on dev, sets the anchors and runs one Step (Assign
// when p is nil), returning everything the Dataset reports. tile names the
// assign shape ("" for the default).
func runBackend(t *testing.T, dev anneal.Device, tile string, pts anneal.Points, anchors []float32, m int, p *anneal.StepParams) result {
	t.Helper()
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if tile != "" {
		w := ds.(*dataset)
		found := false
		for _, c := range w.dev.tiles {
			if c.Name == tile {
				w.tile, found = c, true
			}
		}
		if !found {
			t.Skipf("adapter cannot run tile %s", tile)
		}
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

func relDiff(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(b), 1e-30) }

// checkEnergy compares the energies of two runs within 1e-3 relative, plus
// the absolute error of the expanded float32 form |a|^2 - 2x.a + |x|^2
// both backends use, about 1e-6 of |x|^2 + |a|^2 (what counts when points
// sit on anchors).
func checkEnergy(t *testing.T, pts anneal.Points, anchors []float32, g, c result) {
	t.Helper()
	d := pts.Dim
	var norms float64
	for i, a := range g.assign {
		for j := range d {
			x, v := float64(f16.ToFloat32(pts.Data[i*d+j])), float64(anchors[int(a)*d+j])
			norms += x*x + v*v
		}
	}
	norms /= float64(pts.N)
	if math.Abs(g.st.Energy-c.st.Energy) > 1e-3*c.st.Energy+1e-6*norms {
		t.Errorf("energy %.8g, cpu %.8g (rel %.2g; |x|^2+|a|^2 %.3g)", g.st.Energy, c.st.Energy, relDiff(g.st.Energy, c.st.Energy), norms)
	}
}

// checkCounts checks the counts against the assignments (exact).
func checkCounts(t *testing.T, m int, g result) {
	t.Helper()
	hist := make([]int64, m)
	for i, a := range g.assign {
		if a < 0 || int(a) >= m {
			t.Fatalf("point %d assigned to %d of %d anchors", i, a, m)
		}
		hist[a]++
	}
	for a := range m {
		if g.counts[a] != hist[a] {
			t.Errorf("anchor %d: count %d, assignments give %d", a, g.counts[a], hist[a])
		}
	}
}

// Assignments equal the CPU's except near-ties, energies agree within 1e-3,
// counts are exact and, where every assignment agrees, equal the CPU's,
// with variances within 1e-4: at sizes straddling the workgroups (64 and
// 128 points per assign tile, 256 per workgroup elsewhere, 64 and 128
// anchors per tile, 16 and 32 float16 values per step of the dimension), for each
// assign tile.
func TestAssignParity(t *testing.T) {
	dev := device(t)
	ref := cpu.New()
	type size struct{ n, m, d int }
	var sizes []size
	for _, n := range []int{1, 63, 64, 65, 129, 257, 1000} {
		sizes = append(sizes, size{n, 7, 17})
	}
	for _, m := range []int{1, 63, 64, 65, 129, 300} {
		sizes = append(sizes, size{300, m, 16})
	}
	for _, d := range []int{1, 2, 15, 16, 17, 31, 32, 33, 96, 130} {
		sizes = append(sizes, size{200, 20, d})
	}
	for _, tile := range shaders.AssignTiles {
		for _, c := range sizes {
			t.Run(fmt.Sprintf("%s/n=%d/m=%d/d=%d", tile.Name, c.n, c.m, c.d), func(t *testing.T) {
				pts := synth.Clusters(c.n, c.d, 5, uint64(c.n*1000+c.m*10+c.d))
				anchors := anchorsNear(pts, c.m, 0.5, uint64(c.m*c.d))
				g := runBackend(t, dev, tile.Name, pts, anchors, c.m, nil)
				r := runBackend(t, ref, "", pts, anchors, c.m, nil)
				agr := parity.Compare(pts.Data, c.d, anchors, g.assign, r.assign, false)
				if agr.Mismatches > 0 {
					t.Errorf("assignments: %+v", agr)
				}
				checkEnergy(t, pts, anchors, g, r)
				if g.st.Changed != c.n {
					t.Errorf("first assign changed %d, want %d", g.st.Changed, c.n)
				}
				checkCounts(t, c.m, g)
				if agr.Equal == c.n {
					for a := range c.m {
						if g.counts[a] != r.counts[a] {
							t.Errorf("anchor %d: count %d, cpu %d", a, g.counts[a], r.counts[a])
						}
						for j := range c.d {
							gv, cv := float64(g.variance[a*c.d+j]), float64(r.variance[a*c.d+j])
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

// meanOracle computes in float64 what a Step with p makes of anchors given
// the assignment assign: the CPU backend's formula on the GPU's own
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
	for _, c := range []struct{ n, m, d int }{{129, 7, 96}, {1000, 64, 17}, {1500, 65, 130}, {700, 300, 16}, {128, 1, 1}} {
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
				if agr := parity.Compare(pts.Data, c.d, anchors, g.assign, cp.assign, false); agr.Mismatches > 0 {
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
				checkCounts(t, c.m, g)
			})
		}
	}
}

// Split into chunks (as the binding limit splits large point sets), a
// point set gives the same results as in one piece: several Steps, then
// assignments, anchors, counts and energy against the CPU.
func TestChunks(t *testing.T) {
	dev := device(t)
	ref := cpu.New()
	const n, d, m = 1000, 40, 33
	pts := synth.Clusters(n, d, 6, 11)
	anchors := anchorsNear(pts, m, 0.5, 2)
	run := func(dv anneal.Device) (result, int) {
		ds, err := dv.Load(pts)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		chunks := 1
		if w, ok := ds.(*dataset); ok {
			chunks = len(w.chunks)
		}
		if err := ds.SetAnchors(anchors, m); err != nil {
			t.Fatal(err)
		}
		p := anneal.StepParams{Tau: 20, Rate: 0.5, MaxMove: 3}
		var r result
		for range 3 {
			if r.st, err = ds.Step(p); err != nil {
				t.Fatal(err)
			}
		}
		r.assign = make([]int32, n)
		r.anchors = make([]float32, m*d)
		r.counts = make([]int64, m)
		r.variance = make([]float32, m*d)
		for _, err := range []error{ds.Assignments(r.assign), ds.Anchors(r.anchors), ds.Stats(r.counts, r.variance)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		return r, chunks
	}
	testChunkRows = 256
	g, chunks := run(dev)
	testChunkRows = 0
	if chunks != 4 {
		t.Fatalf("%d chunks, want 4 of 256 rows", chunks)
	}
	c, _ := run(ref)
	agr := parity.Compare(pts.Data, d, g.anchors, g.assign, c.assign, false)
	if agr.Mismatches > 0 || agr.Equal < n*99/100 {
		t.Errorf("assignments after 3 steps: %+v", agr)
	}
	if r := relDiff(g.st.Energy, c.st.Energy); r > 1e-3 {
		t.Errorf("energy %v, cpu %v (rel %.2g)", g.st.Energy, c.st.Energy, r)
	}
	checkCounts(t, m, g)
	for i := range g.anchors {
		if math.Abs(float64(g.anchors[i]-c.anchors[i])) > 1e-3*(1+math.Abs(float64(c.anchors[i]))) {
			t.Fatalf("anchor %d dim %d: %v, cpu %v", i/d, i%d, g.anchors[i], c.anchors[i])
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
	if err := ds.SetAnchors(anchors, 4); err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(1))
	st, err := ds.Step(anneal.StepParams{Tau: inf, Rate: 1, MaxMove: inf})
	if err != nil || st.Changed != 500 {
		t.Fatalf("first step: %+v, %v", st, err)
	}
	got := make([]float32, 4*24)
	counts := make([]int64, 4)
	variance := make([]float32, 4*24)
	if err := ds.Anchors(got); err != nil {
		t.Fatal(err)
	}
	if err := ds.Stats(counts, variance); err != nil {
		t.Fatal(err)
	}
	if counts[3] != 0 {
		t.Errorf("far anchor has %d points", counts[3])
	}
	for j := range 24 {
		if got[3*24+j] != 1e4 || variance[3*24+j] != 0 {
			t.Fatalf("far anchor moved or has variance: %v %v", got[3*24+j], variance[3*24+j])
		}
	}
	if err := ds.SetAnchors(got, 4); err != nil {
		t.Fatal(err)
	}
	st1, err1 := ds.Assign()
	st2, err2 := ds.Assign()
	if err1 != nil || err2 != nil || st2.Changed != 0 || st1.Energy != st2.Energy {
		t.Errorf("repeated assign: %+v then %+v (%v, %v)", st1, st2, err1, err2)
	}
}

// A steady-state Step moves 16 bytes to the host (changed, energy) and the
// 48 bytes of its parameters to the device; loading moves the points once
// (rows padded to 32 float16 values: none here), SetAnchors the anchors.
func TestTransferBytes(t *testing.T) {
	dev := device(t)
	const n, d, m = 1000, 128, 64
	pts := synth.Clusters(n, d, 8, 3)
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	nchunks := int64(len(ds.(*dataset).chunks))
	load := int64(n*d*2) + nchunks*chunkSize + paramsSize
	if up, down := ds.Transfer(); up != load || down != 0 {
		t.Errorf("after Load: %d bytes up, %d down; want %d, 0", up, down, load)
	}
	if err := ds.SetAnchors(anchorsNear(pts, m, 0.5, 1), m); err != nil {
		t.Fatal(err)
	}
	up0, down0 := ds.Transfer()
	if want := load + m*d*4 + paramsSize; up0 != want {
		t.Errorf("after SetAnchors: %d bytes up, want %d", up0, want)
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
	if up-up0 != steps*paramsSize || down-down0 != steps*scalarHead {
		t.Errorf("%d steps moved %d bytes up and %d down; want %d and %d", steps, up-up0, down-down0, steps*paramsSize, steps*scalarHead)
	}
}

// Training end to end on the device: anneal.Train's loop (maintenance
// included) converges to an energy within 1% of the CPU's.
func TestTrain(t *testing.T) {
	dev := device(t)
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
	t.Logf("webgpu: %d iterations, energy %.6g; cpu: %d iterations, energy %.6g", g.Iterations, g.Energy, c.Iterations, c.Energy)
	if relDiff(g.Energy, c.Energy) > 0.01 {
		t.Errorf("energy %v, cpu %v", g.Energy, c.Energy)
	}
}
