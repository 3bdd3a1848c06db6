package graph

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// BenchmarkSearch searches a graph over 10,000 clustered rows of 96
// dimensions (4-bit rotated codes, 100 lists) at a few beam widths,
// re-ranked from the rows, and reports recall@10 against exact search.
// Real data beside the peers: cmd/graphbench.
func BenchmarkSearch(b *testing.B) {
	const n, nq, d = 10000, 200, 96
	base, queries := clustered(n, nq, d)
	ix := writeIndex(b, base, 100, quant.KindRotated, 4, index.L2)
	g, err := Build(context.Background(), ix, base, BuildOptions{NProbe: 8})
	if err != nil {
		b.Fatal(err)
	}
	truth := index.Exact(base, queries, 10, index.L2)
	for _, ef := range []int{16, 32, 64} {
		b.Run(fmt.Sprintf("n=%d/d=%d/ef=%d", n, d, ef), func(b *testing.B) {
			opt := SearchOptions{K: 10, Ef: ef, Rerank: base}
			q := make([]float32, d)
			found, checked := 0, 0
			for i := 0; b.Loop(); i++ {
				hits, err := g.Search(queries.Row(i%nq, q), opt)
				if err != nil {
					b.Fatal(err)
				}
				if i < nq {
					checked++
					for _, h := range hits {
						if slices.Contains(truth[i], h.ID) {
							found++
						}
					}
				}
			}
			b.ReportMetric(float64(found)/float64(10*checked), "recall@10")
		})
	}
}
