package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/backend/cuda"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/crosscheck"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/internal/sysmem"
)

// benchResult is what vlc bench -json prints.
type benchResult struct {
	Backend      string    `json:"backend"`
	N            int       `json:"n"`
	Dim          int       `json:"dim"`
	Anchors      int       `json:"anchors"`
	Iterations   int       `json:"iterations"`
	MsPerIter    float64   `json:"ms_per_iteration"` // median
	MsPerIterMin float64   `json:"ms_per_iteration_min"`
	TFLOPS       float64   `json:"tflops_effective"` // 2*n*m*d / median
	LoadMs       float64   `json:"load_ms"`
	ToDevice     int64     `json:"bytes_to_device_per_iteration"`
	ToHost       int64     `json:"bytes_to_host_per_iteration"`
	Ms           []float64 `json:"ms"`
	// Split: per-device figures of a split set (-devices), per iteration.
	Split *splitFigures `json:"split,omitempty"`
}

// runBench times annealing iterations (assign + reduce + update, Lloyd
// steps) of a backend on clustered float16 data of a given size.
//
//	vlc bench [-backend auto] [-devices all|0,1,...] [-n 1000000] [-dim 768] [-anchors 4096] [-iters 10] [-seed 1] [-json]
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	backend := fs.String("backend", "auto", "backend to time: auto or "+strings.Join(device.Backends(), ", "))
	devices := fs.String("devices", "", "time several devices of the backend, the points split between them: all, or device numbers such as 0,1 (a number twice: two shares on one device)")
	n := fs.Int("n", 1_000_000, "points")
	d := fs.Int("dim", 768, "dimension")
	m := fs.Int("anchors", 4096, "anchors")
	iters := fs.Int("iters", 10, "timed iterations, after one warm-up")
	seed := fs.Uint64("seed", 1, "seed of the data and the anchors")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	if _, err := parse(fs, args, nil, stdout); err != nil {
		return err
	}
	switch {
	case *n < 1 || *d < 1 || *m < 1 || *iters < 1:
		return fmt.Errorf("-n, -dim, -anchors and -iters must be at least 1 (got %d, %d, %d, %d)", *n, *d, *m, *iters)
	case *m > *n:
		return fmt.Errorf("%d anchors for %d points: %w", *m, *n, anneal.ErrTooFewPoints)
	}
	if err := checkBenchSize(*n, *d, *m); err != nil {
		return err
	}
	dev, skipped, err := device.OpenDevices(*backend, *devices)
	for _, s := range skipped {
		slog.Info("backend skipped", "reason", s)
	}
	if err != nil {
		return err
	}
	defer dev.Close()

	t0 := time.Now()
	pts := synth.Clusters(*n, *d, max(1, *m/4), *seed)
	anchors := synth.PickAnchors(pts, *m, *seed)
	fmt.Fprintf(stderr, "data: %d x %d float16 in %d clusters, %d anchors from random points, seed %d (made in %v)\n",
		*n, *d, max(1, *m/4), *m, *seed, time.Since(t0).Round(time.Millisecond))

	t0 = time.Now()
	ds, err := dev.Load(pts)
	if err != nil {
		return err
	}
	defer ds.Close()
	res := benchResult{Backend: dev.Name(), N: *n, Dim: *d, Anchors: *m, Iterations: *iters,
		LoadMs: float64(time.Since(t0).Microseconds()) / 1e3}
	if err := ds.SetAnchors(anchors, *m); err != nil {
		return err
	}
	inf := float32(math.Inf(1))
	lloyd := func(int) device.StepParams { return device.StepParams{Tau: inf, Rate: 1, MaxMove: inf} }
	if _, err := ds.Step(lloyd(0)); err != nil { // warm-up: kernels loaded, caches filled
		return err
	}
	up0, down0 := ds.Transfer()
	split, isSplit := ds.(device.SplitReporter)
	var rep0 device.SplitReport
	if isSplit {
		rep0 = split.SplitReport()
	}
	ms, _, err := crosscheck.TimeSteps(ctx, ds, *iters, lloyd)
	if err != nil {
		return err
	}
	up1, down1 := ds.Transfer()
	if isSplit {
		f := splitDelta(rep0, split.SplitReport())
		res.Split = &f
	}
	flop := 2 * float64(*n) * float64(*m) * float64(*d)
	res.Ms, res.MsPerIter = ms, crosscheck.Median(ms)
	res.MsPerIterMin = ms[0]
	for _, v := range ms {
		res.MsPerIterMin = min(res.MsPerIterMin, v)
	}
	res.TFLOPS = flop / (res.MsPerIter * 1e-3) / 1e12
	res.ToDevice, res.ToHost = (up1-up0)/int64(*iters), (down1-down0)/int64(*iters)

	fmt.Fprintf(stderr, "%s: load %.1f ms; %d iterations (assign + reduce + update, wall clock per Step): %.3f ms median, %.3f min; %.3g TFLOP/s effective (2*n*m*d / median); %d B to the device and %d B to the host per iteration\n",
		res.Backend, res.LoadMs, *iters, res.MsPerIter, res.MsPerIterMin, res.TFLOPS, res.ToDevice, res.ToHost)
	if res.Split != nil {
		res.Split.print(stderr, "  ")
	}
	if _, ok := ds.(cuda.Profiler); ok {
		step := func() error { _, err := ds.Step(lloyd(0)); return err }
		if err := profileCUDA(ds, step, flop, stderr); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	return nil
}

// benchBytes estimates the host memory bench needs: the float16 points,
// about 24 bytes a point of bookkeeping (a permutation to pick anchors,
// assignments, distances, list members) and about 20 bytes an anchor
// value (copies of the anchors and their sums). ok is false when the
// sizes overflow, or when the points could not be one Go slice.
func benchBytes(n, d, m int) (need uint64, ok bool) {
	mul := func(a, b uint64) uint64 {
		hi, lo := bits.Mul64(a, b)
		ok = ok && hi == 0
		return lo
	}
	add := func(a, b uint64) uint64 {
		s, carry := bits.Add64(a, b, 0)
		ok = ok && carry == 0
		return s
	}
	ok = true
	vals := mul(uint64(n), uint64(d))
	need = add(add(mul(vals, 2), mul(uint64(n), 24)), mul(mul(uint64(m), uint64(d)), 20))
	return need, ok && vals <= math.MaxInt && need <= math.MaxInt
}

// checkBenchSize refuses sizes whose data would not fit in memory, with a
// message, rather than panicking in make or being killed out of memory.
func checkBenchSize(n, d, m int) error {
	need, ok := benchBytes(n, d, m)
	if !ok {
		return fmt.Errorf("-n %d x -dim %d with -anchors %d is too large: its size overflows this platform's integers", n, d, m)
	}
	if avail, known := sysmem.Available(); known && need > avail {
		return fmt.Errorf("-n %d x -dim %d with -anchors %d needs about %s of memory, more than the %s available: use a smaller -n or -dim", n, d, m, gib(need), gib(avail))
	}
	return nil
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
