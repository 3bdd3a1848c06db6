package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/vecfile"
)

const (
	goldenV2  = "../../testdata/golden/v2.vlc"
	goldenF16 = "../../testdata/golden/small.f16" // the rows goldenV2 was built from
)

// copyGolden copies the golden version-2 index into a new folder.
func copyGolden(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(goldenV2)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "g.vlc")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// vlc graph writes the graph into the index; info lists its section;
// search walks it (the hits of graph.Searcher at that width), or scans
// the lists when -nprobe alone is given; eval -sweep measures it by ef
// (raised to 10, as recall@10 needs 10 hits).
func TestGraphCommand(t *testing.T) {
	path := copyGolden(t)
	out, _ := mustVLC(t, "graph", "-base", goldenF16, "-degree", "8", "-nprobe", "0", path)
	if !strings.HasPrefix(out, "wrote "+path+": graph of 256 rows, degree 8") {
		t.Fatalf("vlc graph printed %q", out)
	}
	if info, _ := mustVLC(t, "info", path); !strings.Contains(info, "section GRPH") {
		t.Fatalf("vlc info lists no GRPH section:\n%s", info)
	}
	ix, err := index.Open(path, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	g, err := graph.Open(ix)
	if err != nil {
		t.Fatal(err)
	}
	q, err := vecfile.Open(goldenF16, vecfile.Options{Dim: ix.Dim()})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	want, err := (&graph.Searcher{Index: ix, Graph: g, Ef: 12}).SearchBatch(context.Background(), q, index.SearchOptions{K: 3})
	if err != nil {
		t.Fatal(err)
	}
	lists, err := ix.SearchBatch(context.Background(), q, index.SearchOptions{K: 3, NProbe: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want [][]index.Hit
	}{
		{[]string{"-ef", "12"}, want},
		{[]string{"-nprobe", "2"}, lists},
	} {
		args := append(append([]string{"search", "-query", goldenF16, "-k", "3"}, tc.args...), path)
		out, _ := mustVLC(t, args...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 3*q.Len() {
			t.Fatalf("%v: %d lines, want %d", tc.args, len(lines), 3*q.Len())
		}
		for i, line := range lines {
			f := strings.Split(line, "\t")
			if id := tc.want[i/3][i%3].ID; len(f) < 3 || f[2] != strconv.Itoa(id) {
				t.Fatalf("%v: line %d %q, want id %d", tc.args, i, line, id)
			}
		}
	}
	out, _ = mustVLC(t, "eval", "-query", goldenF16, "-base", goldenF16, "-sweep-ef", "8,16", path)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "nprobe  ef  recall@1") || strings.Join(strings.Fields(lines[1])[:2], " ") != "0 10" {
		t.Fatalf("eval -sweep-ef printed:\n%s", out)
	}
	out, _ = mustVLC(t, "eval", "-query", goldenF16, "-base", goldenF16, "-ef", "16", path)
	if !strings.Contains(out, "(graph, ef 16, seeds from 0 list(s), no re-rank)") {
		t.Fatalf("eval -ef printed:\n%s", out)
	}
}

// vlc graph -bits 7 -compact writes a split code and compact lists
// (format version 4) that search and eval walk, finding the hits of the
// same graph built in memory; a store made from the file walks it too;
// -bits outside 5..8 and with -at are one-line errors.
func TestGraphCommandSplit(t *testing.T) {
	path := copyGolden(t)
	out, _ := mustVLC(t, "graph", "-base", goldenF16, "-degree", "8", "-nprobe", "2", "-bits", "7", "-compact", path)
	if !strings.HasPrefix(out, "wrote "+path+": graph of 256 rows, degree 8, a 7-bit split code, compact lists") || !strings.Contains(out, "what a search reads") {
		t.Fatalf("vlc graph printed %q", out)
	}
	if f, err := format.Open(path, format.OpenOptions{}); err != nil || f.Version() != 4 {
		t.Fatalf("the file: %v, version %d, want 4", err, f.Version())
	} else {
		f.Close()
	}
	ix, err := index.Open(path, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	g, err := graph.Open(ix)
	if err != nil {
		t.Fatal(err)
	}
	if o := g.Options(); o.Bits != 7 || !o.Compact {
		t.Fatalf("the graph read has options %+v", o)
	}
	q, err := vecfile.Open(goldenF16, vecfile.Options{Dim: ix.Dim()})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	built, err := graph.Build(context.Background(), ix, q, graph.BuildOptions{Degree: 8, NProbe: 2, Bits: 7, Compact: true})
	if err != nil {
		t.Fatal(err)
	}
	want, err := (&graph.Searcher{Index: ix, Graph: built, Ef: 12}).SearchBatch(context.Background(), q, index.SearchOptions{K: 3})
	if err != nil {
		t.Fatal(err)
	}
	out, _ = mustVLC(t, "search", "-query", goldenF16, "-k", "3", "-ef", "12", path)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3*q.Len() {
		t.Fatalf("%d lines, want %d", len(lines), 3*q.Len())
	}
	for i, line := range lines {
		f := strings.Split(line, "\t")
		if id := want[i/3][i%3].ID; len(f) < 3 || f[2] != strconv.Itoa(id) {
			t.Fatalf("line %d %q, want id %d", i, line, id)
		}
	}
	out, _ = mustVLC(t, "eval", "-query", goldenF16, "-base", goldenF16, "-sweep-ef", "8,16", path)
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 3 {
		t.Fatalf("eval -sweep-ef printed:\n%s", out)
	}
	mustVLC(t, "add", "-maintain=false", path, goldenF16) // a store: the graph's segment and one without
	if info, _ := mustVLC(t, "info", path); !strings.Contains(info, "trained, graph,") {
		t.Fatalf("vlc info does not show the trained segment's graph:\n%s", info)
	}
	st, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hits, err := st.SearchRows(context.Background(), q, vlc.SearchOptions{K: 3, Ef: 12})
	if err != nil {
		t.Fatal(err)
	}
	out, _ = mustVLC(t, "search", "-query", goldenF16, "-k", "3", "-ef", "12", path)
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, line := range lines {
		if f := strings.Split(line, "\t"); len(f) < 3 || f[2] != hits[i/3][i%3].ID {
			t.Fatalf("store: line %d %q, want id %s", i, line, hits[i/3][i%3].ID)
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"graph", "-base", goldenF16, "-bits", "4", copyGolden(t)}, "-bits 4: want 5 to 8"},
		{[]string{"graph", "-at", "100", "-bits", "7", copyGolden(t)}, "-at 100 with -bits"},
	} {
		code, _, errs := runVLC(t, tc.args...)
		checkOneLineError(t, code, errs)
		if !strings.Contains(errs, tc.msg) {
			t.Errorf("%v: stderr %q does not say %q", tc.args, errs, tc.msg)
		}
	}
}

// vlc graph and the graph's search flags refuse what they cannot do,
// in one line that names the flag or the file.
func TestGraphCommandErrors(t *testing.T) {
	path := copyGolden(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"graph", path}, "-base is required"},
		{[]string{"graph", "-base", goldenF16, "-degree", "0", path}, "-degree 0"},
		{[]string{"graph", "-base", goldenF16, "-alpha", "0.5", path}, "-alpha 0.5"},
		{[]string{"graph", "-base", filepath.Join(t.TempDir(), "none.f16"), path}, "-base"},
		{[]string{"search", "-query", goldenF16, "-ef", "16", path}, "holds no graph"},
		{[]string{"eval", "-query", goldenF16, "-base", goldenF16, "-ef", "16", path}, "holds no graph"},
		{[]string{"eval", "-query", goldenF16, "-base", goldenF16, "-sweep", "-ef", "16", path}, "-sweep-ef"},
		{[]string{"eval", "-query", goldenF16, "-base", goldenF16, "-sweep-ef", "0", path}, "-sweep-ef"},
		{[]string{"search", "-query", goldenF16, "-ef", "-1", path}, "-ef -1"},
		{[]string{"search", "-query", goldenF16, "-scan-lists", "-1", path}, "-scan-lists -1"},
		{[]string{"search", "-query", goldenF16, "-scan-lists", "1", path}, "holds no graph"},
		{[]string{"graph", "-base", goldenF16, "-passes", "-1", path}, "-passes -1"},
		{[]string{"graph", "-base", goldenF16, "-starts-per-list", "0", path}, "-starts-per-list 0"},
		{[]string{"graph", "-at", "10", "-starts-per-list", "64", path}, "-starts-per-list"},
		{[]string{"graph", "-base", goldenF16, "-candidates", "-3", path}, "-candidates -3"},
		{[]string{"graph", "-base", goldenF16, "-devices", "0", path}, "-devices 0"},
		{[]string{"graph", "-base", goldenF16, "-backend", "cuda", "-nprobe", "0", path}, "-nprobe 1 or more"},
		{[]string{"graph", "-base", goldenF16, "-backend", "nosuch", path}, "nosuch"},
		{[]string{"graph", "-base", goldenF16, "-prune-on", "gpu", path}, `-prune-on "gpu"`},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			code, _, errs := runVLC(t, tc.args...)
			checkOneLineError(t, code, errs)
			if !strings.Contains(errs, tc.msg) {
				t.Errorf("stderr %q does not say %q", errs, tc.msg)
			}
		})
	}
	if b, _ := os.ReadFile(path); len(b) == 0 || hasGraph(path) {
		t.Fatal("a refused vlc graph changed the index")
	}
}

// On a store whose trained segment holds a graph (vlc graph, then vlc
// add and delete), search walks it by default and with -ef (the hits of
// the library's search with Ef), scans the lists with -nprobe alone (Ef
// -1), and refuses -ef for a store without a graph; eval says it walks.
func TestGraphStoreCommand(t *testing.T) {
	path := copyGolden(t)
	mustVLC(t, "graph", "-base", goldenF16, "-degree", "8", "-nprobe", "0", path)
	plain := copyGolden(t)
	for _, p := range []string{path, plain} {
		mustVLC(t, "add", "-maintain=false", p, goldenF16) // ids 256..511: rows 0..255 again
		mustVLC(t, "delete", "-maintain=false", p, "3", "100", "300")
	}
	if info, _ := mustVLC(t, "info", path); !strings.Contains(info, "trained, graph,") || strings.Count(info, "graph,") != 1 {
		t.Fatalf("vlc info does not show the trained segment's graph alone:\n%s", info)
	}
	st, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q, err := vecfile.Open(goldenF16, vecfile.Options{Dim: st.Dim()})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, tc := range []struct {
		args []string
		opt  vlc.SearchOptions
	}{
		{nil, vlc.SearchOptions{K: 3}},
		{[]string{"-ef", "12"}, vlc.SearchOptions{K: 3, Ef: 12}},
		{[]string{"-ef", "12", "-seed-probe", "1"}, vlc.SearchOptions{K: 3, Ef: 12, SeedProbe: 1}},
		{[]string{"-ef", "12", "-scan-lists", "2"}, vlc.SearchOptions{K: 3, Ef: 12, ScanLists: 2}},
		{[]string{"-nprobe", "2"}, vlc.SearchOptions{K: 3, NProbe: 2, Ef: -1}},
	} {
		want, err := st.SearchRows(context.Background(), q, tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		args := append(append([]string{"search", "-query", goldenF16, "-k", "3"}, tc.args...), path)
		out, _ := mustVLC(t, args...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 3*q.Len() {
			t.Fatalf("%v: %d lines, want %d", tc.args, len(lines), 3*q.Len())
		}
		for i, line := range lines {
			f := strings.Split(line, "\t")
			if id := want[i/3][i%3].ID; len(f) < 3 || f[2] != id {
				t.Fatalf("%v: line %d %q, want id %s", tc.args, i, line, id)
			}
		}
	}
	// The base rows by id: the golden rows twice (.fvecs, which names
	// its dimension).
	rows := make([][]float32, 0, 2*q.Len())
	for range 2 {
		for i := range q.Len() {
			rows = append(rows, q.Row(i, nil))
		}
	}
	twice := filepath.Join(t.TempDir(), "twice.fvecs")
	if err := vecfile.WriteFvecs(twice, rows); err != nil {
		t.Fatal(err)
	}
	out, _ := mustVLC(t, "eval", "-query", goldenF16, "-base", twice, "-ef", "16", path)
	if !strings.Contains(out, "(store: graphs walked at ef 16 where a segment holds one, nprobe 8 elsewhere, no re-rank)") { // nprobe: the lists, 8
		t.Fatalf("eval -ef on the store printed:\n%s", out)
	}
	out, _ = mustVLC(t, "eval", "-query", goldenF16, "-base", twice, "-nprobe", "4", path)
	if !strings.Contains(out, "(nprobe 4, no re-rank)") {
		t.Fatalf("eval -nprobe on the store printed:\n%s", out)
	}
	for _, args := range [][]string{
		{"search", "-query", goldenF16, "-ef", "16", plain},
		{"eval", "-query", goldenF16, "-base", twice, "-ef", "16", plain},
	} {
		code, _, errs := runVLC(t, args...)
		checkOneLineError(t, code, errs)
		if !strings.Contains(errs, "no segment of "+plain+" holds a graph") {
			t.Errorf("%s: stderr %q does not say the store holds no graph", args[0], errs)
		}
	}
	// vlc graph on the store: the added segment's graph, a new file.
	out, _ = mustVLC(t, "graph", "-base", twice, "-degree", "8", "-segment", "1", plain)
	if !strings.HasPrefix(out, "wrote "+plain+": segment 1 (256 rows) with a graph") {
		t.Fatalf("vlc graph on a store printed %q", out)
	}
	if info, _ := mustVLC(t, "info", plain); !strings.Contains(info, "added, graph,") || strings.Count(info, "graph,") != 1 {
		t.Fatalf("vlc info does not show the added segment's graph alone:\n%s", info)
	}
	mustVLC(t, "search", "-query", goldenF16, "-ef", "16", plain)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"graph", "-base", twice, "-segment", "2", plain}, "segment 2: the store has 2"},
		{[]string{"graph", "-base", twice, "-o", filepath.Join(t.TempDir(), "x.vlc"), plain}, "a store's graph goes into a new segment file"},
		{[]string{"graph", "-base", goldenF16, "-segment", "1", copyGolden(t)}, "-segment 1"},
		{[]string{"graph", "-base", twice, "-segment", "1", "-backend", "cuda", plain}, "a store's segment builds its graph on the CPU"},
	} {
		code, _, errs := runVLC(t, tc.args...)
		checkOneLineError(t, code, errs)
		if !strings.Contains(errs, tc.msg) {
			t.Errorf("%v: stderr %q does not say %q", tc.args, errs, tc.msg)
		}
	}
}

// vlc graph -at sets a store's policy (a lone file becomes a store) so
// that segments of that many live rows get graphs, built then and after
// writes (vlc add says so); vlc info shows the policy and the graphs;
// -at 0 turns it off; vlc create -graph-at sets it on a collection; bad
// combinations are one-line errors.
func TestGraphPolicyCommand(t *testing.T) {
	path := copyGolden(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"graph", "-at", "100", "-base", goldenF16, path}, "-at 100 and -base both given"},
		{[]string{"graph", "-at", "100", "-segment", "1", path}, "no -segment or -o"},
		{[]string{"graph", "-at", "-1", path}, "-at -1"},
	} {
		code, _, errs := runVLC(t, tc.args...)
		checkOneLineError(t, code, errs)
		if !strings.Contains(errs, tc.msg) {
			t.Errorf("%v: stderr %q does not say %q", tc.args, errs, tc.msg)
		}
	}
	out, _ := mustVLC(t, "graph", "-at", "100", "-degree", "8", "-compact", path)
	if !strings.HasPrefix(out, path+": graphs for segments of at least 100 live rows, built in the background; 1 of 1 segment(s) hold a graph (256 of 256 live rows)") {
		t.Fatalf("vlc graph -at printed %q", out)
	}
	_, errs := mustVLC(t, "add", path, goldenF16)
	if !strings.Contains(errs, "maintenance: graphs built") {
		t.Errorf("vlc add of 256 rows does not say it built a graph:\n%s", errs)
	}
	info, _ := mustVLC(t, "info", path)
	if !strings.Contains(info, "built in the background for segments of at least 100 live rows (degree 8, alpha 1.1, the index's search of 8 lists, compact lists)") ||
		strings.Count(info, ", graph,") != strings.Count(info, "  segment ") {
		t.Fatalf("vlc info after vlc graph -at and vlc add:\n%s", info)
	}
	js, _ := mustVLC(t, "info", "-json", path)
	if !strings.Contains(js, `"policy":{"graph_at":100,"graph_degree":8,"graph_compact":true}`) {
		t.Errorf("vlc info -json: no policy with graph_at 100 in\n%s", js)
	}
	mustVLC(t, "search", "-query", goldenF16, "-ef", "16", path)
	if out, _ = mustVLC(t, "graph", "-at", "0", path); !strings.Contains(out, "no graphs built in the background") {
		t.Errorf("vlc graph -at 0 printed %q", out)
	}
	if info, _ = mustVLC(t, "info", path); strings.Contains(info, "in the background") {
		t.Errorf("vlc info after -at 0 still names the policy:\n%s", info)
	}
	needCreate(t)
	c := filepath.Join(t.TempDir(), "c.vlc")
	if _, errs = mustVLC(t, "create", c, "-dim", "8", "-graph-at", "50"); !strings.Contains(errs, "graphs for segments of 50 live rows") {
		t.Errorf("vlc create -graph-at said %q", errs)
	}
	if js, _ = mustVLC(t, "info", "-json", c); !strings.Contains(js, `"graph_at":50`) {
		t.Errorf("vlc info -json of the collection: no graph_at 50 in\n%s", js)
	}
	c2 := filepath.Join(t.TempDir(), "c2.vlc")
	if _, errs = mustVLC(t, "create", c2, "-dim", "8", "-code", "rotated", "-graph-at", "50", "-graph-compact"); !strings.Contains(errs, "graphs for segments of 50 live rows, compact lists") {
		t.Errorf("vlc create -graph-compact said %q", errs)
	}
	if js, _ = mustVLC(t, "info", "-json", c2); !strings.Contains(js, `"graph_at":50,"graph_compact":true`) {
		t.Errorf("vlc info -json of the collection: no graph_compact in\n%s", js)
	}
	code, _, errs := runVLC(t, "create", filepath.Join(t.TempDir(), "c3.vlc"), "-dim", "8", "-graph-compact")
	checkOneLineError(t, code, errs)
	if !strings.Contains(errs, "-graph-compact without -graph-at") {
		t.Errorf("vlc create -graph-compact alone said %q", errs)
	}
}

// vlc graph prints each stage's seconds; -backend cpu builds the same
// file as no -backend; -backend cuda or webgpu builds with the index's
// search on the GPU where the binary has the backend and a GPU, and is
// otherwise refused in one line naming the backend, the index left
// without a graph; -passes 0 and -candidates give the fast build.
func TestGraphCommandBackend(t *testing.T) {
	plain, cpu := copyGolden(t), copyGolden(t)
	out, _ := mustVLC(t, "graph", "-base", goldenF16, "-degree", "8", plain)
	if !strings.Contains(out, "\n  stages      rows ") || !strings.Contains(out, ", refine ") || !strings.Contains(out, " s; written in ") {
		t.Errorf("vlc graph printed %q, without the stages' times", out)
	}
	mustVLC(t, "graph", "-base", goldenF16, "-degree", "8", "-backend", "cpu", cpu)
	a, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(cpu); err != nil || string(a) != string(b) {
		t.Errorf("-backend cpu wrote another file than no -backend (%v)", err)
	}
	for _, b := range []string{"cuda", "webgpu"} {
		path := copyGolden(t)
		code, out, errs := runVLC(t, "graph", "-base", goldenF16, "-degree", "8", "-backend", b, path)
		if code == 0 {
			if !strings.Contains(out, "lists on ") || !strings.Contains(out, "(search ") || !hasGraph(path) {
				t.Errorf("-backend %s printed %q", b, out)
			}
			continue
		}
		checkOneLineError(t, code, errs)
		if !strings.Contains(errs, b) {
			t.Errorf("-backend %s: stderr %q does not name the backend", b, errs)
		}
		if hasGraph(path) {
			t.Errorf("-backend %s refused, yet the index has a graph", b)
		}
	}
	fast := copyGolden(t)
	out, errs := mustVLC(t, "graph", "-base", goldenF16, "-degree", "8", "-passes", "0", "-candidates", "40", "-progress", fast)
	if !strings.Contains(out, ", refine 0.00,") || !hasGraph(fast) {
		t.Errorf("vlc graph -passes 0 printed %q", out)
	}
	if !strings.HasPrefix(errs, "vlc graph: "+fast+": rows ") || strings.Contains(errs, ": refine ") || !strings.Contains(errs, ": pack ") || !strings.Contains(errs, ": written ") {
		t.Errorf("vlc graph -progress -passes 0 printed on stderr %q", errs)
	}
}
