package main

import (
	"os"
	"strings"
	"testing"
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
