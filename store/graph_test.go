package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/store"
	"github.com/vlc-embed/vlc/vecfile"
)

// docRows presents documents' vectors as index.Rows, row i document i.
type docRows []vlc.Document

func (d docRows) Len() int                           { return len(d) }
func (d docRows) Dim() int                           { return len(d[0].Vector) }
func (d docRows) Row(i int, dst []float32) []float32 { return append(dst[:0], d[i].Vector...) }

// graphStore builds an index of docs[:trained] at path, writes a graph
// over it into the file (graph.Build, graph.WriteFile) and opens it as a
// store (no background work).
func graphStore(t *testing.T, path string, docs []vlc.Document, trained int) *vlc.Store {
	t.Helper()
	ctx := context.Background()
	st, err := vlc.Build(ctx, path, docs[:trained], vlc.Options{Seed: 1, Code: "rotated", Bits: 4})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	ix, err := index.Open(path, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, i := range []int{0, trained - 1} { // the graph's rows are the documents'
		if k, err := ix.Key(i); err != nil || string(k) != docs[i].ID {
			t.Fatalf("row %d holds %q (%v), want %q", i, k, err, docs[i].ID)
		}
	}
	g, err := graph.Build(ctx, ix, docRows(docs[:trained]), graph.BuildOptions{Degree: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := graph.WriteFile(ctx, path, ix, g); err != nil {
		t.Fatal(err)
	}
	st, err = vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// exactIDs returns the k ids of docs nearest q by exact squared L2,
// among those keep allows.
func exactIDs(docs []vlc.Document, q []float32, k int, keep func(vlc.Document) bool) []string {
	type cand struct {
		id string
		d  float32
	}
	var all []cand
	for _, d := range docs {
		if !keep(d) {
			continue
		}
		var s float32
		for j, x := range d.Vector {
			s += (x - q[j]) * (x - q[j])
		}
		all = append(all, cand{d.ID, s})
	}
	slices.SortFunc(all, func(a, b cand) int {
		if a.d != b.d {
			if a.d < b.d {
				return -1
			}
			return 1
		}
		return 0
	})
	ids := make([]string, 0, k)
	for _, c := range all[:min(k, len(all))] {
		ids = append(ids, c.id)
	}
	return ids
}

// TestStoreGraph: a store whose trained segment holds a graph, with an
// added segment and deletions, walks that graph (the hook counts it) and
// scans the added segment's lists: recall@10 against exact search over
// the live rows at least the floor and near the lists', no deleted row,
// filters honoured (an allow-list and a JSON filter), Search and
// SearchBatch the same hits; Ef < 0 scans the lists only; a compaction
// leaves a segment without a graph, searched by its lists.
func TestStoreGraph(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, 1300)
	path := filepath.Join(t.TempDir(), "g.vlc")
	st := graphStore(t, path, docs, 1000)
	defer st.Close()
	if _, err := st.Add(ctx, docs[1000:1300]); err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	var del []string
	for i := 0; i < 1300; i += 7 {
		del = append(del, docs[i].ID)
		deleted[docs[i].ID] = true
	}
	if err := st.Delete(ctx, del); err != nil {
		t.Fatal(err)
	}
	in, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Segments) != 2 || !in.Segments[0].Graph || in.Segments[1].Graph {
		t.Fatalf("segments %+v: want the trained one with a graph, the added one without", in.Segments)
	}
	qm, err := vecfile.Open("../testdata/deep2k/query.fvecs", vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	nq := 60
	queries := make([][]float32, nq)
	for i := range queries {
		queries[i] = qm.Row(i, nil)
	}
	var walked atomic.Int64
	defer store.SetGraphWalked(func(seg int) {
		if seg != 0 {
			t.Errorf("walked segment %d's graph: only segment 0 holds one", seg)
		}
		walked.Add(1)
	})()
	live := func(d vlc.Document) bool { return !deleted[d.ID] }
	third := func(d vlc.Document) bool {
		var row int
		fmt.Sscanf(d.ID, "doc-%d", &row)
		return row%3 == 0 && live(d)
	}
	var allowed []string
	for _, d := range docs {
		if third(d) || deleted[d.ID] && len(allowed)%2 == 0 { // some deleted ids too: never returned
			allowed = append(allowed, d.ID)
		}
	}
	below := func(d vlc.Document) bool {
		var row int
		fmt.Sscanf(d.ID, "doc-%d", &row)
		return row < 400 && live(d)
	}
	match, err := store.ParseFilter([]byte(`{"row": {"$lt": 400}}`))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]vlc.Document{}
	for _, d := range docs {
		byID[d.ID] = d
	}
	recall := func(name string, opt vlc.SearchOptions, keep func(vlc.Document) bool, wantWalks int64) float64 {
		t.Helper()
		walked.Store(0)
		found := 0
		batch, err := st.SearchBatch(ctx, queries, opt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := walked.Load(); got != wantWalks {
			t.Fatalf("%s: SearchBatch walked the graph %d times, want %d", name, got, wantWalks)
		}
		for i, q := range queries {
			hits, err := st.Search(ctx, q, opt)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(hits, batch[i]) {
				t.Fatalf("%s, query %d: Search %v, SearchBatch %v", name, i, hits, batch[i])
			}
			want := exactIDs(docs, q, 10, keep)
			if len(hits) != len(want) {
				t.Fatalf("%s, query %d: %d hits, want %d", name, i, len(hits), len(want))
			}
			for _, h := range hits {
				if !keep(byID[h.ID]) {
					t.Fatalf("%s, query %d: hit %q is deleted or not allowed", name, i, h.ID)
				}
				if slices.Contains(want, h.ID) {
					found++
				}
			}
		}
		if got := walked.Load(); got != 2*wantWalks {
			t.Fatalf("%s: Search and SearchBatch walked the graph %d times, want %d", name, got, 2*wantWalks)
		}
		r := float64(found) / float64(10*nq)
		t.Logf("%s: recall@10 %.3f", name, r)
		return r
	}
	walks := int64(nq)
	lists := recall("lists", vlc.SearchOptions{Ef: -1}, live, 0)
	for _, c := range []struct {
		name string
		opt  vlc.SearchOptions
		keep func(vlc.Document) bool
	}{
		{"graph", vlc.SearchOptions{}, live},
		{"graph ef 16", vlc.SearchOptions{Ef: 16}, live},
		{"graph seeded", vlc.SearchOptions{Ef: 16, SeedProbe: 1}, live},
		{"graph, a list scanned", vlc.SearchOptions{Ef: 16, ScanLists: 1}, live},
		{"graph, allow-list", vlc.SearchOptions{Filter: vlc.AllowIDs(allowed...)}, third},
		{"graph, JSON filter", vlc.SearchOptions{Filter: match}, below},
		{"graph, Where", vlc.SearchOptions{Filter: store.Where(func(id string, _ []byte) bool { return third(byID[id]) })}, third},
		{"graph, re-ranked", vlc.SearchOptions{Rerank: originals(byID), RerankFactor: 4}, live},
	} {
		r := recall(c.name, c.opt, c.keep, walks)
		if r < 0.85 || r < lists-0.05 {
			t.Errorf("%s: recall@10 %.3f, want at least 0.85 and the lists' %.3f less 0.05", c.name, r, lists)
		}
	}
	if r := recall("lists, allow-list", vlc.SearchOptions{Ef: -1, Filter: vlc.AllowIDs(allowed...)}, third, 0); r < 0.85 {
		t.Errorf("lists, allow-list: recall@10 %.3f, want at least 0.85", r)
	}

	// A compaction writes the live rows anew, without a graph.
	if err := st.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if in, err := st.Info(); err != nil || slices.ContainsFunc(in.Segments, func(s vlc.SegmentInfo) bool { return s.Graph }) {
		t.Fatalf("after Compact: %+v, %v: want no graph", in.Segments, err)
	}
	recall("compacted", vlc.SearchOptions{}, live, 0)
}

// originals re-ranks from the documents' vectors.
type originals map[string]vlc.Document

func (o originals) Vector(id string, dst []float32) ([]float32, error) {
	d, ok := o[id]
	if !ok {
		return nil, fmt.Errorf("no document %q", id)
	}
	return append(dst[:0], d.Vector...), nil
}

// TestStoreGraphBadOptions: options a walk refuses are errors naming
// them, with or without a graph.
func TestStoreGraphBadOptions(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, 300)
	st := graphStore(t, filepath.Join(t.TempDir(), "g.vlc"), docs, 300)
	defer st.Close()
	q := docs[0].Vector
	for _, c := range []struct {
		opt  vlc.SearchOptions
		q    []float32
		want error
		text string
	}{
		{vlc.SearchOptions{SeedProbe: -1}, q, index.ErrArgument, "SeedProbe -1"},
		{vlc.SearchOptions{SeedProbe: 2, Ef: -1}, q, index.ErrArgument, "Ef -1 scans the lists"},
		{vlc.SearchOptions{ScanLists: -1}, q, index.ErrArgument, "ScanLists -1"},
		{vlc.SearchOptions{ScanLists: 1, Ef: -1}, q, index.ErrArgument, "Ef -1 scans the lists"},
		{vlc.SearchOptions{}, q[:5], index.ErrDim, "query has 5 values"},
	} {
		_, err := st.Search(ctx, c.q, c.opt)
		if !errors.Is(err, c.want) || err == nil || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%+v: %v, want %v naming %q", c.opt, err, c.want, c.text)
		}
		_, err = st.SearchBatch(ctx, [][]float32{c.q}, c.opt)
		if !errors.Is(err, c.want) {
			t.Errorf("batch %+v: %v, want %v", c.opt, err, c.want)
		}
	}
}

// BuildGraph gives a store's segments graphs, each a new segment file
// committed as a merge's output is: the same live rows (Len, Get, a
// deleted id still gone), searches walk the graphs (the hook) at the
// recall floor, and the replaced files are removed. Bad arguments are
// errors naming them.
func TestStoreBuildGraph(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, 1200)
	path := filepath.Join(t.TempDir(), "b.vlc")
	st, err := vlc.Build(ctx, path, docs[:1000], vlc.Options{Seed: 1, Code: "rotated", Bits: 4})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = vlc.OpenWith(path, vlc.OpenOptions{Manual: true}); err != nil { // no merge meanwhile
		t.Fatal(err)
	}
	defer st.Close()
	byID := originals{}
	for _, d := range docs {
		byID[d.ID] = d
	}
	// A lone file: made a store of one segment with a graph.
	if err := st.BuildGraph(ctx, 0, byID, graph.BuildOptions{Degree: 16}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Add(ctx, docs[1000:]); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, []string{"doc-5", "doc-1100"}); err != nil {
		t.Fatal(err)
	}
	before, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Segments) != 2 || !before.Segments[0].Graph || before.Segments[1].Graph {
		t.Fatalf("segments %+v: want a graph in the first alone", before.Segments)
	}
	for _, c := range []struct {
		seg  int
		orig store.Originals
		text string
	}{
		{2, byID, "segment 2: the store has 2"},
		{-1, byID, "segment -1"},
		{1, nil, "needs the original vectors"},
		{1, originals{}, `id "doc-1000"`},
	} {
		err := st.BuildGraph(ctx, c.seg, c.orig, graph.BuildOptions{})
		if err == nil || !strings.Contains(err.Error(), c.text) {
			t.Errorf("BuildGraph(%d): %v, want an error naming %q", c.seg, err, c.text)
		}
	}
	if err := st.BuildGraph(ctx, 1, byID, graph.BuildOptions{Degree: 16}); err != nil {
		t.Fatal(err)
	}
	in, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Segments) != 2 || !in.Segments[0].Graph || !in.Segments[1].Graph || in.Rows != 1198 || in.Deleted != 2 {
		t.Fatalf("after BuildGraph: %d live, %d deleted, segments %+v", in.Rows, in.Deleted, in.Segments)
	}
	if in.Segments[1].File == before.Segments[1].File {
		t.Fatalf("segment 1 kept its file name %s", in.Segments[1].File)
	}
	if _, err := os.Stat(before.Segments[1].File); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the replaced file %s: %v, want it removed", before.Segments[1].File, err)
	}
	for _, id := range []string{"doc-5", "doc-1100"} {
		if _, err := st.Get(id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%s) of a deleted id: %v", id, err)
		}
	}
	if r, err := st.Get("doc-1150"); err != nil || r.ID != "doc-1150" {
		t.Errorf("Get(doc-1150): %+v, %v", r, err)
	}
	var walked atomic.Int64
	defer store.SetGraphWalked(func(int) { walked.Add(1) })()
	found, nq := 0, 40
	for i := range nq {
		q := docs[1000+5*i].Vector // queries among the added rows too
		hits, err := st.Search(ctx, q, vlc.SearchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := exactIDs(docs, q, 10, func(d vlc.Document) bool { return d.ID != "doc-5" && d.ID != "doc-1100" })
		for _, h := range hits {
			if h.ID == "doc-5" || h.ID == "doc-1100" {
				t.Fatalf("query %d: deleted %s returned", i, h.ID)
			}
			if slices.Contains(want, h.ID) {
				found++
			}
		}
	}
	if walked.Load() != int64(2*nq) {
		t.Fatalf("walked %d graphs, want %d (two segments, %d queries)", walked.Load(), 2*nq, nq)
	}
	if r := float64(found) / float64(10*nq); r < 0.85 {
		t.Errorf("recall@10 %.3f, want at least 0.85", r)
	} else {
		t.Logf("recall@10 %.3f", r)
	}
}
