package index_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
)

// The re-rank vectors are checked like any input: another number of rows
// than the index, or a non-finite value in a row a search re-ranks, is an
// error (ErrArgument) naming the problem, from Search and SearchBatch.
func TestRerankVectorsChecked(t *testing.T) {
	path, base, queries := build(t, index.L2, 45)
	ix := open(t, path)
	n, d := base.Len(), base.Dim()
	all := memRows{n, d, make([]float32, n*d)}
	for i := range n {
		base.Row(i, all.x[i*d:(i+1)*d])
	}
	q := queries.Row(0, nil)
	hits, err := ix.Search(q, index.SearchOptions{K: 1, NProbe: 45})
	if err != nil {
		t.Fatal(err)
	}
	hit := hits[0].ID
	poisoned := func(v float32) memRows {
		r := memRows{n, d, append([]float32(nil), all.x...)}
		r.x[hit*d+3] = v
		return r
	}
	cases := []struct {
		name string
		rows memRows
		want string
	}{
		{"one row short", memRows{n - 1, d, all.x[:(n-1)*d]}, "have 1999 rows, the index 2000"},
		{"one row more", memRows{n + 1, d, append(append([]float32(nil), all.x...), all.x[:d]...)}, "have 2001 rows, the index 2000"},
		{"NaN in a hit's row", poisoned(float32(math.NaN())), "value 3 is NaN"},
		{"+Inf in a hit's row", poisoned(float32(math.Inf(1))), "value 3 is +Inf"},
	}
	for _, c := range cases {
		opt := index.SearchOptions{K: 10, NProbe: 45, Rerank: c.rows}
		_, err := ix.Search(q, opt)
		_, errBatch := ix.SearchBatch(context.Background(), firstRows{queries, 1}, opt)
		for _, e := range []error{err, errBatch} {
			if !errors.Is(e, index.ErrArgument) || !strings.Contains(e.Error(), c.want) {
				t.Errorf("%s: %v, want ErrArgument saying %q", c.name, e, c.want)
			}
		}
	}
}
