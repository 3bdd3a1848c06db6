package vlc_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc"
)

// TestDistancesNeverNegative: the l2 and cosine distances of Search and
// SearchBatch, by code (index's clamp) and re-ranked exactly (the root's
// clamp, a guard: vec.L2 sums squares), are never below 0 when the
// queries are the stored vectors themselves (by code they were: -0.37
// for a 1-bit l2 index of 16 dimensions).
func TestDistancesNeverNegative(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const n, d = 400, 16
	vectors := rows(n, d, 13)
	docs := make([]vlc.Document, n)
	for i, v := range vectors {
		docs[i] = vlc.Document{Vector: v}
	}
	for _, metric := range []string{"l2", "cosine"} {
		for _, bits := range []int{1, 4, 8} {
			ix, err := vlc.Build(ctx, filepath.Join(dir, fmt.Sprint(metric, bits, ".vlc")), docs, vlc.Options{Metric: metric, Bits: bits, Anchors: 8})
			if err != nil {
				t.Fatal(err)
			}
			for _, opt := range []vlc.SearchOptions{{K: 3}, {K: 3, Rerank: vlc.RowOriginals(matrixRows(vectors))}} {
				got, err := ix.SearchBatch(ctx, vectors, opt)
				if err != nil {
					t.Fatal(err)
				}
				for i, hits := range got {
					for r, h := range hits {
						if h.Distance < 0 {
							t.Fatalf("%s, %d bits, re-ranked %v: query %d hit %d (%s) at %v", metric, bits, opt.Rerank != nil, i, r, h.ID, h.Distance)
						}
					}
				}
			}
			ix.Close()
		}
	}
}

// matrixRows presents [][]float32 as vlc.Rows.
type matrixRows [][]float32

func (m matrixRows) Len() int                           { return len(m) }
func (m matrixRows) Dim() int                           { return len(m[0]) }
func (m matrixRows) Row(i int, dst []float32) []float32 { return append(dst[:0], m[i]...) }
