package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

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
	nanBase := filepath.Join(dir, "nan.f16") // the index's length, a NaN in every row
	nanRows := randomRows(2000, deepDim, 6)
	for _, r := range nanRows {
		r[5] = float32(math.NaN())
	}
	if err := vecfile.WriteF16(nanBase, nanRows); err != nil {
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
		{"rerank file with NaN", []string{"search", ix, "-query", deepQuery, "-rerank", nanBase}, []string{"re-rank vector of", "value 5 is NaN"}},
		{"index missing", []string{"search", filepath.Join(dir, "nope.vlc"), "-query", deepQuery}, []string{"nope.vlc", "no such file"}},
		{"not an index", []string{"search", notIndex, "-query", deepQuery}, []string{notIndex, "not a vlc index"}},
		{"query missing", []string{"search", ix, "-query", filepath.Join(dir, "nope.fvecs")}, []string{"nope.fvecs", "no such file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkFails(t, tc.args, tc.want)
		})
	}
}

// -backend auto without a GPU that can search falls back to the CPU, says
// so once on stderr, and prints the CPU's hits; a backend not built in is
// refused naming how to build it; eval's -batch changes no hit.
func TestSearchBackend(t *testing.T) {
	ix := deepIndexPath(t)
	want, _ := mustVLC(t, "search", ix, "-query", deepQuery, "-k", "5", "-nprobe", "8")
	code, out, errs := runVLC(t, "search", ix, "-query", deepQuery, "-k", "5", "-nprobe", "8", "-backend", "auto")
	if code != 0 || out != want {
		t.Errorf("-backend auto: exit %d, output equal to the CPU's: %v; stderr %q", code, out == want, errs)
	}
	if gpu := strings.Contains(errs, "searching on a device"); !gpu && !strings.Contains(errs, "searching on the CPU") {
		t.Errorf("-backend auto: stderr %q does not say where it searched", errs)
	}
	for _, b := range []string{"cuda", "webgpu"} {
		code, _, errs := runVLC(t, "search", ix, "-query", deepQuery, "-backend", b)
		if code == 0 {
			continue // built in, with a GPU: the device's parity tests cover it
		}
		if !strings.Contains(errs, b) {
			t.Errorf("-backend %s: exit %d, stderr %q does not name the backend", b, code, errs)
		}
	}
	all, _ := mustVLC(t, "eval", ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "8", "-json")
	batched, _ := mustVLC(t, "eval", ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "8", "-json", "-batch", "7")
	recall := func(s string) string { return s[strings.Index(s, `"recall@1"`):strings.Index(s, `"qps"`)] }
	if recall(all) != recall(batched) {
		t.Errorf("eval -batch 7 %s, one batch %s", recall(batched), recall(all))
	}
}
