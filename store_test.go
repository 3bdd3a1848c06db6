package vlc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// deepDocs returns rows lo..hi-1 of a testdata base as documents with ids
// "doc-<row>" and payloads {"row":<row>}.
func deepDocs(t testing.TB, path string, lo, hi int) []vlc.Document {
	t.Helper()
	m, err := vecfile.Open(path, vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	docs := make([]vlc.Document, 0, hi-lo)
	for i := lo; i < hi; i++ {
		docs = append(docs, vlc.Document{ID: fmt.Sprintf("doc-%d", i), Vector: m.Row(i, nil), Payload: fmt.Appendf(nil, `{"row":%d}`, i)})
	}
	return docs
}

func ids(hits []vlc.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

// TestStoreLifecycle builds from memory, adds, deletes, reopens and
// compacts, checking at each step what searches and Get return.
func TestStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	all := deepDocs(t, "testdata/deep2k/base.f16", 0, 2000)
	path := filepath.Join(t.TempDir(), "s.vlc")
	ix, err := vlc.Build(ctx, path, all[:1800], vlc.Options{Bits: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	self := func(ix *vlc.Index, d vlc.Document) []vlc.Hit {
		t.Helper()
		hits, err := ix.Search(ctx, d.Vector, vlc.SearchOptions{K: 5, NProbe: 8})
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	if h := self(ix, all[7]); h[0].ID != "doc-7" || string(h[0].Payload) != `{"row":7}` {
		t.Fatalf("nearest to doc-7: %+v", h[0])
	}
	added, err := ix.Add(ctx, all[1800:])
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 200 || added[0] != "doc-1800" {
		t.Fatalf("Add returned %d ids, first %q", len(added), added[0])
	}
	found := 0
	for _, d := range all[1800:] {
		if h := self(ix, d); h[0].ID == d.ID {
			found++
		}
	}
	if found < 196 {
		t.Fatalf("added vectors are their own nearest in %d of 200 searches", found)
	}
	if rec, err := ix.Get("doc-1900"); err != nil || string(rec.Payload) != `{"row":1900}` {
		t.Fatalf("Get(doc-1900) = %+v, %v", rec, err)
	}
	// Delete some of each segment; they never come back.
	gone := []string{"doc-7", "doc-8", "doc-1850", "doc-1999"}
	if err := ix.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	check := func(ix *vlc.Index, stage string) {
		t.Helper()
		if n := ix.Len(); n != 1996 {
			t.Fatalf("%s: Len %d, want 1996", stage, n)
		}
		for _, id := range gone {
			if _, err := ix.Get(id); !errors.Is(err, vlc.ErrNotFound) {
				t.Fatalf("%s: Get(%s) after delete: %v", stage, id, err)
			}
		}
		for _, i := range []int{7, 8, 1850, 1999} {
			for _, h := range self(ix, all[i]) {
				if slices.Contains(gone, h.ID) {
					t.Fatalf("%s: deleted %s returned", stage, h.ID)
				}
			}
		}
		if h := self(ix, all[1901]); h[0].ID != "doc-1901" {
			t.Fatalf("%s: nearest to doc-1901: %s", stage, h[0].ID)
		}
		if err := ix.Verify(); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
	}
	check(ix, "after delete")
	in, _ := ix.Info()
	if len(in.Segments) != 2 || in.Deleted != 4 || in.Rows != 1996 {
		t.Fatalf("info: %d segments, %d deleted, %d rows", len(in.Segments), in.Deleted, in.Rows)
	}
	ix.Close()
	if ix, err = vlc.Open(path); err != nil {
		t.Fatal(err)
	}
	check(ix, "reopened")
	if err := ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check(ix, "compacted")
	in, _ = ix.Info()
	if len(in.Segments) != 1 || in.Deleted != 0 {
		t.Fatalf("compacted: %d segments, %d deleted", len(in.Segments), in.Deleted)
	}
	if _, err := os.Stat(path + ".d"); !os.IsNotExist(err) {
		t.Fatalf("segment folder left after compaction: %v", err)
	}
	ix.Close()
	if ix, err = vlc.Open(path); err != nil {
		t.Fatal(err)
	}
	check(ix, "compacted, reopened")
	// An id deleted can be added again.
	if _, err := ix.Add(ctx, []vlc.Document{{ID: "doc-7", Vector: all[7].Vector}}); err != nil {
		t.Fatal(err)
	}
	if h := self(ix, all[7]); h[0].ID != "doc-7" {
		t.Fatalf("re-added doc-7: nearest is %s", h[0].ID)
	}
}

// TestStoreBadInput: every refused write names the problem and leaves
// the index as it was, byte for byte.
func TestStoreBadInput(t *testing.T) {
	ctx := context.Background()
	all := deepDocs(t, "testdata/deep2k/base.f16", 0, 1000)
	path := filepath.Join(t.TempDir(), "s.vlc")
	ix, err := vlc.Build(ctx, path, all[:900], vlc.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Add(ctx, all[900:950]); err != nil { // a store, not a lone file
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	nan := slices.Clone(all[960].Vector)
	nan[3] = float32(math.NaN())
	big := slices.Clone(all[961].Vector)
	big[0] = 1e6
	for _, c := range []struct {
		name string
		docs []vlc.Document
		want error
		text string
	}{
		{"duplicate of a live id", []vlc.Document{all[950], {ID: "doc-3", Vector: all[951].Vector}}, vlc.ErrDuplicateID, `"doc-3": already in the index`},
		{"duplicate within the batch", []vlc.Document{all[952], all[952]}, vlc.ErrDuplicateID, "documents 0 and 1"},
		{"wrong dimension", []vlc.Document{all[953], {ID: "short", Vector: make([]float32, 95)}}, index.ErrDim, `document 1 ("short"): index: query dimension does not match the index: 95 values`},
		{"NaN", []vlc.Document{{ID: "nan", Vector: nan}}, index.ErrArgument, "value 3 is NaN"},
		{"beyond float16", []vlc.Document{{ID: "big", Vector: big}}, vlc.ErrRange, "value 0 is 1e+06"},
		{"payload too large", []vlc.Document{{ID: "p", Vector: all[954].Vector, Payload: make([]byte, vlc.MaxPayloadBytes+1)}}, vlc.ErrPayload, "1048577 bytes"},
		{"id too long", []vlc.Document{{ID: strings.Repeat("x", vlc.MaxIDBytes+1), Vector: all[955].Vector}}, vlc.ErrID, "1025 bytes"},
	} {
		_, err := ix.Add(ctx, c.docs)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want %v containing %q", c.name, err, c.want, c.text)
		}
	}
	if err := ix.Delete(ctx, []string{"doc-1", "no-such-id"}); !errors.Is(err, vlc.ErrNotFound) || !strings.Contains(err.Error(), `"no-such-id"`) {
		t.Errorf("delete of an unknown id: %v", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("a refused write changed the manifest")
	}
	if n := ix.Len(); n != 950 {
		t.Fatalf("Len %d after refused writes, want 950", n)
	}
	if _, err := ix.Get("doc-1"); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(path + ".d")
	if len(entries) != 2 {
		t.Fatalf("segment folder holds %d files after refused writes, want 2", len(entries))
	}
}

// TestStoreLock: a second writer of the same index (here a second Index
// in this process, which flock treats as another writer) is refused.
func TestStoreLock(t *testing.T) {
	ctx := context.Background()
	all := deepDocs(t, "testdata/deep2k/base.f16", 0, 600)
	path := filepath.Join(t.TempDir(), "s.vlc")
	a, err := vlc.Build(ctx, path, all[:500], vlc.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Add(ctx, all[500:550]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(ctx, all[550:]); !errors.Is(err, vlc.ErrLocked) {
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	a.Close()
	if _, err := b.Add(ctx, all[550:]); err != nil { // b reads a's write first
		t.Fatal(err)
	}
	if n := b.Len(); n != 600 {
		t.Fatalf("Len %d, want 600", n)
	}
}

// TestStoreSnapshots: 64 goroutines search while one writer adds and
// deletes batches of identical vectors; every search sees a batch whole
// or not at all.
func TestStoreSnapshots(t *testing.T) {
	ctx := context.Background()
	const batch, batches = 8, 12
	base := deepDocs(t, "testdata/deep2k/base.f16", 0, 1000)
	path := filepath.Join(t.TempDir(), "s.vlc")
	ix, err := vlc.Build(ctx, path, base, vlc.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// Batch b's vectors all equal base row b, so a search for it finds the
	// batch's vectors first (distance zero but for the codes' error).
	point := func(b int) []float32 { return base[b].Vector }
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 65)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for !stop.Load() {
				b := r.IntN(batches)
				hits, err := ix.Search(ctx, point(b), vlc.SearchOptions{K: 2*batch + 2, NProbe: 4})
				if err != nil {
					errs <- err
					return
				}
				n := 0
				for _, h := range hits {
					if strings.HasPrefix(h.ID, fmt.Sprintf("b%d-", b)) {
						n++
					}
				}
				if n != 0 && n != batch {
					errs <- fmt.Errorf("search saw %d of batch %d's %d vectors", n, b, batch)
					return
				}
				time.Sleep(50 * time.Microsecond) // leave the writer some of the 2 cores CI has

			}
		}()
	}
	for round := range 3 {
		for b := range batches {
			docs := make([]vlc.Document, batch)
			for j := range docs {
				docs[j] = vlc.Document{ID: fmt.Sprintf("b%d-%d", b, j), Vector: point(b)}
			}
			if _, err := ix.Add(ctx, docs); err != nil {
				t.Fatal(err)
			}
			if b%2 == round%2 {
				ids := make([]string, batch)
				for j := range ids {
					ids[j] = fmt.Sprintf("b%d-%d", b, j)
				}
				if err := ix.Delete(ctx, ids); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := ix.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		// Leave each batch deleted before the next round adds it again.
		for b := range batches {
			if b%2 != round%2 {
				ids := make([]string, batch)
				for j := range ids {
					ids[j] = fmt.Sprintf("b%d-%d", b, j)
				}
				if err := ix.Delete(ctx, ids); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
