package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/cpu"
)

// test-webgpu, short: without the webgpu build tag it fails with one line
// saying why; built with it, it skips only where the machine has no
// adapter (fails then, with VLC_WEBGPU_REQUIRE set), and otherwise must
// pass.
func TestTestWebGPU(t *testing.T) {
	code, _, stderr := runVLC(t, "test-webgpu", "-iters", "4")
	switch {
	case strings.Contains(stderr, "not built with WebGPU support"):
		checkOneLineError(t, code, stderr)
	case strings.Contains(stderr, "no WebGPU adapter"):
		checkOneLineError(t, code, stderr)
		if os.Getenv("VLC_WEBGPU_REQUIRE") != "" {
			t.Fatalf("VLC_WEBGPU_REQUIRE is set: %s", stderr)
		}
		t.Skip(strings.TrimSpace(stderr))
	default:
		t.Log(stderr)
		if code != 0 {
			t.Fatalf("exit status %d", code)
		}
		for _, want := range []string{"adapter: ", "webgpu: 4 steps", "ms/iteration", "B to the host", "speedup: ",
			"energy after 4 steps: webgpu", "parity, same anchors", " 0 beyond a near-tie", "PASS"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("output lacks %q", want)
			}
		}
	}
}

// The comparison itself, run with the CPU backend standing in for the GPU:
// identical backends must pass, on all points and on a subsample.
func TestTestWebGPUFlow(t *testing.T) {
	for _, cfg := range []backendTest{
		{n: 700, d: 20, m: 16, sub: 700, gpuIters: 4, cpuIters: 3, seed: 2},
		{n: 900, d: 9, m: 8, sub: 300, gpuIters: 3, cpuIters: 2, seed: 3},
	} {
		var out bytes.Buffer
		if err := testWebGPU(context.Background(), cpu.New(), cfg, &out); err != nil {
			t.Errorf("%+v: %v\n%s", cfg, err, out.String())
			continue
		}
		for _, want := range []string{"ms/iteration", "parity, same anchors", "0 beyond a near-tie", "PASS"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%+v: output lacks %q:\n%s", cfg, want, out.String())
			}
		}
	}
}
