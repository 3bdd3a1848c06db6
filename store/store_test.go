package store_test

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
	"github.com/vlc-embed/vlc/store"
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

// TestStoreBadInput: every refused write names the problem and leaves
// the index as it was, byte for byte.
func TestStoreBadInput(t *testing.T) {
	ctx := context.Background()
	all := deepDocs(t, "../testdata/deep2k/base.f16", 0, 1000)
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
		{"wrong dimension", []vlc.Document{all[953], {ID: "short", Vector: make([]float32, 95)}}, index.ErrDim, `document 1 ("short"): dimension does not match the index: 95 values`},
		{"NaN", []vlc.Document{{ID: "nan", Vector: nan}}, index.ErrArgument, "value 3 is NaN"},
		{"beyond float16", []vlc.Document{{ID: "big", Vector: big}}, vlc.ErrRange, "value 0 is 1e+06"},
		{"payload too large", []vlc.Document{{ID: "p", Vector: all[954].Vector, Payload: make([]byte, vlc.MaxPayloadBytes+1)}}, vlc.ErrPayload, "1048577 bytes"},
		{"id too long", []vlc.Document{{ID: strings.Repeat("x", vlc.MaxIDBytes+1), Vector: all[955].Vector}}, vlc.ErrID, "1025 bytes"},
	} {
		_, err := ix.Add(ctx, c.docs)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want %v containing %q", c.name, err, c.want, c.text)
		}
		category := vlc.ErrArgument
		if c.want == vlc.ErrDuplicateID {
			category = vlc.ErrDuplicate
		}
		if !errors.Is(err, category) {
			t.Errorf("%s: %v does not match its category %v", c.name, err, category)
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
// TestStoreLockPerWrite: the write lock is held for one write, not for
// the life of the handle that wrote: a second handle writes after the
// first one's write, on top of it; while another writer holds the lock a
// write waits for it, and gives up with ErrLocked after lockWait.
func TestStoreLockPerWrite(t *testing.T) {
	ctx := context.Background()
	all := deepDocs(t, "../testdata/deep2k/base.f16", 0, 600)
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
	if _, err := b.Add(ctx, all[550:580]); err != nil { // b reads a's write first
		t.Fatal(err)
	}
	if n := b.Len(); n != 580 {
		t.Fatalf("Len %d, want 580", n)
	}
	if err := a.Delete(ctx, []string{"doc-560"}); err != nil { // and a reads b's
		t.Fatal(err)
	}
	defer store.SetLockWait(200 * time.Millisecond)()
	release, err := store.HoldLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(ctx, all[580:590]); !errors.Is(err, vlc.ErrLocked) {
		t.Fatalf("a write while another holds the lock: %v, want ErrLocked", err)
	}
	time.AfterFunc(50*time.Millisecond, release)
	if _, err := b.Add(ctx, all[580:590]); err != nil {
		t.Fatalf("a write that waited for the lock: %v", err)
	}
	if n := b.Len(); n != 589 {
		t.Fatalf("Len %d, want 589", n)
	}
}

// TestStoreSnapshots: 64 goroutines search while one writer adds and
// deletes batches of identical vectors; every search sees a batch whole
// or not at all.
func TestStoreSnapshots(t *testing.T) {
	ctx := context.Background()
	const batch, batches = 8, 12
	base := deepDocs(t, "../testdata/deep2k/base.f16", 0, 1000)
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
	searchers, rounds := 64, 3
	if testing.Short() {
		searchers, rounds = 8, 2 // under -race on 2 cores, 64 take a minute
	}
	errs := make(chan error, searchers+1)
	for g := range searchers {
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
	for round := range rounds {
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
