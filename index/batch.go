package index

import (
	"context"
	"fmt"
	"sync"

	"github.com/vlc-embed/vlc/internal/par"
)

// SearchBatch searches for every row of queries, on all cores, and returns
// each one's hits in order. It stops at the first failing query, or once
// ctx is done, with an error that names the query; a panic in a search (a
// bug) comes back as an error naming the queries it stopped, not as a
// crash of the process. Safe for concurrent use, as Search.
func (ix *Index) SearchBatch(ctx context.Context, queries Rows, opt SearchOptions) ([][]Hit, error) {
	if queries.Dim() != ix.d {
		return nil, fmt.Errorf("%w: queries have dimension %d, the index %d", ErrDim, queries.Dim(), ix.d)
	}
	hits := make([][]Hit, queries.Len())
	var once sync.Once
	var first error
	fail := func(err error) { once.Do(func() { first = err }) }
	par.For(queries.Len(), 16, func(lo, hi int) {
		defer func() {
			if r := recover(); r != nil {
				fail(fmt.Errorf("internal error in queries %d..%d: %v", lo, hi-1, r))
			}
		}()
		x := make([]float32, ix.d)
		for i := lo; i < hi; i++ {
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
