package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

// The deep2k test set: 2000 base vectors of dimension 96 (float16), 200
// queries and their exact ground truth.
const (
	deepDir   = "../../testdata/deep2k"
	deepBase  = deepDir + "/base.f16"
	deepQuery = deepDir + "/query.fvecs"
	deepGT    = deepDir + "/groundtruth.ivecs"
	deepN     = 2000
	deepNQ    = 200
	deepDim   = 96
	// anchors picked by default for 2000 vectors: round(sqrt(2000)).
	deepAnchors = 45
)

// runVLC runs one command line in-process and returns its exit status, stdout
// and stderr. run sets the process-wide slog default, so tests that call it
// must not run in parallel.
func runVLC(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// mustVLC runs a command line that must succeed.
func mustVLC(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	code, out, errs := runVLC(t, args...)
	if code != 0 {
		t.Fatalf("vlc %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, errs)
	}
	return out, errs
}

// checkOneLineError checks the contract for a failing command: exit status
// 1, exactly one line on stderr, and nothing that looks like a crash.
func checkOneLineError(t *testing.T, code int, stderr string) {
	t.Helper()
	t.Logf("stderr: %s", strings.TrimSuffix(stderr, "\n"))
	if code != 1 {
		t.Errorf("exit status %d, want 1 (stderr %q)", code, stderr)
	}
	if n := strings.Count(stderr, "\n"); n != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr has %d newlines, want exactly one line: %q", n, stderr)
	}
	for _, bad := range []string{"panic", "goroutine", "internal error"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("stderr contains %q: %q", bad, stderr)
		}
	}
}

var (
	deepOnce  sync.Once
	deepIndex string // built once from deep2k with -seed 1
	deepErr   string
	sharedDir string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vlc-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sharedDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// deepIndexPath returns the path of the deep2k index, building it on first
// use with `compress BASE -dim 96 -o X -seed 1 -quiet` (flags after the
// positional argument).
func deepIndexPath(t *testing.T) string {
	t.Helper()
	deepOnce.Do(func() {
		p := filepath.Join(sharedDir, "deep.vlc")
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"compress", deepBase, "-dim", "96", "-o", p, "-seed", "1", "-quiet"}, &out, &errb)
		if code != 0 {
			deepErr = fmt.Sprintf("compress exit %d: %s", code, errb.String())
			return
		}
		if out.Len() != 0 {
			deepErr = fmt.Sprintf("compress -quiet wrote to stdout: %q", out.String())
			return
		}
		deepIndex = p
	})
	if deepErr != "" {
		t.Fatal(deepErr)
	}
	return deepIndex
}

// randomRows returns n deterministic pseudo-random rows of dimension d in [-1, 1).
func randomRows(n, d int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 42))
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, d)
		for j := range rows[i] {
			rows[i][j] = r.Float32()*2 - 1
		}
	}
	return rows
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func evalJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, _ := mustVLC(t, append([]string{"eval"}, args...)...)
	if n := strings.Count(out, "\n"); n != 1 {
		t.Fatalf("eval -json printed %d lines, want 1: %q", n, out)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("eval -json output %q: %v", out, err)
	}
	if dec.More() {
		t.Fatalf("eval -json printed more than one JSON value: %q", out)
	}
	return m
}

func TestEvalDeep2k(t *testing.T) {
	ix := deepIndexPath(t)
	wantKeys := []string{"bytes_per_vector", "k", "nprobe", "qps", "recall@1", "recall@10", "size_ratio"}

	tests := []struct {
		name        string
		args        []string
		wantNProbe  float64
		minRecall10 float64
	}{
		{"gt nprobe 45", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "45", "-json"}, 45, 0.99},
		{"nprobe clamped to anchors", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "1000", "-json"}, deepAnchors, 0.99},
		{"flags before index", []string{"-json", "-nprobe", "8", "-query", deepQuery, "-gt", deepGT, ix}, 8, 0.5},
		{"exact ground truth from base", []string{ix, "-query", deepQuery, "-base", deepBase, "-nprobe", "45", "-json"}, 45, 0.99},
		{"rerank", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "45", "-json", "-rerank", deepBase}, 45, 0.999},
		{"nprobe 0 means 1", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "0", "-json"}, 1, 0},
		{"negative nprobe means 1", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "-3", "-json"}, 1, 0},
	}
	results := map[string]map[string]any{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := evalJSON(t, tc.args...)
			results[tc.name] = m
			var keys []string
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, wantKeys) {
				t.Fatalf("keys %v, want exactly %v", keys, wantKeys)
			}
			for _, k := range keys {
				if _, ok := m[k].(float64); !ok {
					t.Errorf("%s is %T (%v), want a number", k, m[k], m[k])
				}
			}
			r1, r10 := m["recall@1"].(float64), m["recall@10"].(float64)
			if r10 < tc.minRecall10 || r10 > 1 {
				t.Errorf("recall@10 = %v, want in [%v, 1]", r10, tc.minRecall10)
			}
			if r1 < 0 || r1 > 1 {
				t.Errorf("recall@1 = %v, want in [0, 1]", r1)
			}
			if got := m["nprobe"].(float64); got != tc.wantNProbe {
				t.Errorf("nprobe = %v, want %v", got, tc.wantNProbe)
			}
			if got := m["k"].(float64); got != 10 {
				t.Errorf("k = %v, want 10 (the default)", got)
			}
			if sr := m["size_ratio"].(float64); sr <= 0 || sr >= 0.7 {
				t.Errorf("size_ratio = %v, want in (0, 0.7)", sr)
			}
			if q := m["qps"].(float64); !(q > 0) || math.IsInf(q, 0) {
				t.Errorf("qps = %v, want a positive finite number", q)
			}
			st, err := os.Stat(ix)
			if err != nil {
				t.Fatal(err)
			}
			wantBPV := float64(st.Size()) / deepN
			if bpv := m["bytes_per_vector"].(float64); math.Abs(bpv-wantBPV) > 1e-9 {
				t.Errorf("bytes_per_vector = %v, want %v (file size / n)", bpv, wantBPV)
			}
			wantRatio := float64(st.Size()) / (2 * deepN * deepDim)
			if sr := m["size_ratio"].(float64); math.Abs(sr-wantRatio) > 1e-9 {
				t.Errorf("size_ratio = %v, want %v (file size / float16 size)", sr, wantRatio)
			}
		})
	}
	gt, base := results["gt nprobe 45"], results["exact ground truth from base"]
	if gt != nil && base != nil {
		a, b := gt["recall@10"].(float64), base["recall@10"].(float64)
		if math.Abs(a-b) > 0.01 {
			t.Errorf("recall@10 with -gt %v and with -base %v differ by more than 0.01", a, b)
		}
	}
	// nprobe beyond the number of lists scans every list, like nprobe 45.
	if a, b := results["gt nprobe 45"], results["nprobe clamped to anchors"]; a != nil && b != nil {
		if a["recall@10"] != b["recall@10"] || a["recall@1"] != b["recall@1"] {
			t.Errorf("nprobe 1000 recall %v/%v, nprobe 45 %v/%v: want equal", b["recall@1"], b["recall@10"], a["recall@1"], a["recall@10"])
		}
	}
}

func TestEvalText(t *testing.T) {
	ix := deepIndexPath(t)
	out, _ := mustVLC(t, "eval", ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "8")
	for _, want := range []string{"queries          200 (nprobe 8, no re-rank)", "recall@1 ", "recall@10 ", "qps ", "bytes/vector ", "size ratio "} {
		if !strings.Contains(out, want) {
			t.Errorf("eval output lacks %q:\n%s", want, out)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	ix := deepIndexPath(t)
	dir := t.TempDir()
	shortGT := filepath.Join(dir, "short.ivecs")
	if err := vecfile.WriteIvecs(shortGT, [][]int32{{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	narrowGT := filepath.Join(dir, "narrow.ivecs")
	rows := make([][]int32, deepNQ)
	for i := range rows {
		rows[i] = []int32{1, 2, 3}
	}
	if err := vecfile.WriteIvecs(narrowGT, rows); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"neither gt nor base", []string{"eval", ix, "-query", deepQuery}, []string{"-gt", "-base"}},
		{"no query", []string{"eval", ix, "-gt", deepGT}, []string{"-query is required"}},
		{"gt too few rows", []string{"eval", ix, "-query", deepQuery, "-gt", shortGT}, []string{shortGT, "1 rows for 200 queries"}},
		{"gt rows too short", []string{"eval", ix, "-query", deepQuery, "-gt", narrowGT}, []string{narrowGT, "row 0", "3 ids"}},
		{"k zero", []string{"eval", ix, "-query", deepQuery, "-gt", deepGT, "-k", "0"}, []string{"-k must be at least 1, got 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runVLC(t, tc.args...)
			checkOneLineError(t, code, errs)
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not contain %q", errs, w)
				}
			}
		})
	}
}

// TestFlagOrder builds the deep2k index with the flags before, between and
// after the positional argument: the files must be byte-identical, which
// also shows that the CLI path is deterministic.
func TestFlagOrder(t *testing.T) {
	ref := readFile(t, deepIndexPath(t)) // flags after the input
	dir := t.TempDir()
	tests := []struct {
		name string
		args func(out string) []string
	}{
		{"flags before", func(out string) []string {
			return []string{"compress", "-dim", "96", "-o", out, "-seed", "1", "-quiet", deepBase}
		}},
		{"flags around", func(out string) []string {
			return []string{"compress", "-dim", "96", "-quiet", deepBase, "-o", out, "-seed", "1"}
		}},
		{"double dash flags", func(out string) []string {
			return []string{"compress", "--dim=96", "--o=" + out, deepBase, "--seed=1", "--quiet"}
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && i > 0 {
				t.Skip("short")
			}
			out := filepath.Join(dir, fmt.Sprintf("%d.vlc", i))
			mustVLC(t, tc.args(out)...)
			if got := readFile(t, out); !bytes.Equal(got, ref) {
				t.Errorf("%s: %d bytes differ from the reference index (%d bytes)", tc.name, len(got), len(ref))
			}
		})
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

type hitLine struct {
	q, rank, id int
	dist        float64
}

func parseHits(t *testing.T, out string) []hitLine {
	t.Helper()
	if out != "" && !strings.HasSuffix(out, "\n") {
		t.Fatalf("search output does not end in a newline")
	}
	var hits []hitLine
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" && out == "" {
			break
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("line %d %q: %d tab-separated fields, want 4", i+1, line, len(f))
		}
		var h hitLine
		var err error
		for j, p := range []*int{&h.q, &h.rank, &h.id} {
			if *p, err = strconv.Atoi(f[j]); err != nil {
				t.Fatalf("line %d %q: field %d: %v", i+1, line, j+1, err)
			}
		}
		if h.dist, err = strconv.ParseFloat(f[3], 64); err != nil {
			t.Fatalf("line %d %q: distance: %v", i+1, line, err)
		}
		hits = append(hits, h)
	}
	return hits
}

// checkHits checks that hits hold, in order, perQuery hits for each of nq
// queries, ranks 1..perQuery, distinct ids in [0, n), distances
// non-decreasing within a query, and returns the ids per query.
func checkHits(t *testing.T, hits []hitLine, nq, perQuery, n int) [][]int {
	t.Helper()
	if len(hits) != nq*perQuery {
		t.Fatalf("%d lines, want %d (%d queries x %d)", len(hits), nq*perQuery, nq, perQuery)
	}
	ids := make([][]int, nq)
	for i, h := range hits {
		q, r := i/perQuery, i%perQuery+1
		if h.q != q || h.rank != r {
			t.Fatalf("line %d: query %d rank %d, want query %d rank %d", i+1, h.q, h.rank, q, r)
		}
		if h.id < 0 || h.id >= n {
			t.Fatalf("line %d: id %d out of [0, %d)", i+1, h.id, n)
		}
		if math.IsNaN(h.dist) || math.IsInf(h.dist, 0) {
			t.Fatalf("line %d: distance %v", i+1, h.dist)
		}
		if r > 1 && h.dist < hits[i-1].dist {
			t.Fatalf("line %d: distance %v after %v: not non-decreasing", i+1, h.dist, hits[i-1].dist)
		}
		if slices.Contains(ids[q], h.id) {
			t.Fatalf("line %d: id %d repeated for query %d", i+1, h.id, q)
		}
		ids[q] = append(ids[q], h.id)
	}
	return ids
}

func TestSearchDeep2k(t *testing.T) {
	ix := deepIndexPath(t)
	out, errs := mustVLC(t, "search", ix, "-query", deepQuery, "-k", "5", "-nprobe", "8")
	if errs != "" {
		t.Errorf("search wrote to stderr: %q", errs)
	}
	ids := checkHits(t, parseHits(t, out), deepNQ, 5, deepN)

	// The first hit is usually the true nearest neighbour.
	gt, err := vecfile.ReadIvecs(deepGT)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for q := range ids {
		if ids[q][0] == int(gt[q][0]) {
			found++
		}
	}
	if found < deepNQ*9/10 {
		t.Errorf("top hit is the true nearest neighbour for %d of %d queries, want >= 90%%", found, deepNQ)
	}

	// Flags first, and the same search again: identical output.
	out2, _ := mustVLC(t, "search", "-nprobe", "8", "-k", "5", "-query", deepQuery, ix)
	if out2 != out {
		t.Error("search with flags before the index printed something else")
	}

	// Re-ranking with the original vectors: exact distances, the top hit
	// is the true nearest neighbour for (nearly) every query.
	out3, _ := mustVLC(t, "search", ix, "-query", deepQuery, "-k", "10", "-nprobe", "45", "-rerank", deepBase)
	ids3 := checkHits(t, parseHits(t, out3), deepNQ, 10, deepN)
	found = 0
	for q := range ids3 {
		if ids3[q][0] == int(gt[q][0]) {
			found++
		}
	}
	if found < deepNQ*99/100 {
		t.Errorf("with -rerank the top hit is the true nearest neighbour for %d of %d queries, want >= 99%%", found, deepNQ)
	}
}

// TestSearchKLargerThanN searches a 30-vector index for 50 hits: every
// query gets exactly the 30 vectors.
func TestSearchKLargerThanN(t *testing.T) {
	dir := t.TempDir()
	base, query, ix := filepath.Join(dir, "tiny.f16"), filepath.Join(dir, "q.fvecs"), filepath.Join(dir, "tiny.vlc")
	const n, d, nq = 30, 8, 4
	if err := vecfile.WriteF16(base, randomRows(n, d, 1)); err != nil {
		t.Fatal(err)
	}
	if err := vecfile.WriteFvecs(query, randomRows(nq, d, 2)); err != nil {
		t.Fatal(err)
	}
	mustVLC(t, "compress", base, "-dim", "8", "-anchors", "3", "-o", ix, "-quiet")
	info := infoJSON(t, ix)
	if info["anchors"] != 3.0 || info["vectors"] != 30.0 {
		t.Fatalf("info: anchors %v vectors %v, want 3 and 30", info["anchors"], info["vectors"])
	}
	for _, nprobe := range []string{"1", "3", "100"} {
		t.Run("nprobe "+nprobe, func(t *testing.T) {
			out, _ := mustVLC(t, "search", ix, "-query", query, "-k", "50", "-nprobe", nprobe)
			hits := parseHits(t, out)
			if nprobe == "1" {
				// One list holds fewer than 30 vectors unless it is the only
				// non-empty one; just check the shape per query.
				perQ := map[int]int{}
				for _, h := range hits {
					perQ[h.q]++
				}
				for q := range nq {
					if perQ[q] < 1 || perQ[q] > n {
						t.Errorf("query %d: %d hits with nprobe 1, want 1..%d", q, perQ[q], n)
					}
				}
				return
			}
			ids := checkHits(t, hits, nq, n, n)
			for q, got := range ids {
				s := slices.Sorted(slices.Values(got))
				for i, id := range s {
					if id != i {
						t.Fatalf("query %d: ids %v, want each of 0..29 once", q, s)
					}
				}
			}
		})
	}
}

func TestSearchErrors(t *testing.T) {
	ix := deepIndexPath(t)
	dir := t.TempDir()
	q95 := filepath.Join(dir, "q95.fvecs")
	if err := vecfile.WriteFvecs(q95, randomRows(3, 95, 3)); err != nil {
		t.Fatal(err)
	}
	qnan := filepath.Join(dir, "qnan.fvecs")
	rows := randomRows(4, deepDim, 4)
	rows[2][7] = float32(math.NaN())
	if err := vecfile.WriteFvecs(qnan, rows); err != nil {
		t.Fatal(err)
	}
	smallBase := filepath.Join(dir, "small.f16")
	if err := vecfile.WriteF16(smallBase, randomRows(10, deepDim, 5)); err != nil {
		t.Fatal(err)
	}
	notIndex := filepath.Join(dir, "not.vlc")
	if err := os.WriteFile(notIndex, []byte("this is not an index at all, just text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"query of dimension 95", []string{"search", ix, "-query", q95, "-k", "5"}, []string{q95, "95", "96"}},
		{"query with NaN", []string{"search", ix, "-query", qnan}, []string{qnan, "row 2", "column 7", "NaN"}},
		{"no query", []string{"search", ix}, []string{"-query is required"}},
		{"k zero", []string{"search", ix, "-query", deepQuery, "-k", "0"}, []string{"-k must be at least 1, got 0"}},
		{"rerank file of other length", []string{"search", ix, "-query", deepQuery, "-rerank", smallBase}, []string{smallBase, "10 vectors", "2000"}},
		{"index missing", []string{"search", filepath.Join(dir, "nope.vlc"), "-query", deepQuery}, []string{"nope.vlc", "no such file"}},
		{"not an index", []string{"search", notIndex, "-query", deepQuery}, []string{notIndex, "not a vlc index"}},
		{"query missing", []string{"search", ix, "-query", filepath.Join(dir, "nope.fvecs")}, []string{"nope.fvecs", "no such file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runVLC(t, tc.args...)
			checkOneLineError(t, code, errs)
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not contain %q", errs, w)
				}
			}
		})
	}
}

func infoJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	out, _ := mustVLC(t, "info", path, "-json")
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("info -json output %q: %v", out, err)
	}
	return m
}

type sectionInfo struct {
	Kind   string `json:"kind"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	CRC    string `json:"crc32c"`
}

func sections(t *testing.T, path string) []sectionInfo {
	t.Helper()
	out, _ := mustVLC(t, "info", "-json", path)
	var v struct {
		Sections []sectionInfo `json:"sections"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v.Sections
}

func TestInfoVerify(t *testing.T) {
	ix := deepIndexPath(t)
	st, err := os.Stat(ix)
	if err != nil {
		t.Fatal(err)
	}

	out, _ := mustVLC(t, "info", ix)
	for _, want := range []string{"2000 x 96", "metric l2", "anchors     45", "8 bits per dimension", fmt.Sprintf("%d bytes", st.Size())} {
		if !strings.Contains(out, want) {
			t.Errorf("info output lacks %q:\n%s", want, out)
		}
	}

	m := infoJSON(t, ix)
	for k, want := range map[string]any{
		"vectors": 2000.0, "dim": 96.0, "anchors": 45.0, "bits": 8.0, "metric": "l2",
		"seed": 1.0, "bytes": float64(st.Size()), "path": ix,
	} {
		if m[k] != want {
			t.Errorf("info -json %s = %v, want %v", k, m[k], want)
		}
	}
	for _, k := range []string{"list_min", "list_median", "list_max"} {
		if v, _ := m[k].(float64); v < 1 || v > deepN {
			t.Errorf("info -json %s = %v", k, m[k])
		}
	}
	if !(m["list_min"].(float64) <= m["list_median"].(float64) && m["list_median"].(float64) <= m["list_max"].(float64)) {
		t.Errorf("list sizes min %v median %v max %v are not ordered", m["list_min"], m["list_median"], m["list_max"])
	}

	secs := sections(t, ix)
	var kinds []string
	end := int64(0)
	for _, s := range secs {
		kinds = append(kinds, s.Kind)
		if s.Offset < end || s.Length <= 0 || s.Offset+s.Length > st.Size() {
			t.Errorf("section %+v out of order or out of the %d-byte file", s, st.Size())
		}
		if len(s.CRC) != 8 {
			t.Errorf("section %s crc32c %q, want 8 hex digits", s.Kind, s.CRC)
		}
		end = s.Offset + s.Length
	}
	if want := []string{"META", "ANCH", "LIST", "ROWS", "PARM", "CODE"}; !slices.Equal(kinds, want) {
		t.Errorf("sections %v, want %v", kinds, want)
	}

	out, errs := mustVLC(t, "verify", ix)
	if !strings.Contains(out, "ok") || !strings.Contains(out, "6 sections") {
		t.Errorf("verify output %q", out)
	}
	if errs != "" {
		t.Errorf("verify wrote to stderr: %q", errs)
	}
}

func copyFile(t *testing.T, src, dst string, edit func([]byte) []byte) {
	t.Helper()
	b := readFile(t, src)
	b = edit(slices.Clone(b))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCorruption(t *testing.T) {
	ix := deepIndexPath(t)
	dir := t.TempDir()
	secs := sections(t, ix)
	if len(secs) == 0 {
		t.Fatal("info -json lists no sections")
	}
	for _, s := range secs {
		t.Run("flip "+s.Kind, func(t *testing.T) {
			bad := filepath.Join(dir, "flip-"+s.Kind+".vlc")
			copyFile(t, ix, bad, func(b []byte) []byte {
				b[s.Offset+s.Length/2] ^= 0x40
				return b
			})
			code, out, errs := runVLC(t, "verify", bad)
			checkOneLineError(t, code, errs)
			if out != "" {
				t.Errorf("verify printed %q on stdout", out)
			}
			for _, w := range []string{s.Kind, bad} {
				if !strings.Contains(errs, w) {
					t.Errorf("verify stderr %q does not name %q", errs, w)
				}
			}
			// search and eval verify the checksums too.
			code, out, errs = runVLC(t, "search", bad, "-query", deepQuery, "-k", "3")
			checkOneLineError(t, code, errs)
			if out != "" || !strings.Contains(errs, s.Kind) {
				t.Errorf("search on a damaged %s: stdout %d bytes, stderr %q", s.Kind, len(out), errs)
			}
			// info does not read the sections' data; it must not crash
			// (META damage, which info decodes, may be reported or not).
			code, _, errs = runVLC(t, "info", bad)
			if code != 0 {
				checkOneLineError(t, code, errs)
			}
		})
	}

	// Damage outside the sections: the header, the table and the zero
	// padding between sections are covered too.
	var listSec sectionInfo
	for _, s := range secs {
		if s.Kind == "LIST" {
			listSec = s
		}
	}
	if listSec.Length%64 == 0 {
		t.Fatalf("LIST section %+v has no padding to damage", listSec)
	}
	others := []struct {
		name string
		off  int64
		want []string
	}{
		{"header size field", 20, []string{"header checksum mismatch"}},
		{"table entry", 64 + 32 + 10, []string{"header checksum mismatch"}},
		{"padding after LIST", listSec.Offset + listSec.Length + 1, []string{"padding", "LIST"}},
		{"magic", 0, []string{"not a vlc index"}},
		{"version", 8, []string{"version"}},
	}
	for _, o := range others {
		t.Run("flip "+o.name, func(t *testing.T) {
			bad := filepath.Join(dir, "flip-"+strings.ReplaceAll(o.name, " ", "-")+".vlc")
			copyFile(t, ix, bad, func(b []byte) []byte {
				b[o.off] ^= 0x01
				return b
			})
			code, out, errs := runVLC(t, "verify", bad)
			checkOneLineError(t, code, errs)
			if out != "" {
				t.Errorf("verify printed %q on stdout", out)
			}
			for _, w := range append(o.want, bad) {
				if !strings.Contains(errs, w) {
					t.Errorf("verify stderr %q does not contain %q", errs, w)
				}
			}
		})
	}

	cuts := []struct {
		name string
		size func(n int) int
	}{
		{"half", func(n int) int { return n / 2 }},
		{"half on a 64-byte boundary", func(n int) int { return n / 2 &^ 63 }},
		{"last 64 bytes", func(n int) int { return n - 64 }},
		{"last byte", func(n int) int { return n - 1 }},
		{"header only", func(n int) int { return 100 }},
		{"magic only", func(n int) int { return 4 }},
		{"empty", func(n int) int { return 0 }},
	}
	for _, c := range cuts {
		t.Run("truncate "+c.name, func(t *testing.T) {
			bad := filepath.Join(dir, "cut-"+strings.ReplaceAll(c.name, " ", "-")+".vlc")
			copyFile(t, ix, bad, func(b []byte) []byte { return b[:c.size(len(b))] })
			for _, cmd := range [][]string{
				{"search", bad, "-query", deepQuery, "-k", "5"},
				{"verify", bad},
				{"info", bad},
				{"eval", bad, "-query", deepQuery, "-gt", deepGT},
			} {
				code, out, errs := runVLC(t, cmd...)
				checkOneLineError(t, code, errs)
				if out != "" {
					t.Errorf("%s: stdout %q, want nothing", cmd[0], out)
				}
				if !strings.Contains(errs, bad) {
					t.Errorf("%s: stderr %q does not name the file", cmd[0], errs)
				}
			}
		})
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string // help asked for goes to stdout
		stderr []string // the list after a missing command goes to stderr
	}{
		{"no args", nil, 1, nil, []string{"usage: vlc COMMAND", "compress", "search", "eval", "info", "verify", "version"}},
		{"-h", []string{"-h"}, 0, []string{"usage: vlc COMMAND", "vlc help COMMAND"}, nil},
		{"help", []string{"help"}, 0, []string{"usage: vlc COMMAND", "test-webgpu"}, nil},
		{"help compress", []string{"help", "compress"}, 0, []string{"usage of vlc compress", "-dim", "-bits", "-anchors"}, nil},
		{"compress -h", []string{"compress", "-h"}, 0, []string{"usage of vlc compress", "-dim", "-bits", "-anchors", "-metric", "-backend", "-seed", "-quiet"}, nil},
		{"compress file -h", []string{"compress", "x.f16", "-h"}, 0, []string{"usage of vlc compress"}, nil},
		{"search -h", []string{"search", "-h"}, 0, []string{"usage of vlc search", "-query", "-k", "-nprobe", "-rerank"}, nil},
		{"eval -help", []string{"eval", "-help"}, 0, []string{"usage of vlc eval", "-gt", "-base", "-json"}, nil},
		{"help info", []string{"help", "info"}, 0, []string{"usage of vlc info", "-json"}, nil},
		{"verify -h", []string{"verify", "-h"}, 0, []string{"usage of vlc verify"}, nil},
		{"help test-cuda", []string{"help", "test-cuda"}, 0, []string{"usage of vlc test-cuda", "-large"}, nil},
		{"help nope", []string{"help", "nope"}, 1, nil, []string{`unknown command "nope"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runVLC(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, errs)
			}
			for _, c := range []struct {
				name, got string
				want      []string
			}{{"stdout", out, tc.stdout}, {"stderr", errs, tc.stderr}} {
				if len(c.want) == 0 && c.got != "" {
					t.Errorf("%s %q, want nothing", c.name, c.got)
				}
				for _, w := range c.want {
					if !strings.Contains(c.got, w) {
						t.Errorf("%s lacks %q:\n%s", c.name, w, c.got)
					}
				}
			}
		})
	}
}

// vlc version names the module version, the Go version and the backends.
func TestVersion(t *testing.T) {
	out, _ := mustVLC(t, "version")
	if !strings.HasPrefix(out, "vlc ") || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, "backends: ") || !strings.Contains(out, "cpu") {
		t.Errorf("version: %q", out)
	}
}

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
