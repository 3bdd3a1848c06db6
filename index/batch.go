package index

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vlc-embed/vlc/internal/par"
)

// SearchBatch searches for every row of queries, on all cores, and returns
// each one's hits in order. When a query fails, or ctx is done, the
// workers stop at their next query and the first error recorded comes
// back (a query's names it; ctx's is returned as it is); a panic in a
// search (a bug) comes back as an error naming the block of queries, not
// as a crash of the process. Safe for concurrent use, as Search.
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
	par.For(queries.Len(), 16, func(lo, hi int) {
		defer func() {
			if r := recover(); r != nil {
				fail(fmt.Errorf("internal error in queries %d..%d: %v", lo, hi-1, r))
			}
		}()
		x := make([]float32, ix.d)
		for i := lo; i < hi; i++ {
			if failed.Load() {
				return
			}
			if err := ctx.Err(); err != nil {
				fail(err)
				return
			}
			h, err := ix.Search(queries.Row(i, x), opt)
			if err != nil {
				fail(fmt.Errorf("query %d: %w", i, err))
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
