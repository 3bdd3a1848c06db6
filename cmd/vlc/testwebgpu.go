package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/vlc-embed/vlc/anneal"
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
	// The near-tie slack has no float16 term: this backend keeps the
	// anchors in float32.
	cfg.label, cfg.f16Anchors = "webgpu", false
	cfg.profile = func(ds anneal.Dataset, _ func() error, flop float64) error {
		prof, ok := ds.(webgpu.Profiler)
		if !ok {
			return nil
		}
		ts, err := prof.TimeAssign(max(3, min(10, cfg.gpuIters)))
		if err != nil {
			return err
		}
		ms := median(ts[1:])
		fmt.Fprintf(stderr, "webgpu assign alone (tile %s): %.3f ms (median of %d submissions, wall clock), %.3g TFLOP/s effective (2*n*m*d / time)\n",
			prof.Tile(), ms, len(ts)-1, flop/(ms*1e-3)/1e12)
		return nil
	}
	return testBackends(ctx, dev, cfg, stderr)
}
