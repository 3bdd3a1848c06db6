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
