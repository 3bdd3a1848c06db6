package graph

import (
	"runtime/debug"
	"slices"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/vec"
)

// SearchOptions sets how hard a search looks.
type SearchOptions struct {
	K int // hits wanted, at least 1; more than Len() returns Len()
	// Ef is the beam's width: the rows kept while walking, at least K.
	Ef int
	// Starts is how many of the anchors nearest the query give the walk
	// its first rows (BuildOptions.StartsPerList of each, spread over
	// its list); 0 means DefaultStarts. Where clusters are far apart,
	// pruning leaves few edges between them, and a walk that starts in
	// a cluster the query is not in stays there.
	Starts int
	// ScanLists, when above 0, has the walk start from every row of the
	// query's ScanLists nearest lists as well, each scored by its code,
	// the nearest Ef kept. Where a query's cluster holds rows nearly
	// equidistant from it (clusters far apart, high dimensions), a walk
	// finds its nearest only by scoring most of the cluster, and a scan
	// does so in batches. The rows' lists are indexed at the first such
	// search: 4 bytes a row, held for the graph's life.
	ScanLists int
	// Seeds are more rows the walk starts from (a caller's cheap first
	// guesses: an IVF search of the nearest list, say); rows beyond the
	// graph are an error.
	Seeds []uint32
	// Rerank, when set, holds the original vectors (the input the index
	// was built from): the best RerankCount rows by code are measured
	// exactly and the best K of them returned.
	Rerank      index.Rows
	RerankCount int // default Ef; at least K
	// Reads, when set, has what the search read added to it (not
	// safe for searches that share one concurrently).
	Reads *Reads
	// Filter, when set, restricts the hits to the rows it allows (the
	// index.Filter the store resolves for the index's own search): an
	// index.RowSet is counted and, when few, scanned (filter.go).
	Filter index.Filter
	// Plan is how a filtered search finds its hits: PlanAuto (0)
	// chooses by the filter's count.
	Plan FilterPlan
	// FilterEf is a filtered walk's width; 0 widens Ef by the share
	// of rows the filter allows. At least K.
	FilterEf int
}

// Reads counts what searches read, in bytes.
type Reads struct {
	Searches  int
	Adjacency int64 // neighbour lists of the rows expanded
	Codes     int64 // records of the rows scored
	// Rerank is the rows re-ranked at 2 bytes a value: what a float16
	// copy of the vectors gives, whatever Rows holds.
	Rerank int64
}

// searcher is one search's scratch, pooled.
type searcher struct {
	beam *beam
	sc   *scorer
	row  []float32
	top  []pair
	// anchors and entries: the anchors nearest the query, their rows.
	anchors []int
	entries []uint32
	allowed allowedScorer // a filtered walk's scorer
	dists   []float32     // a scan's scores
	pq      []float32     // a split code's padded query
}

// DefaultStarts is SearchOptions.Starts when it is 0.
const DefaultStarts = 2

// Search returns the K rows nearest q that a walk of width Ef finds,
// nearest first, with their squared distances: the codes' estimates
// (clamped at 0), or exact when re-ranked. Safe for concurrent use.
func (g *Graph) Search(q []float32, opt SearchOptions) (_ []index.Hit, err error) {
	if g.path != "" { // read from a mapped file (Open): a fault there is an error
		defer format.CatchFault(g.path, &err, debug.SetPanicOnFault(true))
	}
	switch {
	case g.n == 0:
		return nil, ErrEmpty
	case len(q) != g.d:
		return nil, argErr("query has %d values, the graph dimension %d", len(q), g.d)
	case opt.K < 1:
		return nil, argErr("k must be at least 1, got %d", opt.K)
	case opt.Starts < 0:
		return nil, argErr("starts must be 0 (the default) or more, got %d", opt.Starts)
	case opt.ScanLists < 0:
		return nil, argErr("scan lists must be 0 (none) or more, got %d", opt.ScanLists)
	case opt.Ef < opt.K:
		return nil, argErr("ef %d is below k %d: the beam holds the hits", opt.Ef, opt.K)
	case opt.Rerank != nil && (opt.Rerank.Len() != g.n || opt.Rerank.Dim() != g.d):
		return nil, argErr("re-rank vectors are %d x %d, the graph %d x %d", opt.Rerank.Len(), opt.Rerank.Dim(), g.n, g.d)
	}
	for _, r := range opt.Seeds {
		if int(r) >= g.n {
			return nil, argErr("seed row %d of %d rows", r, g.n)
		}
	}
	for j, v := range q {
		if v-v != 0 { // NaN or ±Inf
			return nil, argErr("query value %d is %v", j, v)
		}
	}
	plan, err := g.planFilter(opt)
	if err != nil {
		return nil, err
	}
	if plan.none {
		return []index.Hit{}, nil
	}
	s, _ := g.pool.Get().(*searcher)
	if s == nil {
		s = &searcher{beam: newBeam(g.n), sc: g.nodes.newScorer(), row: make([]float32, g.d)}
	}
	defer g.pool.Put(s)
	s.sc.setQuery(q)
	var top []pair
	switch {
	case plan.scan != nil:
		if top, err = g.scanAllowed(s, plan.scan, keepCount(opt)); err != nil {
			return nil, err
		}
	case opt.Filter != nil:
		g.entries(s, opt)
		top = g.walkFiltered(s, opt, plan)
	default:
		g.entries(s, opt)
		s.beam.searchFrom(g.walkAdj(), s.entries, opt.Ef, s.sc, false)
		top = s.top[:0]
		for _, p := range s.beam.pool {
			top = append(top, p.pair)
		}
	}
	slices.SortFunc(top, comparePairs) // ties by row
	s.top = top
	expanded := 0
	if opt.Reads != nil {
		expanded = s.beam.expandedCount
	}
	refined := 0
	if opt.Rerank == nil && g.refine != nil {
		count := opt.RerankCount
		if count < 1 {
			count = opt.Ef
		}
		top = top[:min(len(top), max(count, opt.K))]
		s.pq = g.refine.query(s.sc, s.pq)
		for i := range top {
			top[i].dist = g.refine.score(s.sc, s.pq, top[i].id)
		}
		slices.SortFunc(top, comparePairs)
		refined = len(top)
	}
	if opt.Rerank != nil {
		count := opt.RerankCount
		if count < 1 {
			count = opt.Ef
		}
		top = top[:min(len(top), max(count, opt.K))]
		for i := range top {
			x := opt.Rerank.Row(int(top[i].id), s.row)
			top[i].dist = vec.L2(q, x)
		}
		slices.SortFunc(top, comparePairs)
		if opt.Reads != nil {
			opt.Reads.Rerank += int64(len(top)) * int64(g.d) * 2
		}
	}
	if r := opt.Reads; r != nil {
		r.Searches++
		if g.compact != nil { // the mean row
			r.Adjacency += int64(expanded) * int64(len(g.compact.data)) / int64(g.n)
		} else {
			r.Adjacency += int64(expanded) * int64((g.r*g.adj.w+7)/8)
		}
		r.Codes += int64(s.beam.scored) * int64(g.nodes.stride)
		if g.refine != nil {
			r.Codes += int64(refined) * int64(g.refine.stride)
		}
	}
	hits := make([]index.Hit, min(opt.K, len(top)))
	for i := range hits {
		hits[i] = index.Hit{ID: int(top[i].id), Distance: max(top[i].dist, 0)}
	}
	return hits, nil
}

// entries sets s.entries to the rows a walk starts from: opt's seeds, the
// starting rows of the Starts anchors nearest the query and, with
// ScanLists, every row of the ScanLists nearest anchors' lists.
func (g *Graph) entries(s *searcher, opt SearchOptions) {
	starts := opt.Starts
	if starts == 0 {
		starts = DefaultStarts
	}
	m := len(g.reps) / g.perList
	s.anchors = s.sc.nearestAnchors(s.anchors, min(max(starts, opt.ScanLists), m))
	s.entries = append(s.entries[:0], opt.Seeds...)
	for _, a := range s.anchors[:min(starts, m)] {
		for _, r := range g.reps[a*g.perList : (a+1)*g.perList] {
			if r != noEdge {
				s.entries = append(s.entries, r)
			}
		}
	}
	if opt.ScanLists > 0 {
		lists := g.listRows()
		for _, a := range s.anchors[:min(opt.ScanLists, m)] {
			s.entries = append(s.entries, lists.rows[lists.start[a]:lists.start[a+1]]...)
		}
	}
}

// listIndex holds the rows of each list, by row: list a's are
// rows[start[a]:start[a+1]].
type listIndex struct {
	start, rows []uint32
}

// listRows returns the rows' lists, indexed at the first call from the
// node records (a counting sort by list). A fault reading a mapped file
// leaves nothing behind: the next call reads again.
func (g *Graph) listRows() *listIndex {
	if l := g.lists.Load(); l != nil {
		return l
	}
	g.listsMu.Lock()
	defer g.listsMu.Unlock()
	if l := g.lists.Load(); l != nil {
		return l
	}
	nc := &g.nodes
	m := len(nc.norms)
	list := make([]uint32, g.n)
	start := make([]uint32, m+1)
	for i := range g.n {
		_, _, a := nc.scalars(nc.data[i*nc.stride : (i+1)*nc.stride])
		list[i] = a
		start[a+1]++ // Open checked every record's list
	}
	for a := range m {
		start[a+1] += start[a]
	}
	rows := make([]uint32, g.n)
	next := slices.Clone(start[:m])
	for i, a := range list {
		rows[next[a]] = uint32(i)
		next[a]++
	}
	l := &listIndex{start: start, rows: rows}
	g.lists.Store(l)
	return l
}
