package index_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/quant"
)

// TestCosineRefusesZeroQuery: under cosine a zero query has no direction;
// every search refuses it with ErrZeroVector (a batch names the query),
// where it used to find every vector at the same distance. A tiny query
// that is not zero is searched, and l2 and ip take a zero query.
func TestCosineRefusesZeroQuery(t *testing.T) {
	const n, d, m = 300, 8, 5
	dir := t.TempDir()
	open := func(metric index.Metric) *index.Index {
		p := filepath.Join(dir, metric.String()+".vlc")
		if err := os.WriteFile(p, tinyIndex(t, n, d, m, quant.KindRotated, 4, metric), 0o644); err != nil {
			t.Fatal(err)
		}
		ix, err := index.Open(p, index.Options{Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		return ix
	}
	zero := make([]float32, d)
	tiny := make([]float32, d)
	tiny[3] = 1e-40 // a float32 subnormal: its square underflows
	queries := randRows(5, d, 1)
	copy(queries.x[2*d:3*d], zero) // query 2 is zero
	ctx := context.Background()
	opt := index.SearchOptions{K: 3, NProbe: 2}

	ix := open(index.Cosine)
	g, err := index.NewGroup(ix, ix)
	if err != nil {
		t.Fatal(err)
	}
	want := func(what string, err error, name string) {
		t.Helper()
		if !errors.Is(err, index.ErrZeroVector) {
			t.Errorf("%s: %v, want ErrZeroVector", what, err)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %q does not name %q", what, err, name)
		}
	}
	_, err = ix.Search(zero, opt)
	want("Search", err, "every value of the query is 0")
	_, err = ix.SearchAppend(nil, zero, opt)
	want("SearchAppend", err, "every value of the query is 0")
	_, err = ix.Search(zero, index.SearchOptions{K: 3, Filter: evenRows{}})
	want("Search with a filter", err, "every value of the query is 0")
	_, err = ix.SearchBatch(ctx, queries, opt)
	want("SearchBatch", err, "query 2")
	_, err = g.Search(ctx, zero, opt)
	want("Group.Search", err, "every value of the query is 0")
	_, err = g.SearchBatch(ctx, queries, opt)
	want("Group.SearchBatch", err, "query 2")

	di, err := ix.OnDevice(devicetest.Reference())
	if err != nil {
		t.Fatal(err)
	}
	defer di.Close()
	_, err = di.SearchBatch(ctx, queries, opt)
	want("device SearchBatch", err, "query 2")
	if hits, err := di.SearchBatch(ctx, randRows(5, d, 2), opt); err != nil || len(hits) != 5 {
		t.Errorf("device SearchBatch of queries that are not zero: %v", err)
	}

	hits, err := ix.Search(tiny, opt)
	if err != nil || len(hits) != 3 {
		t.Errorf("a tiny query (1e-40) under cosine: %v, %v; want 3 hits", hits, err)
	}
	for _, metric := range []index.Metric{index.L2, index.IP} {
		if hits, err := open(metric).Search(zero, opt); err != nil || len(hits) != 3 {
			t.Errorf("a zero query under %v: %v, %v; want 3 hits", metric, hits, err)
		}
	}
}
