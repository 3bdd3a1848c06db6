package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/gpu/cuda"
	"github.com/vlc-embed/vlc/internal/crosscheck"
	"github.com/vlc-embed/vlc/internal/synth"
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
}

// runBench times annealing iterations (assign + reduce + update, Lloyd
// steps) of a backend on clustered float16 data of a given size.
//
//	vlc bench [-backend auto] [-n 1000000] [-dim 768] [-anchors 4096] [-iters 10] [-seed 1] [-json]
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	backend := fs.String("backend", "auto", "backend to time: auto or "+strings.Join(anneal.Backends(), ", "))
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
	dev, skipped, err := anneal.OpenBackend(*backend)
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
	lloyd := func(int) anneal.StepParams { return anneal.StepParams{Tau: inf, Rate: 1, MaxMove: inf} }
	if _, err := ds.Step(lloyd(0)); err != nil { // warm-up: kernels loaded, caches filled
		return err
	}
	up0, down0 := ds.Transfer()
	ms, _, err := crosscheck.TimeSteps(ctx, ds, *iters, lloyd)
	if err != nil {
		return err
	}
	up1, down1 := ds.Transfer()
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
