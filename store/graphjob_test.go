package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/store"
	"github.com/vlc-embed/vlc/vecfile"
)

// graphPolicy is the policy the graph job tests set: graphs for
// segments of 300 live rows, merges of 2.
var graphPolicy = store.Policy{GraphAt: 300, GraphDegree: 16, MergeFactor: 2}

// policyStore builds an index of docs[:trained] (rotated, 4 bits) at
// path and opens it without background work, with graphPolicy set.
func policyStore(t *testing.T, path string, docs []vlc.Document, trained int) *vlc.Store {
	t.Helper()
	ctx := context.Background()
	st, err := vlc.Build(ctx, path, docs[:trained], vlc.Options{Seed: 1, Code: "rotated", Bits: 4})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = vlc.OpenWith(path, vlc.OpenOptions{Manual: true}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPolicy(ctx, graphPolicy); err != nil {
		st.Close()
		t.Fatal(err)
	}
	return st
}

// graphs lists which segments hold a graph, and their live rows.
func graphs(t *testing.T, st *vlc.Store) (has []bool, live []int) {
	t.Helper()
	in, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range in.Segments {
		has, live = append(has, s.Graph), append(live, s.Rows-s.Deleted)
	}
	return has, live
}

// checkFolder checks that the segment folder holds the segments the
// store names and nothing of vlc's besides (an empty pending folder).
func checkFolder(t *testing.T, path string) {
	t.Helper()
	st, err := vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer st.Close()
	if err := st.Verify(); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	in, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, s := range in.Segments {
		named[filepath.Base(s.File)] = true
	}
	ents, err := os.ReadDir(path + ".d")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "pending" {
			if p, _ := os.ReadDir(filepath.Join(path+".d", e.Name())); len(p) > 0 {
				t.Errorf("pending folder holds %s", p[0].Name())
			}
			continue
		}
		if !named[e.Name()] {
			t.Errorf("segment folder holds %s, which no segment names", e.Name())
		}
	}
}

// TestGraphPolicy: with Policy.GraphAt set on a store grown from an index
// file, Maintain gives the trained segment a graph, merges small added
// segments and gives the merged one (at least GraphAt live rows) a graph,
// and leaves a small one to its lists; searches walk both graphs and
// scan the rest, with recall@10 against exact search over the live rows
// of at least 0.85 (the lists' floor in TestStoreGraph); the policy is
// read back, survives reopening, and bad policies are refused.
func TestGraphPolicy(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, 1450)
	path := filepath.Join(t.TempDir(), "p.vlc")
	st := policyStore(t, path, docs, 1000)
	defer st.Close()
	for _, p := range []store.Policy{{GraphAt: -1}, {GraphAt: 10, GraphAlpha: 0.5}, {GraphNProbe: -2}, {GraphDegree: 2000}, {TrainAt: 100}} {
		if err := st.SetPolicy(ctx, p); !errors.Is(err, index.ErrArgument) {
			t.Errorf("SetPolicy(%+v): %v, want ErrArgument", p, err)
		}
	}
	if in, err := st.Info(); err != nil || in.Policy != graphPolicy {
		t.Fatalf("Info.Policy %+v (%v), want %+v", in.Policy, err, graphPolicy)
	}
	if has, _ := graphs(t, st); has[0] {
		t.Fatal("a graph before Maintain")
	}
	if err := st.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if has, _ := graphs(t, st); !slices.Equal(has, []bool{true}) {
		t.Fatalf("after Maintain: graphs %v, want the trained segment's", has)
	}
	for i := 1000; i < 1400; i += 100 {
		if _, err := st.Add(ctx, docs[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	var del []string
	deleted := map[string]bool{}
	for i := 0; i < 1400; i += 9 {
		del = append(del, docs[i].ID)
		deleted[docs[i].ID] = true
	}
	if err := st.Delete(ctx, del); err != nil {
		t.Fatal(err)
	}
	if err := st.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	// Four segments of 100 (tier 6 of 2) merged into one of 400, less
	// its deletions: above GraphAt.
	has, live := graphs(t, st)
	if !slices.Equal(has, []bool{true, true}) || live[1] < graphPolicy.GraphAt {
		t.Fatalf("after adds and Maintain: graphs %v, live rows %v; want two segments with graphs", has, live)
	}
	// A small segment stays without a graph until a merge makes it one of
	// GraphAt rows (here the segments' fixed bytes ask for one at once).
	if _, err := st.Add(ctx, docs[1400:1450]); err != nil {
		t.Fatal(err)
	}
	if has, _ = graphs(t, st); !slices.Equal(has, []bool{true, true, false}) {
		t.Fatalf("after a small add: graphs %v, want the last segment without", has)
	}
	if err := st.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	has, live = graphs(t, st)
	withGraph := 0
	for i := range has {
		if live[i] >= graphPolicy.GraphAt && !has[i] {
			t.Fatalf("after Maintain: segment %d of %d live rows has no graph (graphs %v, live %v)", i, live[i], has, live)
		}
		if has[i] {
			withGraph++
		}
	}
	t.Logf("segments' live rows %v, graphs %v", live, has)

	qm, err := vecfile.Open("../testdata/deep2k/query.fvecs", vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	var walked atomic.Int64
	defer store.SetGraphWalked(func(int) { walked.Add(1) })()
	live2 := func(d vlc.Document) bool { return !deleted[d.ID] }
	found, nq := 0, 50
	for i := range nq {
		q := qm.Row(i, nil)
		hits, err := st.Search(ctx, q, vlc.SearchOptions{Ef: 32})
		if err != nil {
			t.Fatal(err)
		}
		want := exactIDs(docs, q, 10, live2)
		for _, h := range hits {
			if deleted[h.ID] {
				t.Fatalf("query %d: deleted %s returned", i, h.ID)
			}
			if slices.Contains(want, h.ID) {
				found++
			}
		}
	}
	if got := walked.Load(); got != int64(withGraph*nq) {
		t.Fatalf("walked %d graphs, want %d (%d segments, %d queries)", got, withGraph*nq, withGraph, nq)
	}
	r := float64(found) / float64(10*nq)
	t.Logf("recall@10 %.3f at ef 32 (graphs from decoded 4-bit vectors)", r)
	if r < 0.85 {
		t.Errorf("recall@10 %.3f, want at least 0.85", r)
	}
	st.Close()
	checkFolder(t, path)
	st, err = vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	if in, err := st.Info(); err != nil || in.Policy != graphPolicy || in.Rows != 1450-len(del) {
		t.Fatalf("reopened: policy %+v, %d rows (%v); want %+v, %d", in.Policy, in.Rows, err, graphPolicy, 1450-len(del))
	}
	// Turning graphs off leaves those built; none is built after.
	if err := st.SetPolicy(ctx, store.Policy{}); err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if has, _ = graphs(t, st); !slices.Equal(has, []bool{false}) {
		t.Fatalf("policy off, compacted: graphs %v, want none", has)
	}
}
