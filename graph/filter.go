package graph

import (
	"fmt"
	"math"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/errs"
)

// FilterPlan is how a search with a filter finds its hits.
type FilterPlan int

const (
	// PlanAuto picks by the share of rows the filter allows: a scan
	// where the allowed rows are fewer than a walk would score, else a
	// walk (README.md, "Filtered search", has the measurements).
	PlanAuto FilterPlan = iota
	// PlanWalk filters during the walk: every row the walk scores
	// guides it, and the allowed ones among them are the candidates.
	PlanWalk
	// PlanScan scores every allowed row from its code, as an exact
	// search over the allowed rows would (an index.RowSet only).
	PlanScan
)

// Filter plan constants, measured with graphbench -filter on deep10k,
// 4-bit codes re-ranked (README.md, "Filtered search").
const (
	// widenPower widens a filtered walk's beam to Ef * share^-widenPower,
	// share the allowed fraction of the rows: at shares 0.5 and 0.1
	// it kept recall@10 at the unfiltered walk's or above (0.990 at Ef
	// 32, 0.998 at 64); a power of 0.25 loses about 0.025 at 0.1.
	widenPower = 0.5
	// scanPerEf: a RowSet of at most scanPerEf times the widened beam
	// is scanned rather than walked. A row scanned costs about half a
	// row the walk scores, and the walk scores 9 to 13 rows per unit of
	// its width: at a share of 0.2 the walk was faster at Ef 32 and the
	// scan at Ef 64, and this puts the switch between them.
	scanPerEf = 16
)

// ErrRowOutOfRange marks a filter that allows rows the graph does not
// hold; it is an ErrArgument.
var ErrRowOutOfRange = errs.New(errs.ErrArgument, "graph: the filter allows a row beyond the graph")

func rowErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRowOutOfRange}, a...)...)
}

// filterPlan is what planFilter decided for one search.
type filterPlan struct {
	none bool         // the filter allows no row: no hits
	scan index.RowSet // set: score these rows, no walk
	ef   int          // the walk's width
	// count is the rows an index.RowSet allows; 0 for a filter that
	// cannot count them.
	count int
	// estimate: the filter cannot count its rows, so the walk measures
	// the share it allows and walks again wider where that share asks.
	estimate bool
}

// planFilter checks opt's filter options and chooses how to search.
func (g *Graph) planFilter(opt SearchOptions) (filterPlan, error) {
	switch {
	case opt.FilterEf != 0 && opt.FilterEf < opt.K:
		return filterPlan{}, argErr("filter ef %d is below k %d: the beam holds the hits", opt.FilterEf, opt.K)
	case opt.Plan < PlanAuto || opt.Plan > PlanScan:
		return filterPlan{}, argErr("unknown filter plan %d", opt.Plan)
	case opt.Filter == nil && opt.Plan != PlanAuto:
		return filterPlan{}, argErr("filter plan %d without a filter", opt.Plan)
	}
	if opt.Filter == nil {
		return filterPlan{ef: opt.Ef}, nil
	}
	set, counted := opt.Filter.(index.RowSet)
	if !counted {
		if opt.Plan == PlanScan {
			return filterPlan{}, argErr("a scan needs a filter that lists its rows (index.RowSet)")
		}
		if opt.FilterEf > 0 {
			return filterPlan{ef: opt.FilterEf}, nil
		}
		return filterPlan{ef: opt.Ef, estimate: true}, nil
	}
	c := set.Count()
	switch {
	case c > g.n:
		return filterPlan{}, rowErr("it counts %d rows, the graph holds %d", c, g.n)
	case c <= 0:
		return filterPlan{none: true}, nil
	}
	ef := opt.FilterEf
	if ef == 0 {
		ef = widen(opt.Ef, float64(c)/float64(g.n), g.n)
	}
	if opt.Plan == PlanScan || opt.Plan == PlanAuto && c <= scanPerEf*ef {
		return filterPlan{scan: set}, nil
	}
	return filterPlan{ef: ef, count: c}, nil
}

// widen is the beam width a walk needs where a share of the rows is
// allowed: the allowed rows nearest the query lie further out than the
// nearest rows, among more rows that are not.
func widen(ef int, share float64, n int) int {
	if share >= 1 {
		return ef
	}
	w := math.Ceil(float64(ef) * math.Pow(share, -widenPower))
	return int(min(w, float64(max(n, ef))))
}

// allowedScorer scores rows for a filtered walk: every row scored guides
// the walk, and the allowed ones enter top, the keep nearest.
type allowedScorer struct {
	sc     *scorer
	filter index.Filter
	keep   int
	top    maxHeap
	// count, when set, asks the filter of every row scored, so that
	// met and allowed measure its share.
	count        bool
	met, allowed int
}

func (a *allowedScorer) reset(f index.Filter, keep int, count bool) {
	a.filter, a.keep, a.count = f, keep, count
	a.top = a.top[:0]
	a.met, a.allowed = 0, 0
}

func (a *allowedScorer) scores(ids []uint32, out []float32) {
	a.sc.scores(ids, out)
	a.met += len(ids)
	for k, id := range ids {
		p := pair{out[k], id}
		full := len(a.top) == a.keep
		if full && !a.count && !less(p, a.top[0]) {
			continue // the filter asked only of rows that would enter
		}
		if !a.filter.Allows(int(id)) {
			continue
		}
		a.allowed++
		switch {
		case !full:
			a.top.push(p)
		case less(p, a.top[0]):
			a.top.replaceTop(p)
		}
	}
}

// walkFiltered walks at the plan's width keeping the allowed rows the
// walk scores, and walks again, wider, from the rows the last walk kept
// and the graph's entry: where the filter cannot count its rows and the
// share of the rows scored that it allows asks for a wider beam, and
// while fewer than K allowed rows (or all of them, where fewer) are
// found. It returns the allowed candidates, unordered.
func (g *Graph) walkFiltered(s *searcher, opt SearchOptions, plan filterPlan) []pair {
	a := &s.allowed
	a.sc = s.sc
	keep := keepCount(opt)
	want := opt.K
	if plan.count > 0 {
		want = min(want, plan.count)
	}
	ef, estimate := plan.ef, plan.estimate
	scored, expanded := 0, 0
	for {
		a.reset(opt.Filter, keep, estimate)
		s.beam.searchFrom(g.walkAdj(), s.entries, ef, a, false)
		scored += s.beam.scored
		expanded += s.beam.expandedCount
		wider := ef
		if estimate && a.allowed < a.met {
			wider = g.n
			if a.allowed > 0 {
				wider = widen(opt.Ef, float64(a.allowed)/float64(a.met), g.n)
			}
		}
		if len(a.top) < want {
			wider = max(wider, 4*ef)
		}
		if wider = min(wider, g.n); wider <= ef {
			break
		}
		ef, estimate = wider, false
		for _, p := range s.beam.pool {
			s.entries = append(s.entries, p.id)
		}
		s.entries = append(s.entries, g.entry)
	}
	s.beam.scored, s.beam.expandedCount = scored, expanded
	return append(s.top[:0], a.top...)
}

// scanAllowed scores every row of set into the keep nearest, unordered.
func (g *Graph) scanAllowed(s *searcher, set index.RowSet, keep int) ([]pair, error) {
	top := maxHeap(s.top[:0])
	ids := s.entries[:0]
	dists := s.dists
	flush := func() {
		dists = append(dists[:0], make([]float32, len(ids))...)
		s.sc.scores(ids, dists)
		for k, id := range ids {
			p := pair{dists[k], id}
			switch {
			case len(top) < keep:
				top.push(p)
			case less(p, top[0]):
				top.replaceTop(p)
			}
		}
		ids = ids[:0]
	}
	var bad error
	scored := 0
	set.Each(func(row int) bool {
		if row < 0 || row >= g.n {
			bad = rowErr("row %d (the graph holds %d rows)", row, g.n)
			return false
		}
		ids = append(ids, uint32(row))
		if len(ids) == scanBatch {
			scored += len(ids)
			flush()
		}
		return true
	})
	if bad != nil {
		return nil, bad
	}
	scored += len(ids)
	flush()
	s.entries, s.dists = ids, dists
	s.beam.scored, s.beam.expandedCount = scored, 0
	return top, nil
}

// scanBatch is the rows a scan scores together, their records
// prefetched first.
const scanBatch = 64

// keepCount is the allowed candidates a filtered search keeps: K, or
// when re-ranking RerankCount (default Ef), at least K.
func keepCount(opt SearchOptions) int {
	switch {
	case opt.Rerank == nil:
		return opt.K
	case opt.RerankCount >= 1:
		return max(opt.RerankCount, opt.K)
	}
	return max(opt.Ef, opt.K)
}
