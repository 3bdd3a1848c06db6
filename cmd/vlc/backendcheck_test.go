package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/internal/crosscheck"
)

// Without the cuda build tag (or without a driver) test-cuda fails with
// one line saying why.
func TestTestCUDAUnavailable(t *testing.T) {
	code, _, stderr := runVLC(t, "test-cuda")
	if strings.Contains(stderr, "PASS") {
		t.Skip("this binary has a working CUDA backend")
	}
	checkOneLineError(t, code, stderr)
	if !strings.Contains(stderr, "not built with CUDA support") && !strings.Contains(stderr, "no CUDA") {
		t.Errorf("stderr %q does not say why", stderr)
	}
}

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

// The report test-cuda and test-webgpu print, with the CPU backend standing
// in for the GPU: on all points and on a subsample.
func TestCheckBackendReport(t *testing.T) {
	for _, c := range []struct {
		cfg  crosscheck.Config
		want []string
	}{
		{crosscheck.Config{N: 700, Dim: 20, Anchors: 16, Sub: 700, Steps: 4, Seed: 2},
			[]string{"data: 700 x 20", "gpu: 4 steps", "transfers per steady-state Step: 0 B", "kernel times", "speedup: ", "energy after 4 steps: gpu", "0 beyond a near-tie", "PASS"}},
		{crosscheck.Config{N: 900, Dim: 9, Anchors: 8, Sub: 300, Steps: 3, RefSteps: 2, Seed: 3},
			[]string{"subsample of 300 of the 900 points: 2 steps", "an extrapolation", "not comparable", "parity, same anchors, one assign of 300 points", "PASS"}},
	} {
		var out bytes.Buffer
		prof := bytes.NewBufferString("kernel times\n")
		if err := checkBackend(context.Background(), cpu.New(), "gpu", c.cfg, prof, &out); err != nil {
			t.Errorf("%+v: %v\n%s", c.cfg, err, out.String())
			continue
		}
		for _, want := range c.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%+v: output lacks %q:\n%s", c.cfg, want, out.String())
			}
		}
	}
}
