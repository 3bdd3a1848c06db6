//go:build webgpu

package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// skipWithoutAdapter skips when the WebGPU backend cannot start here
// (fails, with VLC_WEBGPU_REQUIRE set).
func skipWithoutAdapter(t *testing.T, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "no WebGPU adapter") {
		if os.Getenv("VLC_WEBGPU_REQUIRE") != "" {
			t.Fatalf("VLC_WEBGPU_REQUIRE is set: %s", stderr)
		}
		t.Skip(strings.TrimSpace(stderr))
	}
}

// compress -backend webgpu builds a deep2k index whose recall@10 equals the
// CPU-trained index's within 0.005, at nprobe 4 and 16; -backend auto (no
// CUDA in this binary) takes webgpu and says so, except on a software
// adapter (lavapipe) without VLC_WEBGPU_SOFTWARE=1, where it takes the CPU
// and logs why.
func TestCompressWebGPU(t *testing.T) {
	t.Setenv("VLC_WEBGPU_SOFTWARE", "1") // CI has lavapipe only
	dir := t.TempDir()
	software := false
	recall := map[string]map[string]float64{}
	for _, backend := range []string{"webgpu", "cpu"} {
		ix := filepath.Join(dir, backend+".vlc")
		code, _, stderr := runVLC(t, "compress", deepBase, "-dim", "96", "-o", ix, "-seed", "1", "-backend", backend)
		if backend == "webgpu" {
			skipWithoutAdapter(t, stderr)
			software = strings.Contains(stderr, ", cpu)\n")
		}
		if code != 0 {
			t.Fatalf("compress -backend %s: exit %d:\n%s", backend, code, stderr)
		}
		if !strings.Contains(stderr, "backend       "+backend+" (") {
			t.Errorf("compress -backend %s: summary does not name the backend:\n%s", backend, stderr)
		}
		t.Logf("-backend %s:\n%s", backend, stderr)
		recall[backend] = map[string]float64{}
		for _, np := range []string{"4", "16"} {
			m := evalJSON(t, ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", np, "-json")
			recall[backend][np] = m["recall@10"].(float64)
		}
	}
	for _, np := range []string{"4", "16"} {
		g, c := recall["webgpu"][np], recall["cpu"][np]
		t.Logf("nprobe %s: recall@10 webgpu %.4f, cpu %.4f", np, g, c)
		if math.Abs(g-c) > 0.005 {
			t.Errorf("nprobe %s: recall@10 webgpu %.4f, cpu %.4f: differ by more than 0.005", np, g, c)
		}
	}

	code, _, stderr := runVLC(t, "compress", deepBase, "-dim", "96", "-o", filepath.Join(dir, "auto.vlc"), "-seed", "1", "-backend", "auto")
	if code != 0 {
		t.Fatalf("compress -backend auto: exit %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "backend       webgpu (") {
		t.Errorf("-backend auto did not take webgpu (no CUDA in this binary):\n%s", stderr)
	}

	t.Setenv("VLC_WEBGPU_SOFTWARE", "")
	code, _, stderr = runVLC(t, "compress", deepBase, "-dim", "96", "-o", filepath.Join(dir, "auto2.vlc"), "-seed", "1", "-backend", "auto")
	if code != 0 {
		t.Fatalf("compress -backend auto: exit %d:\n%s", code, stderr)
	}
	want := "backend       webgpu ("
	if software {
		want = "backend       cpu ("
		if !strings.Contains(stderr, "software renderer") {
			t.Errorf("-backend auto on a software adapter does not log why it passed webgpu over:\n%s", stderr)
		}
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("-backend auto without VLC_WEBGPU_SOFTWARE: want %q in\n%s", want, stderr)
	}
}
