package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

const goldenIndex = "../../testdata/golden/v1.vlc"

// errs0 returns what `vlc verify path` prints on stderr.
func errs0(t *testing.T, path string) string {
	_, _, errs := runVLC(t, "verify", path)
	return errs
}

// `vlc verify` on a damaged copy of a real index (the golden file) fails
// with exit status 1 and one line naming the file and the damaged part,
// for a sample of single-byte changes spread over the whole file and the
// first and last byte of every section; search (which verifies too)
// refuses the same files.
func TestVerifyNamesDamage(t *testing.T) {
	good := readFile(t, goldenIndex)
	ix, err := index.Open(goldenIndex, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	secs := ix.Sections()
	ix.Close()
	offsets := map[int]bool{}
	for i := 0; i < len(good); i += 7 {
		offsets[i] = true
	}
	for _, s := range secs {
		offsets[int(s.Offset)] = true
		offsets[int(s.Offset+s.Length-1)] = true
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.vlc")
	q := filepath.Join(dir, "q.fvecs")
	if err := vecfile.WriteFvecs(q, randomRows(2, 16, 1)); err != nil {
		t.Fatal(err)
	}
	detected := 0
	for _, i := range slices.Sorted(func(yield func(int) bool) {
		for i := range offsets {
			if !yield(i) {
				return
			}
		}
	}) {
		b := slices.Clone(good)
		b[i] ^= 0x10
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want := []string{bad}
		switch {
		case i < 8:
			want = append(want, "not a vlc index")
		case i < 12:
			want = append(want, "version")
		case i >= 12 && i < 16 && !strings.Contains(errs0(t, bad), "header checksum"):
			want = append(want, "section count") // range-checked before the CRC
		case i < 64+32*len(secs):
			want = append(want, "header checksum mismatch")
		default:
			part := "padding"
			for _, s := range secs {
				if int64(i) >= s.Offset && int64(i) < s.Offset+s.Length {
					part = fmt.Sprintf("section %q checksum mismatch", s.Kind)
				}
			}
			want = append(want, part)
		}
		code, out, errs := runVLC(t, "verify", bad)
		ok := code == 1 && out == "" && strings.Count(errs, "\n") == 1 && !strings.Contains(errs, "panic")
		for _, w := range want {
			ok = ok && strings.Contains(errs, w)
		}
		if !ok {
			t.Errorf("byte %d: exit %d, stdout %q, stderr %q; want one line with %q", i, code, out, errs, want)
			continue
		}
		if i%49 == 0 {
			if code, out, errs := runVLC(t, "search", bad, "-query", q); code != 1 || out != "" || !strings.Contains(errs, bad) {
				t.Errorf("byte %d: search exit %d, stdout %q, stderr %q", i, code, out, errs)
			}
		}
		detected++
	}
	t.Logf("vlc verify named %d of %d damaged copies correctly", detected, len(offsets))
}

// Valid but awkward input through the CLI: every vector identical, many
// duplicates, d = 1 and d = 4096 compress, verify and search; k beyond n
// returns n hits; nprobe beyond the lists is clamped and says so.
func TestAwkwardInputCLI(t *testing.T) {
	dir := t.TempDir()
	same := randomRows(1, 8, 1)[0]
	var identical, dups [][]float32
	for i := range 200 {
		identical = append(identical, slices.Clone(same))
		dups = append(dups, randomRows(5, 8, 2)[i%5])
	}
	for _, c := range []struct {
		name string
		rows [][]float32
		args []string
	}{
		{"identical", identical, nil},
		{"duplicates", dups, []string{"-metric", "cosine"}},
		{"d1", randomRows(300, 1, 3), []string{"-bits", "1"}},
		{"d4096", randomRows(100, 4096, 4), []string{"-anchors", "3", "-max-iter", "4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, out, q := filepath.Join(dir, c.name+".npy"), filepath.Join(dir, c.name+".vlc"), filepath.Join(dir, c.name+"-q.fvecs")
			if err := vecfile.WriteNpy(in, c.rows, "<f2"); err != nil {
				t.Fatal(err)
			}
			if err := vecfile.WriteFvecs(q, c.rows[:3]); err != nil {
				t.Fatal(err)
			}
			mustVLC(t, append([]string{"compress", in, "-o", out, "-quiet"}, c.args...)...)
			mustVLC(t, "verify", out)
			n := len(c.rows)
			lists := int(infoJSON(t, out)["anchors"].(float64))
			stdout, stderr := mustVLC(t, "search", out, "-query", q, "-k", strconv.Itoa(n+5), "-nprobe", "100000")
			checkHits(t, parseHits(t, stdout), 3, n, n)
			want := fmt.Sprintf("vlc search: -nprobe 100000 clamped to %d (the index has %d lists)\n", lists, lists)
			if stderr != want {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
			// A re-rank factor far beyond n (k*factor overflows int) is n.
			stdout, _ = mustVLC(t, "search", out, "-query", q, "-k", "2", "-nprobe", strconv.Itoa(lists), "-rerank", in, "-rerank-factor", "9223372036854775807")
			checkHits(t, parseHits(t, stdout), 3, 2, n)
		})
	}
}

// A binary built with -tags cuda on a machine without a CUDA driver (built
// without cgo: the driver is loaded at run time) falls back to the CPU
// with -backend auto and logs why; -backend cuda fails with one line.
func TestCUDABuildWithoutDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI with -tags cuda")
	}
	bin := builtVLC(t, []string{"CGO_ENABLED=0"}, "cuda")
	dir := t.TempDir()
	in, out := filepath.Join(dir, "v.f16"), filepath.Join(dir, "v.vlc")
	if err := vecfile.WriteF16(in, randomRows(200, 8, 1)); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		var eb bytes.Buffer
		cmd.Stderr = &eb
		cmd.Run()
		return cmd.ProcessState.ExitCode(), eb.String()
	}
	code, stderr := run("compress", in, "-dim", "8", "-o", out, "-backend", "auto")
	if strings.Contains(stderr, "backend       cuda") {
		t.Skip("this machine has a CUDA driver: auto picked the GPU")
	}
	if code != 0 {
		t.Fatalf("-backend auto: exit %d, stderr:\n%s", code, stderr)
	}
	for _, w := range []string{`msg="backend skipped" reason="cuda: no CUDA driver:`, "backend       cpu"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("-backend auto: stderr lacks %q:\n%s", w, stderr)
		}
	}
	code, stderr = run("compress", in, "-dim", "8", "-o", filepath.Join(dir, "w.vlc"), "-backend", "cuda")
	checkOneLineError(t, code, stderr)
	if !strings.HasPrefix(stderr, "vlc compress: backend not available: cuda: no CUDA driver:") {
		t.Errorf("-backend cuda: stderr %q", stderr)
	}
	code, stderr = run("test-cuda")
	checkOneLineError(t, code, stderr)
	if !strings.Contains(stderr, "no CUDA driver") {
		t.Errorf("test-cuda: stderr %q", stderr)
	}
}
