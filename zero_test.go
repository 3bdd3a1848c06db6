package vlc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

// TestCosineRefusesZeroVector: under cosine a zero vector has no
// direction. It used to be stored as it was (normalising left it zero),
// at distance 0.5 from every query, above any real neighbour of cosine
// similarity below 0.5. Now it is refused wherever a vector enters, with
// an error wrapping vlc.ErrZeroVector that names the row, document or
// query; a vector that is tiny but not zero is taken, and l2 and ip take
// a zero vector as before.
func TestCosineRefusesZeroVector(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const n, d = 300, 8
	vectors := rows(n, d, 11)
	docs := make([]vlc.Document, n)
	for i, v := range vectors {
		docs[i] = vlc.Document{ID: fmt.Sprintf("doc-%d", i), Vector: v}
	}
	withZero := func() []vlc.Document {
		out := append([]vlc.Document(nil), docs...)
		out[17] = vlc.Document{ID: "blank", Vector: make([]float32, d)}
		return out
	}
	tiny := make([]float32, d)
	tiny[5] = 1e-40 // a float32 subnormal: its square underflows float32
	cosine := vlc.Options{Metric: "cosine", Anchors: 4}
	want := func(t *testing.T, err error, detail ...string) {
		t.Helper()
		if !errors.Is(err, vlc.ErrZeroVector) {
			t.Fatalf("got %v, want an error wrapping vlc.ErrZeroVector", err)
		}
		for _, s := range detail {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%q does not say %q", err, s)
			}
		}
	}
	good := filepath.Join(dir, "good.vlc")
	ix, err := vlc.Build(ctx, good, docs, cosine)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()

	t.Run("Build", func(t *testing.T) {
		p := filepath.Join(dir, "build.vlc")
		_, err := vlc.Build(ctx, p, withZero(), cosine)
		want(t, err, `document 17 ("blank")`, "every value is 0", "cosine")
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused Build left %s: %v", p, err)
		}
	})
	t.Run("Build under a cosine model", func(t *testing.T) {
		_, err := vlc.Build(ctx, filepath.Join(dir, "model.vlc"), withZero(), vlc.Options{AnchorsFrom: good})
		want(t, err, "row 17", "every value is 0")
	})
	t.Run("Add", func(t *testing.T) {
		before := ix.Len()
		_, err := ix.Add(ctx, []vlc.Document{{ID: "fine", Vector: vectors[0]}, {ID: "blank", Vector: make([]float32, d)}})
		want(t, err, `document 1 ("blank")`, "every value is 0")
		if ix.Len() != before {
			t.Errorf("a refused Add changed the index: %d vectors, was %d", ix.Len(), before)
		}
	})
	t.Run("Compress", func(t *testing.T) {
		for _, name := range []string{"zero.f16", "zero.fvecs", "zero.npy"} {
			in := filepath.Join(dir, name)
			rs := rows(n, d, 12)
			rs[17] = make([]float32, d)
			var err error
			switch filepath.Ext(name) {
			case ".f16":
				err = vecfile.WriteF16(in, rs)
			case ".fvecs":
				err = vecfile.WriteFvecs(in, rs)
			default:
				err = vecfile.WriteNpy(in, rs, "<f4")
			}
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "zero.vlc")
			for _, opt := range []vlc.Options{
				{Dim: d, Metric: "cosine", Anchors: 4},
				{Dim: d, Metric: "cosine", Anchors: 4, TrainSample: 50}, // row 17 not in the sample
				{Dim: d, Metric: "cosine", Anchors: 4, Start: 10, End: 100},
				{Dim: d, AnchorsFrom: good}, // the model's metric
			} {
				_, err := vlc.Compress(ctx, in, out, opt)
				want(t, err, in+": row 17: every value is 0", "cosine")
				if !errors.Is(err, vecfile.ErrZero) {
					t.Errorf("%v does not wrap vecfile.ErrZero", err)
				}
				if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a refused Compress left %s: %v", out, err)
				}
			}
			// Rows that leave the zero row out compress.
			if _, err := vlc.Compress(ctx, in, out, vlc.Options{Dim: d, Metric: "cosine", Anchors: 4, Start: 18}); err != nil {
				t.Errorf("rows 18 on: %v", err)
			}
			os.Remove(out)
		}
	})
	t.Run("Search", func(t *testing.T) {
		_, err := ix.Search(ctx, make([]float32, d), vlc.SearchOptions{K: 3})
		want(t, err, "query", "every value")
		queries := [][]float32{vectors[0], vectors[1], make([]float32, d)}
		_, err = ix.SearchBatch(ctx, queries, vlc.SearchOptions{K: 3})
		want(t, err, "query 2")
	})
	t.Run("tiny vectors are normalised", func(t *testing.T) {
		if _, err := ix.Add(ctx, []vlc.Document{{ID: "tiny", Vector: tiny}}); err != nil {
			t.Fatalf("Add of a tiny vector: %v", err)
		}
		hits, err := ix.Search(ctx, tiny, vlc.SearchOptions{K: 1, NProbe: 4})
		if err != nil || len(hits) != 1 || hits[0].ID != "tiny" {
			t.Errorf("a tiny query: %v, %v; want the tiny vector first", hits, err)
		}
		tinyDocs := append([]vlc.Document(nil), docs...)
		tinyDocs[17].Vector = tiny
		b, err := vlc.Build(ctx, filepath.Join(dir, "tiny.vlc"), tinyDocs, cosine)
		if err != nil {
			t.Fatalf("Build with a tiny vector: %v", err)
		}
		b.Close()
	})
	for _, metric := range []string{"l2", "ip"} {
		t.Run(metric+" takes zero vectors", func(t *testing.T) {
			b, err := vlc.Build(ctx, filepath.Join(dir, metric+".vlc"), withZero(), vlc.Options{Metric: metric, Anchors: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if _, err := b.Add(ctx, []vlc.Document{{Vector: make([]float32, d)}}); err != nil {
				t.Errorf("Add: %v", err)
			}
			if hits, err := b.Search(ctx, make([]float32, d), vlc.SearchOptions{K: 3}); err != nil || len(hits) != 3 {
				t.Errorf("a zero query: %v, %v", hits, err)
			}
		})
	}
}
