package cuda

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite consts.cuh from kernels.go")

// consts.cuh is what constsHeader makes of kernels.go: the kernels see
// the values the Go side sizes buffers and grids with. After changing a
// constant, run `go test -run TestConstsHeader -update` here, then `make
// ptx` on a machine with nvcc.
func TestConstsHeader(t *testing.T) {
	want := constsHeader()
	if *update {
		if err := os.WriteFile("consts.cuh", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("consts.cuh")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("consts.cuh is stale: run go test -run TestConstsHeader -update in backend/cuda, then make ptx")
	}
}

// The padding constants cover every variant's tiles.
func TestVariantTiles(t *testing.T) {
	for _, v := range assignVariants {
		if tileK%v.bk != 0 || anchorPad%v.bn != 0 || v.bn%64 != 0 || v.bk%32 != 0 {
			t.Errorf("variant %+v: tiles do not divide the padding (columns %d, anchor rows %d)", v, tileK, anchorPad)
		}
		if v.hopper && (v.bn != 256 || v.bk != 64) {
			t.Errorf("variant %s: the wgmma kernels are written for m64n256k16 tiles of 64 dimensions", v.name)
		}
	}
}

// No kernel source defines again a constant consts.cuh gives it: nvcc only
// warns about a redefinition, and the kernel would then disagree with Go.
func TestNoRedefinedConsts(t *testing.T) {
	var names []string
	for _, line := range strings.Split(constsHeader(), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "#define" {
			names = append(names, strings.SplitN(f[1], "(", 2)[0])
		}
	}
	for _, src := range []string{"kernels.cu", "kernels_sm90.cu"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "#define" && slices.Contains(names, strings.SplitN(f[1], "(", 2)[0]) {
				t.Errorf("%s:%d defines %s, which consts.cuh gives (from kernels.go)", src, i+1, f[1])
			}
		}
	}
}
