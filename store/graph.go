package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/par"
)

// Search through segment graphs: a segment whose file holds a graph
// (section GRPH, written by vlc graph or graph.WriteFile) is searched by
// walking it (graph.Graph.Search, Ef wide), the segments without one by
// scanning their lists together (index.Group, NProbe lists), and the hits
// merged by distance. The filter a search resolves over the store's rows
// (deletions, AllowIDs, Match, Where) is handed to each graph as the
// same rows in the segment's numbering (spanned), a counted set staying
// counted, so that the graph's filtered search plans as it does for a
// lone file. Writes never carry a graph over: a segment written by Add,
// a merge, Compact or Retrain has none and is searched by its lists, until
// BuildGraph or, under Policy.GraphAt, the background work (graphjob.go)
// gives it one; a segment keeps its graph through deletions, whose rows
// stay in it as waypoints that the filter keeps from the hits. A store
// opened on a device searches every segment's lists.

// openGraph opens s's graph once, where its file holds one; s.graph is
// nil otherwise. The graph reads the segment's mapping, so it lives as
// long as s.ix.
func (s *segment) openGraph() error {
	s.graphOnce.Do(func() {
		if _, ok := s.ix.Section(graph.SectionKind); !ok {
			return
		}
		s.graph, s.graphErr = graph.Open(s.ix)
	})
	return s.graphErr
}

// walkPlan is what a snapshot searches through graphs: the segments with
// one, and the others as one group of lists.
type walkPlan struct {
	graphs []int // segments with a graph
	// lists searches the segments without a graph (nil when none has
	// rows), its rows spanning listSpans of the store's rows.
	lists     *index.Group
	listSpans rowSpans
}

// planWalks opens the segments' graphs and, where any has one, sets
// snap.walk; an error is a graph its file holds that does not open.
func (snap *snapshot) planWalks() error {
	var w walkPlan
	var parts []*index.Index
	for i, s := range snap.segs {
		if err := s.openGraph(); err != nil {
			return fmt.Errorf("segment %d: %w", i, err)
		}
		if s.graph != nil {
			w.graphs = append(w.graphs, i)
			continue
		}
		if n := s.ix.Len(); n > 0 {
			parts = append(parts, s.ix)
			w.listSpans = w.listSpans.add(rowSpan{snap.group.Base(i), n})
		}
	}
	if len(w.graphs) == 0 {
		return nil
	}
	if len(parts) > 0 {
		g, err := index.NewGroup(parts...)
		if err != nil {
			return err
		}
		w.lists = g
	}
	snap.walk = &w
	return nil
}

// walks reports whether a search with opt walks the segments' graphs:
// where one holds a graph, the search runs on the CPU and Ef is not
// negative.
func (snap *snapshot) walks(opt SearchOptions) bool {
	return snap.walk != nil && opt.Ef >= 0 && snap.group.Devices() == nil
}

// checkWalk checks the options only a walk reads.
func checkWalk(opt SearchOptions) error {
	if opt.SeedProbe < 0 {
		return fmt.Errorf("%w: SeedProbe %d: want 0 (no seeds) or more", index.ErrArgument, opt.SeedProbe)
	}
	if opt.SeedProbe > 0 && opt.Ef < 0 {
		return fmt.Errorf("%w: SeedProbe %d seeds a graph's walk, and Ef %d scans the lists instead", index.ErrArgument, opt.SeedProbe, opt.Ef)
	}
	if opt.ScanLists < 0 {
		return fmt.Errorf("%w: ScanLists %d: want 0 (none) or more", index.ErrArgument, opt.ScanLists)
	}
	if opt.ScanLists > 0 && opt.Ef < 0 {
		return fmt.Errorf("%w: ScanLists %d starts a graph's walk, and Ef %d scans the lists instead", index.ErrArgument, opt.ScanLists, opt.Ef)
	}
	return nil
}

// searchWalk is a search of q with the group's options io where the
// snapshot walks its graphs: each graph's io.K best rows by code, the
// other segments' io.K best from their lists, merged into the io.K
// nearest, in the store's row numbers.
func (snap *snapshot) searchWalk(ctx context.Context, q []float32, io index.SearchOptions, opt SearchOptions) ([]index.Hit, error) {
	if d := snap.segs[0].ix.Dim(); len(q) != d {
		return nil, fmt.Errorf("%w: query has %d values, the index %d", index.ErrDim, len(q), d)
	}
	for j, v := range q {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%w: query value %d is %v", index.ErrArgument, j, v)
		}
	}
	ef := opt.Ef
	if ef == 0 {
		ef = graph.DefaultEf
	}
	ef = max(ef, io.K)
	var hits []index.Hit
	for _, i := range snap.walk.graphs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s, base := snap.segs[i], snap.group.Base(i)
		gopt := graph.SearchOptions{K: io.K, Ef: ef, ScanLists: opt.ScanLists, Filter: snap.within(io.Filter, rowSpans{{base, s.ix.Len()}})}
		if opt.SeedProbe > 0 {
			seeds, err := s.ix.Search(q, index.SearchOptions{K: ef, NProbe: opt.SeedProbe})
			if err != nil {
				return nil, err
			}
			gopt.Seeds = make([]uint32, len(seeds))
			for k, h := range seeds {
				gopt.Seeds[k] = uint32(h.ID)
			}
		}
		hs, err := s.graph.Search(q, gopt)
		if err != nil {
			return nil, fmt.Errorf("segment %d's graph: %w", i, err)
		}
		if graphWalked != nil {
			graphWalked(i)
		}
		for _, h := range hs {
			hits = append(hits, index.Hit{ID: base + h.ID, Distance: h.Distance})
		}
	}
	if w := snap.walk; w.lists != nil {
		lo := io
		lo.Filter = snap.within(io.Filter, w.listSpans)
		hs, err := w.lists.Search(ctx, q, lo)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			hits = append(hits, index.Hit{ID: w.listSpans.row(h.ID), Distance: h.Distance})
		}
	}
	slices.SortFunc(hits, func(a, b index.Hit) int { return cmp.Or(cmp.Compare(a.Distance, b.Distance), cmp.Compare(a.ID, b.ID)) })
	return hits[:min(len(hits), io.K)], nil
}

// graphWalked, when set (by tests), is called with the segment whose
// graph a search has walked.
var graphWalked func(segment int)

// rowSpan is the store's rows from, from+1, ..., from+n-1.
type rowSpan struct{ from, n int }

// rowSpans number the rows they cover one after another from 0: the rows
// of a segment, or of the group of segments without a graph.
type rowSpans []rowSpan

// add appends s, joined to the last rowSpan where it follows it.
func (sp rowSpans) add(s rowSpan) rowSpans {
	if k := len(sp) - 1; k >= 0 && sp[k].from+sp[k].n == s.from {
		sp[k].n += s.n
		return sp
	}
	return append(sp, s)
}

// row is the store's row of row r of the rowSpans; -1 past them.
func (sp rowSpans) row(r int) int {
	for _, s := range sp {
		if r < s.n {
			return s.from + r
		}
		r -= s.n
	}
	return -1
}

func (sp rowSpans) len() int {
	n := 0
	for _, s := range sp {
		n += s.n
	}
	return n
}

// rankIn counts the rows of b within the rowSpans.
func (sp rowSpans) rankIn(b *roaring.Bitmap) int {
	c := 0
	for _, s := range sp {
		if s.n == 0 {
			continue
		}
		hi := b.Rank(uint32(s.from + s.n - 1))
		if s.from > 0 {
			hi -= b.Rank(uint32(s.from - 1))
		}
		c += int(hi)
	}
	return c
}

// within returns filter f, over the store's rows, as a filter over the
// rows of sp numbered from 0: a set f counts stays counted (the rows it
// allows within sp), and the deletions alone become a counted set of the
// live rows, or nil where sp holds no deleted row.
func (snap *snapshot) within(f index.Filter, sp rowSpans) index.Filter {
	switch f := f.(type) {
	case nil:
		return nil
	case notIn:
		gone := sp.rankIn(snap.gone)
		if gone == 0 {
			return nil
		}
		return spannedSet{spanned{f, sp}, sp.len() - gone, nil, true}
	case rowSet:
		return spannedSet{spanned{f, sp}, sp.rankIn(f.b), f.b, false}
	case candidates:
		in, all := sp.rankIn(f.rows), int(f.rows.GetCardinality())
		count := 0
		if in > 0 { // the estimate's share of the candidates within sp
			count = min(in, max(1, int(math.Ceil(float64(f.est)*float64(in)/float64(all)))))
		}
		return spannedSet{spanned{f, sp}, count, f.rows, true}
	}
	return spanned{f, sp}
}

// spanned is a filter over the store's rows asked about the rows of sp.
type spanned struct {
	f  index.Filter
	sp rowSpans
}

func (s spanned) Allows(r int) bool {
	if len(s.sp) == 1 { // a segment's rows
		return r >= 0 && r < s.sp[0].n && s.f.Allows(s.sp[0].from+r)
	}
	row := s.sp.row(r)
	return r >= 0 && row >= 0 && s.f.Allows(row)
}

// spannedSet is spanned for a filter that counts its rows: count of them
// within sp, listed from rows (or from every row where rows is nil),
// each asked of the filter where check is set.
type spannedSet struct {
	spanned
	count int
	rows  *roaring.Bitmap
	check bool
}

func (s spannedSet) Count() int { return s.count }

func (s spannedSet) Each(yield func(int) bool) {
	at := 0 // the first row of the rowSpan, numbered within sp
	for _, p := range s.sp {
		end := p.from + p.n
		if s.rows == nil {
			for r := p.from; r < end; r++ {
				if s.f.Allows(r) && !yield(at+r-p.from) {
					return
				}
			}
		} else {
			it := s.rows.Iterator()
			it.AdvanceIfNeeded(uint32(p.from))
			for it.HasNext() {
				r := int(it.Next())
				if r >= end {
					break
				}
				if (!s.check || s.f.Allows(r)) && !yield(at+r-p.from) {
					return
				}
			}
		}
		at += p.n
	}
}

var _ index.RowSet = spannedSet{}

// searchWalkBatch is searchWalk for every query, on all cores. The first
// error stops the work: a query's names it; ctx's comes back as it is.
func (snap *snapshot) searchWalkBatch(ctx context.Context, queries Rows, io index.SearchOptions, opt SearchOptions) ([][]index.Hit, error) {
	if d := snap.segs[0].ix.Dim(); queries.Dim() != d {
		return nil, fmt.Errorf("%w: queries have dimension %d, the index %d", index.ErrDim, queries.Dim(), d)
	}
	hits := make([][]index.Hit, queries.Len())
	var (
		mu     sync.Mutex
		first  error
		failed atomic.Bool
	)
	par.For(queries.Len(), 8, func(lo, hi int) {
		x := make([]float32, queries.Dim())
		for i := lo; i < hi && !failed.Load(); i++ {
			h, err := snap.searchWalk(ctx, queries.Row(i, x), io, opt)
			if err != nil {
				if ctx.Err() == nil {
					err = fmt.Errorf("query %d: %w", i, err)
				}
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				failed.Store(true)
				return
			}
			hits[i] = h
		}
	})
	if first != nil {
		return nil, first
	}
	return hits, nil
}
