package index

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
)

// Hit is one search result: the row of the vector in the input file and its
// distance to the query (smaller is nearer, whatever the metric; never
// below 0 under l2 and cosine, see finish).
type Hit struct {
	ID       int
	Distance float32
}

// SearchOptions sets how hard a search looks.
type SearchOptions struct {
	K      int // hits wanted; more than Len() returns Len()
	NProbe int // lists scanned, nearest anchors first; clamped to [1, M]; 0 means 1
	// Rerank, when set, holds the original vectors (the input file): the
	// best RerankFactor*K candidates by code are re-scored exactly and the
	// best K of those returned.
	Rerank       Rows
	RerankFactor int // default 10
	// Filter, when set, restricts the hits to the rows it allows; the
	// search then reads more lists than NProbe where the filter leaves
	// too few hits in them (filter.go).
	Filter Filter
}

// EffectiveNProbe is the number of lists a search with opt scans.
func (ix *Index) EffectiveNProbe(nprobe int) int { return min(max(nprobe, 1), ix.m) }

// scratch is one search in progress: the query (normalised for cosine),
// its dot products with the anchors, the lists it probes, its scorer and
// its best candidates. Pooled per index, so that a search in steady state
// allocates nothing.
type scratch struct {
	q, row []float32
	qq     float32   // |q|^2
	scale  float64   // what load multiplied the query by (ipScale)
	dots   []float32 // <q, anchor a>, from the probe
	dist   []float32 // the probe's distance to each anchor, and
	sel    []float32 // a copy of them to select from
	probe  []Hit     // candidate lists, ID = list number
	top    topK
	scorer quant.Scorer
	// For blocked codes: their scorer and one block's first estimates.
	bscorer    quant.BlockScorer
	est, bound [quant.BlockLen]float32
	cand       []candidate // entries of a list to refine
	// The filter of the search in progress, and the number the rows of
	// the index being scanned start from (a Group's part).
	filter Filter
	base   int
	total  int // rows of the index or group: hit IDs are below it
	pairs  []partEntry
	// A device search's hits for one query, mapped from the entries its
	// parts returned (partsOnDevice.fromDevices).
	mapped []Hit
	runs   []int // where each part's hits start in mapped
	merged []Hit // the first keep of mapped's runs merged
}

// Search returns the K nearest vectors to q found in the NProbe nearest lists,
// nearest first (ties by ascending ID, except hits whose l2 or cosine
// distance was clamped to 0: they keep the estimate's order). Under cosine
// a zero q is refused (ErrZeroVector). Safe for concurrent use.
func (ix *Index) Search(q []float32, opt SearchOptions) ([]Hit, error) {
	hits, err := ix.SearchAppend(nil, q, opt)
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// SearchAppend is Search appending the hits to dst: with room in dst and
// no re-ranking it allocates nothing, for a server answering one query
// after another. On an error it returns dst as it was.
func (ix *Index) SearchAppend(dst []Hit, q []float32, opt SearchOptions) (hits []Hit, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return dst, ErrClosed
	}
	n0 := len(dst)
	defer func() {
		if err != nil {
			hits = dst[:n0]
		}
	}()
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	k, keep, err := ix.check(q, opt)
	if err != nil {
		return dst, err
	}
	s := ix.getScratch()
	defer ix.pool.Put(s)
	if opt.Filter != nil {
		parts := [1]*Index{ix}
		return searchParts(context.Background(), parts[:], []int{0, ix.n}, s, dst, q, opt, k, keep)
	}
	ix.start(s, q, ix.EffectiveNProbe(opt.NProbe), keep)
	for _, p := range s.probe {
		ix.scan(s, p.ID)
	}
	return ix.finish(dst, s, opt, k)
}

// check validates a query and its options and returns the hits wanted and
// the candidates to keep (more than k when re-ranking).
func (ix *Index) check(q []float32, opt SearchOptions) (k, keep int, err error) {
	if len(q) != ix.d {
		return 0, 0, fmt.Errorf("%w: query has %d values, index has dimension %d", ErrDim, len(q), ix.d)
	}
	if k, keep, err = ix.want(opt); err != nil {
		return 0, 0, err
	}
	if err := ix.checkQuery(q); err != nil {
		return 0, 0, err
	}
	return k, keep, nil
}

// checkQuery refuses a query (of the index's dimension) that is not
// finite, too large for float32 distances (l2, ip) or zero (cosine: it
// has no direction; ErrZeroVector). A query that is tiny but not zero is
// taken under cosine: load normalises it.
func (ix *Index) checkQuery(q []float32) error {
	// One SIMD pass answers for the usual query: a sum of squares above 0
	// and finite means every value is finite and one is not 0, and below
	// a quarter of the float32 range, that Dot(q, q), which adds in
	// another order, does not overflow either (the two sums differ by a
	// factor below 1.2 up to 2^20 values: SumSquares). The loop below
	// decides the rest: it names the value that is not finite, or tells
	// an overflow from a NaN.
	if s := vec.SumSquares(q); s > 0 && s <= math.MaxFloat32/4 && len(q) <= 1<<20 {
		return nil
	}
	zero := true
	for j, v := range q {
		if !finite(v) {
			return fmt.Errorf("%w: query value %d is %v", ErrArgument, j, v)
		}
		zero = zero && v == 0
	}
	if zero && ix.meta.Metric == Cosine {
		return fmt.Errorf("%w: every value of the query is 0, and a zero vector has no direction to compare", ErrZeroVector)
	}
	if s := vec.Dot(q, q); ix.meta.Metric != Cosine && math.IsInf(float64(s), 1) {
		// Every distance would be infinite and the hits arbitrary.
		return fmt.Errorf("%w: query too large (its squared length overflows float32)", ErrArgument)
	}
	return nil
}

// want checks opt and returns the hits it wants and the candidates to
// keep (more than k when re-ranking).
func (ix *Index) want(opt SearchOptions) (k, keep int, err error) {
	if opt.K < 1 {
		return 0, 0, fmt.Errorf("%w: k must be at least 1, got %d", ErrArgument, opt.K)
	}
	if opt.Rerank != nil && opt.Rerank.Dim() != ix.d {
		return 0, 0, fmt.Errorf("%w: re-rank vectors have dimension %d, index %d", ErrDim, opt.Rerank.Dim(), ix.d)
	}
	k = min(opt.K, ix.n)
	keep = k
	if opt.Rerank != nil {
		f := opt.RerankFactor
		if f < 1 {
			f = 10
		}
		// min(k*f, n) without overflow: k*f can exceed the int range
		// for a huge factor, and a negative keep would empty the heap.
		keep = ix.n
		if f <= ix.n/k {
			keep = k * f
		}
	}
	return k, keep, nil
}

// start sets s up for query q (checked): normalised for cosine, its
// nprobe lists chosen, its scorer set, an empty top-keep.
func (ix *Index) start(s *scratch, q []float32, nprobe, keep int) {
	ix.load(s, q)
	ix.panels.Dots1(s.q, s.dots)
	ix.begin(s, nprobe, keep)
}

// load copies query q into s, normalised for cosine.
func (ix *Index) load(s *scratch, q []float32) {
	copy(s.q, q)
	s.scale = ix.loadInPlace(s.q)
}

// loadInPlace is load for a query already where the search reads it:
// normalised for cosine, scaled for ip (ScaleIPQuery), in place; it
// returns the scale.
func (ix *Index) loadInPlace(q []float32) (scale float64) {
	switch ix.meta.Metric {
	case Cosine:
		vec.Normalize(q)
	case IP:
		return ScaleIPQuery(q)
	}
	return 1
}

// ScaleIPQuery scales an ip query whose largest magnitude lies outside
// 2^-20..2^20 by the power of two (ipScale) that brings it to about 1,
// in place, and returns the factor (1 for other queries): distances
// computed with the scaled query, divided by it, are the query's.
func ScaleIPQuery(q []float32) float64 {
	f := ipScale(q)
	if f != 1 {
		for j := range q {
			q[j] = float32(float64(q[j]) * f) // exact: a power of two, in range
		}
	}
	return f
}

// ipScale is the power of two that brings an ip query whose largest
// magnitude lies outside 2^-20..2^20 to about 1, and 1 for others. Under
// ip the ranking does not depend on the query's length, but float32 does:
// the estimates of a tiny query's distances lose their digits against the
// anchors' terms. finish scales the distances back.
func ipScale(q []float32) float64 {
	var big float32
	for _, v := range q {
		big = max(big, v, -v)
	}
	if big == 0 || (big >= 0x1p-20 && big <= 0x1p20) {
		return 1
	}
	_, e := math.Frexp(float64(big))
	return math.Ldexp(1, -e) // up to 2^149, beyond float32
}

// begin starts s's search once s.dots holds the query's dot products with
// the anchors: its nprobe lists chosen, its scorer set, an empty top-keep.
func (ix *Index) begin(s *scratch, nprobe, keep int) {
	s.filter, s.base, s.total = nil, 0, ix.n
	ix.probeLists(s, nprobe)
	s.top.reset(keep)
	if ix.blocked != nil {
		s.bscorer.SetQuery(s.q)
	} else {
		s.scorer.SetQuery(s.q)
	}
	s.qq = vec.Dot(s.q, s.q)
}

// scan scores every entry of list a for s's query and keeps the best.
func (ix *Index) scan(s *scratch, a int) {
	if ix.blocked != nil {
		ix.scanBlocks(s, a, s.qq, s.dots[a], results{top: &s.top})
		return
	}
	cb, pb := ix.code.CodeBytes(), ix.code.ParamBytes()
	lo, hi := int(ix.lists[a]), int(ix.lists[a+1])
	codes := ix.codes[lo*cb : hi*cb]
	mul, bias := ix.listForm(s.qq, s.dots[a], s.scorer, a, ix.params[a*pb:(a+1)*pb])
	for e := lo; e < hi; e++ {
		if dist := mul*s.scorer.Score(codes[(e-lo)*cb:(e-lo+1)*cb]) + bias; s.top.accepts(dist) {
			row := s.base + ix.ids.at(e)
			if s.filter == nil || s.filter.Allows(row) {
				s.top.push(Hit{ID: row, Distance: dist})
			}
		}
	}
}

// listForm readies sc to score list a (parameters prm) for a query of
// squared length qq and dot product qa with the list's anchor, and returns how a Score becomes the metric's distance, mul*Score + bias:
//   - l2 and cosine: the L2 estimate as it is (1, 0);
//   - ip: -<q, x> = -<q, anchor> - <q, r>, through the dot estimate (-1,
//     -<q, anchor>);
//   - ip with inner-product codes, which allow two estimates of -<q, x>:
//     through the L2 estimate, which holds -2<a, r> in place of |r|^2,
//     |q - a|^2 - 2<q, r> = |q|^2 + |a|^2 - 2<q, x>, erring by |q - a|; or
//     through the dot estimate, erring by |q|. The list's smaller is taken.
func (ix *Index) listForm(qq, qa float32, sc interface {
	ForL2(a int, params []byte)
	ForDot(a int, params []byte)
}, a int, prm []byte) (mul, bias float32) {
	switch {
	case ix.ipCodes && qq-2*qa+ix.norms[a] < qq:
		sc.ForL2(a, prm)
		return 0.5, -(qq + ix.norms[a]) / 2
	case ix.meta.Metric == IP:
		sc.ForDot(a, prm)
		return -1, -qa
	}
	sc.ForL2(a, prm)
	return 1, 0
}

// scanBlocks is scan for a blocked code, for the query s's scorer holds
// (squared length qq, dot product qa with anchor a), into out. The blocks
// of the list get the first estimates of their entries, and the entries
// whose estimate less its bound could enter the best are noted, their low
// bits (far apart in memory) prefetched as they are, so that the misses
// overlap; then each is refined to the exact estimate, unless a hit
// refined since rules it out. Blocks span lists: entries of a block
// outside list a are skipped.
func (ix *Index) scanBlocks(s *scratch, a int, qq, qa float32, out results) {
	pb := ix.code.ParamBytes()
	prm := ix.params[a*pb : (a+1)*pb]
	lo, hi := int(ix.lists[a]), int(ix.lists[a+1])
	if lo == hi {
		return
	}
	sc := s.bscorer
	mul, bias := ix.listForm(qq, qa, sc, a, prm)
	slack := max(mul, -mul)
	bb, lb := ix.blocked.BlockBytes(), ix.blocked.LowBytes()
	cand := s.cand[:0]
	for b := lo / quant.BlockLen; b*quant.BlockLen < hi; b++ {
		block := ix.blocks[b*bb : (b+1)*bb]
		first := b * quant.BlockLen
		from, to := max(lo, first), min(hi, first+quant.BlockLen)
		sc.Estimate(block, from-first, to-first, &s.est, &s.bound)
		limit := out.limit()
		for e := from; e < to; e++ {
			v := e - first
			if low := mul*s.est[v] + bias - slack*s.bound[v]; mayEnter(limit, low) {
				if s.filter != nil && !s.filter.Allows(s.base+ix.ids.at(e)) {
					continue
				}
				cand = append(cand, candidate{uint32(e), low})
				vec.Prefetch(ix.codes[e*lb : (e+1)*lb])
			}
		}
	}
	for _, c := range cand {
		if !mayEnter(out.limit(), c.low) {
			continue
		}
		e := int(c.entry)
		b := e / quant.BlockLen
		block := ix.blocks[b*bb : (b+1)*bb]
		if dist := mul*sc.Refine(block, e-b*quant.BlockLen, ix.codes[e*lb:]) + bias; mayEnter(out.limit(), dist) {
			out.add(Hit{ID: s.base + ix.ids.at(e), Distance: dist})
		}
	}
	s.cand = cand
}

// mayEnter reports whether an entry whose distance is at least low could
// enter results of the given limit. A NaN low (a float16 scalar that
// overflowed to infinity, times zero in the estimate) rules nothing out:
// the entry is refined.
func mayEnter(limit, low float32) bool { return !(low > limit) }

// results is where a scan puts its hits: a query's best so far. A batch
// search shares one query's results between workers scanning different
// lists for it; mu then guards top, and shared holds top's limit, to be
// read without the lock.
type results struct {
	top    *topK
	mu     *sync.Mutex
	shared *atomic.Uint32 // float32 bits
}

// limit is the largest distance that may still enter: +Inf until top is
// full. A shared limit may lag behind top's; it is never below it.
func (r results) limit() float32 {
	if r.mu == nil {
		return r.top.limit()
	}
	return math.Float32frombits(r.shared.Load())
}

// add offers h to the results.
func (r results) add(h Hit) {
	if r.mu == nil {
		if r.top.accepts(h.Distance) {
			r.top.push(h)
		}
		return
	}
	r.mu.Lock()
	if r.top.accepts(h.Distance) {
		r.top.push(h)
		r.shared.Store(math.Float32bits(r.top.limit()))
	}
	r.mu.Unlock()
}

// candidate is an entry of a list that its first estimate could not rule
// out, and the least distance that estimate allows.
type candidate struct {
	entry uint32
	low   float32
}

// finish appends s's k best hits to dst, nearest first: re-ranked when opt
// asks, distances as the metric defines them, those of l2 and cosine
// clamped at 0 once sorted (clampDistances). Every path that returns hits
// (Search, SearchBatch, a Group's, a device's) ends here.
func (ix *Index) finish(dst []Hit, s *scratch, opt SearchOptions, k int) ([]Hit, error) {
	return ix.finishSorted(s.top.appendSorted(dst), len(dst), s, opt, k)
}

// finishSorted is finish once dst[n0:] holds the kept hits, sorted by
// compareHits.
func (ix *Index) finishSorted(dst []Hit, n0 int, s *scratch, opt SearchOptions, k int) ([]Hit, error) {
	hits := dst[n0:]
	for _, h := range hits {
		if h.ID >= s.total {
			return dst[:n0], fmt.Errorf("%s: %w: entry refers to row %d of %d", ix.path, ErrCorrupt, h.ID, s.total)
		}
	}
	if opt.Rerank != nil {
		if err := ix.rerank(s, hits, opt.Rerank); err != nil {
			return dst[:n0], err
		}
	}
	if ix.meta.Metric == Cosine {
		for i := range hits {
			hits[i].Distance /= 2 // |q-x|^2 = 2 - 2cos for unit vectors
		}
	}
	if s.scale != 1 { // an ip query scaled by load
		for i := range hits {
			hits[i].Distance = float32(float64(hits[i].Distance) / s.scale)
		}
	}
	if ix.meta.Metric != IP {
		clampDistances(hits)
	}
	return dst[:n0+min(len(hits), k)], nil
}

// clampDistances sets the negative distances of hits (and -0) to 0:
// squared L2 and 1 - cos are never below 0, but the code's estimate of a
// vector near the query, or float rounding, can be. Applied to sorted
// hits, it leaves their order as it is (hits tied at 0 keep the order the
// estimate gave them). Not for ip, whose distances (the negative inner
// product) may be below 0.
func clampDistances(hits []Hit) {
	for i := range hits {
		if hits[i].Distance <= 0 {
			hits[i].Distance = 0
		}
	}
}

// probeLists puts the nprobe lists nearest to s.q into s.probe, nearest
// first, from the dot products in s.dots: the nprobe least distances by
// (distance, list), as a top-nprobe heap would keep them, found by a
// selection rather than a heap, as most of the M anchors would enter a
// heap of the best so far.
func (ix *Index) probeLists(s *scratch, nprobe int) {
	dist := s.dist[:ix.m]
	for a, qa := range s.dots[:ix.m] {
		if ix.meta.Metric == IP {
			dist[a] = -qa
		} else {
			dist[a] = ix.norms[a] - 2*qa
		}
	}
	t := nthSmallest(append(s.sel[:0], dist...), nprobe-1)
	probe := s.probe[:0]
	for a, d := range dist {
		if cmp.Less(d, t) {
			probe = append(probe, Hit{ID: a, Distance: d})
		}
	}
	for a, d := range dist { // ties at t, lowest lists first
		if len(probe) == nprobe {
			break
		}
		if cmp.Compare(d, t) == 0 {
			probe = append(probe, Hit{ID: a, Distance: d})
		}
	}
	slices.SortFunc(probe, compareHits)
	s.probe = probe
}

// nthSmallest returns the value that would be x[n] were x sorted by
// cmp.Compare (NaN first), reordering x: Hoare's selection, in expected
// linear time.
func nthSmallest(x []float32, n int) float32 {
	lo, hi := 0, len(x)-1
	for lo < hi {
		// The median of three as the pivot, left at x[lo+(hi-lo)/2].
		mid := lo + (hi-lo)/2
		if cmp.Less(x[mid], x[lo]) {
			x[mid], x[lo] = x[lo], x[mid]
		}
		if cmp.Less(x[hi], x[lo]) {
			x[hi], x[lo] = x[lo], x[hi]
		}
		if cmp.Less(x[hi], x[mid]) {
			x[hi], x[mid] = x[mid], x[hi]
		}
		p := x[mid]
		i, j := lo, hi
		for i <= j {
			for cmp.Less(x[i], p) {
				i++
			}
			for cmp.Less(p, x[j]) {
				j--
			}
			if i <= j {
				x[i], x[j] = x[j], x[i]
				i++
				j--
			}
		}
		// Now x[lo..j] <= p <= x[i..hi], and x[j+1..i-1] == p.
		switch {
		case n <= j:
			hi = j
		case n >= i:
			lo = i
		default:
			return x[n]
		}
	}
	return x[n]
}

// rerank replaces the estimated distances by exact ones from the original
// vectors and re-sorts.
//
// The re-rank vectors are an input like the queries: they must hold one
// row for each of the index's (a file of another length is another
// file), and a row read must be finite, or the hits would be ordered by
// NaN.
func (ix *Index) rerank(s *scratch, hits []Hit, rows Rows) error {
	if rows.Len() != s.total {
		return fmt.Errorf("%w: re-rank vectors have %d rows, the index %d", ErrArgument, rows.Len(), s.total)
	}
	for i, h := range hits {
		x := rows.Row(h.ID, s.row)
		for j, v := range x {
			if !finite(v) {
				return fmt.Errorf("%w: re-rank vectors: row %d, value %d is %v", ErrArgument, h.ID, j, v)
			}
		}
		switch ix.meta.Metric {
		case L2:
			hits[i].Distance = vec.L2(s.q, x)
		case IP:
			hits[i].Distance = -vec.Dot(s.q, x)
		case Cosine:
			vec.Normalize(x)
			hits[i].Distance = vec.L2(s.q, x)
		}
	}
	slices.SortFunc(hits, compareHits)
	return nil
}

func (ix *Index) getScratch() *scratch {
	if s, ok := ix.pool.Get().(*scratch); ok {
		return s
	}
	s := &scratch{
		q:    make([]float32, ix.d),
		row:  make([]float32, ix.d),
		dots: make([]float32, ix.panels.Stride()),
		dist: make([]float32, ix.m),
		sel:  make([]float32, ix.m),
	}
	if ix.blocked != nil {
		s.bscorer = ix.blocked.NewBlockScorer()
	} else {
		s.scorer = ix.code.NewScorer()
	}
	return s
}

func compareHits(a, b Hit) int {
	return cmp.Or(cmp.Compare(a.Distance, b.Distance), cmp.Compare(a.ID, b.ID))
}

// topK keeps the k smallest hits seen (by distance, then ID) in a max-heap.
type topK struct {
	k int
	h []Hit
}

func (t *topK) reset(k int) { t.k, t.h = k, t.h[:0] }

// accepts reports whether a hit at dist could enter (ties are settled by push).
func (t *topK) accepts(dist float32) bool { return len(t.h) < t.k || dist <= t.h[0].Distance }

// limit is the largest distance accepts takes: +Inf until t is full.
func (t *topK) limit() float32 {
	if len(t.h) < t.k {
		return float32(math.Inf(1))
	}
	return t.h[0].Distance
}

func (t *topK) push(x Hit) {
	if len(t.h) < t.k {
		t.h = append(t.h, x)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if compareHits(t.h[p], t.h[i]) >= 0 {
				break
			}
			t.h[p], t.h[i] = t.h[i], t.h[p]
			i = p
		}
		return
	}
	if compareHits(x, t.h[0]) >= 0 {
		return
	}
	t.h[0] = x
	for i := 0; ; {
		l, r, big := 2*i+1, 2*i+2, i
		if l < len(t.h) && compareHits(t.h[l], t.h[big]) > 0 {
			big = l
		}
		if r < len(t.h) && compareHits(t.h[r], t.h[big]) > 0 {
			big = r
		}
		if big == i {
			return
		}
		t.h[i], t.h[big] = t.h[big], t.h[i]
		i = big
	}
}

// sorted returns the kept hits, nearest first, in a new slice.
func (t *topK) sorted() []Hit { return t.appendSorted(nil) }

// appendSorted appends the kept hits to dst, nearest first.
func (t *topK) appendSorted(dst []Hit) []Hit {
	n0 := len(dst)
	dst = append(dst, t.h...)
	slices.SortFunc(dst[n0:], compareHits)
	return dst
}
