package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGenerated fails when the committed kernels are not what this
// generator writes: after editing main.go, run `go generate ./internal/vec`
// (or `make asm`) from the repository root and commit both files.
func TestGenerated(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"kernels_amd64.s", "kernels_amd64_stubs.go"} {
		if _, err := os.Stat(filepath.Join("..", f)); err != nil {
			t.Fatalf("committed kernel file missing: %v", err)
		}
	}
	cmd := exec.Command("go", "run", ".", "-out", filepath.Join(dir, "kernels_amd64.s"),
		"-stubs", filepath.Join(dir, "kernels_amd64_stubs.go"), "-pkg", "vec")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator failed: %v\n%s", err, out)
	}
	for _, f := range []string{"kernels_amd64.s", "kernels_amd64_stubs.go"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		// The first line names the command's output paths, which differ.
		if !bytes.Equal(afterFirstLine(got), afterFirstLine(want)) {
			t.Errorf("internal/vec/%s is stale: run `make asm` and commit it", f)
		}
	}
}

func afterFirstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}
