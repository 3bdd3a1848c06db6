package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

// compress -devices splits training over simulated CPU devices (0
// repeated) and writes the bytes one device writes; a device the backend
// lacks, or a list that does not parse, is a one-line error naming it.
func TestCompressDevices(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "small.npy")
	if err := vecfile.WriteNpy(in, randomRows(700, 24, 3), "<f4"); err != nil {
		t.Fatal(err)
	}
	one, split := filepath.Join(dir, "one.vlc"), filepath.Join(dir, "split.vlc")
	mustVLC(t, "compress", in, "-o", one, "-backend", "cpu", "-quiet")
	_, stderr := mustVLC(t, "compress", in, "-o", split, "-backend", "cpu", "-devices", "0,0,0")
	if !bytes.Equal(readFile(t, one), readFile(t, split)) {
		t.Error("-devices 0,0,0: the index differs from one device's")
	}
	if !strings.Contains(stderr, "3 x cpu (") {
		t.Errorf("the summary does not name the devices: %s", stderr)
	}
	// Out of core: trained on a sample, every row assigned window by
	// window, on the split devices too.
	mustVLC(t, "compress", in, "-o", one, "-backend", "cpu", "-train-sample", "300", "-quiet")
	mustVLC(t, "compress", in, "-o", split, "-backend", "cpu", "-train-sample", "300", "-devices", "0,0", "-quiet")
	if !bytes.Equal(readFile(t, one), readFile(t, split)) {
		t.Error("-devices 0,0 -train-sample 300: the index differs from one device's")
	}
	checkFails(t, []string{"compress", in, "-o", split, "-backend", "cpu", "-devices", "0,1"}, []string{"backend not available: cpu: no CPU device 1"})
	checkFails(t, []string{"compress", in, "-o", split, "-devices", "0;1"}, []string{`-devices 0;1: want all, or device numbers separated by commas`})
}

// bench -devices times a split set.
func TestBenchDevices(t *testing.T) {
	code, stdout, stderr := runVLC(t, "bench", "-backend", "cpu", "-devices", "0,0", "-n", "2000", "-dim", "16", "-anchors", "32", "-iters", "2", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	if !strings.HasPrefix(r.Backend, "2 x cpu (") || len(r.Ms) != 2 || r.MsPerIter <= 0 {
		t.Errorf("result %+v", r)
	}
}

// search and eval -devices split the index over a backend's devices:
// refused where the search runs on the CPU, or with a list that does
// not parse; with -backend auto and no GPU that can search (the CPU
// backend's devices cannot), the CPU's hits.
func TestSearchDevices(t *testing.T) {
	ix := deepIndexPath(t)
	want, _ := mustVLC(t, "search", ix, "-query", deepQuery, "-k", "5", "-nprobe", "8")
	code, out, errs := runVLC(t, "search", ix, "-query", deepQuery, "-k", "5", "-nprobe", "8", "-backend", "auto", "-devices", "0,0")
	if code != 0 || out != want {
		t.Errorf("-backend auto -devices 0,0: exit %d, output equal to the CPU's: %v; stderr %q", code, out == want, errs)
	}
	for _, cmd := range [][]string{{"search"}, {"eval", "-gt", deepGT}} {
		args := append(cmd, ix, "-query", deepQuery)
		checkFails(t, append(args, "-devices", "0,1"), []string{"-devices 0,1 splits the index over GPUs: give -backend cuda, webgpu or auto too"})
		checkFails(t, append(args, "-backend", "auto", "-devices", "0;1"), []string{`-devices 0;1: want all, or device numbers separated by commas`})
		checkFails(t, append(args, "-backend", "auto", "-devices", "0,0", "-spread", "rows"), []string{`-spread: `, `spread "rows": want lists`})
	}
	code, out, errs = runVLC(t, "search", ix, "-query", deepQuery, "-k", "5", "-nprobe", "8", "-backend", "auto", "-devices", "0,0", "-spread", "queries")
	if code != 0 || out != want {
		t.Errorf("-backend auto -devices 0,0 -spread queries: exit %d, output equal to the CPU's: %v; stderr %q", code, out == want, errs)
	}
}
