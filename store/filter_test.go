package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// deep10k builds an index of testdata/deep10k (ids "doc-<row>") and
// returns it with the base and query vectors.
func deep10k(t testing.TB) (*vlc.Store, [][]float32, [][]float32) {
	t.Helper()
	docs := deepDocs(t, "../testdata/deep10k/base.f16", 0, 10000)
	ix, err := vlc.Build(context.Background(), filepath.Join(t.TempDir(), "deep10k.vlc"), docs, vlc.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	qm, err := vecfile.Open("../testdata/deep10k/query.fvecs", vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	base := make([][]float32, len(docs))
	for i, d := range docs {
		base[i] = d.Vector
	}
	queries := make([][]float32, qm.Len())
	for i := range queries {
		queries[i] = qm.Row(i, nil)
	}
	return ix, base, queries
}

// allowed draws a share of the rows, seeded.
func allowed(n int, share float64, seed uint64) ([]int, []string) {
	r := rand.New(rand.NewPCG(seed, 7))
	var rows []int
	var ids []string
	for i := range n {
		if r.Float64() < share {
			rows = append(rows, i)
			ids = append(ids, fmt.Sprintf("doc-%d", i))
		}
	}
	return rows, ids
}

// TestFilteredRecall: with 1% and 50% of deep10k's ids allowed, recall@10
// against exact search over the allowed rows is at least 0.95 at the
// default options, and every hit is allowed.
func TestFilteredRecall(t *testing.T) {
	ix, base, queries := deep10k(t)
	for _, share := range []float64{0.01, 0.5} {
		rows, ids := allowed(len(base), share, 1)
		sub := make(matrix, len(rows))
		for i, r := range rows {
			sub[i] = base[r]
		}
		truth := index.Exact(sub, matrix(queries), 10, index.L2)
		ok := map[string]bool{}
		for _, id := range ids {
			ok[id] = true
		}
		f := vlc.AllowIDs(ids...)
		found := 0
		for i, q := range queries {
			hits, err := ix.Search(context.Background(), q, vlc.SearchOptions{Filter: f})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, h := range hits {
				if !ok[h.ID] {
					t.Fatalf("%.0f%%: hit %s is not allowed", 100*share, h.ID)
				}
				got[h.ID] = true
			}
			for _, j := range truth[i] {
				if got[fmt.Sprintf("doc-%d", rows[j])] {
					found++
				}
			}
		}
		recall := float64(found) / float64(10*len(queries))
		t.Logf("%.0f%% allowed (%d ids): recall@10 %.4f", 100*share, len(ids), recall)
		if recall < 0.95 {
			t.Errorf("%.0f%% allowed: recall@10 %.4f, want at least 0.95", 100*share, recall)
		}
	}
}

// BenchmarkFilter times a search of deep10k at the default options
// without a filter and with 50% and 1% of the ids allowed (the filter
// resolved once, as a service keeping it would).
func BenchmarkFilter(b *testing.B) {
	ix, base, queries := deep10k(b)
	for _, share := range []float64{0, 0.5, 0.01} {
		var opt vlc.SearchOptions
		if share > 0 {
			_, ids := allowed(len(base), share, 1)
			opt.Filter = vlc.AllowIDs(ids...)
		}
		b.Run(fmt.Sprintf("allowed=%g", share), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := ix.Search(context.Background(), queries[i%len(queries)], opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// matrix presents [][]float32 as index.Rows.
type matrix [][]float32

func (m matrix) Len() int                           { return len(m) }
func (m matrix) Dim() int                           { return len(m[0]) }
func (m matrix) Row(i int, dst []float32) []float32 { return append(dst[:0], m[i]...) }
