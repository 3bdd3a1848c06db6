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
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/store"
	"github.com/vlc-embed/vlc/vecfile"
)

// graphPolicy is the policy the graph job tests set: graphs for
// segments of 300 live rows, merges of 2.
var graphPolicy = store.Policy{GraphAt: 300, GraphDegree: 16, MergeFactor: 2}

// jobRows is the rows of the store the graph job tests build: one
// segment, above graphPolicy.GraphAt.
const jobRows = 350

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

// segmentGraphOptions reads the options segment i's graph was built with
// from its file.
func segmentGraphOptions(t *testing.T, st *vlc.Store, i int) graph.BuildOptions {
	t.Helper()
	in, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(in.Segments[i].File, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	g, err := graph.Open(ix)
	if err != nil {
		t.Fatal(err)
	}
	return g.Options()
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

// TestGraphJobRaces: writes of another handle (as of another process)
// land while a graph job is built, outside the lock. Rows deleted
// meanwhile: the graph commits (its rows are the segment's) and the
// rows stay deleted. A compaction meanwhile replaces the segment: the
// job commits nothing (the next one builds the compacted segment's
// graph). A merge meanwhile that takes the segment in: the same. After
// each, every live row is found, no deleted one, and the segment folder
// holds nothing the store does not name.
func TestGraphJobRaces(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, jobRows+100)
	for _, c := range []struct {
		name  string
		stage string
		// race runs in the job, on other, a handle of the same store;
		// it returns the ids it deleted.
		race func(other *vlc.Store) []string
		// built is the graphs built in all: 1 where the job that raced
		// commits, 2 where it is dropped and another builds the graph of
		// what replaced its segment.
		built int
	}{
		{"delete", "computed", func(o *vlc.Store) []string {
			ids := []string{docs[3].ID, docs[200].ID, docs[jobRows-1].ID}
			if err := o.Delete(ctx, ids); err != nil {
				t.Fatal(err)
			}
			return ids
		}, 1},
		{"delete before commit", "written", func(o *vlc.Store) []string {
			ids := []string{docs[10].ID, docs[11].ID}
			if err := o.Delete(ctx, ids); err != nil {
				t.Fatal(err)
			}
			return ids
		}, 1},
		{"compact", "written", func(o *vlc.Store) []string {
			ids := []string{docs[20].ID}
			if err := o.Delete(ctx, ids); err != nil {
				t.Fatal(err)
			}
			if err := o.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			return ids
		}, 2},
		{"merge", "computed", func(o *vlc.Store) []string {
			// Two small segments beside the first: the merge's fixed-bytes
			// rule folds them, and with them the segment the job built for.
			if _, err := o.Add(ctx, docs[jobRows:jobRows+50]); err != nil {
				t.Fatal(err)
			}
			if _, err := o.Add(ctx, docs[jobRows+50:jobRows+100]); err != nil {
				t.Fatal(err)
			}
			if err := o.Maintain(ctx); err != nil {
				t.Fatal(err)
			}
			return nil
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.vlc")
			st := policyStore(t, path, docs, jobRows)
			defer st.Close()
			other, err := vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			var gone []string
			raced, built := false, 0
			defer store.SetJobHook(func(kind, stage string) {
				if kind == "graph" && stage == "computed" {
					built++
				}
				if kind == "graph" && stage == c.stage && !raced {
					raced = true
					gone = c.race(other)
				}
			})()
			// One job at a time: runJob through Maintain runs until none is
			// due, so look between the job that raced and the next
			// through another handle's view of the store.
			if err := st.Maintain(ctx); err != nil {
				t.Fatal(err)
			}
			if !raced || built != c.built {
				t.Fatalf("raced %v, %d graphs built; want %d", raced, built, c.built)
			}
			has, live := graphs(t, st)
			for i := range has {
				if live[i] >= graphPolicy.GraphAt && !has[i] {
					t.Errorf("segment %d of %d live rows has no graph after Maintain (graphs %v)", i, live[i], has)
				}
			}
			want := jobRows - len(gone)
			if c.name == "merge" {
				want = jobRows + 100
			}
			if n := st.Len(); n != want {
				t.Errorf("%d live rows, want %d", n, want)
			}
			for _, id := range gone {
				if _, err := st.Get(id); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("Get(%s) of an id deleted during the job: %v", id, err)
				}
			}
			hits, err := st.Search(ctx, docs[0].Vector, vlc.SearchOptions{K: 1000, Ef: 1000, NProbe: 1 << 16})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, h := range hits {
				if slices.Contains(gone, h.ID) || seen[h.ID] {
					t.Fatalf("hit %s deleted or twice", h.ID)
				}
				seen[h.ID] = true
			}
			if len(hits) != want {
				t.Errorf("a search of every row through the graphs found %d, want %d", len(hits), want)
			}
			st.Close()
			other.Close()
			checkFolder(t, path)
		})
	}
}

// TestGraphJobCancelled: a graph job whose context ends while it builds,
// after the graph is computed, or while it waits for the lock to commit,
// commits nothing and leaves no file behind (the pending folder empty,
// no segment the manifest does not name), and the store reopens whole;
// the next Maintain builds the graph.
func TestGraphJobCancelled(t *testing.T) {
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, jobRows)
	for _, stage := range []string{"start", "computed", "written"} {
		t.Run(stage, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.vlc")
			st := policyStore(t, path, docs, jobRows)
			defer st.Close()
			ctx, cancel := context.WithCancel(context.Background())
			if stage == "start" {
				cancel()
			}
			var release func()
			fired := false
			defer store.SetJobHook(func(kind, s string) {
				if kind != "graph" || s != stage || fired {
					return
				}
				fired = true
				if s == "written" { // the commit then waits for the lock, and gives up
					var err error
					if release, err = store.HoldLock(path); err != nil {
						t.Error(err)
					}
				}
				cancel()
			})()
			err := st.Maintain(ctx)
			if release != nil {
				release()
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Maintain: %v, want context.Canceled", err)
			}
			if has, _ := graphs(t, st); has[0] {
				t.Fatal("a graph committed by a cancelled job")
			}
			st.Close()
			checkFolder(t, path)
			st, err = vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Maintain(context.Background()); err != nil {
				t.Fatal(err)
			}
			if has, _ := graphs(t, st); !has[0] || st.Len() != jobRows {
				t.Fatalf("after a Maintain not cancelled: graphs %v, %d rows", has, st.Len())
			}
		})
	}
}

// TestGraphPolicyCollection: a collection created with GraphAt holds its
// vectors exactly (a code the graph does not take: no graph) until it
// trains; then the trained segment gets a graph, and searches walk it.
func TestGraphPolicyCollection(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, 700)
	path := filepath.Join(t.TempDir(), "c.vlc")
	st, err := store.Create(ctx, path, store.Schema{Dim: 96, Code: "rotated", Bits: 4, Policy: store.Policy{TrainAt: 500, GraphAt: 150, GraphDegree: 16, GraphCompact: true}})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = store.OpenWith(path, store.OpenOptions{Manual: true}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Add(ctx, docs[:300]); err != nil {
		t.Fatal(err)
	}
	if err := st.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if has, _ := graphs(t, st); slices.Contains(has, true) {
		t.Fatalf("untrained: graphs %v, want none (flat code)", has)
	}
	if _, err := st.Add(ctx, docs[300:700]); err != nil {
		t.Fatal(err)
	}
	if err := st.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	has, live := graphs(t, st)
	if len(has) != 1 || !has[0] || live[0] != 700 {
		t.Fatalf("trained: graphs %v, live rows %v; want one segment of 700 with a graph", has, live)
	}
	if opt := segmentGraphOptions(t, st, 0); !opt.Compact || opt.Degree != 16 {
		t.Fatalf("the segment's graph was built with %+v, want the policy's compact lists and degree 16", opt)
	}
	var walked atomic.Int64
	defer store.SetGraphWalked(func(int) { walked.Add(1) })()
	hits, err := st.Search(ctx, docs[5].Vector, store.SearchOptions{K: 3})
	if err != nil || len(hits) != 3 || hits[0].ID != docs[5].ID || walked.Load() != 1 {
		t.Fatalf("search of a row: %v, %v, %d walks; want it first, through the graph", hits, err, walked.Load())
	}
	for _, p := range []store.Schema{{Dim: 8, Metric: "ip", Policy: store.Policy{GraphAt: 10}}, {Dim: 8, Code: "sq8", Policy: store.Policy{GraphAt: 10}}} {
		if _, err := store.Create(ctx, filepath.Join(t.TempDir(), "x.vlc"), p); !errors.Is(err, index.ErrArgument) {
			t.Errorf("Create(%+v): %v, want ErrArgument", p, err)
		}
	}
}

// TestMergeAfterGraphCommit: a merge computed from a version one of whose
// input segments then gets a graph (another handle's graph job, under a
// policy changed meanwhile) finds that input's file gone while the newest
// version holds its rows under a new name. No row may be lost or live
// twice; and the merge starts again (the graph commit counts a change of
// layout) rather than write those rows as deleted copies beside the new
// file, which a vacuum merge would then have to drop.
func TestMergeAfterGraphCommit(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, 770)
	path := filepath.Join(t.TempDir(), "m.vlc")
	st := policyStore(t, path, docs, 600)
	defer st.Close()
	if err := st.Maintain(ctx); err != nil { // the first segment's graph
		t.Fatal(err)
	}
	for _, r := range [][2]int{{600, 700}, {700, 770}} { // both of tier 6 (of 2)
		if _, err := st.Add(ctx, docs[r[0]:r[1]]); err != nil {
			t.Fatal(err)
		}
	}
	other, err := vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	merged, merges := false, 0
	defer store.SetJobHook(func(kind, stage string) {
		if kind == "merge" && stage == "written" {
			merges++
		}
		if kind != "merge" || stage != "written" || merged {
			return
		}
		merged = true
		if err := other.SetPolicy(ctx, store.Policy{GraphAt: 80, GraphDegree: 16, MergeFactor: 100}); err != nil {
			t.Fatal(err)
		}
		if err := other.Maintain(ctx); err != nil {
			t.Fatal(err)
		}
		if has, _ := graphs(t, other); !slices.Equal(has, []bool{true, true, false}) {
			t.Fatalf("the other handle's graphs %v, want the first two segments'", has)
		}
	})()
	if err := st.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if !merged || merges != 1 {
		t.Fatalf("%d merges ran, want the one that met the graph commit and was dropped", merges)
	}
	if n := st.Len(); n != 770 {
		t.Fatalf("%d live rows after the merge met the graph commit, want 770", n)
	}
	for _, d := range docs {
		if _, err := st.Get(d.ID); err != nil {
			t.Fatalf("Get(%s): %v", d.ID, err)
		}
	}
	st.Close()
	other.Close()
	checkFolder(t, path)
}
