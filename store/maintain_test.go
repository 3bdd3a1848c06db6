package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/store"
)

// TestTieredMerges: a store taking one document at a time keeps few
// segments (background merges fold them), every id added stays readable
// with its payload, rows deleted while a merge runs stay deleted, and
// search answers as the compacted store does.
func TestTieredMerges(t *testing.T) {
	ctx := context.Background()
	adds := 300
	if testing.Short() {
		adds = 120
	}
	docs := deepDocs(t, "../testdata/deep10k/base.f16", 0, 1000+adds)
	path := filepath.Join(t.TempDir(), "s.vlc")
	ix, err := vlc.Build(ctx, path, docs[:1000], vlc.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	ix, err = store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var deleted []string
	for i, d := range docs[1000:] {
		d.Payload = fmt.Appendf(nil, `{"i":%d}`, i)
		if _, err := ix.Add(ctx, []vlc.Document{d}); err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 { // delete an earlier one, often while a merge runs
			id := docs[1000+i-2].ID
			if err := ix.Delete(ctx, []string{id}); err != nil {
				t.Fatal(err)
			}
			deleted = append(deleted, id)
		}
	}
	if err := ix.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := ix.Info()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d segments after %d single adds", len(info.Segments), adds)
	// At most MergeFactor-1 segments per tier.
	if n := len(info.Segments); n > 2*store.DefaultMergeFactor {
		t.Errorf("%d segments after %d single adds; want at most %d", n, adds, 2*store.DefaultMergeFactor)
	}
	if want := len(docs) - len(deleted); info.Rows != want {
		t.Errorf("%d live rows, want %d", info.Rows, want)
	}
	for i, d := range docs[1000:] {
		rec, err := ix.Get(d.ID)
		if slices.Contains(deleted, d.ID) {
			if err == nil {
				t.Fatalf("deleted id %s is back after merging", d.ID)
			}
			continue
		}
		if err != nil {
			t.Fatalf("id %s: %v", d.ID, err)
		}
		if want := fmt.Sprintf(`{"i":%d}`, i); string(rec.Payload) != want {
			t.Fatalf("id %s: payload %s, want %s", d.ID, rec.Payload, want)
		}
	}
	// Search over the merged segments equals search after a compaction.
	q := docs[1050].Vector
	before, err := ix.Search(ctx, q, vlc.SearchOptions{K: 10, NProbe: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := ix.Search(ctx, q, vlc.SearchOptions{K: 10, NProbe: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if before[i].ID != after[i].ID {
			t.Fatalf("hit %d: %s before compaction, %s after", i, before[i].ID, after[i].ID)
		}
	}
}

// TestMergeLeavesLargeSegment: small segments merge among themselves;
// the large first segment is not rewritten for them (a run must hold
// MergeFactor segments of its own tier).
func TestMergeLeavesLargeSegment(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep10k/base.f16", 0, 1020)
	path := filepath.Join(t.TempDir(), "s.vlc")
	ix, err := vlc.Build(ctx, path, docs[:1000], vlc.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	ix, err = store.OpenWith(path, store.OpenOptions{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	first := ""
	for i, d := range docs[1000:] {
		if _, err := ix.Add(ctx, []vlc.Document{d}); err != nil {
			t.Fatal(err)
		}
		if err := ix.Maintain(ctx); err != nil {
			t.Fatal(err)
		}
		info, _ := ix.Info()
		if first == "" {
			first = info.Segments[0].File
		}
		if info.Segments[0].File != first {
			t.Fatalf("after %d single adds the 1,000-row segment was rewritten", i+1)
		}
		// The segments' fixed bytes (anchors) keep their number within
		// MergeFactor at this size.
		if want := store.DefaultMergeFactor; len(info.Segments) > want {
			t.Fatalf("after %d single adds: %d segments, want at most %d", i+1, len(info.Segments), want)
		}
	}
	if err := ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := vlc.Create(ctx, filepath.Join(t.TempDir(), "c.vlc"), vlc.Schema{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Compact(ctx); err != nil {
		t.Fatalf("Compact of an empty collection: %v", err)
	}
}
