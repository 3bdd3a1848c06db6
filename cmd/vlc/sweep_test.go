package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/vecfile"
)

func init() {
	// Speed is not what these tests check: repeat short passes for less
	// long than a real sweep does.
	sweepMinTime = 10 * time.Millisecond
}

var (
	plain45Once sync.Once
	plain45     map[string]any
)

// plainEval45 returns `eval -nprobe 45 -json` on the deep2k index, run once.
func plainEval45(t *testing.T) map[string]any {
	t.Helper()
	plain45Once.Do(func() {
		plain45 = evalJSON(t, deepIndexPath(t), "-query", deepQuery, "-gt", deepGT, "-nprobe", "45", "-json")
	})
	if plain45 == nil {
		t.Fatal("eval -nprobe 45 failed before")
	}
	return plain45
}

var (
	deep4Once sync.Once
	deep4Path string
	deep4Err  string
)

// deep4IndexPath returns a 4-bit index of deep2k, built once.
func deep4IndexPath(t *testing.T) string {
	t.Helper()
	deep4Once.Do(func() {
		p := filepath.Join(sharedDir, "deep4.vlc")
		code, _, errs := runVLC(t, "compress", deepBase, "-dim", "96", "-bits", "4", "-seed", "1", "-o", p, "-quiet")
		if code != 0 {
			deep4Err = fmt.Sprintf("compress -bits 4: exit %d: %s", code, errs)
			return
		}
		deep4Path = p
	})
	if deep4Err != "" {
		t.Fatal(deep4Err)
	}
	return deep4Path
}

type sweepTableRow struct {
	index             string
	nprobe            int
	recall1, recall10 float64
	cells             []string
}

// parseSweepTable checks the table's shape (a header line, then rows whose
// lines are as long as the header: aligned columns) and returns the rows.
func parseSweepTable(t *testing.T, out string, withIndex bool) []sweepTableRow {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("sweep printed %d lines, want a header and rows:\n%s", len(lines), out)
	}
	want := []string{"nprobe", "recall@1", "recall@10", "qps"}
	if withIndex {
		want = append([]string{"index"}, append(want, "bytes/vector")...)
	}
	if got := strings.Fields(lines[0]); !slices.Equal(got, want) {
		t.Fatalf("header %q, want the columns %v", lines[0], want)
	}
	var rows []sweepTableRow
	for _, line := range lines[1:] {
		if len(line) != len(lines[0]) {
			t.Errorf("row %q is %d wide, the header %d: columns not aligned", line, len(line), len(lines[0]))
		}
		f := strings.Fields(line)
		if len(f) != len(want) {
			t.Fatalf("row %q has %d columns, want %d", line, len(f), len(want))
		}
		var r sweepTableRow
		r.cells = f
		if withIndex {
			r.index, f = f[0], f[1:]
		}
		var err error
		if r.nprobe, err = strconv.Atoi(f[0]); err != nil {
			t.Fatalf("row %q: nprobe: %v", line, err)
		}
		if r.recall1, err = strconv.ParseFloat(f[1], 64); err != nil {
			t.Fatalf("row %q: recall@1: %v", line, err)
		}
		if r.recall10, err = strconv.ParseFloat(f[2], 64); err != nil {
			t.Fatalf("row %q: recall@10: %v", line, err)
		}
		if q, err := strconv.ParseFloat(f[3], 64); err != nil || !(q > 0) {
			t.Fatalf("row %q: qps %q, want a positive number", line, f[3])
		}
		rows = append(rows, r)
	}
	return rows
}

func TestSweepDefault(t *testing.T) {
	ix := deepIndexPath(t)
	out, _ := mustVLC(t, "eval", ix, "-query", deepQuery, "-gt", deepGT, "-sweep")
	rows := parseSweepTable(t, out, false)
	var nprobes []int
	for _, r := range rows {
		nprobes = append(nprobes, r.nprobe)
	}
	if want := []int{1, 2, 4, 8, 16, 32, deepAnchors}; !slices.Equal(nprobes, want) {
		t.Fatalf("nprobe column %v, want %v", nprobes, want)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].recall10 < rows[i-1].recall10-0.02 {
			t.Errorf("recall@10 %v at nprobe %d after %v at nprobe %d: falls by more than 0.02",
				rows[i].recall10, rows[i].nprobe, rows[i-1].recall10, rows[i-1].nprobe)
		}
	}
	// The last row scans every list: the same recall as a plain eval.
	m := plainEval45(t)
	last := rows[len(rows)-1]
	if got, want := last.cells[2], fmt.Sprintf("%.4f", m["recall@10"].(float64)); got != want {
		t.Errorf("last row recall@10 %s, plain eval -nprobe 45 %s", got, want)
	}
	if got, want := last.cells[1], fmt.Sprintf("%.4f", m["recall@1"].(float64)); got != want {
		t.Errorf("last row recall@1 %s, plain eval -nprobe 45 %s", got, want)
	}
}

func sweepJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, _ := mustVLC(t, append([]string{"eval"}, args...)...)
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("eval -sweep -json output %q: %v", out, err)
	}
	return rows
}

func TestSweepJSON(t *testing.T) {
	ix := deepIndexPath(t)
	// -sweep-nprobe implies -sweep; values are sorted, and clamped to the
	// 45 lists.
	rows := sweepJSON(t, ix, "-query", deepQuery, "-gt", deepGT, "-sweep-nprobe", "8,1,1000", "-json")
	wantKeys := []string{"bytes_per_vector", "k", "nprobe", "qps", "recall@1", "recall@10", "size_ratio"}
	var nprobes []float64
	for i, r := range rows {
		keys := slices.Sorted(maps.Keys(r))
		if !slices.Equal(keys, wantKeys) {
			t.Errorf("element %d has keys %v, want exactly %v", i, keys, wantKeys)
		}
		for _, k := range keys {
			if _, ok := r[k].(float64); !ok {
				t.Errorf("element %d: %s is %T, want a number", i, k, r[k])
			}
		}
		if r["k"] != 10.0 {
			t.Errorf("element %d: k %v, want 10", i, r["k"])
		}
		nprobes = append(nprobes, r["nprobe"].(float64))
	}
	if want := []float64{1, 8, deepAnchors}; !slices.Equal(nprobes, want) {
		t.Fatalf("nprobe %v, want %v", nprobes, want)
	}
	m := plainEval45(t)
	last := rows[len(rows)-1]
	for _, k := range []string{"recall@1", "recall@10", "bytes_per_vector", "size_ratio"} {
		if last[k] != m[k] {
			t.Errorf("last element %s %v, plain eval -nprobe 45 %v", k, last[k], m[k])
		}
	}
}

func TestSweepTwoIndexes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a second index")
	}
	ix8, ix4 := deepIndexPath(t), deep4IndexPath(t)
	// Re-rank flags apply to every row; nprobe 45 without re-ranking
	// compares the codes themselves.
	out, _ := mustVLC(t, "eval", ix8, ix4, "-query", deepQuery, "-gt", deepGT, "-sweep-nprobe", "4,45")
	rows := parseSweepTable(t, out, true)
	var got []string
	full := map[string]float64{}
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s@%d", r.index, r.nprobe))
		if r.nprobe == deepAnchors {
			full[r.index] = r.recall10
		}
	}
	if want := []string{"deep.vlc@4", "deep.vlc@45", "deep4.vlc@4", "deep4.vlc@45"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if !(full["deep4.vlc"] < full["deep.vlc"]) {
		t.Errorf("recall@10 at nprobe 45: 4 bits %v, 8 bits %v: want 4 bits lower", full["deep4.vlc"], full["deep.vlc"])
	}
	// With several indexes each JSON element names its index.
	js := sweepJSON(t, ix8, ix4, "-query", deepQuery, "-base", deepBase, "-sweep-nprobe", "4", "-json")
	if len(js) != 2 || js[0]["index"] != "deep.vlc" || js[1]["index"] != "deep4.vlc" {
		t.Errorf("JSON rows %v, want one for deep.vlc and one for deep4.vlc", js)
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	b := readFile(t, path)
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s does not start with the PNG signature: % x", path, b[:min(8, len(b))])
	}
	if len(b) <= 1000 {
		t.Errorf("%s is %d bytes, want more than 1000", path, len(b))
	}
}

// checkOnly checks that dir holds exactly the files want: an atomic write
// leaves no temporary file behind.
func checkOnly(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("folder holds %v, want %v", got, want)
	}
}

func TestPlot(t *testing.T) {
	ix := deepIndexPath(t)
	dir := t.TempDir()
	png, svg := filepath.Join(dir, "x.png"), filepath.Join(dir, "x.svg")

	// -plot implies -sweep: the table still goes to stdout.
	out, errs := mustVLC(t, "eval", ix, "-query", deepQuery, "-gt", deepGT, "-sweep-nprobe", "1,4", "-plot", png)
	if rows := parseSweepTable(t, out, false); len(rows) != 2 {
		t.Errorf("%d rows, want 2", len(rows))
	}
	if !strings.Contains(errs, png) {
		t.Errorf("stderr %q does not name the plot", errs)
	}
	checkPNG(t, png)

	mustVLC(t, "eval", "-plot", svg, ix, "-query", deepQuery, "-gt", deepGT, "-sweep-nprobe", "2,16", "-rerank", deepBase, "-json")
	b := readFile(t, svg)
	if !bytes.HasPrefix(b, []byte("<?xml")) && !bytes.HasPrefix(b, []byte("<svg")) {
		t.Errorf("%s starts with %q, want <?xml or <svg", svg, b[:min(20, len(b))])
	}
	for _, want := range []string{"recall@10 vs QPS", "n = 2000, d = 96", "deep.vlc +rerank", ">16<"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s does not contain %q", svg, want)
		}
	}

	// Writing again replaces the file through a temporary one.
	mustVLC(t, "eval", ix, "-query", deepQuery, "-gt", deepGT, "-sweep-nprobe", "1", "-plot", png)
	checkPNG(t, png)
	checkOnly(t, dir, "x.png", "x.svg")
}

func TestPlotTwoIndexes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a second index")
	}
	dir := t.TempDir()
	png := filepath.Join(dir, "cmp.png")
	mustVLC(t, "eval", deepIndexPath(t), deep4IndexPath(t), "-query", deepQuery, "-gt", deepGT, "-sweep-nprobe", "1,8", "-plot", png)
	checkPNG(t, png)
}

func TestSweepErrors(t *testing.T) {
	ix := deepIndexPath(t)
	dir := t.TempDir()
	// Another data set: 300 vectors of dimension 96, and 300 of dimension 8.
	small, narrow := filepath.Join(dir, "small.vlc"), filepath.Join(dir, "narrow.vlc")
	for _, c := range []struct {
		out string
		d   int
	}{{small, deepDim}, {narrow, 8}} {
		in := strings.TrimSuffix(c.out, ".vlc") + ".npy"
		if err := vecfile.WriteNpy(in, randomRows(300, c.d, 9), "<f4"); err != nil {
			t.Fatal(err)
		}
		mustVLC(t, "compress", in, "-o", c.out, "-quiet")
	}
	missing := filepath.Join(dir, "nope.vlc")
	q := []string{"-query", deepQuery, "-gt", deepGT}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"gif before any work", []string{missing, "-query", missing, "-gt", missing, "-plot", filepath.Join(dir, "x.gif")}, []string{"x.gif", ".png or .svg"}},
		{"plot without extension", append([]string{ix, "-plot", filepath.Join(dir, "x")}, q...), []string{".png or .svg"}},
		{"plot folder missing", append([]string{ix, "-plot", filepath.Join(dir, "no", "x.png")}, q...), []string{"-plot", filepath.Join(dir, "no")}},
		{"other n", append([]string{ix, small, "-sweep"}, q...), []string{ix, small, "2000", "300"}},
		{"other dimension", append([]string{ix, narrow, "-sweep-nprobe", "4"}, q...), []string{ix, narrow, "96", "8"}},
		{"bad list", append([]string{ix, "-sweep-nprobe", "1,x"}, q...), []string{"-sweep-nprobe", `"x"`}},
		{"zero in list", append([]string{ix, "-sweep-nprobe", "0,4"}, q...), []string{"-sweep-nprobe", `"0"`}},
		{"empty in list", append([]string{ix, "-sweep-nprobe", "4,,8"}, q...), []string{"-sweep-nprobe"}},
		{"nprobe with sweep", append([]string{ix, "-sweep", "-nprobe", "8"}, q...), []string{"-nprobe", "-sweep-nprobe"}},
		{"neither gt nor base", []string{ix, "-sweep", "-query", deepQuery}, []string{"-gt", "-base"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkFails(t, append([]string{"eval"}, tc.args...), tc.want)
		})
	}
	checkOnly(t, dir, "narrow.npy", "narrow.vlc", "small.npy", "small.vlc")
}

// eval -sweep -cpuprofile profiles the sweep (it once ignored the flag).
func TestSweepCPUProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "sweep.prof")
	mustVLC(t, "eval", deepIndexPath(t), "-query", deepQuery, "-gt", deepGT, "-sweep-nprobe", "8,45", "-cpuprofile", prof)
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // gzip, as pprof writes
		t.Fatalf("profile %s: %d bytes, %v; want a gzipped pprof profile", prof, len(b), err)
	}
}
