package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/vecfile"
)

// badInputs writes small bad and good inputs to dir and returns their paths
// by name.
func badInputs(t *testing.T, dir string) map[string]string {
	t.Helper()
	p := func(name string) string { return filepath.Join(dir, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(p("empty.f16"), nil, 0o644))
	must(os.WriteFile(p("seven.f16"), make([]byte, 7), 0o644))
	must(vecfile.WriteF16(p("ok.f16"), randomRows(40, 4, 1)))
	must(vecfile.WriteFvecs(p("ok.fvecs"), randomRows(40, 4, 2)))
	must(vecfile.WriteNpy(p("ok.npy"), randomRows(40, 4, 3), "<f4"))
	rows := randomRows(40, 4, 4)
	rows[5][2] = float32(math.NaN())
	must(vecfile.WriteF16(p("nan.f16"), rows))
	rows = randomRows(40, 4, 5)
	rows[0][1] = float32(math.Inf(1))
	must(vecfile.WriteF16(p("inf.f16"), rows))
	rows = randomRows(40, 4, 6)
	rows[17][3] = float32(math.Inf(-1))
	must(vecfile.WriteFvecs(p("neginf.fvecs"), rows))
	must(vecfile.WriteF16(p("ten.f16"), randomRows(10, 4, 7)))
	must(os.WriteFile(p("vectors.txt"), []byte("0.1 0.2 0.3 0.4\n"), 0o644))
	return map[string]string{
		"empty": p("empty.f16"), "seven": p("seven.f16"), "ok": p("ok.f16"),
		"fvecs": p("ok.fvecs"), "npy": p("ok.npy"), "nan": p("nan.f16"), "inf": p("inf.f16"),
		"neginf": p("neginf.fvecs"), "ten": p("ten.f16"), "txt": p("vectors.txt"),
		"missing": p("does-not-exist.f16"), "out": p("out.vlc"),
		"missingDir": p("no-such-folder"),
	}
}

// TestCompressBadInput runs compress on bad inputs and options: each must
// fail with status 1 and one stderr line that names the problem.
func TestCompressBadInput(t *testing.T) {
	dir := t.TempDir()
	in := badInputs(t, dir)
	out := in["out"]
	tests := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"empty f16", []string{in["empty"], "-dim", "4", "-o", out}, []string{in["empty"], "empty file (0 bytes)"}},
		{"f16 size not a multiple of the row", []string{in["seven"], "-dim", "2", "-o", out}, []string{in["seven"], "7 bytes", "not a multiple of the row size 4 bytes", "dim 2", "3 bytes left over"}},
		{"f16 without -dim", []string{in["ok"], "-o", out}, []string{in["ok"], "needs its dimension (-dim)"}},
		{"f16 negative -dim", []string{in["ok"], "-dim", "-4", "-o", out}, []string{in["ok"], "dimension -4 out of range"}},
		{"fvecs with wrong -dim", []string{in["fvecs"], "-dim", "5", "-o", out}, []string{in["fvecs"], "dimension mismatch", "file has 4", "-dim says 5"}},
		{"npy with wrong -dim", []string{in["npy"], "-dim", "3", "-o", out}, []string{in["npy"], "dimension mismatch", "file has 4", "-dim says 3"}},
		{"NaN at row 5", []string{in["nan"], "-dim", "4", "-o", out}, []string{in["nan"], "row 5", "column 2", "NaN"}},
		{"+Inf at row 0", []string{in["inf"], "-dim", "4", "-o", out}, []string{in["inf"], "row 0", "column 1", "+Inf"}},
		{"-Inf at row 17 of fvecs", []string{in["neginf"], "-o", out}, []string{in["neginf"], "row 17", "column 3", "-Inf"}},
		{"fewer vectors than anchors", []string{in["ten"], "-dim", "4", "-anchors", "20", "-o", out}, []string{in["ten"], "10 vectors", "20 anchors"}},
		{"negative anchors", []string{in["ok"], "-dim", "4", "-anchors", "-2", "-o", out}, []string{"-anchors -2: must be 0"}},
		{"bits and ratio", []string{in["ok"], "-dim", "4", "-bits", "4", "-ratio", "0.3", "-o", out}, []string{"give only one of", "-bits, -ratio"}},
		{"negative ratio", []string{in["ok"], "-dim", "4", "-ratio", "-1", "-o", out}, []string{"-ratio -1: must be a positive"}},
		{"subspaces of the rotated code", []string{in["ok"], "-dim", "4", "-code", "rotated", "-subspaces", "2", "-o", out}, []string{"-subspaces 2: a setting of the pq code"}},
		{"bits 3", []string{in["ok"], "-dim", "4", "-bits", "3", "-o", out}, []string{"-bits 3", "must be 1, 2, 4 or 8"}},
		{"unknown extension", []string{in["txt"], "-dim", "4", "-o", out}, []string{in["txt"], `unknown extension ".txt"`}},
		{"input does not exist", []string{in["missing"], "-dim", "4", "-o", out}, []string{in["missing"], "no such file"}},
		{"output in a missing folder", []string{in["ok"], "-dim", "4", "-o", filepath.Join(in["missingDir"], "x.vlc")}, []string{filepath.Join(in["missingDir"], "x.vlc"), "no such file"}},
		{"output folder is a file", []string{in["ok"], "-dim", "4", "-o", filepath.Join(in["fvecs"], "x.vlc")}, []string{in["fvecs"], "not a folder"}},
		{"unknown metric", []string{in["ok"], "-dim", "4", "-metric", "hamming", "-o", out}, []string{`"hamming"`, "metric"}},
		{"unknown backend", []string{in["ok"], "-dim", "4", "-backend", "tpu", "-o", out}, []string{`"tpu"`, "backend"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, errs := runVLC(t, append([]string{"compress"}, tc.args...)...)
			checkOneLineError(t, code, errs)
			if !strings.HasPrefix(errs, "vlc compress: ") {
				t.Errorf("stderr %q does not start with \"vlc compress: \"", errs)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not contain %q", errs, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failing compress created %s", out)
				os.Remove(out)
			}
		})
	}
	if _, err := os.Stat(in["missingDir"]); err == nil {
		t.Errorf("compress created the missing output folder %s", in["missingDir"])
	}
	assertNoTempFiles(t, dir)
}

// TestCompressSucceedsOnEveryFormat compresses the same small set of vectors
// from .f16, .fvecs and .npy, with every metric.
func TestCompressFormatsAndMetrics(t *testing.T) {
	dir := t.TempDir()
	rows := randomRows(60, 6, 11)
	files := map[string]func(string) error{
		"v.f16":   func(p string) error { return vecfile.WriteF16(p, rows) },
		"v.fvecs": func(p string) error { return vecfile.WriteFvecs(p, rows) },
		"v.npy":   func(p string) error { return vecfile.WriteNpy(p, rows, "<f2") },
		"V.NPY":   func(p string) error { return vecfile.WriteNpy(p, rows, "<f4") },
	}
	query := filepath.Join(dir, "q.fvecs")
	if err := vecfile.WriteFvecs(query, rows[:5]); err != nil {
		t.Fatal(err)
	}
	for name, write := range files {
		in := filepath.Join(dir, name)
		if err := write(in); err != nil {
			t.Fatal(err)
		}
		for _, metric := range []string{"l2", "ip", "cosine"} {
			t.Run(name+" "+metric, func(t *testing.T) {
				out := filepath.Join(dir, name+"."+metric+".vlc")
				args := []string{"compress", in, "-o", out, "-metric", metric, "-anchors", "4", "-quiet"}
				if strings.HasSuffix(name, ".f16") {
					args = append(args, "-dim", "6")
				}
				mustVLC(t, args...)
				m := infoJSON(t, out)
				if m["vectors"] != 60.0 || m["dim"] != 6.0 || m["metric"] != metric || m["anchors"] != 4.0 {
					t.Errorf("info: vectors %v dim %v metric %v anchors %v", m["vectors"], m["dim"], m["metric"], m["anchors"])
				}
				mustVLC(t, "verify", out)
				// Every query is a base vector: with all lists scanned and
				// exact re-ranking, the top hit is the query itself for l2
				// and cosine.
				so, _ := mustVLC(t, "search", out, "-query", query, "-k", "3", "-nprobe", "4", "-rerank", in)
				hits := parseHits(t, so)
				checkHits(t, hits, 5, 3, 60)
				if metric != "ip" {
					for q := range 5 {
						if hits[q*3].id != q {
							t.Errorf("query %d: top hit %d, want itself", q, hits[q*3].id)
						}
					}
				}
			})
		}
	}
}

// TestCompressSummary checks the summary printed without -quiet: it goes to
// stderr, stdout stays empty.
func TestCompressSummary(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "v.f16"), filepath.Join(dir, "v.vlc")
	if err := vecfile.WriteF16(in, randomRows(100, 8, 3)); err != nil {
		t.Fatal(err)
	}
	stdout, errs := mustVLC(t, "compress", in, "-dim", "8", "-o", out, "-anchors", "5", "-max-iter", "3")
	if stdout != "" {
		t.Errorf("compress wrote to stdout: %q", stdout)
	}
	for _, w := range []string{"compressed " + in + " -> " + out, "100 x 8", "anchors       5", "8 bits per dimension, metric l2", "bytes/vector", "size ratio"} {
		if !strings.Contains(errs, w) {
			t.Errorf("summary lacks %q:\n%s", w, errs)
		}
	}
}

// TestCompressFailureKeepsExistingIndex: a compress that fails leaves an
// index already at -o byte-identical, and no temporary files behind.
func TestCompressFailureKeepsExistingIndex(t *testing.T) {
	dir := t.TempDir()
	in := badInputs(t, dir)
	good := filepath.Join(dir, "good.vlc")
	mustVLC(t, "compress", in["ok"], "-dim", "4", "-o", good, "-anchors", "3", "-quiet")
	before := readFile(t, good)
	tests := []struct {
		name string
		args []string
	}{
		{"bits 3", []string{"compress", in["ok"], "-dim", "4", "-bits", "3", "-o", good}},
		{"NaN input", []string{"compress", in["nan"], "-dim", "4", "-o", good}},
		{"too few vectors", []string{"compress", in["ten"], "-dim", "4", "-anchors", "20", "-o", good}},
		{"unknown backend", []string{"compress", in["ok"], "-dim", "4", "-backend", "nope", "-o", good}},
		{"unknown metric", []string{"compress", in["ok"], "-dim", "4", "-metric", "nope", "-o", good}},
		{"empty input", []string{"compress", in["empty"], "-dim", "4", "-o", good}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runVLC(t, tc.args...)
			checkOneLineError(t, code, errs)
			if after := readFile(t, good); !bytes.Equal(after, before) {
				t.Errorf("the existing index changed (%d bytes, was %d)", len(after), len(before))
			}
			mustVLC(t, "verify", good)
			assertNoTempFiles(t, dir)
		})
	}
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", filepath.Join(dir, e.Name()))
		}
	}
}

// TestCompressMaxIter: -max-iter bounds the training iterations (recorded in
// the index), and a negative value is an error.
func TestCompressMaxIter(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "v.f16")
	if err := vecfile.WriteF16(in, randomRows(200, 8, 9)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "v.vlc")
	mustVLC(t, "compress", in, "-dim", "8", "-anchors", "10", "-max-iter", "2", "-o", out, "-quiet")
	if m := infoJSON(t, out); m["iterations"].(float64) > 2 || m["iterations"].(float64) < 1 {
		t.Errorf("-max-iter 2: index records %v iterations", m["iterations"])
	}

	neg := filepath.Join(dir, "neg.vlc")
	code, _, errs := runVLC(t, "compress", in, "-dim", "8", "-max-iter", "-5", "-o", neg, "-quiet")
	if code != 1 {
		t.Fatalf("-max-iter -5: exit %d, want 1; stderr %q", code, errs)
	}
	checkOneLineError(t, code, errs)
	if !strings.HasPrefix(errs, "vlc compress: ") || !strings.Contains(errs, "-max-iter -5") {
		t.Errorf("-max-iter -5: stderr %q", errs)
	}
	if _, err := os.Stat(neg); err == nil {
		t.Errorf("a failing compress created %s", neg)
	}
}

// TestCompressCanceled: a canceled context stops compress with status 1,
// names the cause, and leaves no index and no temporary file.
func TestCompressCanceled(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "v.f16"), filepath.Join(dir, "v.vlc")
	if err := vecfile.WriteF16(in, randomRows(200, 8, 9)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"compress", in, "-dim", "8", "-o", out, "-quiet"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "context canceled") {
		t.Errorf("stderr %q does not name the cancellation", stderr.String())
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a canceled compress created %s", out)
	}
	assertNoTempFiles(t, dir)

	// search stops too.
	mustVLC(t, "compress", in, "-dim", "8", "-o", out, "-quiet")
	q := filepath.Join(dir, "q.fvecs")
	if err := vecfile.WriteFvecs(q, randomRows(5, 8, 1)); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code = run(ctx, []string{"search", out, "-query", q}, &stdout, &stderr)
	checkOneLineError(t, code, stderr.String())
	if !strings.Contains(stderr.String(), "context canceled") || stdout.Len() != 0 {
		t.Errorf("canceled search: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// TestCompressFloat32BeyondFloat16 compresses float32 input holding a finite
// value larger than float16 can hold (65504); training runs on float16.
// Compress must either refuse it with one line naming the lowest such row
// and its column, or write an index that opens. (Before a fix in vlc.go,
// compress exited 0 and wrote an index that every command rejected with
// "corrupt index: an anchor holds NaN".)
func TestCompressFloat32BeyondFloat16(t *testing.T) {
	dir := t.TempDir()
	small := randomRows(50, 4, 1)
	small[9][2] = 1e5
	// Over several 1024-row blocks: the lowest bad row wins.
	large := randomRows(2200, 4, 2)
	large[2100][0] = -7e4
	large[1100][3] = 1e6
	tests := []struct {
		name     string
		rows     [][]float32
		row, col string
	}{
		{"small", small, "row 9", "column 2"},
		{"large", large, "row 1100", "column 3"},
	}
	for _, tc := range tests {
		for _, ext := range []string{".fvecs", ".npy"} {
			in := filepath.Join(dir, tc.name+ext)
			var err error
			if ext == ".npy" {
				err = vecfile.WriteNpy(in, tc.rows, "<f4")
			} else {
				err = vecfile.WriteFvecs(in, tc.rows)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, metric := range []string{"l2", "ip", "cosine"} {
				t.Run(tc.name+ext+" "+metric, func(t *testing.T) {
					out := filepath.Join(dir, tc.name+ext+"."+metric+".vlc")
					code, _, errs := runVLC(t, "compress", in, "-o", out, "-metric", metric, "-anchors", "3", "-max-iter", "5", "-quiet")
					if code != 0 {
						checkOneLineError(t, code, errs)
						for _, w := range []string{in, tc.row, tc.col} {
							if !strings.Contains(errs, w) {
								t.Errorf("stderr %q does not contain %q", errs, w)
							}
						}
						if _, err := os.Stat(out); err == nil {
							t.Errorf("a failing compress created %s", out)
						}
						return
					}
					if vcode, _, verrs := runVLC(t, "verify", out); vcode != 0 {
						t.Errorf("compress exited 0 but verify fails: %s", verrs)
					}
				})
			}
		}
	}
}

// Asking for a GPU backend this binary was built without says how to
// build it in; "auto" passes over it without a word.
func TestBackendNotBuilt(t *testing.T) {
	dir := t.TempDir()
	in := badInputs(t, dir)
	for _, c := range []struct{ name, tag string }{{"cuda", "-tags cuda"}, {"webgpu", "-tags webgpu"}} {
		if slices.Contains(device.Backends(), c.name) {
			continue // built in
		}
		code, _, errs := runVLC(t, "compress", in["ok"], "-dim", "4", "-o", filepath.Join(dir, "x.vlc"), "-backend", c.name)
		checkOneLineError(t, code, errs)
		if !strings.Contains(errs, `"`+c.name+`" is not built into this binary`) || !strings.Contains(errs, "build with "+c.tag) {
			t.Errorf("-backend %s: stderr %q", c.name, errs)
		}
	}
	if len(device.Backends()) == 1 {
		_, errs := mustVLC(t, "compress", in["ok"], "-dim", "4", "-o", filepath.Join(dir, "y.vlc"), "-anchors", "2")
		if strings.Contains(errs, "skipped") {
			t.Errorf("-backend auto on a CPU-only build logged a skip:\n%s", errs)
		}
	}
}

// TestDeterminismSmall checks seeds on a small input: the same seed gives
// the same bytes, another seed other bytes; and the default output name.
func TestDeterminismSmall(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "small.npy")
	if err := vecfile.WriteNpy(in, randomRows(300, 16, 7), "<f4"); err != nil {
		t.Fatal(err)
	}
	a, b, c := filepath.Join(dir, "a.vlc"), filepath.Join(dir, "b.vlc"), filepath.Join(dir, "c.vlc")
	mustVLC(t, "compress", in, "-o", a, "-seed", "5", "-quiet")
	mustVLC(t, "compress", "-seed", "5", "-quiet", "-o", b, in)
	mustVLC(t, "compress", in, "-o", c, "-seed", "6", "-quiet")
	if !bytes.Equal(readFile(t, a), readFile(t, b)) {
		t.Error("same seed, different flag order: index files differ")
	}
	if bytes.Equal(readFile(t, a), readFile(t, c)) {
		t.Error("seeds 5 and 6 gave byte-identical indexes")
	}
	// Without -o the index goes next to the input with the extension .vlc.
	mustVLC(t, "compress", in, "-seed", "5", "-quiet")
	if !bytes.Equal(readFile(t, filepath.Join(dir, "small.vlc")), readFile(t, a)) {
		t.Error("default output small.vlc differs from -o a.vlc")
	}
}
