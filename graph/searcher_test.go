package graph

import (
	"context"
	"reflect"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// allowEven is a filter that allows the even rows.
type allowEven struct{}

func (allowEven) Allows(row int) bool { return row%2 == 0 }

// Searcher gives the graph's own search (seeded by the index's search
// of SeedProbe lists), the same from SearchBatch, and the lists' search
// where a filter is given; seeded, its recall holds.
func TestSearcher(t *testing.T) {
	base, queries := clustered(600, 30, 16)
	ix := writeIndex(t, base, 8, quant.KindRotated, 4, index.L2)
	_, g, ix2 := writeWithGraph(t, ix, base, BuildOptions{Degree: 12})
	truth := index.Exact(base, queries, 10, index.L2)
	for _, seed := range []int{0, 1} {
		s := &Searcher{Index: ix2, Graph: g, Ef: 24, SeedProbe: seed}
		opt := index.SearchOptions{K: 10, Rerank: base, RerankFactor: 2}
		batch, err := s.SearchBatch(context.Background(), queries, opt)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		q := make([]float32, queries.d)
		for i := range queries.n {
			queries.Row(i, q)
			o := SearchOptions{K: 10, Ef: 24, Rerank: base, RerankCount: 20}
			if seed > 0 {
				hits, err := ix2.Search(q, index.SearchOptions{K: 24, NProbe: seed})
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range hits {
					o.Seeds = append(o.Seeds, uint32(h.ID))
				}
			}
			want, err := g.Search(q, o)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(batch[i], want) {
				t.Fatalf("seed probe %d, query %d: SearchBatch %v, the graph's search %v", seed, i, batch[i], want)
			}
			for _, h := range want {
				for _, id := range truth[i] {
					if h.ID == id {
						found++
					}
				}
			}
		}
		if r := float64(found) / float64(10*queries.n); r < 0.95 {
			t.Errorf("seed probe %d: re-ranked recall@10 %.3f, want >= 0.95", seed, r)
		}
		if got := s.EffectiveNProbe(16); got != seed {
			t.Errorf("EffectiveNProbe %d, want %d", got, seed)
		}
	}
	s := &Searcher{Index: ix2, Graph: g}
	opt := index.SearchOptions{K: 5, NProbe: 3, Filter: allowEven{}}
	got, err := s.Search(queries.x[:16], opt)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ix2.Search(queries.x[:16], opt)
	if err != nil {
		t.Fatal(err)
	}
	// The graph's filtered search: only allowed rows, and the rows the
	// lists find (the distances are the graph's estimates, not the
	// lists').
	inWant := map[int]bool{}
	for _, h := range want {
		inWant[h.ID] = true
	}
	same := 0
	for _, h := range got {
		if h.ID%2 != 0 {
			t.Fatalf("filtered: row %d is not allowed (hits %v)", h.ID, got)
		}
		if inWant[h.ID] {
			same++
		}
	}
	if len(got) != len(want) || same < len(want)-1 {
		t.Fatalf("filtered: %v, the lists' %v", got, want)
	}
	if _, err := s.Search(queries.x[:16], index.SearchOptions{K: 0}); err == nil {
		t.Fatal("k 0 accepted")
	}
}
