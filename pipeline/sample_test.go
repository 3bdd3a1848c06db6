package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/sysmem"
	"github.com/vlc-embed/vlc/pipeline"
	"github.com/vlc-embed/vlc/vecfile"
)

const deep10kBase = "../testdata/deep10k/base.f16"

// compressT is vlc.Compress that fails the test on error.
func compressT(t *testing.T, input, output string, opt vlc.Options) *vlc.Summary {
	t.Helper()
	sum, err := vlc.Compress(context.Background(), input, output, opt)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// sameHits fails unless a and b return the same ids at the same distances
// for every deep10kBase query.
func sameHits(t *testing.T, a, b string) {
	t.Helper()
	q, err := vecfile.Open("../testdata/deep10k/query.fvecs", vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ia, err := vlc.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer ia.Close()
	ib, err := vlc.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	if ia.Len() != ib.Len() {
		t.Fatalf("%s holds %d rows, %s %d", a, ia.Len(), b, ib.Len())
	}
	opt := vlc.SearchOptions{K: 10, NProbe: 8}
	for i := range q.Len() {
		x := q.Row(i, nil)
		ha, err := ia.Search(context.Background(), x, opt)
		if err != nil {
			t.Fatal(err)
		}
		hb, err := ib.Search(context.Background(), x, opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(ha) != len(hb) {
			t.Fatalf("query %d: %d hits against %d", i, len(ha), len(hb))
		}
		for j := range ha {
			if ha[j].ID != hb[j].ID || ha[j].Distance != hb[j].Distance {
				t.Fatalf("query %d, hit %d: %s at %v in %s, %s at %v in %s", i, j, ha[j].ID, ha[j].Distance, a, hb[j].ID, hb[j].Distance, b)
			}
		}
	}
}

// sameSections fails unless a and b hold the same bytes in every section
// but META (whose training statistics are means taken in another order).
func sameSections(t *testing.T, a, b string) {
	t.Helper()
	fa, err := format.Open(a, format.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := format.Open(b, format.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if len(fa.Sections()) != len(fb.Sections()) {
		t.Fatalf("%d sections against %d", len(fa.Sections()), len(fb.Sections()))
	}
	for _, s := range fa.Sections() {
		if s.Kind.String() == "META" {
			continue
		}
		da, _ := fa.Section(s.Kind)
		db, ok := fb.Section(s.Kind)
		if !ok || !bytes.Equal(da, db) {
			t.Errorf("section %s differs", s.Kind)
		}
	}
}

// Rows encoded apart under one model and merged give what one encode of
// them all gives: the same codes byte for byte (every section but META's
// statistics), so the same hits at the same distances, for the rotated
// and pq codes, in two and three uneven shards.
func TestFrozenMerge(t *testing.T) {
	ctx := context.Background()
	n := 10000 // rows of deep10k encoded; -short takes fewer (pq trains slowly under -race)
	if testing.Short() {
		n = 2000
	}
	for _, code := range []string{"rotated", "pq"} {
		t.Run(code, func(t *testing.T) {
			dir := t.TempDir()
			model := filepath.Join(dir, "model.vlc")
			compressT(t, deep10kBase, model, vlc.Options{Dim: 96, End: 3 * n / 10, Anchors: 48, Bits: 4, Code: code, Seed: 3})
			all := filepath.Join(dir, "all.vlc")
			sum := compressT(t, deep10kBase, all, vlc.Options{Dim: 96, AnchorsFrom: model, End: n})
			if sum.N != n || sum.Anchors != 48 || sum.Code != code || sum.Bits != 4 || sum.TrainRows != 0 {
				t.Fatalf("frozen encode: %+v", sum)
			}
			// The rotated code loses nothing under a model; pq puts
			// corrections beyond the model's grids (fitted to about 60
			// rows a list here) at their ends: measured 0.921 against
			// 0.940.
			cutSets := [][]int{{0, 1, n/2 + 97, n}}
			if testing.Short() {
				t.Log("-short: the recall beside a fitted index and the two-shard merge run in make test-long")
			} else {
				fitted := filepath.Join(dir, "fitted.vlc")
				compressT(t, deep10kBase, fitted, vlc.Options{Dim: 96, Anchors: 48, Bits: 4, Code: code, Seed: 3, TrainSample: 3000})
				rf, ra := recallOf(t, fitted), recallOf(t, all)
				t.Logf("%s: recall@10 %.4f encoded under the model, %.4f with lists fitted", code, ra, rf)
				if tol := map[string]float64{"rotated": 0.005, "pq": 0.03}[code]; ra < rf-tol {
					t.Errorf("%s: recall@10 %.4f under the model, %.4f fitted", code, ra, rf)
				}
				cutSets = append(cutSets, []int{0, 6001, n})
			}
			for _, cuts := range cutSets {
				var shards []string
				for i := range len(cuts) - 1 {
					p := filepath.Join(dir, "shard"+string(rune('a'+i))+".vlc")
					compressT(t, deep10kBase, p, vlc.Options{Dim: 96, AnchorsFrom: model, Start: cuts[i], End: cuts[i+1]})
					shards = append(shards, p)
				}
				merged := filepath.Join(dir, "merged.vlc")
				ms, err := vlc.Merge(ctx, merged, shards)
				if err != nil {
					t.Fatal(err)
				}
				if ms.Rows != n || ms.Inputs != len(shards) {
					t.Fatalf("merge summary %+v", ms)
				}
				sameSections(t, merged, all)
				sameHits(t, merged, all)
			}
		})
	}
}

// Merge refuses indexes of two models (ErrModel), an output that is an
// input, and ids two inputs share; ids given are kept.
func TestMergeChecks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m1, m2 := filepath.Join(dir, "m1.vlc"), filepath.Join(dir, "m2.vlc")
	compressT(t, deep10kBase, m1, vlc.Options{Dim: 96, End: 2000, Anchors: 16, Bits: 4, Code: "rotated", Seed: 1})
	compressT(t, deep10kBase, m2, vlc.Options{Dim: 96, End: 2000, Anchors: 16, Bits: 4, Code: "rotated", Seed: 2})
	out := filepath.Join(dir, "out.vlc")
	if _, err := vlc.Merge(ctx, out, []string{m1, m2}); !errors.Is(err, vlc.ErrModel) {
		t.Fatalf("two models: got %v, want ErrModel", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused merge left %s", out)
	}
	if _, err := vlc.Merge(ctx, m1, []string{m1, m1}); !errors.Is(err, index.ErrArgument) {
		t.Fatalf("output is an input: got %v", err)
	}

	ids := func(prefix string, n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = prefix + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		}
		return s
	}
	a, b := filepath.Join(dir, "a.vlc"), filepath.Join(dir, "b.vlc")
	compressT(t, deep10kBase, a, vlc.Options{Dim: 96, AnchorsFrom: m1, End: 100, IDs: ids("x-", 100)})
	compressT(t, deep10kBase, b, vlc.Options{Dim: 96, AnchorsFrom: m1, Start: 100, End: 150, IDs: ids("y-", 50)})
	if _, err := vlc.Merge(ctx, out, []string{a, b}); err != nil {
		t.Fatal(err)
	}
	ix, err := vlc.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ix.Get("y-baa")
	if err != nil {
		t.Fatalf("an id of the second input: %v", err)
	}
	_ = rec
	ix.Close()
	a2 := filepath.Join(dir, "a2.vlc")
	compressT(t, deep10kBase, a2, vlc.Options{Dim: 96, AnchorsFrom: m1, End: 100, IDs: ids("x-", 100)})
	if _, err := vlc.Merge(ctx, filepath.Join(dir, "dup.vlc"), []string{a, a2}); !errors.Is(err, vlc.ErrDuplicateID) {
		t.Fatalf("an id in two inputs: got %v, want ErrDuplicateID", err)
	}
	// An input without ids after one with them: its rows are numbered on.
	c := filepath.Join(dir, "c.vlc")
	compressT(t, deep10kBase, c, vlc.Options{Dim: 96, AnchorsFrom: m1, Start: 150, End: 200})
	mixed := filepath.Join(dir, "mixed.vlc")
	if _, err := vlc.Merge(ctx, mixed, []string{a, c}); err != nil {
		t.Fatal(err)
	}
	ix, err = vlc.Open(mixed)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, id := range []string{"x-aaa", "100", "149"} {
		if _, err := ix.Get(id); err != nil {
			t.Errorf("id %s after merging 100 rows with ids and 50 without: %v", id, err)
		}
	}
	if _, err := ix.Get("0"); !errors.Is(err, vlc.ErrNotFound) {
		t.Errorf("id 0: got %v, want ErrNotFound (the rows without ids are numbered from 100)", err)
	}
}

// Assigning every row window by window gives the bytes of one window, for
// float16 input under l2 and cosine and for float32 input (its windows
// converted copies); progress reports each window.
func TestWindows(t *testing.T) {
	dir := t.TempDir()
	fvecs := filepath.Join(dir, "base.fvecs")
	m, err := vecfile.Open(deep10kBase, vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]float32, m.Len())
	for i := range rows {
		rows[i] = m.Row(i, nil)
	}
	m.Close()
	if err := vecfile.WriteFvecs(fvecs, rows); err != nil {
		t.Fatal(err)
	}
	n := 10000 // rows compressed; -short takes half (two windows, not four)
	if testing.Short() {
		n = 5000
	}
	for _, c := range []struct {
		input, metric string
	}{{deep10kBase, "l2"}, {deep10kBase, "cosine"}, {fvecs, "l2"}} {
		opt := vlc.Options{Dim: 96, End: n, Anchors: 40, Bits: 4, Code: "rotated", Metric: c.metric, TrainSample: 2500}
		one, many := filepath.Join(dir, "one.vlc"), filepath.Join(dir, "many.vlc")
		compressT(t, c.input, one, opt)
		undo := pipeline.SetMinWindow(1)
		calls := 0
		opt.AssignProgress = func(done, total int) { calls++ }
		compressT(t, c.input, many, opt)
		undo()
		if calls != 1+n/2500 { // 0, then a call a window of 2,500
			t.Errorf("%s %s: %d progress calls, want %d", c.input, c.metric, calls, 1+n/2500)
		}
		a, b := readAll(t, one), readAll(t, many)
		if !bytes.Equal(a, b) {
			t.Errorf("%s %s: %d windows wrote other bytes than one", c.input, c.metric, n/2500)
		}
	}
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// AnchorsFrom refuses settings that contradict the model, and a model of
// another dimension; Start and End outside the file are refused.
func TestAnchorsFromChecks(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.vlc")
	compressT(t, deep10kBase, model, vlc.Options{Dim: 96, End: 2000, Anchors: 16, Bits: 4, Code: "rotated"})
	out := filepath.Join(dir, "out.vlc")
	var oe *vlc.OptionError
	for _, opt := range []vlc.Options{
		{Bits: 8}, {Code: "pq"}, {Metric: "cosine"}, {Anchors: 32}, {Ratio: 0.3},
	} {
		opt.Dim, opt.AnchorsFrom = 96, model
		if _, err := vlc.Compress(context.Background(), deep10kBase, out, opt); !errors.As(err, &oe) {
			t.Errorf("%+v: got %v, want an OptionError", opt, err)
		}
	}
	if _, err := vlc.Compress(context.Background(), "../testdata/golden/small.f16", out, vlc.Options{Dim: 16, AnchorsFrom: model}); !errors.Is(err, index.ErrDim) {
		t.Errorf("a model of another dimension: got %v, want ErrDim", err)
	}
	if _, err := vlc.Compress(context.Background(), deep10kBase, out, vlc.Options{Dim: 96, Start: 9000, End: 10001}); !errors.Is(err, index.ErrArgument) {
		t.Errorf("rows past the end: got %v, want ErrArgument", err)
	}
	if _, err := vlc.Compress(context.Background(), deep10kBase, out, vlc.Options{Dim: 96, AnchorsFrom: filepath.Join(dir, "none.vlc")}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing model: got %v, want ErrNotExist", err)
	}
}

// Training on a sample, then assigning every row window by window, loses
// little recall against training on every row, and reports the sample.
func TestTrainSample(t *testing.T) {
	dir := t.TempDir()
	full, part := filepath.Join(dir, "full.vlc"), filepath.Join(dir, "part.vlc")
	fs := compressT(t, deep10kBase, full, vlc.Options{Dim: 96, Anchors: 100, Bits: 4, Code: "rotated"})
	var assigned []int
	ps := compressT(t, deep10kBase, part, vlc.Options{Dim: 96, Anchors: 100, Bits: 4, Code: "rotated", TrainSample: 2500,
		AssignProgress: func(done, total int) { assigned = append(assigned, done, total) }})
	// The CPU sizes nothing to DeviceMemory.
	cs := compressT(t, deep10kBase, filepath.Join(dir, "cpu.vlc"), vlc.Options{Dim: 96, Anchors: 100, Bits: 4, Code: "rotated", Backend: "cpu", DeviceMemory: 1 << 20})
	if cs.TrainRows != 10000 {
		t.Errorf("the CPU with DeviceMemory 1 MiB trained on %d rows, want all 10000", cs.TrainRows)
	}
	if fs.TrainRows != 10000 || ps.TrainRows != 2500 {
		t.Fatalf("train rows %d and %d, want 10000 and 2500", fs.TrainRows, ps.TrainRows)
	}
	if len(assigned) < 4 || assigned[len(assigned)-2] != 10000 || assigned[len(assigned)-1] != 10000 {
		t.Fatalf("assign progress %v", assigned)
	}
	rf, rp := recallOf(t, full), recallOf(t, part)
	t.Logf("recall@10: every row trains %.4f, a 2,500-row sample %.4f; energy %.5g and %.5g", rf, rp, fs.Energy, ps.Energy)
	if rp < rf-0.02 {
		t.Errorf("recall@10 %.4f after a sample, %.4f after every row", rp, rf)
	}
	if ps.Energy > fs.Energy*1.1 {
		t.Errorf("energy %.5g after a sample, %.5g after every row", ps.Energy, fs.Energy)
	}
}

func itoa(i int) string {
	return string(appendInt(nil, i))
}

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

func recallOf(t *testing.T, path string) float64 {
	t.Helper()
	gt, err := vecfile.ReadIvecs("../testdata/deep10k/groundtruth.ivecs")
	if err != nil {
		t.Fatal(err)
	}
	q, err := vecfile.Open("../testdata/deep10k/query.fvecs", vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ix, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	found := 0
	for i := range q.Len() {
		hits, err := ix.Search(context.Background(), q.Row(i, nil), vlc.SearchOptions{K: 10, NProbe: 16})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			for _, id := range gt[i][:10] {
				if h.ID == itoa(int(id)) {
					found++
				}
			}
		}
	}
	return float64(found) / float64(10*q.Len())
}

// Code arrays that take at most a quarter of the available memory stay on
// the heap; larger ones go to files in the output's folder.
func TestSpillDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.vlc")
	avail, ok := sysmem.Available()
	if !ok {
		if got := pipeline.SpillDir(out, 1000, 100); got != filepath.Dir(out) {
			t.Fatalf("available memory unknown: SpillDir = %q, want the output's folder", got)
		}
		return
	}
	if got := pipeline.SpillDir(out, 1000, 100); got != "" {
		t.Errorf("200 kB of code arrays: SpillDir = %q, want the heap", got)
	}
	if got := pipeline.SpillDir(out, int(avail/100), 100); got != filepath.Dir(out) {
		t.Errorf("twice the available memory: SpillDir = %q, want %q", got, filepath.Dir(out))
	}
}
