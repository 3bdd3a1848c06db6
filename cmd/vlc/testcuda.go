package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/cpu"
	"github.com/vlc-embed/vlc/gpu/cuda"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/parity"
)

// Parity limits of test-cuda: the relative energy difference, and the
// fraction of points whose anchors differ beyond a near-tie.
const (
	testCUDAEnergyTol  = 1e-3
	testCUDAMismatches = 1e-3
)

// runTestCUDA runs the CUDA and CPU backends' Steps from the same anchors
// on clustered data, times both, and checks that they agree.
//
//	vlc test-cuda [--large] [-seed S] [-iters N]
func runTestCUDA(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseBackendTest("test-cuda", args, stderr)
	if err != nil {
		return err
	}
	dev, err := cuda.Open()
	if err != nil {
		return err
	}
	defer dev.Close()
	if in, ok := dev.(interface{ Info() cuda.Info }); ok {
		i := in.Info()
		fmt.Fprintf(stderr, "device: %s, %d SMs, compute capability %d.%d, %.1f GiB (%.1f GiB free), PTX %s\n",
			i.Name, i.SMs, i.CCMajor, i.CCMinor, float64(i.TotalMem)/(1<<30), float64(i.FreeMem)/(1<<30), i.PTXSource)
	}
	cfg.label, cfg.f16Anchors = "cuda", true
	cfg.profile = func(ds anneal.Dataset, step func() error, flop float64) error {
		return profileCUDA(ds, step, flop, stderr)
	}
	return testBackends(ctx, dev, cfg, stderr)
}

// profileCUDA reports the kernel split of a Step (CUDA events; the anchors
// go on from where the timed steps left them) and the fused assign's
// TFLOP/s for every tile shape.
func profileCUDA(ds anneal.Dataset, step func() error, flop float64, stderr io.Writer) error {
	prof, ok := ds.(cuda.Profiler)
	if !ok {
		return nil
	}
	prof.SetTiming(true)
	var kt []cuda.KernelTimes
	for i := range 5 {
		if err := step(); err != nil {
			return err
		}
		if i > 0 {
			kt = append(kt, prof.LastTimes())
		}
	}
	prof.SetTiming(false)
	pick := func(f func(cuda.KernelTimes) float64) float64 {
		v := make([]float64, len(kt))
		for i, t := range kt {
			v[i] = f(t)
		}
		return median(v)
	}
	fmt.Fprintf(stderr, "cuda kernels (median of %d Steps, CUDA events): assign %.3f ms, finalize %.3f, reduce %.3f, update %.3f\n",
		len(kt), pick(func(t cuda.KernelTimes) float64 { return t.Assign }), pick(func(t cuda.KernelTimes) float64 { return t.Finalize }),
		pick(func(t cuda.KernelTimes) float64 { return t.Reduce }), pick(func(t cuda.KernelTimes) float64 { return t.Update }))
	for _, v := range prof.Variants() {
		ts, err := prof.TimeAssign(v, 20)
		if err != nil {
			return err
		}
		def := ""
		if v == prof.AssignVariant() {
			def = " (used by Step)"
		}
		ms := median(ts[1:])
		fmt.Fprintf(stderr, "cuda fused assign %s%s: %.3f ms (median of %d), %.1f TFLOP/s effective (2*n*m*d / time)\n",
			v, def, ms, len(ts)-1, flop/(ms*1e-3)/1e12)
	}
	return nil
}

// backendTest sizes one comparison: n x d points, m anchors, the CPU on
// the first sub points (sub = n: all), timed Steps on each backend.
type backendTest struct {
	n, d, m, sub       int
	gpuIters, cpuIters int
	seed               uint64
	label              string // the backend's name in the report: "cuda", "webgpu"
	f16Anchors         bool   // the backend rounds anchors to float16 (parity slack)
	// profile, when set, reports backend-specific timings after the timed
	// Steps; step runs one more Step at the end of the schedule.
	profile func(ds anneal.Dataset, step func() error, flop float64) error
}

// parseBackendTest reads the flags test-cuda and test-webgpu share.
func parseBackendTest(name string, args []string, stderr io.Writer) (backendTest, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	large := fs.Bool("large", false, "1,000,000 x 768 points and 4096 anchors (the CPU runs on a subsample); default 10,000 x 128 and 256")
	seed := fs.Uint64("seed", 1, "seed of the data and the initial anchors")
	iters := fs.Int("iters", 0, "timed iterations per backend (default 20; 10 on the GPU and 2 on the CPU with --large)")
	if _, err := parse(fs, args, nil, stderr); err != nil {
		return backendTest{}, err
	}
	cfg := backendTest{n: 10_000, d: 128, m: 256, sub: 10_000, gpuIters: 20, cpuIters: 20, seed: *seed}
	if *large {
		cfg = backendTest{n: 1_000_000, d: 768, m: 4096, sub: 4096, gpuIters: 10, cpuIters: 2, seed: *seed}
	}
	if *iters > 0 {
		cfg.gpuIters, cfg.cpuIters = *iters, *iters
		if *large {
			cfg.cpuIters = min(*iters, 2)
		}
	}
	return cfg, nil
}

// testBackends compares dev (the accelerated backend) with the CPU
// reference and reports on w; it fails when they disagree beyond the
// tolerances.
func testBackends(ctx context.Context, dev anneal.Device, cfg backendTest, stderr io.Writer) error {
	n, d, m, sub := cfg.n, cfg.d, cfg.m, cfg.sub
	gpuIters, cpuIters := cfg.gpuIters, cfg.cpuIters
	seed := cfg.seed
	large := sub < n
	if !large {
		cpuIters = gpuIters // the same schedule on the same points
	}
	k := max(1, m/4)
	t0 := time.Now()
	pts := clusteredPoints(n, d, k, seed)
	fmt.Fprintf(stderr, "data: %d x %d float16 in %d clusters, seed %d (made in %v); %d anchors from random points\n",
		n, d, k, seed, time.Since(t0).Round(time.Millisecond), m)
	anchors0 := pickAnchors(pts, m, seed)
	// The schedule: the first half of the steps robust (Huber threshold,
	// half rate, capped moves), the second half Lloyd, as annealing ends.
	inf := float32(math.Inf(1))
	rd := float32(math.Sqrt(float64(d)))
	params := func(it, of int) anneal.StepParams {
		if it < of/2 {
			return anneal.StepParams{Tau: 2 * rd, Rate: 0.5, MaxMove: rd}
		}
		return anneal.StepParams{Tau: inf, Rate: 1, MaxMove: inf}
	}
	schedIters := gpuIters

	// GPU: upload, one warm-up step, then the timed steps from anchors0.
	t0 = time.Now()
	gds, err := dev.Load(pts)
	if err != nil {
		return err
	}
	defer gds.Close()
	up, _ := gds.Transfer()
	fmt.Fprintf(stderr, "%s: load %v (%.1f MiB to the device)\n", dev.Name(), time.Since(t0).Round(time.Microsecond), float64(up)/(1<<20))
	if err := gds.SetAnchors(anchors0, m); err != nil {
		return err
	}
	if _, err := gds.Step(params(0, schedIters)); err != nil {
		return err
	}
	if err := gds.SetAnchors(anchors0, m); err != nil {
		return err
	}
	upA, downA := gds.Transfer()
	gpuMs, gpuE, err := timeSteps(ctx, gds, gpuIters, schedIters, params)
	if err != nil {
		return err
	}
	upB, downB := gds.Transfer()
	gpuAnchors := make([]float32, m*d)
	if err := gds.Anchors(gpuAnchors); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: %d steps, %.3f ms/iteration (median; mean %.3f), wall clock per Step incl. the scalar read-back\n",
		cfg.label, gpuIters, median(gpuMs), mean(gpuMs))
	fmt.Fprintf(stderr, "%s: transfers per steady-state Step: %d B to the host, %d B to the device\n",
		cfg.label, (downB-downA)/int64(gpuIters), (upB-upA)/int64(gpuIters))

	flop := 2 * float64(n) * float64(m) * float64(d)
	if cfg.profile != nil {
		step := func() error {
			_, err := gds.Step(params(schedIters-1, schedIters))
			return err
		}
		if err := cfg.profile(gds, step, flop); err != nil {
			return err
		}
	}

	// CPU: the same schedule from the same anchors, on all points or on the
	// first sub of them.
	cpts := pts
	if sub < n {
		cpts = anneal.Points{Data: pts.Data[:sub*d], N: sub, Dim: d}
	}
	cdev := cpu.New()
	cds, err := cdev.Load(cpts)
	if err != nil {
		return err
	}
	defer cds.Close()
	if err := cds.SetAnchors(anchors0, m); err != nil {
		return err
	}
	cpuMs, cpuE, err := timeSteps(ctx, cds, cpuIters, schedIters, params)
	if err != nil {
		return err
	}
	gmed, cmed := median(gpuMs), median(cpuMs)
	if sub < n {
		scaled := cmed * float64(n) / float64(sub)
		fmt.Fprintf(stderr, "%s: ran on a subsample of %d of the %d points: %d steps, %.1f ms/iteration (median)\n", cdev.Name(), sub, n, cpuIters, cmed)
		fmt.Fprintf(stderr, "speedup: %.0fx against the CPU time scaled linearly to %d points (%.0f ms; an extrapolation, not a measurement)\n", scaled/gmed, n, scaled)
	} else {
		fmt.Fprintf(stderr, "%s: %d steps, %.3f ms/iteration (median; mean %.3f)\n", cdev.Name(), cpuIters, cmed, mean(cpuMs))
		fmt.Fprintf(stderr, "speedup: %.1fx (median ms/iteration, cpu / %s)\n", cmed/gmed, cfg.label)
	}

	var failures []string
	if sub == n {
		r := relDiff(gpuE, cpuE)
		fmt.Fprintf(stderr, "energy after %d steps: %s %.6f, cpu %.6f, relative difference %.2g\n", schedIters, cfg.label, gpuE, cpuE, r)
		if r > testCUDAEnergyTol {
			failures = append(failures, fmt.Sprintf("energy after the steps differs by %.2g", r))
		}
	} else {
		fmt.Fprintf(stderr, "energy after the steps: %s %.6f (all %d points, %d steps); cpu %.6f (subsample, %d steps): not comparable\n", cfg.label, gpuE, n, gpuIters, cpuE, cpuIters)
	}

	// Parity: both backends assign the CPU's points to the same anchors
	// (the GPU run's final ones).
	if err := gds.SetAnchors(gpuAnchors, m); err != nil {
		return err
	}
	if err := cds.SetAnchors(gpuAnchors, m); err != nil {
		return err
	}
	gst, err := gds.Assign()
	if err != nil {
		return err
	}
	cst, err := cds.Assign()
	if err != nil {
		return err
	}
	ga := make([]int32, n)
	ca := make([]int32, cpts.N)
	if err := gds.Assignments(ga); err != nil {
		return err
	}
	if err := cds.Assignments(ca); err != nil {
		return err
	}
	agr := parity.Compare(pts.Data, d, gpuAnchors, ga, ca, cfg.f16Anchors)
	gE := gst.Energy
	if sub < n {
		gE = hostEnergy(cpts, gpuAnchors, ga[:sub])
	}
	r := relDiff(gE, cst.Energy)
	fmt.Fprintf(stderr, "parity, same anchors, one assign of %d points: %d equal (%.3f%%), %d near-ties, %d beyond a near-tie (%.3f%%); energy %s %.6f, cpu %.6f, relative difference %.2g\n",
		agr.N, agr.Equal, 100*float64(agr.Equal)/float64(agr.N), agr.NearTies, agr.Mismatches, 100*agr.NonTieFraction(), cfg.label, gE, cst.Energy, r)
	if r > testCUDAEnergyTol {
		failures = append(failures, fmt.Sprintf("energy of the same-anchor assign differs by %.2g", r))
	}
	if agr.NonTieFraction() > testCUDAMismatches {
		failures = append(failures, fmt.Sprintf("%.3f%% of the assignments differ beyond near-ties", 100*agr.NonTieFraction()))
	}
	if len(failures) > 0 {
		fmt.Fprintln(stderr, "FAIL")
		return fmt.Errorf("%s and cpu disagree: %s", cfg.label, strings.Join(failures, "; "))
	}
	fmt.Fprintln(stderr, "PASS")
	return nil
}

// timeSteps runs iters Steps of the schedule (of steps in all) and returns
// the wall-clock milliseconds of each and the energy of the last.
func timeSteps(ctx context.Context, ds anneal.Dataset, iters, of int, params func(it, of int) anneal.StepParams) ([]float64, float64, error) {
	ms := make([]float64, iters)
	var st anneal.StepStats
	for it := range iters {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		t := time.Now()
		var err error
		if st, err = ds.Step(params(it, of)); err != nil {
			return nil, 0, err
		}
		ms[it] = float64(time.Since(t).Nanoseconds()) / 1e6
	}
	return ms, st.Energy, nil
}

// clusteredPoints makes n float16 points around k centres (spread 10 per
// coordinate, unit Gaussian noise), as internal/testutil.Clusters does, in
// parallel: each block of rows draws from its own seeded generator, so the
// points depend on the seed only.
func clusteredPoints(n, d, k int, seed uint64) anneal.Points {
	rng := rand.New(rand.NewPCG(seed, 1))
	centres := make([]float32, k*d)
	for i := range centres {
		centres[i] = float32(rng.NormFloat64() * 10)
	}
	data := make([]uint16, n*d)
	const block = 4096
	par.For(n, block, func(lo, hi int) {
		r := rand.New(rand.NewPCG(seed, 2+uint64(lo/block)))
		for i := lo; i < hi; i++ {
			c := centres[r.IntN(k)*d:]
			for j := range d {
				data[i*d+j] = f16.FromFloat32(c[j] + float32(r.NormFloat64()))
			}
		}
	})
	return anneal.Points{Data: data, N: n, Dim: d}
}

// pickAnchors returns m distinct random points as float32 anchors.
func pickAnchors(pts anneal.Points, m int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	d := pts.Dim
	a := make([]float32, m*d)
	for k, i := range rng.Perm(pts.N)[:m] {
		f16.DecodeRow(a[k*d:(k+1)*d], pts.Data[i*d:(i+1)*d])
	}
	return a
}

// hostEnergy is the mean squared distance (float64) of the points to their
// assigned anchors.
func hostEnergy(pts anneal.Points, anchors []float32, assign []int32) float64 {
	d := pts.Dim
	var e float64
	for i, a := range assign {
		for j := range d {
			r := float64(f16.ToFloat32(pts.Data[i*d+j])) - float64(anchors[int(a)*d+j])
			e += r * r
		}
	}
	return e / float64(len(assign))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	c := slices.Clone(v)
	slices.Sort(c)
	return c[len(c)/2]
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func relDiff(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(b), 1e-300) }
