package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// vlc bench times Steps and reports them as JSON whose figures agree with
// each other; bad sizes are one-line errors.
func TestBench(t *testing.T) {
	code, stdout, stderr := runVLC(t, "bench", "-backend", "cpu", "-n", "2000", "-dim", "16", "-anchors", "32", "-iters", "3", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	if r.N != 2000 || r.Dim != 16 || r.Anchors != 32 || len(r.Ms) != 3 || !strings.HasPrefix(r.Backend, "cpu") {
		t.Errorf("result %+v", r)
	}
	if want := 2 * 2000 * 32 * 16 / (r.MsPerIter * 1e-3) / 1e12; math.Abs(r.TFLOPS-want) > 1e-9*want || r.MsPerIterMin > r.MsPerIter {
		t.Errorf("TFLOP/s %g, want %g from %g ms; min %g", r.TFLOPS, want, r.MsPerIter, r.MsPerIterMin)
	}
	for _, args := range [][]string{{"-n", "10", "-anchors", "20"}, {"-iters", "0"}, {"-backend", "nope"}} {
		code, _, stderr := runVLC(t, append([]string{"bench"}, args...)...)
		if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("bench %v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
