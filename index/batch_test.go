package index_test

import (
	"context"
	"errors"
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
	if err == nil || !strings.Contains(err.Error(), "internal error in queries 32..63") {
		t.Errorf("a panic in query 37: %v", err)
	}
}

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
