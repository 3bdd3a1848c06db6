package index_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// SearchBatch returns what Search returns for each query, in order; it
// refuses queries of another dimension, stops with ctx's error, and turns
// a panic while searching into an error naming the queries.
func TestSearchBatch(t *testing.T) {
	opt := index.SearchOptions{K: 10, NProbe: 8}
	for _, metric := range []index.Metric{index.IP, index.Cosine, index.L2} {
		path, _, queries := build(t, metric, 45)
		ix := open(t, path)
		// 200 queries: six whole blocks and a part block of 8.
		got, err := ix.SearchBatch(context.Background(), queries, opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != queries.Len() {
			t.Fatalf("%d results for %d queries", len(got), queries.Len())
		}
		for i := range queries.Len() {
			want, err := ix.Search(queries.Row(i, nil), opt)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got[i], want) {
				t.Fatalf("%v, query %d: batch %v, one by one %v", metric, i, got[i], want)
			}
		}
	}
	path, _, queries := build(t, index.L2, 45)
	ix := open(t, path)

	other, err := vecfile.Open(deep+"base.f16", vecfile.Options{Dim: 48})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := ix.SearchBatch(context.Background(), other, opt); !errors.Is(err, index.ErrDim) {
		t.Errorf("queries of dimension 48: %v, want ErrDim", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ix.SearchBatch(ctx, queries, opt); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}

	_, err = ix.SearchBatch(context.Background(), panicRows{queries, 37}, opt)
	var lo, hi int
	if err == nil || !strings.Contains(err.Error(), "internal error in queries ") {
		t.Errorf("a panic in query 37: %v", err)
	} else if _, e := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "queries ")+8:], "%d..%d", &lo, &hi); e != nil || lo > 37 || hi < 37 || hi-lo >= 32 {
		t.Errorf("a panic in query 37: %v; want the block of queries holding 37", err)
	}

	// Batches of every remainder of the probe's four-row groups and of
	// part blocks return Search's hits too.
	for _, n := range []int{1, 2, 3, 5, 7, 33, 35} {
		got, err := ix.SearchBatch(context.Background(), firstRows{queries, n}, opt)
		if err != nil || len(got) != n {
			t.Fatalf("%d queries: %d results, %v", n, len(got), err)
		}
		for i := range n {
			want, _ := ix.Search(queries.Row(i, nil), opt)
			if !slices.Equal(got[i], want) {
				t.Fatalf("%d queries, query %d: batch %v, one by one %v", n, i, got[i], want)
			}
		}
	}
}

// firstRows is the first n rows of a matrix.
type firstRows struct {
	*vecfile.Matrix
	n int
}

func (r firstRows) Len() int { return r.n }

// panicRows panics when asked for row bad.
type panicRows struct {
	*vecfile.Matrix
	bad int
}

func (r panicRows) Row(i int, dst []float32) []float32 {
	if i == r.bad {
		panic("row 37")
	}
	return r.Matrix.Row(i, dst)
}
