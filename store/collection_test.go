package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/store"
)

// exactTop is the k nearest docs to q by squared L2, computed directly.
func exactTop(docs []vlc.Document, q []float32, k int) []string {
	type hit struct {
		id string
		d  float32
	}
	hits := make([]hit, len(docs))
	for i, d := range docs {
		hits[i] = hit{d.ID, vec.L2(q, d.Vector)}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if a.d < b.d {
			return -1
		}
		if a.d > b.d {
			return 1
		}
		return 0
	})
	out := make([]string, 0, k)
	for _, h := range hits[:min(k, len(hits))] {
		out = append(out, h.id)
	}
	return out
}

// recall is recall@k of the store's default search against exact search
// over docs, for queries drawn from docs (perturbed).
func recall(t *testing.T, ix *vlc.Store, docs []vlc.Document, queries int) float64 {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 5))
	found, total := 0, 0
	for range queries {
		q := slices.Clone(docs[r.IntN(len(docs))].Vector)
		for j := range q {
			q[j] += float32(r.NormFloat64() * 0.02)
		}
		want := exactTop(docs, q, 10)
		hits, err := ix.Search(context.Background(), q, vlc.SearchOptions{K: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			if slices.Contains(want, h.ID) {
				found++
			}
		}
		total += len(want)
	}
	return float64(found) / float64(total)
}

// TestCollectionLifecycle: a collection created empty answers exactly
// while small, trains itself in the background at Policy.TrainAt without
// losing a write made meanwhile, and keeps recall after training.
func TestCollectionLifecycle(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep10k/base.f16", 0, 2000)
	path := filepath.Join(t.TempDir(), "c.vlc")
	ix, err := vlc.Create(ctx, path, vlc.Schema{Dim: 96, Policy: vlc.Policy{TrainAt: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := vlc.Create(ctx, path, vlc.Schema{Dim: 96}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("Create over a collection: %v, want ErrExists", err)
	}
	if n, _ := ix.Count(nil); n != 0 {
		t.Fatalf("a new collection counts %d", n)
	}
	hits, err := ix.Search(ctx, docs[0].Vector, vlc.SearchOptions{})
	if err != nil || len(hits) != 0 {
		t.Fatalf("search of an empty collection: %v hits, %v", hits, err)
	}
	// One document at a time, then batches.
	for _, d := range docs[:20] {
		if _, err := ix.Add(ctx, []vlc.Document{d}); err != nil {
			t.Fatal(err)
		}
	}
	for lo := 20; lo < 900; lo += 80 {
		if _, err := ix.Add(ctx, docs[lo:min(lo+80, 900)]); err != nil {
			t.Fatal(err)
		}
	}
	if got := recall(t, ix, docs[:900], 30); got != 1 {
		t.Errorf("untrained recall@10 %.3f, want 1 (exact)", got)
	}
	info, _ := ix.Info()
	if info.Lists != 1 {
		t.Fatalf("trained at 900 vectors (%d lists), TrainAt is 1000", info.Lists)
	}
	// Cross the threshold; writes go on while it trains.
	for lo := 900; lo < 2000; lo += 100 {
		if _, err := ix.Add(ctx, docs[lo:lo+100]); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Delete(ctx, []string{docs[5].ID}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	info, _ = ix.Info()
	if info.Lists < 2 || info.Rows != 1999 {
		t.Fatalf("after 2000 adds: %d lists, %d rows; want trained, 1999", info.Lists, info.Rows)
	}
	live := append(slices.Clone(docs[:5]), docs[6:]...)
	if got := recall(t, ix, live, 50); got < 0.95 {
		t.Errorf("trained recall@10 %.3f, want at least 0.95", got)
	}
	for _, d := range live {
		if _, err := ix.Get(d.ID); err != nil {
			t.Fatalf("%s lost by training: %v", d.ID, err)
		}
	}
	if _, err := ix.Get(docs[5].ID); err == nil {
		t.Fatalf("%s deleted, and back after training", docs[5].ID)
	}
	// A snapshot opens on its own and holds the same.
	snapPath := filepath.Join(t.TempDir(), "snap.vlc")
	if err := ix.Snapshot(ctx, snapPath); err != nil {
		t.Fatal(err)
	}
	sn, err := vlc.Open(snapPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := sn.Len(); n != 1999 {
		t.Errorf("snapshot holds %d rows, want 1999", n)
	}
	sn.Close()
	if err := vlc.Remove(ctx, snapPath); err != nil {
		t.Fatal(err)
	}
	if _, err := vlc.Open(snapPath); err == nil {
		t.Fatal("a removed snapshot opens")
	}
}

// TestUpsertAndPages: Upsert replaces a live id in one commit, SetPayloads
// changes a payload without changing the vector, List pages through the
// ids in order, Get returns the decoded vector, Radius bounds the hits.
func TestUpsertAndPages(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep10k/base.f16", 0, 300)
	ix, err := vlc.Create(ctx, filepath.Join(t.TempDir(), "c.vlc"), vlc.Schema{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	moved := vlc.Document{ID: docs[3].ID, Vector: docs[200].Vector, Payload: []byte(`{"v":2}`)}
	if _, err := ix.Add(ctx, []vlc.Document{moved}); !errors.Is(err, vlc.ErrDuplicateID) {
		t.Fatalf("Add of a live id: %v, want ErrDuplicateID", err)
	}
	if _, err := ix.Upsert(ctx, []vlc.Document{moved}); err != nil {
		t.Fatal(err)
	}
	rec, err := ix.Get(docs[3].ID, vlc.WithVector())
	if err != nil || string(rec.Payload) != `{"v":2}` || !slices.Equal(rec.Vector, docs[200].Vector) {
		t.Fatalf("after Upsert: %q %v (vector equal %v)", rec.Payload, err, slices.Equal(rec.Vector, docs[200].Vector))
	}
	if n, _ := ix.Count(nil); n != 300 {
		t.Fatalf("Upsert changed the count to %d", n)
	}
	if err := ix.SetPayloads(ctx, []vlc.Record{{ID: docs[7].ID, Payload: []byte(`{"tag":"x"}`)}}); err != nil {
		t.Fatal(err)
	}
	rec, err = ix.Get(docs[7].ID, vlc.WithVector())
	if err != nil || string(rec.Payload) != `{"tag":"x"}` || !slices.Equal(rec.Vector, docs[7].Vector) {
		t.Fatalf("after SetPayloads: %q %v", rec.Payload, err)
	}
	if err := ix.SetPayloads(ctx, []vlc.Record{{ID: "nope"}}); !errors.Is(err, vlc.ErrNotFound) {
		t.Fatalf("SetPayloads of an unknown id: %v", err)
	}
	var ids []string
	after := ""
	for {
		page, err := ix.List(ctx, vlc.ListOptions{After: after, Limit: 64})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			ids = append(ids, r.ID)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	want := make([]string, len(docs))
	for i, d := range docs {
		want[i] = d.ID
	}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("List pages gave %d ids, want the %d in order", len(ids), len(want))
	}
	q := docs[10].Vector
	all, err := ix.Search(ctx, q, vlc.SearchOptions{K: 50})
	if err != nil {
		t.Fatal(err)
	}
	r := all[4].Distance
	near, err := ix.Search(ctx, q, vlc.SearchOptions{K: 50, Radius: r})
	if err != nil {
		t.Fatal(err)
	}
	if len(near) < 5 || near[len(near)-1].Distance > r {
		t.Fatalf("radius %v: %d hits", r, len(near))
	}
	_ = fmt.Sprint
}
