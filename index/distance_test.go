package index_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
	"github.com/vlc-embed/vlc/vecfile"
)

// TestL2DistancesNeverNegative queries l2 and cosine indexes of every code
// with their own stored vectors, whose estimated distance is about 0 and
// was often below it (-0.001 at every bit width on deep2k): every distance
// a search returns, on every path that produces hits (Search, SearchBatch,
// a small allow-list scored entry by entry, a Group of parts, re-ranking,
// a device's SearchBatch),
// is at least 0, and the hits stay sorted.
func TestL2DistancesNeverNegative(t *testing.T) {
	base, err := vecfile.Open(deep+"base.f16", vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	const n, d, m = 2000, 96, 20
	for _, metric := range []index.Metric{index.L2, index.Cosine} {
		rows := memRows{n, d, make([]float32, n*d)}
		for i := range n {
			x := base.Row(i, rows.x[i*d:(i+1)*d])
			if metric == index.Cosine {
				vec.Normalize(x)
			}
		}
		// The queries: every row, or every 20th with -short (the race
		// detector's pass: every 5th took 30 s there), each the vector of
		// a stored row.
		step := 1
		if testing.Short() {
			step = 20
		}
		qs := memRows{n / step, d, make([]float32, n/step*d)}
		for i := range qs.n {
			copy(qs.x[i*d:(i+1)*d], rows.x[i*step*d:(i*step+1)*d])
		}
		// Anchors: the mean of every m-th row (assignment need not be
		// nearest for the search to be right).
		anchors := make([]float32, m*d)
		assign := make([]int32, n)
		for i := range n {
			assign[i] = int32(i % m)
			for j := range d {
				anchors[(i%m)*d+j] += rows.x[i*d+j] / float32(n/m)
			}
		}
		for _, c := range []struct {
			kind quant.Kind
			bits int
		}{
			{quant.KindRotated, 1}, {quant.KindRotated, 2}, {quant.KindRotated, 4}, {quant.KindRotated, 8},
			{quant.KindSQ8, 8}, {quant.KindPQ, 4}, {quant.KindFlat, 32},
		} {
			name := fmt.Sprintf("%v/%v-%dbits", metric, c.kind, c.bits)
			t.Run(name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "i.vlc")
				meta := index.Meta{Code: uint32(c.kind), Bits: uint32(c.bits), Metric: metric, Seed: 1}
				if c.kind == quant.KindPQ && testing.Short() {
					meta.Subspaces = 12 // training the default's codebooks took 7.5 s a metric under -race
				}
				err := index.Write(path, index.Plan{Rows: rows, Anchors: anchors, Assign: assign, Meta: meta})
				if err != nil {
					t.Fatal(err)
				}
				ix := open(t, path)
				g, err := index.NewGroup(ix, ix)
				if err != nil {
					t.Fatal(err)
				}
				negative, worst := 0, float32(0)
				// check takes the hits of the query that is row row's vector.
				check := func(how string, row int, hits []index.Hit) {
					t.Helper()
					if len(hits) == 0 {
						t.Fatalf("%s, the query of row %d: no hits", how, row)
					}
					for r, h := range hits {
						if h.Distance < 0 {
							negative++
							if h.Distance < worst {
								worst = h.Distance
								t.Errorf("%s, the query of row %d: hit %d (row %d) at distance %v < 0", how, row, r, h.ID, h.Distance)
							}
						}
						if r > 0 && h.Distance < hits[r-1].Distance {
							t.Fatalf("%s, the query of row %d: hits not sorted: %v", how, row, hits)
						}
					}
				}
				opts := map[string]index.SearchOptions{
					"Search":            {K: 3, NProbe: 4},
					"Search, re-ranked": {K: 3, NProbe: 4, Rerank: rows},
				}
				for how, opt := range opts {
					for i := range qs.n {
						hits, err := ix.Search(qs.Row(i, nil), opt)
						if err != nil {
							t.Fatal(err)
						}
						check(how, i*step, hits)
					}
					batch, err := ix.SearchBatch(context.Background(), qs, opt)
					if err != nil {
						t.Fatal(err)
					}
					for i, hits := range batch {
						check(how+" (SearchBatch)", i*step, hits)
					}
				}
				// A small allow-list: its rows are scored one by one.
				for i := 0; i < n; i += 7 {
					hits, err := ix.Search(rows.Row(i, nil), index.SearchOptions{K: 2, Filter: rowList{i, (i + 1) % n}})
					if err != nil {
						t.Fatal(err)
					}
					check("allow-list", i, hits)
				}
				// A group of two parts (the same index twice): one top for both.
				groupHits, err := g.SearchBatch(context.Background(), qs, index.SearchOptions{K: 3, NProbe: 4})
				if err != nil {
					t.Fatal(err)
				}
				for i, hits := range groupHits {
					check("Group", i*step, hits)
				}
				// A device search (the plain-Go reference device): its
				// distances come back through the same last step.
				if c.kind == quant.KindRotated {
					di, err := ix.OnDevice(devicetest.Reference())
					if err != nil {
						t.Fatal(err)
					}
					defer di.Close()
					devHits, err := di.SearchBatch(context.Background(), qs, index.SearchOptions{K: 3, NProbe: 4})
					if err != nil {
						t.Fatal(err)
					}
					for i, hits := range devHits {
						check("device", i*step, hits)
					}
				}
				if negative > 0 {
					t.Errorf("%d negative distances, the least %v", negative, worst)
				}
			})
		}
	}
}

// rowList is an index.RowSet of a few rows, ascending.
type rowList []int

func (l rowList) Allows(row int) bool {
	for _, r := range l {
		if r == row {
			return true
		}
	}
	return false
}
func (l rowList) Count() int { return len(l) }
func (l rowList) Each(yield func(int) bool) {
	for r := range 2000 {
		if l.Allows(r) && !yield(r) {
			return
		}
	}
}
