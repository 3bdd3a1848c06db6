package main

import (
	"context"
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
	cfg, err := parseBackendTest("test-webgpu", args, stderr)
	if err != nil {
		return err
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
