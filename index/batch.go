package index

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/quant"
)

// batchBlock is the most queries one worker takes at a time (fewer when
// that would leave cores idle) to set them up: normalised, their dot
// products with the anchors computed together (the anchors read once per
// block rather than once per query) and their lists chosen. Codes that are
// not blocked are also scanned block by block: the block's probes are
// merged so that each list is scanned for every query of the block that
// probes it in a row, while its codes are in cache.
const batchBlock = 32

// batchChunk is the most queries a search of blocked codes holds at once
// (about 20 KB each at 4,096 anchors): their lists are scanned list by
// list, each list read once for all of them (see searchChunk).
const batchChunk = 1024

// SearchBatch searches for every row of queries, on all cores, and returns
// each one's hits in order: the same hits Search returns. When a query
// fails, or ctx is done, the workers stop at their next block (at most
// 32 queries, or a share of the lists) and the first error recorded comes
// back (a query's names it; ctx's is returned as it is); a panic in a
// search (a bug) comes back as an error naming the block of queries, not
// as a crash of the process. Safe for concurrent use, as Search.
func (ix *Index) SearchBatch(ctx context.Context, queries Rows, opt SearchOptions) ([][]Hit, error) {
	if queries.Dim() != ix.d {
		return nil, fmt.Errorf("%w: queries have dimension %d, the index %d", ErrDim, queries.Dim(), ix.d)
	}
	if opt.Filter != nil {
		g := &Group{parts: []*Index{ix}, bases: []int{0, ix.n}}
		return g.searchEach(ctx, queries, opt)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil, ErrClosed
	}
	hits := make([][]Hit, queries.Len())
	var errs firstError
	if ix.blocked == nil {
		n, procs := queries.Len(), runtime.GOMAXPROCS(0)
		block := min(batchBlock, max(1, (n+procs-1)/procs))
		par.For(n, block, func(lo, hi int) {
			errs.run(ctx, fmt.Sprintf("queries %d..%d", lo, hi-1), func() error {
				return ix.searchBlock(queries, lo, hi, opt, hits)
			})
		})
		if err := errs.get(); err != nil {
			return nil, err
		}
		return hits, nil
	}
	for lo := 0; lo < queries.Len() && errs.get() == nil; lo += batchChunk {
		ix.searchChunk(ctx, queries, lo, min(lo+batchChunk, queries.Len()), opt, hits, &errs)
	}
	if err := errs.get(); err != nil {
		return nil, err
	}
	return hits, nil
}

// firstError keeps the first error of concurrent workers.
type firstError struct {
	once   sync.Once
	err    error
	failed atomic.Bool
}

func (f *firstError) set(err error) {
	f.once.Do(func() { f.err = err })
	f.failed.Store(true)
}

// get returns the first error, once every worker that may set one is done.
func (f *firstError) get() error {
	if !f.failed.Load() {
		return nil
	}
	return f.err
}

// run calls work unless an error came first or ctx is done, keeping its
// error; a panic in it (a bug) becomes an error naming what (the work).
func (f *firstError) run(ctx context.Context, what string, work func() error) {
	f.runQueries(ctx, -1, -1, what, work)
}

// runQueries is run for work on queries first to last, named "queries
// first..last" (what when first is -1) only when it panics: a batch of
// one query formats nothing.
func (f *firstError) runQueries(ctx context.Context, first, last int, what string, work func() error) {
	defer func() {
		if r := recover(); r != nil {
			if first >= 0 {
				what = fmt.Sprintf("queries %d..%d", first, last)
			}
			f.set(fmt.Errorf("internal error in %s: %v", what, r))
		}
	}()
	if f.failed.Load() {
		return
	}
	if err := ctx.Err(); err != nil {
		f.set(err)
		return
	}
	if err := work(); err != nil {
		f.set(err)
	}
}

// batchQuery is one query of a chunk: its search in progress, and its
// results, which workers scanning different lists share.
type batchQuery struct {
	s     *scratch
	mu    sync.Mutex
	limit atomic.Uint32 // float32 bits of s.top.limit()
}

func (q *batchQuery) results() results {
	return results{top: &q.s.top, mu: &q.mu, shared: &q.limit}
}

// searchChunk searches queries lo..hi-1 of a blocked code into hits[lo:hi],
// in three steps, each on all cores:
//  1. per block of queries, as searchBlock: the lists to probe, and the
//     nearest of them scanned, which gives each query a good limit early;
//  2. the other lists, list by list: a list's blocks and low bits are read
//     from memory once and scanned from cache for every query that probes
//     it (about hi-lo times nprobe over M of them). Workers take shares of
//     the lists, so a query's results are shared between them;
//  3. each query's hits sorted (and re-ranked).
//
// A list's scan rules entries out against the query's results so far,
// whichever worker found them; the hits do not depend on the order, except
// where a first estimate's bound fails (see quant.EstimateSigmas).
func (ix *Index) searchChunk(ctx context.Context, queries Rows, lo, hi int, opt SearchOptions, hits [][]Hit, errs *firstError) {
	n, procs := hi-lo, runtime.GOMAXPROCS(0)
	nprobe := ix.EffectiveNProbe(opt.NProbe)
	qs := make([]batchQuery, n)
	defer func() {
		for i := range qs {
			if qs[i].s != nil {
				ix.pool.Put(qs[i].s)
			}
		}
	}()
	k := min(opt.K, ix.n)
	// Blocks of queries small enough for about four a worker, so that
	// the workers finish each step together.
	block := min(batchBlock, max(4, (n+4*procs-1)/(4*procs)))
	par.For(n, block, func(b0, b1 int) {
		errs.run(ctx, fmt.Sprintf("queries %d..%d", lo+b0, lo+b1-1), func() (err error) {
			defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
			if err := ix.beginBlock(queries, lo+b0, lo+b1, opt, nprobe, qs[b0:b1]); err != nil {
				return err
			}
			for i := b0; i < b1; i++ {
				s := qs[i].s
				ix.scan(s, s.probe[0].ID)
				qs[i].limit.Store(math.Float32bits(s.top.limit()))
			}
			return nil
		})
	})
	if errs.get() != nil {
		return
	}

	// Each list's queries, ascending: visits[first[a]:first[a+1]].
	first := make([]int, ix.m+1)
	for i := range qs {
		for _, p := range qs[i].s.probe[1:] {
			first[p.ID+1]++
		}
	}
	for a := range ix.m {
		first[a+1] += first[a]
	}
	visits := make([]int32, first[ix.m])
	next := slices.Clone(first[:ix.m])
	for i := range qs {
		for _, p := range qs[i].s.probe[1:] {
			visits[next[p.ID]] = int32(i)
			next[p.ID]++
		}
	}
	shares := ix.shareLists(first, 16*procs)
	par.For(len(shares)-1, 1, func(t, _ int) {
		a0, a1 := shares[t], shares[t+1]
		errs.run(ctx, fmt.Sprintf("lists %d..%d of queries %d..%d", a0, a1-1, lo, hi-1), func() (err error) {
			defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
			w := ix.getScratch()
			defer ix.pool.Put(w)
			w.filter, w.base = nil, 0
			for a := a0; a < a1; a++ {
				for _, i := range visits[first[a]:first[a+1]] {
					q := &qs[i]
					w.bscorer.SetQueryFrom(q.s.bscorer)
					ix.scanBlocks(w, a, q.s.qq, q.s.dots[a], q.results())
				}
			}
			return nil
		})
	})
	if errs.get() != nil {
		return
	}

	par.For(n, block, func(b0, b1 int) {
		errs.run(ctx, fmt.Sprintf("queries %d..%d", lo+b0, lo+b1-1), func() (err error) {
			defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true)) // re-ranking reads a file
			for i := b0; i < b1; i++ {
				h, err := ix.finish(nil, qs[i].s, opt, k)
				if err != nil {
					return fmt.Errorf("query %d: %w", lo+i, err)
				}
				hits[lo+i] = h
			}
			return nil
		})
	})
}

// shareLists cuts the lists into at most shares runs of about equal work
// (a list's entries times the queries that probe it, visits[first[a]:
// first[a+1]]) and returns their bounds: run t is lists cut[t] to
// cut[t+1]-1.
func (ix *Index) shareLists(first []int, shares int) []int {
	work := func(a int) int { return (first[a+1] - first[a]) * (int(ix.lists[a+1]-ix.lists[a]) + quant.BlockLen) }
	total := 0
	for a := range ix.m {
		total += work(a)
	}
	cut := []int{0}
	sum := 0
	for a := range ix.m {
		sum += work(a)
		if len(cut) < shares && sum*shares >= total*len(cut) {
			cut = append(cut, a+1)
		}
	}
	if cut[len(cut)-1] != ix.m {
		cut = append(cut, ix.m)
	}
	return cut
}

// beginBlock sets up queries lo..hi-1 (checked) into qs: normalised, their
// dot products with the anchors computed together, their nprobe lists
// chosen, their scorers set.
func (ix *Index) beginBlock(queries Rows, lo, hi int, opt SearchOptions, nprobe int, qs []batchQuery) error {
	d, stride := ix.d, ix.panels.Stride()
	rows := (hi - lo + 3) / 4 * 4
	x := make([]float32, rows*d)
	keep := 0
	for i := range hi - lo {
		q := queries.Row(lo+i, x[i*d:(i+1)*d])
		_, kp, err := ix.check(q, opt)
		if err != nil {
			return fmt.Errorf("query %d: %w", lo+i, err)
		}
		keep = kp
		s := ix.getScratch()
		qs[i].s = s
		ix.load(s, q)
		copy(x[i*d:(i+1)*d], s.q)
	}
	// The probe's kernel takes rows four at a time: pad with the last.
	for i := hi - lo; i < rows; i++ {
		copy(x[i*d:(i+1)*d], x[(hi-lo-1)*d:(hi-lo)*d])
	}
	dots := make([]float32, rows*stride)
	ix.panels.DotsBlock(x, dots)
	for i := range hi - lo {
		s := qs[i].s
		copy(s.dots, dots[i*stride:(i+1)*stride])
		ix.begin(s, nprobe, keep)
	}
	return nil
}

// searchBlock searches queries lo..hi-1 of a code that is not blocked
// into hits[lo:hi], list by list.
func (ix *Index) searchBlock(queries Rows, lo, hi int, opt SearchOptions, hits [][]Hit) (err error) {
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	qs := make([]batchQuery, hi-lo)
	defer func() {
		for i := range qs {
			if qs[i].s != nil {
				ix.pool.Put(qs[i].s)
			}
		}
	}()
	if err := ix.beginBlock(queries, lo, hi, opt, ix.EffectiveNProbe(opt.NProbe), qs); err != nil {
		return err
	}
	var visits []visit
	for i := range qs {
		for _, p := range qs[i].s.probe {
			visits = append(visits, visit{int32(p.ID), int32(i)})
		}
	}
	slices.SortFunc(visits, func(a, b visit) int { return cmp.Or(cmp.Compare(a.list, b.list), cmp.Compare(a.query, b.query)) })
	for _, v := range visits {
		ix.scan(qs[v.query].s, int(v.list))
	}
	k := min(opt.K, ix.n)
	for i := range qs {
		h, err := ix.finish(nil, qs[i].s, opt, k)
		if err != nil {
			return fmt.Errorf("query %d: %w", lo+i, err)
		}
		hits[lo+i] = h
	}
	return nil
}

// visit is one list to scan for one query of a block.
type visit struct{ list, query int32 }
