package index

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/par"
)

// batchBlock is the most queries one worker takes at a time (fewer when
// that would leave cores idle). Their probes are merged so that each list
// is scanned for every query of the block that probes it in a row, while
// its codes are in cache: queries near each other share lists, and a list
// read from memory once serves them all.
const batchBlock = 32

// SearchBatch searches for every row of queries, on all cores, and returns
// each one's hits in order: the same hits Search returns. When a query
// fails, or ctx is done, the workers stop at their next block (at most
// 32 queries) and the
// first error recorded comes back (a query's names it; ctx's is returned
// as it is); a panic in a search (a bug) comes back as an error naming the
// block of queries, not as a crash of the process. Safe for concurrent
// use, as Search.
func (ix *Index) SearchBatch(ctx context.Context, queries Rows, opt SearchOptions) ([][]Hit, error) {
	if queries.Dim() != ix.d {
		return nil, fmt.Errorf("%w: queries have dimension %d, the index %d", ErrDim, queries.Dim(), ix.d)
	}
	hits := make([][]Hit, queries.Len())
	var once sync.Once
	var first error
	var failed atomic.Bool
	fail := func(err error) {
		once.Do(func() { first = err })
		failed.Store(true)
	}
	n, procs := queries.Len(), runtime.GOMAXPROCS(0)
	block := min(batchBlock, max(1, (n+procs-1)/procs))
	par.For(n, block, func(lo, hi int) {
		defer func() {
			if r := recover(); r != nil {
				fail(fmt.Errorf("internal error in queries %d..%d: %v", lo, hi-1, r))
			}
		}()
		if failed.Load() {
			return
		}
		if err := ctx.Err(); err != nil {
			fail(err)
			return
		}
		if err := ix.searchBlock(queries, lo, hi, opt, hits); err != nil {
			fail(err)
		}
	})
	if first != nil {
		return nil, first
	}
	return hits, nil
}

// visit is one list to scan for one query of a block.
type visit struct{ list, query int32 }

// searchBlock searches queries lo..hi-1 into hits[lo:hi], list by list.
func (ix *Index) searchBlock(queries Rows, lo, hi int, opt SearchOptions, hits [][]Hit) (err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	nprobe := ix.EffectiveNProbe(opt.NProbe)
	block := make([]*scratch, hi-lo)
	defer func() {
		for _, s := range block {
			if s != nil {
				ix.pool.Put(s)
			}
		}
	}()
	ks, keeps := make([]int, hi-lo), make([]int, hi-lo)
	// The block's queries, normalised, padded to a multiple of four
	// rows, go through the probe's kernel together: the anchors are read
	// once per block rather than once per query.
	d, stride := ix.d, ix.panels.Stride()
	rows := (hi - lo + 3) / 4 * 4
	qs := make([]float32, rows*d)
	x := make([]float32, d)
	for i := range block {
		q := queries.Row(lo+i, x)
		k, keep, err := ix.check(q, opt)
		if err != nil {
			return fmt.Errorf("query %d: %w", lo+i, err)
		}
		s := ix.getScratch()
		block[i], ks[i], keeps[i] = s, k, keep
		ix.load(s, q)
		copy(qs[i*d:(i+1)*d], s.q)
	}
	for i := hi - lo; i < rows; i++ {
		copy(qs[i*d:(i+1)*d], qs[(hi-lo-1)*d:(hi-lo)*d])
	}
	dots := make([]float32, rows*stride)
	ix.panels.DotsBlock(qs, dots)
	visits := make([]visit, 0, (hi-lo)*nprobe)
	for i, s := range block {
		copy(s.dots, dots[i*stride:(i+1)*stride])
		ix.begin(s, nprobe, keeps[i])
		for _, p := range s.probe {
			visits = append(visits, visit{int32(p.ID), int32(i)})
		}
	}
	slices.SortFunc(visits, func(a, b visit) int { return cmp.Or(cmp.Compare(a.list, b.list), cmp.Compare(a.query, b.query)) })
	for _, v := range visits {
		ix.scan(block[v.query], int(v.list))
	}
	for i, s := range block {
		h, err := ix.finish(nil, s, opt, ks[i])
		if err != nil {
			return fmt.Errorf("query %d: %w", lo+i, err)
		}
		hits[lo+i] = h
	}
	return nil
}
