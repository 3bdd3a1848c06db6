package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/cpu"
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

// The comparison itself, run with the CPU backend standing in for the GPU:
// identical backends must pass, on all points and on a subsample.
func TestTestBackendsFlow(t *testing.T) {
	for _, cfg := range []backendTest{
		{n: 700, d: 20, m: 16, sub: 700, gpuIters: 4, cpuIters: 3, seed: 2},
		{n: 900, d: 9, m: 8, sub: 300, gpuIters: 3, cpuIters: 2, seed: 3},
	} {
		var out bytes.Buffer
		cfg.label = "cpu-as-gpu"
		if err := testBackends(context.Background(), cpu.New(), cfg, &out); err != nil {
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

// The parallel generator depends on the seed only.
func TestClusteredPoints(t *testing.T) {
	a := clusteredPoints(5000, 7, 4, 9)
	b := clusteredPoints(5000, 7, 4, 9)
	c := clusteredPoints(5000, 7, 4, 10)
	if !slices.Equal(a.Data, b.Data) {
		t.Error("same seed, different points")
	}
	if slices.Equal(a.Data, c.Data) {
		t.Error("different seeds, same points")
	}
}
