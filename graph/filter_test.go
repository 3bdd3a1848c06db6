package graph

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// rowSet is an index.RowSet over sorted rows.
type rowSet struct {
	rows  []int
	allow map[int]bool
}

func newRowSet(rows []int) rowSet {
	s := rowSet{rows: rows, allow: map[int]bool{}}
	for _, r := range rows {
		s.allow[r] = true
	}
	return s
}

func (s rowSet) Allows(row int) bool { return s.allow[row] }
func (s rowSet) Count() int          { return len(s.rows) }
func (s rowSet) Each(yield func(int) bool) {
	for _, r := range s.rows {
		if !yield(r) {
			return
		}
	}
}

// onlyAllows hides a rowSet's count: a filter the search cannot count.
type onlyAllows struct{ s rowSet }

func (f onlyAllows) Allows(row int) bool { return f.s.Allows(row) }

// drawRows returns about share of n rows, ascending, by a seeded draw.
func drawRows(n int, share float64, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 1))
	var rows []int
	for i := range n {
		if r.Float64() < share {
			rows = append(rows, i)
		}
	}
	return rows
}

// exactAllowed is the k nearest allowed rows of each query, exactly.
func exactAllowed(base, queries memRows, rows []int, k int) [][]int {
	sub := memRows{make([]float32, 0, len(rows)*base.d), len(rows), base.d}
	for _, r := range rows {
		sub.x = append(sub.x, base.x[r*base.d:(r+1)*base.d]...)
	}
	truth := index.Exact(sub, queries, min(k, len(rows)), index.L2)
	for _, t := range truth {
		for j := range t {
			t[j] = rows[t[j]]
		}
	}
	return truth
}

// A filtered search returns only allowed rows, and finds the allowed rows
// nearest the query (exact search over them is the truth) at 1 %, 10 %
// and 50 % of the rows, by each plan.
func TestFilterRecall(t *testing.T) {
	base, queries := clustered(2000, 50, 32)
	ix := writeIndex(t, base, 16, quant.KindRotated, 4, index.L2)
	g, err := Build(context.Background(), ix, base, BuildOptions{NProbe: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, share := range []float64{0.01, 0.1, 0.5} {
		rows := drawRows(g.Len(), share, 7)
		set := newRowSet(rows)
		truth := exactAllowed(base, queries, rows, 10)
		for _, tc := range []struct {
			name   string
			filter index.Filter
			plan   FilterPlan
			floor  float64
		}{
			{"auto", set, PlanAuto, 0.95},
			{"walk", set, PlanWalk, 0.9},
			{"scan", set, PlanScan, 0.95},
			{"uncounted", onlyAllows{set}, PlanAuto, 0.9},
		} {
			t.Run(fmt.Sprintf("%g/%s", share, tc.name), func(t *testing.T) {
				opt := SearchOptions{K: 10, Ef: 32, Rerank: base, Filter: tc.filter, Plan: tc.plan}
				found := 0
				q := make([]float32, queries.d)
				for i := range queries.n {
					hits, err := g.Search(queries.Row(i, q), opt)
					if err != nil {
						t.Fatal(err)
					}
					if len(hits) != len(truth[i]) {
						t.Fatalf("query %d: %d hits, want %d", i, len(hits), len(truth[i]))
					}
					for _, h := range hits {
						if !set.Allows(h.ID) {
							t.Fatalf("query %d: hit row %d is not allowed", i, h.ID)
						}
						if slices.Contains(truth[i], h.ID) {
							found++
						}
					}
				}
				recall := float64(found) / float64(queries.n*len(truth[0]))
				t.Logf("%d allowed rows: recall@10 %.3f", len(rows), recall)
				if recall < tc.floor {
					t.Errorf("recall@10 %.3f, want at least %.2f", recall, tc.floor)
				}
			})
		}
	}
}

// A filter that allows no row gives no hits and no error; one that
// allows rows beyond the graph, or a plan it cannot serve, is an error.
func TestFilterEdges(t *testing.T) {
	base, _ := clustered(300, 0, 8)
	ix := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	g, err := Build(context.Background(), ix, base, BuildOptions{Degree: 8})
	if err != nil {
		t.Fatal(err)
	}
	q := base.x[:8]
	empty := newRowSet(nil)
	for _, f := range []index.Filter{empty, onlyAllows{empty}} {
		hits, err := g.Search(q, SearchOptions{K: 5, Ef: 10, Filter: f})
		if err != nil || len(hits) != 0 {
			t.Errorf("%T allowing nothing: %d hits, error %v; want none, nil", f, len(hits), err)
		}
	}
	many := make([]int, 301)
	for i := range many {
		many[i] = i
	}
	for _, tc := range []struct {
		name string
		opt  SearchOptions
		want error
	}{
		{"row beyond the graph", SearchOptions{K: 5, Ef: 10, Filter: newRowSet([]int{3, 300})}, ErrRowOutOfRange},
		{"negative row", SearchOptions{K: 5, Ef: 10, Filter: newRowSet([]int{-1, 3})}, ErrRowOutOfRange},
		{"more rows than the graph", SearchOptions{K: 5, Ef: 10, Filter: newRowSet(many)}, ErrRowOutOfRange},
		{"scan of an uncounted filter", SearchOptions{K: 5, Ef: 10, Filter: onlyAllows{empty}, Plan: PlanScan}, ErrArgument},
		{"plan without a filter", SearchOptions{K: 5, Ef: 10, Plan: PlanWalk}, ErrArgument},
		{"unknown plan", SearchOptions{K: 5, Ef: 10, Filter: empty, Plan: 9}, ErrArgument},
		{"filter ef below k", SearchOptions{K: 5, Ef: 10, Filter: empty, FilterEf: 4}, ErrArgument},
	} {
		if _, err := g.Search(q, tc.opt); !errors.Is(err, tc.want) || !errors.Is(err, ErrArgument) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

// The plan scans a small allowed set and walks a broad one, the beam
// widened as the share drops.
func TestFilterPlan(t *testing.T) {
	g := &Graph{n: 10000}
	for _, tc := range []struct {
		count      int
		scan       bool
		ef, filter int
	}{
		{100, true, 0, 0},
		{1000, true, 0, 0},
		{2000, false, 72, 0},
		{5000, false, 46, 0},
		{10000, false, 32, 0},
		{1000, false, 40, 40},
	} {
		p, err := g.planFilter(SearchOptions{K: 10, Ef: 32, Filter: newRowSet(make([]int, tc.count)), FilterEf: tc.filter})
		if err != nil {
			t.Fatal(err)
		}
		if (p.scan != nil) != tc.scan || !tc.scan && p.ef != tc.ef {
			t.Errorf("%d of 10000 rows: scan %v ef %d, want scan %v ef %d", tc.count, p.scan != nil, p.ef, tc.scan, tc.ef)
		}
	}
}
