package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/vlc-embed/vlc/internal/sysmem"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"
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

// vlc bench refuses sizes beyond memory, or beyond what the platform's
// integers hold, before allocating: one line naming the sizes, not a
// panic or an out-of-memory death. It runs the built CLI under a deadline
// so that a regression kills a child process, not the tests.
func TestBenchTooLarge(t *testing.T) {
	bin := builtVLC(t, nil)
	_, memKnown := sysmem.Available()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-n", "9223372036854775807", "-dim", "2"}, "overflows"},
		{[]string{"-n", "4611686018427387904", "-dim", "1", "-anchors", "1"}, "overflows"},
		{[]string{"-n", "3037000500", "-dim", "3037000500", "-anchors", "1"}, "overflows"},
		{[]string{"-n", "1", "-dim", "9223372036854775807", "-anchors", "1"}, "overflows"},
		{[]string{"-n", "1000000000000", "-dim", "768"}, "more than the"},
		{[]string{"-n", "1000000000", "-dim", "768"}, "more than the"},
		{[]string{"-n", "1", "-dim", "1000000000000000", "-anchors", "1"}, "more than the"},
		{[]string{"-n", "100000000000", "-dim", "1", "-anchors", "1"}, "more than the"},
	}
	for _, c := range cases {
		if c.want == "more than the" && !memKnown {
			continue // memory unknown here: only overflow is refused
		}
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "-backend", "cpu"}, c.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Run()
			checkOneLineError(t, cmd.ProcessState.ExitCode(), stderr.String())
			for _, w := range []string{"-n " + c.args[1], "-dim " + c.args[3], c.want} {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q does not contain %q", stderr.String(), w)
				}
			}
		})
	}
}

func TestBenchBytes(t *testing.T) {
	if need, ok := benchBytes(1000, 10, 4); !ok || need != 1000*10*2+1000*24+4*10*20 {
		t.Errorf("benchBytes(1000, 10, 4) = %d, %v", need, ok)
	}
	for _, c := range [][3]int{{math.MaxInt, 2, 1}, {1 << 62, 1, 1}, {1, math.MaxInt, 1}, {1 << 40, 1 << 40, 1}, {1, 1 << 40, 1 << 40}} {
		if _, ok := benchBytes(c[0], c[1], c[2]); ok {
			t.Errorf("benchBytes%v: no overflow reported", c)
		}
	}
}
