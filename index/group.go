package index

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/quant"
)

// Filter restricts a search to some rows. Allows must be safe for
// concurrent use and cheap: a search asks it of every entry whose first
// estimate could enter the results.
type Filter interface {
	Allows(row int) bool
}

// RowSet is a Filter that can list the rows it allows (an allow-list).
// Knowing how many, a search adapts: when they are few it scores each of
// them, as an exact scan over the allowed rows would (no list is probed,
// so recall does not depend on where they lie); otherwise it reads
// sqrt(Len/Count) times NProbe lists, as the allowed nearest neighbours
// lie further out than the unfiltered ones.
type RowSet interface {
	Filter
	Count() int
	// Each calls yield with every allowed row, ascending, until it returns false.
	Each(yield func(row int) bool)
}

// scoreAllBelow is the share of rows (1/scoreAllBelow of them, and at
// least scoreAllMin) up to which a RowSet's rows are scored one by one
// rather than filtered while the widened probe scans its lists: at
// 100,000 rows of 96 dimensions (bench/ragstore, 2-core VM) a 1 % set
// took 0.14 ms scored one by one against 0.53 ms probed.
const (
	scoreAllBelow = 32
	scoreAllMin   = 256
)

// Group searches indexes that share their anchors, code and metric (the
// segments of a store) as one: rows are numbered part after part, so
// part i's row r is Group row Base(i)+r. The lists to read are chosen
// once per query for all parts. Its methods are safe for concurrent use
// as long as the parts stay open.
type Group struct {
	parts []*Index
	bases []int // bases[i]: first row of part i; bases[len(parts)]: all rows
	// devs[i], when devs is set and it is not nil, searches part i on a
	// device (WithDevices).
	devs []*DeviceIndex
}

// WithDevices returns the group searching part i on devs[i] (its copy on
// a device: devs[i].Index() is part i), or on the CPU where devs[i] is
// nil. Searches give the CPU's hits, up to float rounding and ties (see
// DeviceIndex.SearchBatch); g itself is unchanged.
func (g *Group) WithDevices(devs []*DeviceIndex) (*Group, error) {
	if len(devs) != len(g.parts) {
		return nil, fmt.Errorf("%w: %d devices for a group of %d indexes", ErrArgument, len(devs), len(g.parts))
	}
	for i, d := range devs {
		if d != nil && d.ix != g.parts[i] {
			return nil, fmt.Errorf("%w: the device copy of %s given for part %d, %s", ErrArgument, d.ix.path, i, g.parts[i].path)
		}
	}
	if !slices.ContainsFunc(devs, func(d *DeviceIndex) bool { return d != nil }) {
		return &Group{parts: g.parts, bases: g.bases}, nil
	}
	return &Group{parts: g.parts, bases: g.bases, devs: slices.Clone(devs)}, nil
}

// Devices is the parts' device copies that WithDevices gave (nil where a
// part is searched on the CPU), or nil.
func (g *Group) Devices() []*DeviceIndex { return g.devs }

// onDevice is the group's search on its devices.
func (g *Group) onDevice() partsOnDevice {
	return partsOnDevice{parts: g.parts, bases: g.bases, devs: g.devs}
}

// NewGroup checks that the parts were encoded against the same anchors
// and code and returns their group.
func NewGroup(parts ...*Index) (*Group, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: a group needs at least one index", ErrArgument)
	}
	g := &Group{parts: parts, bases: make([]int, len(parts)+1)}
	p0 := parts[0]
	a0, _ := p0.file.Section(secAnchors)
	q0, _ := p0.file.Section(secGlobal)
	for i, p := range parts {
		if i > 0 {
			a, _ := p.file.Section(secAnchors)
			q, _ := p.file.Section(secGlobal)
			s0, s := p0.meta.CodeSpec(), p.meta.CodeSpec()
			if p.d != p0.d || p.m != p0.m || p.meta.Metric != p0.meta.Metric || s != s0 || !bytes.Equal(a, a0) || !bytes.Equal(q, q0) {
				return nil, fmt.Errorf("%w: %s and %s were not encoded against the same anchors and code", ErrArgument, p0.path, p.path)
			}
		}
		g.bases[i+1] = g.bases[i] + p.n
	}
	return g, nil
}

// Len is the number of rows of all parts.
func (g *Group) Len() int { return g.bases[len(g.parts)] }

// Parts are the indexes of the group, in row order.
func (g *Group) Parts() []*Index { return g.parts }

// Base is the Group row of part i's row 0.
func (g *Group) Base(i int) int { return g.bases[i] }

// Locate returns the part holding Group row row, and its row there.
func (g *Group) Locate(row int) (part, local int) {
	part = sort.Search(len(g.parts), func(i int) bool { return g.bases[i+1] > row })
	return part, row - g.bases[part]
}

// Search returns the K nearest rows to q in the NProbe nearest lists of
// every part, as Index.Search does for one, giving up with ctx's error
// once ctx is done (checked every few lists).
func (g *Group) Search(ctx context.Context, q []float32, opt SearchOptions) (hits []Hit, err error) {
	if g.devs != nil {
		all, err := g.onDevice().searchBatch(ctx, oneRow(q), opt)
		if err != nil {
			return nil, err
		}
		return all[0], nil
	}
	for _, p := range g.parts {
		p.mu.RLock()
		defer p.mu.RUnlock()
		if p.file == nil {
			return nil, ErrClosed
		}
	}
	ix := g.parts[0]
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	if g.Len() == 0 {
		return nil, nil
	}
	if _, _, err := ix.check(q, opt); err != nil {
		return nil, err
	}
	k := min(opt.K, g.Len())
	keep := keepFor(opt, g.Len(), k)
	s := ix.getScratch()
	defer ix.pool.Put(s)
	return searchParts(ctx, g.parts, g.bases, s, nil, q, opt, k, keep)
}

// keepFor is the candidates to keep for k hits among n rows: more than k
// when re-ranking (Index.check).
func keepFor(opt SearchOptions, n, k int) int {
	if opt.Rerank == nil {
		return k
	}
	f := opt.RerankFactor
	if f < 1 {
		f = 10
	}
	if f <= n/k {
		return k * f
	}
	return n
}

// SearchBatch is Search for every row of queries, on all cores, each
// query's hits in order. The first error (a query's, or ctx's once ctx is
// done) stops the work and comes back.
func (g *Group) SearchBatch(ctx context.Context, queries Rows, opt SearchOptions) ([][]Hit, error) {
	if g.devs != nil {
		return g.onDevice().searchBatch(ctx, queries, opt)
	}
	if len(g.parts) == 1 && opt.Filter == nil {
		return g.parts[0].SearchBatch(ctx, queries, opt)
	}
	if queries.Dim() != g.parts[0].d {
		return nil, fmt.Errorf("%w: queries have dimension %d, the index %d", ErrDim, queries.Dim(), g.parts[0].d)
	}
	return g.searchEach(ctx, queries, opt)
}

// searchEach is SearchBatch query by query.
func (g *Group) searchEach(ctx context.Context, queries Rows, opt SearchOptions) ([][]Hit, error) {
	hits := make([][]Hit, queries.Len())
	var once sync.Once
	var first error
	var failed atomic.Bool
	par.For(queries.Len(), 8, func(lo, hi int) {
		x := make([]float32, queries.Dim())
		for i := lo; i < hi && !failed.Load(); i++ {
			h, err := g.Search(ctx, queries.Row(i, x), opt)
			if err != nil {
				if ctx.Err() == nil {
					err = fmt.Errorf("query %d: %w", i, err)
				}
				once.Do(func() { first = err })
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

// searchParts searches the parts (part i's rows numbered from bases[i],
// bases[len(parts)] all of them) for q, checked, with opt, appending the
// k best hits to dst; s is a scratch of parts[0], whose scorers serve
// every part as they share anchors and code.
func searchParts(ctx context.Context, parts []*Index, bases []int, s *scratch, dst []Hit, q []float32, opt SearchOptions, k, keep int) ([]Hit, error) {
	ix := parts[0]
	total := bases[len(parts)]
	nprobe, scoreAll, none := filterProbe(opt.Filter, ix.m, total, ix.EffectiveNProbe(opt.NProbe))
	if none {
		return dst, nil
	}
	set, _ := opt.Filter.(RowSet)
	ix.load(s, q)
	ix.panels.Dots1(s.q, s.dots)
	ix.begin(s, nprobe, keep)
	s.filter, s.total = opt.Filter, total
	done := func(i int) error {
		if i%8 != 0 {
			return nil
		}
		return ctx.Err()
	}
	if scoreAll {
		scoreRows(parts, bases, s, set)
		return ix.finish(dst, s, opt, k)
	}
	scanned := 0
	for _, p := range s.probe {
		if err := done(scanned); err != nil {
			return dst, err
		}
		for i, part := range parts {
			s.base = bases[i]
			part.scan(s, p.ID)
		}
		scanned++
	}
	if opt.Filter != nil && len(s.top.h) < keep && scanned < ix.m {
		// Too few allowed rows in the lists read: read on, nearest
		// lists first, until there are enough.
		order := ix.allLists(s)
		for _, a := range order[scanned:] {
			if len(s.top.h) >= keep {
				break
			}
			if err := done(scanned); err != nil {
				return dst, err
			}
			for i, part := range parts {
				s.base = bases[i]
				part.scan(s, a.ID)
			}
			scanned++
		}
	}
	return ix.finish(dst, s, opt, k)
}

// filterProbe is the lists a search of total rows in m lists with filter
// f reads first, nprobe asked: for a RowSet, nprobe*sqrt(total/allowed),
// and whether its rows are few enough to score one by one (scoreAll);
// none when it allows no row.
func filterProbe(f Filter, m, total, nprobe int) (lists int, scoreAll, none bool) {
	set, isSet := f.(RowSet)
	if !isSet {
		return nprobe, false, false
	}
	c := set.Count()
	if c == 0 {
		return nprobe, false, true
	}
	widen := math.Sqrt(float64(total) / float64(c))
	return min(m, int(math.Ceil(float64(nprobe)*widen))), c <= max(total/scoreAllBelow, scoreAllMin), false
}

// allLists returns every list, nearest to s.q first, in the order
// probeLists chooses them; it leaves s.top as it is.
func (ix *Index) allLists(s *scratch) []Hit {
	order := make([]Hit, ix.m)
	for a, qa := range s.dots[:ix.m] {
		dist := -qa
		if ix.meta.Metric != IP {
			dist = ix.norms[a] - 2*qa
		}
		order[a] = Hit{ID: a, Distance: dist}
	}
	slices.SortFunc(order, compareHits)
	return order
}

// partEntry is a row to score one by one: its part, entry and Group row.
type partEntry struct {
	part, entry uint32
	row         int
}

// scoreRows scores every row set allows, list by list within each part,
// into s.top: the filtered search's exact scan when set is small.
func scoreRows(parts []*Index, bases []int, s *scratch, set RowSet) {
	pairs := s.pairs[:0]
	total := bases[len(parts)]
	set.Each(func(row int) bool {
		if row < 0 || row >= total {
			return true
		}
		i := sort.Search(len(parts), func(i int) bool { return bases[i+1] > row })
		if e, ok := parts[i].entryOf(row - bases[i]); ok {
			pairs = append(pairs, partEntry{uint32(i), e, row})
		}
		return true
	})
	slices.SortFunc(pairs, func(a, b partEntry) int { return cmp.Or(cmp.Compare(a.part, b.part), cmp.Compare(a.entry, b.entry)) })
	s.pairs = pairs
	for lo := 0; lo < len(pairs); {
		hi := lo
		for hi < len(pairs) && pairs[hi].part == pairs[lo].part {
			hi++
		}
		parts[pairs[lo].part].scoreEntries(s, pairs[lo:hi])
		lo = hi
	}
}

// scoreEntries scores the given entries of ix (ascending) into s.top.
func (ix *Index) scoreEntries(s *scratch, pe []partEntry) {
	pb := ix.code.ParamBytes()
	a := -1
	var mul, bias float32
	for _, p := range pe {
		e := int(p.entry)
		if a < 0 || uint64(e) >= ix.lists[a+1] {
			a = sort.Search(ix.m, func(i int) bool { return ix.lists[i+1] > uint64(e) })
			prm := ix.params[a*pb : (a+1)*pb]
			if ix.blocked != nil {
				mul, bias = ix.listForm(s.qq, s.dots[a], s.bscorer, a, prm)
			} else {
				mul, bias = ix.listForm(s.qq, s.dots[a], s.scorer, a, prm)
			}
		}
		var dist float32
		if ix.blocked != nil {
			bb, lb := ix.blocked.BlockBytes(), ix.blocked.LowBytes()
			b := e / quant.BlockLen
			dist = mul*s.bscorer.Refine(ix.blocks[b*bb:(b+1)*bb], e-b*quant.BlockLen, ix.codes[e*lb:]) + bias
		} else {
			cb := ix.code.CodeBytes()
			dist = mul*s.scorer.Score(ix.codes[e*cb:(e+1)*cb]) + bias
		}
		if s.top.accepts(dist) {
			s.top.push(Hit{ID: p.row, Distance: dist})
		}
	}
}

// entryOf returns the entry holding row, from a map built on first use.
func (ix *Index) entryOf(row int) (uint32, bool) {
	ix.entriesOnce.Do(func() {
		ix.entries = make([]uint32, ix.n)
		for e := range ix.n {
			if r := ix.ids.at(e); r < ix.n {
				ix.entries[r] = uint32(e)
			}
		}
	})
	if row < 0 || row >= len(ix.entries) {
		return 0, false
	}
	return ix.entries[row], true
}
