//go:build unix

package vlc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// truncateOnTraining is a log handler that truncates a file when compress
// says it starts training, as another program might.
type truncateOnTraining struct {
	slog.Handler
	path string
}

func (h truncateOnTraining) Enabled(context.Context, slog.Level) bool { return true }

func (h truncateOnTraining) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "training" {
		return os.Truncate(h.path, 4096)
	}
	return nil
}

// An input truncated while compress trains on it (in par.For's workers)
// gives an error naming the input and wrapping vecfile.ErrChanged, and no
// index, rather than ending the process with SIGBUS.
func TestCompressInputTruncatedWhileTraining(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "x.f16")
	b, err := os.ReadFile("testdata/deep10k/base.f16")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.vlc")
	log := slog.New(truncateOnTraining{slog.Default().Handler(), in})
	_, err = vlc.Compress(context.Background(), in, out, vlc.Options{Dim: 96, Bits: 4, Backend: "cpu", Logger: log})
	if !errors.Is(err, vecfile.ErrChanged) || !strings.HasPrefix(err.Error(), in+":") {
		t.Fatalf("%v, want an error naming %s and wrapping vecfile.ErrChanged", err, in)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an index was written: %v", err)
	}
}

// Re-rank vectors through the store's API: a file truncated while mapped
// gives ErrChanged naming it, a non-finite value ErrArgument naming the
// id; never a crash or NaN distances.
func TestStoreRerankVectorsChecked(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("testdata/deep10k/base.f16")
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "x.f16")
	if err := os.WriteFile(in, b[:2000*96*2], 0o644); err != nil { // 2,000 rows: what the checks need
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.vlc")
	if _, err := vlc.Compress(context.Background(), in, out, vlc.Options{Dim: 96, Bits: 4, Backend: "cpu", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	ix, err := vlc.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	orig, err := vecfile.Open(in, vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	q := orig.Row(0, nil)
	opt := vlc.SearchOptions{K: 5, Rerank: vlc.RowOriginals(nanRows{orig})}
	if _, err := ix.Search(context.Background(), q, opt); !errors.Is(err, index.ErrArgument) || !strings.Contains(err.Error(), "value 7 is NaN") {
		t.Errorf("re-rank vectors with NaN: %v, want ErrArgument naming value 7", err)
	}
	opt.Rerank = vlc.RowOriginals(orig)
	if err := os.Truncate(in, 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Search(context.Background(), q, opt); !errors.Is(err, vecfile.ErrChanged) || !strings.HasPrefix(err.Error(), in+":") {
		t.Errorf("re-rank file truncated: %v, want ErrChanged naming %s", err, in)
	}
}

// nanRows is rows with value 7 of every row NaN.
type nanRows struct{ *vecfile.Matrix }

func (r nanRows) Row(i int, dst []float32) []float32 {
	x := r.Matrix.Row(i, dst)
	x[7] = float32(math.NaN())
	return x
}

// A store's ids and payloads (sections KEYS, KIDX, PAYL) overwritten in
// place under an open Index: Get and Search never panic; they answer or
// fail with ErrCorrupt (or ErrNotFound for an id no longer found).
func TestStoreKeysRewrittenInPlace(t *testing.T) {
	orig, err := vecfile.Open("testdata/deep10k/base.f16", vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	docs := make([]vlc.Document, 2000)
	for i := range docs {
		docs[i] = vlc.Document{ID: fmt.Sprintf("doc-%d", i), Vector: orig.Row(i, nil), Payload: []byte(fmt.Sprintf("payload %d", i))}
	}
	for _, kind := range []string{"KEYS", "KIDX", "PAYL"} {
		for _, fill := range []byte{0x00, 0xff} {
			path := filepath.Join(t.TempDir(), "s.vlc")
			ix, err := vlc.Build(context.Background(), path, docs, vlc.Options{Bits: 4, Backend: "cpu", Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := index.Open(path, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			secs := raw.Sections()
			raw.Close()
			for _, s := range secs {
				if s.Kind.String() == kind {
					w, err := os.OpenFile(path, os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					w.WriteAt(bytes.Repeat([]byte{fill}, int(s.Length)), int64(s.Offset))
					w.Close()
				}
			}
			for i := 0; i < 2000; i += 97 {
				_, err := ix.Get(fmt.Sprintf("doc-%d", i))
				if err != nil && !errors.Is(err, index.ErrCorrupt) && !errors.Is(err, vlc.ErrNotFound) {
					t.Errorf("%s filled with %#x: Get: %v", kind, fill, err)
				}
				_, err = ix.Search(context.Background(), docs[i].Vector, vlc.SearchOptions{K: 5})
				if err != nil && !errors.Is(err, index.ErrCorrupt) {
					t.Errorf("%s filled with %#x: Search: %v", kind, fill, err)
				}
			}
			ix.Close()
		}
	}
}

// Deleting every row of an added segment drops the segment and, once no
// search reads it, its file: a store that adds and deletes all day does
// not grow.
func TestDeleteDropsEmptySegments(t *testing.T) {
	orig, err := vecfile.Open("testdata/deep10k/base.f16", vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	docs := make([]vlc.Document, 1000)
	for i := range docs {
		docs[i] = vlc.Document{ID: fmt.Sprint(i), Vector: orig.Row(i, nil)}
	}
	path := filepath.Join(t.TempDir(), "s.vlc")
	ix, err := vlc.Build(context.Background(), path, docs, vlc.Options{Bits: 4, Backend: "cpu", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for round := range 5 {
		a, b := fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round)
		if _, err := ix.Add(context.Background(), []vlc.Document{{ID: a, Vector: orig.Row(2000, nil)}, {ID: b, Vector: orig.Row(2001, nil)}}); err != nil {
			t.Fatal(err)
		}
		if err := ix.Delete(context.Background(), []string{a}); err != nil {
			t.Fatal(err)
		}
		in, _ := ix.Info()
		if len(in.Segments) != 2 {
			t.Fatalf("round %d, half the segment deleted: %d segments, want 2", round, len(in.Segments))
		}
		if err := ix.Delete(context.Background(), []string{b}); err != nil {
			t.Fatal(err)
		}
		in, _ = ix.Info()
		if len(in.Segments) != 1 || in.Rows != 1000 {
			t.Fatalf("round %d, all of it deleted: %d segments, %d rows; want 1 and 1000", round, len(in.Segments), in.Rows)
		}
	}
	files, _ := os.ReadDir(path + ".d")
	if len(files) != 1 {
		t.Errorf("%d files in the segment folder after 5 adds deleted again, want 1 (the trained segment)", len(files))
	}
	hits, err := ix.Search(context.Background(), orig.Row(7, nil), vlc.SearchOptions{K: 1})
	if err != nil || len(hits) != 1 || hits[0].ID != "7" {
		t.Errorf("search after: %v %v", hits, err)
	}
	reopened, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	reopened.Close()
}
