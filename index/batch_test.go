package index_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
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

	other := randRows(200, 48, 1)
	if _, err := ix.SearchBatch(context.Background(), other, opt); !errors.Is(err, index.ErrDim) {
		t.Errorf("queries of dimension 48: %v, want ErrDim", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ix.SearchBatch(ctx, queries, opt); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}

	_, err := ix.SearchBatch(context.Background(), panicRows{queries, 37}, opt)
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

// SearchBatch returns Search's hits for every code (blocked or not), at
// one list, some and all of them, on one worker and on several sharing
// each query's results, with and without a filter.
func TestSearchBatchCodes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	const n, d, m = 3000, 40, 37
	queries := randRows(150, d, 9)
	for _, c := range []struct {
		kind   quant.Kind
		bits   int
		metric index.Metric
	}{
		{quant.KindRotated, 4, index.L2}, {quant.KindRotated, 1, index.IP}, {quant.KindRotated, 8, index.Cosine},
		{quant.KindSQ8, 8, index.L2}, {quant.KindPQ, 4, index.IP}, {quant.KindFlat, 32, index.IP},
	} {
		path := filepath.Join(t.TempDir(), "i.vlc")
		if err := os.WriteFile(path, tinyIndex(t, n, d, m, c.kind, c.bits, c.metric), 0o644); err != nil {
			t.Fatal(err)
		}
		ix := open(t, path)
		for _, procs := range []int{1, 4} {
			runtime.GOMAXPROCS(procs)
			for _, opt := range []index.SearchOptions{
				{K: 10, NProbe: 1}, {K: 10, NProbe: 5}, {K: 3, NProbe: m}, {K: 10, NProbe: 5, Filter: evenRows{}},
			} {
				got, err := ix.SearchBatch(context.Background(), queries, opt)
				if err != nil {
					t.Fatal(err)
				}
				for i := range queries.Len() {
					want, err := ix.Search(queries.Row(i, nil), opt)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got[i], want) {
						t.Fatalf("%v %d bits %v, %d procs, nprobe %d, filter %v, query %d: batch %v, one by one %v",
							c.kind, c.bits, c.metric, procs, opt.NProbe, opt.Filter != nil, i, got[i], want)
					}
					if opt.Filter != nil {
						for _, h := range got[i] {
							if h.ID%2 != 0 {
								t.Fatalf("filter of even rows gave row %d", h.ID)
							}
						}
					}
				}
			}
		}
	}
}

// evenRows allows the even rows.
type evenRows struct{}

func (evenRows) Allows(row int) bool { return row%2 == 0 }

// Batches of more than one chunk (batchChunk queries) on several workers
// return Search's hits too.
func TestSearchBatchChunks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	path := filepath.Join(t.TempDir(), "i.vlc")
	if err := os.WriteFile(path, tinyIndex(t, 3000, 24, 29, quant.KindRotated, 4, index.L2), 0o644); err != nil {
		t.Fatal(err)
	}
	ix := open(t, path)
	queries := randRows(2100, 24, 12) // two whole chunks and a part
	opt := index.SearchOptions{K: 5, NProbe: 7}
	got, err := ix.SearchBatch(context.Background(), queries, opt)
	if err != nil {
		t.Fatal(err)
	}
	for i := range queries.Len() {
		want, _ := ix.Search(queries.Row(i, nil), opt)
		if !slices.Equal(got[i], want) {
			t.Fatalf("query %d: batch %v, one by one %v", i, got[i], want)
		}
	}
}
