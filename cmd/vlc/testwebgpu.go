package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/cpu"
	"github.com/vlc-embed/vlc/gpu/webgpu"
)

// runTestWebGPU runs the WebGPU and CPU backends' Steps from the same
// anchors on clustered data, times both, and checks that they agree: the
// contract of test-cuda, on the best WebGPU adapter (VLC_WEBGPU_ADAPTER
// picks another).
//
//	vlc test-webgpu [--large] [-seed S] [-iters N]
func runTestWebGPU(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("test-webgpu", flag.ContinueOnError)
	large := fs.Bool("large", false, "1,000,000 x 768 points and 4096 anchors (the CPU runs on a subsample); default 10,000 x 128 and 256")
	seed := fs.Uint64("seed", 1, "seed of the data and the initial anchors")
	iters := fs.Int("iters", 0, "timed iterations per backend (default 20; 10 on the GPU and 2 on the CPU with --large)")
	if _, err := parse(fs, args, nil, stderr); err != nil {
		return err
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
	dev, err := webgpu.OpenAny() // lavapipe too: this checks whatever adapter there is
	if err != nil {
		return err
	}
	defer dev.Close()
	if in, ok := dev.(interface{ Info() webgpu.Info }); ok {
		i := in.Info()
		fmt.Fprintf(stderr, "adapter: %s (driver %q), backend %s, type %s; max storage binding %.0f MiB, max buffer %.0f MiB (adapter reports %d bytes)\n",
			i.Name, i.Driver, i.Backend, i.Type, float64(i.MaxBinding)/(1<<20), float64(i.MaxBuffer)/(1<<20), i.AdapterMaxBuffer)
	}
	return testWebGPU(ctx, dev, cfg, stderr)
}

// testWebGPU compares dev with the CPU reference as testBackends does for
// CUDA (same data, schedule and tolerances; the near-tie test is
// webgpu.Compare, which has no float16 slack since this backend keeps
// float32 anchors) and reports on stderr; it fails when they disagree.
func testWebGPU(ctx context.Context, dev anneal.Device, cfg backendTest, stderr io.Writer) error {
	n, d, m, sub := cfg.n, cfg.d, cfg.m, cfg.sub
	gpuIters, cpuIters := cfg.gpuIters, cfg.cpuIters
	if sub == n {
		cpuIters = gpuIters // the same schedule on the same points
	}
	k := max(1, m/4)
	t0 := time.Now()
	pts := clusteredPoints(n, d, k, cfg.seed)
	fmt.Fprintf(stderr, "data: %d x %d float16 in %d clusters, seed %d (made in %v); %d anchors from random points\n",
		n, d, k, cfg.seed, time.Since(t0).Round(time.Millisecond), m)
	anchors0 := pickAnchors(pts, m, cfg.seed)
	inf := float32(math.Inf(1))
	rd := float32(math.Sqrt(float64(d)))
	params := func(it, of int) anneal.StepParams {
		if it < of/2 {
			return anneal.StepParams{Tau: 2 * rd, Rate: 0.5, MaxMove: rd}
		}
		return anneal.StepParams{Tau: inf, Rate: 1, MaxMove: inf}
	}
	sched := gpuIters

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
	if _, err := gds.Step(params(0, sched)); err != nil { // warm-up
		return err
	}
	if err := gds.SetAnchors(anchors0, m); err != nil {
		return err
	}
	upA, downA := gds.Transfer()
	gpuMs, gpuE, err := timeSteps(ctx, gds, gpuIters, sched, params)
	if err != nil {
		return err
	}
	upB, downB := gds.Transfer()
	gpuAnchors := make([]float32, m*d)
	if err := gds.Anchors(gpuAnchors); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "webgpu: %d steps, %.3f ms/iteration (median; mean %.3f), wall clock per Step incl. the scalar read-back\n",
		gpuIters, median(gpuMs), mean(gpuMs))
	fmt.Fprintf(stderr, "webgpu: transfers per steady-state Step: %d B to the host, %d B to the device\n",
		(downB-downA)/int64(gpuIters), (upB-upA)/int64(gpuIters))
	if prof, ok := gds.(webgpu.Profiler); ok {
		ts, err := prof.TimeAssign(max(3, min(10, gpuIters)))
		if err != nil {
			return err
		}
		ms := median(ts[1:])
		flop := 2 * float64(n) * float64(m) * float64(d)
		fmt.Fprintf(stderr, "webgpu assign alone (tile %s): %.3f ms (median of %d submissions, wall clock), %.3g TFLOP/s effective (2*n*m*d / time)\n",
			prof.Tile(), ms, len(ts)-1, flop/(ms*1e-3)/1e12)
	}

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
	cpuMs, cpuE, err := timeSteps(ctx, cds, cpuIters, sched, params)
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
		fmt.Fprintf(stderr, "speedup: %.1fx (median ms/iteration, cpu / webgpu)\n", cmed/gmed)
	}

	var failures []string
	if sub == n {
		r := relDiff(gpuE, cpuE)
		fmt.Fprintf(stderr, "energy after %d steps: webgpu %.6f, cpu %.6f, relative difference %.2g\n", sched, gpuE, cpuE, r)
		if r > testCUDAEnergyTol {
			failures = append(failures, fmt.Sprintf("energy after the steps differs by %.2g", r))
		}
	} else {
		fmt.Fprintf(stderr, "energy after the steps: webgpu %.6f (all %d points, %d steps); cpu %.6f (subsample, %d steps): not comparable\n", gpuE, n, gpuIters, cpuE, cpuIters)
	}

	// Parity: both backends assign the CPU's points to the same anchors
	// (the WebGPU run's final ones).
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
	agr := webgpu.Compare(pts.Data, d, gpuAnchors, ga, ca)
	gE := gst.Energy
	if sub < n {
		gE = hostEnergy(cpts, gpuAnchors, ga[:sub])
	}
	r := relDiff(gE, cst.Energy)
	fmt.Fprintf(stderr, "parity, same anchors, one assign of %d points: %d equal (%.3f%%), %d near-ties, %d beyond a near-tie (%.3f%%); energy webgpu %.6f, cpu %.6f, relative difference %.2g\n",
		agr.N, agr.Equal, 100*float64(agr.Equal)/float64(agr.N), agr.NearTies, agr.Mismatches, 100*agr.NonTieFraction(), gE, cst.Energy, r)
	if r > testCUDAEnergyTol {
		failures = append(failures, fmt.Sprintf("energy of the same-anchor assign differs by %.2g", r))
	}
	if agr.NonTieFraction() > testCUDAMismatches {
		failures = append(failures, fmt.Sprintf("%.3f%% of the assignments differ beyond near-ties", 100*agr.NonTieFraction()))
	}
	if len(failures) > 0 {
		fmt.Fprintln(stderr, "FAIL")
		return fmt.Errorf("webgpu and cpu disagree: %s", strings.Join(failures, "; "))
	}
	fmt.Fprintln(stderr, "PASS")
	return nil
}
