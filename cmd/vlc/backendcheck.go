package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/backend/cuda"
	"github.com/vlc-embed/vlc/backend/webgpu"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/crosscheck"
	"github.com/vlc-embed/vlc/internal/synth"
)

// runTestCUDA checks the CUDA backend against the CPU (crosscheck.Check)
// and prints the report, with the split of a Step's kernels and every
// assign variant's speed. With -devices it checks the points split over
// those devices, and first that the split gives the bits of the first
// device alone (splitParity).
//
//	vlc test-cuda [--large] [-devices all|0,1,...] [-seed S] [-iters N]
func runTestCUDA(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var devices string
	cfg, err := parseBackendCheck("test-cuda", args, stdout, &devices)
	if err != nil {
		return err
	}
	var devs []device.Device
	if devices == "" {
		dev, err := cuda.Open()
		if err != nil {
			return err
		}
		devs = []device.Device{dev}
	} else {
		ords, err := device.ParseDevices(devices)
		if err != nil {
			return err
		}
		if devs, err = cuda.OpenDevices(ords); err != nil {
			return err
		}
	}
	dev := devs[0]
	if len(devs) > 1 {
		dev = device.Multi(devs...)
	}
	defer dev.Close()
	for _, d := range devs {
		if in, ok := d.(interface{ Info() cuda.Info }); ok {
			i := in.Info()
			fmt.Fprintf(stderr, "device: %s, %d SMs, compute capability %d.%d, %.1f GiB (%.1f GiB free), PTX %s\n",
				i.Name, i.SMs, i.CCMajor, i.CCMinor, float64(i.TotalMem)/(1<<30), float64(i.FreeMem)/(1<<30), i.PTXSource)
		}
	}
	if len(devs) > 1 {
		if err := splitParity(devs[0], dev, cfg, stderr); err != nil {
			return err
		}
	}
	cfg.F16Anchors = true
	var prof bytes.Buffer
	cfg.Profile = func(ds device.Dataset, step func() error) error {
		return profileCUDA(ds, step, flops(cfg), &prof)
	}
	return checkBackend(ctx, dev, "cuda", cfg, &prof, stderr)
}

// splitParity runs robust Steps and an Assign from the same anchors on one
// device and on the points split over several (split), and fails unless
// every energy, changed count, assignment, count, anchor and variance is
// the same to the bit.
func splitParity(one, split device.Device, cfg crosscheck.Config, w io.Writer) error {
	pts := synth.Clusters(cfg.N, cfg.Dim, max(1, cfg.Anchors/4), cfg.Seed)
	anchors := synth.PickAnchors(pts, cfg.Anchors, cfg.Seed)
	const steps = 3
	type result struct {
		st       []device.StepStats
		assign   []int32
		anchors  []float32
		counts   []int64
		variance []float32
	}
	run := func(dev device.Device) (*result, error) {
		ds, err := dev.Load(pts)
		if err != nil {
			return nil, err
		}
		defer ds.Close()
		if err := ds.SetAnchors(anchors, cfg.Anchors); err != nil {
			return nil, err
		}
		m, d := cfg.Anchors, cfg.Dim
		r := &result{assign: make([]int32, pts.N), anchors: make([]float32, m*d), counts: make([]int64, m), variance: make([]float32, m*d)}
		inf := float32(math.Inf(1))
		for k := range steps + 1 {
			var st device.StepStats
			if k < steps {
				st, err = ds.Step(device.StepParams{Tau: 4, Rate: 0.5, MaxMove: inf})
			} else {
				st, err = ds.Assign()
			}
			if err != nil {
				return nil, err
			}
			r.st = append(r.st, st)
		}
		for _, err := range []error{ds.Assignments(r.assign), ds.Anchors(r.anchors), ds.Stats(r.counts, r.variance)} {
			if err != nil {
				return nil, err
			}
		}
		return r, nil
	}
	a, err := run(one)
	if err != nil {
		return err
	}
	b, err := run(split)
	if err != nil {
		return err
	}
	bits := func(x, y []float32) bool {
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
		return true
	}
	var diff []string
	if !slices.Equal(a.st, b.st) {
		diff = append(diff, fmt.Sprintf("step statistics %v / %v", a.st, b.st))
	}
	if !slices.Equal(a.assign, b.assign) || !slices.Equal(a.counts, b.counts) {
		diff = append(diff, "assignments or counts")
	}
	if !bits(a.anchors, b.anchors) || !bits(a.variance, b.variance) {
		diff = append(diff, "anchors or variances")
	}
	what := fmt.Sprintf("split parity: %s against %s alone, %d x %d points, %d anchors, %d robust Steps and an Assign", split.Name(), one.Name(), cfg.N, cfg.Dim, cfg.Anchors, steps)
	if len(diff) > 0 {
		fmt.Fprintf(w, "%s: FAIL\n", what)
		return fmt.Errorf("split over devices, the results differ from one device's: %s", strings.Join(diff, "; "))
	}
	fmt.Fprintf(w, "%s: the same bits\n", what)
	return nil
}

// runTestWebGPU is test-cuda's check for the WebGPU backend, on the best
// adapter (VLC_WEBGPU_ADAPTER picks another; software adapters too).
//
//	vlc test-webgpu [--large] [-seed S] [-iters N]
func runTestWebGPU(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseBackendCheck("test-webgpu", args, stdout, nil)
	if err != nil {
		return err
	}
	dev, err := webgpu.OpenAny()
	if err != nil {
		return err
	}
	defer dev.Close()
	if in, ok := dev.(interface{ Info() webgpu.Info }); ok {
		i := in.Info()
		fmt.Fprintf(stderr, "adapter: %s (driver %q), backend %s, type %s; max storage binding %.0f MiB, max buffer %.0f MiB (adapter reports %d bytes)\n",
			i.Name, i.Driver, i.Backend, i.Type, float64(i.MaxBinding)/(1<<20), float64(i.MaxBuffer)/(1<<20), i.AdapterMaxBuffer)
	}
	var prof bytes.Buffer
	cfg.Profile = func(ds device.Dataset, _ func() error) error {
		p, ok := ds.(webgpu.Profiler)
		if !ok {
			return nil
		}
		ts, err := p.TimeAssign(max(3, min(10, cfg.Steps)))
		if err != nil {
			return err
		}
		ms := crosscheck.Median(ts[1:])
		fmt.Fprintf(&prof, "webgpu assign alone (tile %s): %.3f ms (median of %d submissions, wall clock), %.3g TFLOP/s effective (2*n*m*d / time)\n",
			p.Tile(), ms, len(ts)-1, flops(cfg)/(ms*1e-3)/1e12)
		return nil
	}
	return checkBackend(ctx, dev, "webgpu", cfg, &prof, stderr)
}

// parseBackendCheck reads the flags test-cuda and test-webgpu share (help
// goes to stdout), and -devices into devices when it is not nil.
func parseBackendCheck(name string, args []string, stdout io.Writer, devices *string) (crosscheck.Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if devices != nil {
		fs.StringVar(devices, "devices", "", "check the points split over these devices: all, or device numbers such as 0,1 (a number twice: two shares on one GPU); first that the split gives one device's bits")
	}
	large := fs.Bool("large", false, "1,000,000 x 768 points and 4096 anchors (the CPU runs on a subsample); default 10,000 x 128 and 256")
	seed := fs.Uint64("seed", 1, "seed of the data and the initial anchors")
	iters := fs.Int("iters", 0, "timed iterations per backend (default 20; 10 on the GPU and 2 on the CPU with --large)")
	if _, err := parse(fs, args, nil, stdout); err != nil {
		return crosscheck.Config{}, err
	}
	cfg := crosscheck.Config{N: 10_000, Dim: 128, Anchors: 256, Sub: 10_000, Steps: 20, RefSteps: 20, Seed: *seed}
	if *large {
		cfg = crosscheck.Config{N: 1_000_000, Dim: 768, Anchors: 4096, Sub: 4096, Steps: 10, RefSteps: 2, Seed: *seed}
	}
	if *iters > 0 {
		cfg.Steps, cfg.RefSteps = *iters, *iters
		if *large {
			cfg.RefSteps = min(*iters, 2)
		}
	}
	return cfg, nil
}

// flops is the multiply-adds of one assign, twice: 2 n m d.
func flops(cfg crosscheck.Config) float64 {
	return 2 * float64(cfg.N) * float64(cfg.Anchors) * float64(cfg.Dim)
}

// checkBackend runs the check and prints its report: the device's part
// as soon as it is done (with prof, the backend's own timings), the rest
// at the end. It fails when the backends disagree beyond the limits.
func checkBackend(ctx context.Context, dev device.Device, label string, cfg crosscheck.Config, prof *bytes.Buffer, w io.Writer) error {
	cfg.DeviceDone = func(r *crosscheck.Report) {
		fmt.Fprintf(w, "data: %d x %d float16 in %d clusters, seed %d (made in %v); %d anchors from random points\n",
			r.N, r.Dim, max(1, r.Anchors/4), r.Seed, r.DataTime.Round(1e6), r.Anchors)
		fmt.Fprintf(w, "%s: load %v (%.1f MiB to the device)\n", r.Device, r.LoadTime.Round(1e3), float64(r.Uploaded)/(1<<20))
		fmt.Fprintf(w, "%s: %d steps, %.3f ms/iteration (median; mean %.3f), wall clock per Step incl. the scalar read-back\n",
			label, r.Steps, crosscheck.Median(r.DeviceMs), crosscheck.Mean(r.DeviceMs))
		fmt.Fprintf(w, "%s: transfers per steady-state Step: %d B to the host, %d B to the device\n", label, r.StepDown, r.StepUp)
		w.Write(prof.Bytes())
	}
	r, err := crosscheck.Check(ctx, dev, cpu.New(), cfg)
	if err != nil {
		return err
	}
	gmed, cmed := crosscheck.Median(r.DeviceMs), crosscheck.Median(r.RefMs)
	if r.Subsample() {
		scaled := cmed * float64(r.N) / float64(r.Sub)
		fmt.Fprintf(w, "%s: ran on a subsample of %d of the %d points: %d steps, %.1f ms/iteration (median)\n", r.Reference, r.Sub, r.N, r.RefSteps, cmed)
		fmt.Fprintf(w, "speedup: %.0fx against the CPU time scaled linearly to %d points (%.0f ms; an extrapolation, not a measurement)\n", scaled/gmed, r.N, scaled)
		fmt.Fprintf(w, "energy after the steps: %s %.6f (all %d points, %d steps); cpu %.6f (subsample, %d steps): not comparable\n",
			label, r.DeviceEnergy, r.N, r.Steps, r.RefEnergy, r.RefSteps)
	} else {
		fmt.Fprintf(w, "%s: %d steps, %.3f ms/iteration (median; mean %.3f)\n", r.Reference, r.RefSteps, cmed, crosscheck.Mean(r.RefMs))
		fmt.Fprintf(w, "speedup: %.1fx (median ms/iteration, cpu / %s)\n", cmed/gmed, label)
		fmt.Fprintf(w, "energy after %d steps: %s %.6f, cpu %.6f, relative difference %.2g\n",
			r.Steps, label, r.DeviceEnergy, r.RefEnergy, r.EnergyDiff())
	}
	a := r.Agreement
	fmt.Fprintf(w, "parity, same anchors, one assign of %d points: %d equal (%.3f%%), %d near-ties, %d beyond a near-tie (%.3f%%); energy %s %.6f, cpu %.6f, relative difference %.2g\n",
		a.N, a.Equal, 100*float64(a.Equal)/float64(a.N), a.NearTies, a.Mismatches, 100*a.NonTieFraction(),
		label, r.DeviceAssignEnergy, r.RefAssignEnergy, r.AssignEnergyDiff())
	if len(r.Failures) > 0 {
		fmt.Fprintln(w, "FAIL")
		return fmt.Errorf("%s and cpu disagree: %s", label, strings.Join(r.Failures, "; "))
	}
	fmt.Fprintln(w, "PASS")
	return nil
}

// profileCUDA reports the kernel split of a Step (CUDA events; the anchors
// go on from where the timed steps left them) and the fused assign's
// TFLOP/s for every variant.
func profileCUDA(ds device.Dataset, step func() error, flop float64, w io.Writer) error {
	if split, ok := ds.(device.SplitReporter); ok {
		// A split set: each device's share of 5 Steps, and the exchange.
		before := split.SplitReport()
		for range 5 {
			if err := step(); err != nil {
				return err
			}
		}
		fmt.Fprintf(w, "split over %d devices, 5 Steps:\n", len(before.Shares))
		splitDelta(before, split.SplitReport()).print(w, "  ")
		return nil
	}
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
		return crosscheck.Median(v)
	}
	fmt.Fprintf(w, "cuda kernels (median of %d Steps, CUDA events): assign %.3f ms, finalize %.3f, reduce %.3f, update %.3f\n",
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
		ms := crosscheck.Median(ts[1:])
		fmt.Fprintf(w, "cuda fused assign %s%s: %.3f ms (median of %d), %.1f TFLOP/s effective (2*n*m*d / time)\n",
			v, def, ms, len(ts)-1, flop/(ms*1e-3)/1e12)
	}
	return nil
}
