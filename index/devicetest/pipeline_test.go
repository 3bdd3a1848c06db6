package devicetest

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
)

// part is rows lo to hi-1 of r.
type part struct {
	r      index.Rows
	lo, hi int
}

func (p part) Len() int                           { return p.hi - p.lo }
func (p part) Dim() int                           { return p.r.Dim() }
func (p part) Row(i int, dst []float32) []float32 { return p.r.Row(p.lo+i, dst) }

// A batch large enough to go through the pipeline (prepared, searched
// and finished in overlapping chunks) gives each query the hits it gets
// in a batch of its own half; a bad query in a late chunk is an error
// that names it.
func TestPipelinedBatch(t *testing.T) {
	b := Build(t, t.TempDir(), Case{Name: "pipe", N: 600, Dim: 16, Lists: 8, Bits: 4, Metric: index.L2, Queries: 5000})
	di, err := b.Index.OnDevice(Reference())
	if err != nil {
		t.Fatal(err)
	}
	defer di.Close()
	ctx := context.Background()
	for _, opt := range []index.SearchOptions{{K: 10, NProbe: 2}, {K: 5, NProbe: 3, Filter: NewFilter(b.Index.Len(), 0.5, false)}} {
		all, err := di.SearchBatch(ctx, b.Queries, opt)
		if err != nil {
			t.Fatal(err)
		}
		half := b.Queries.Len() / 2
		first, err := di.SearchBatch(ctx, part{b.Queries, 0, half}, opt)
		if err != nil {
			t.Fatal(err)
		}
		second, err := di.SearchBatch(ctx, part{b.Queries, half, b.Queries.Len()}, opt)
		if err != nil {
			t.Fatal(err)
		}
		if want := append(first, second...); !reflect.DeepEqual(all, want) {
			t.Fatalf("filter %v: a batch of %d differs from its halves searched apart", opt.Filter != nil, len(all))
		}
	}
	bad := badRow{b.Queries, 4500}
	if _, err := di.SearchBatch(ctx, bad, index.SearchOptions{K: 10, NProbe: 2}); !errors.Is(err, index.ErrArgument) || !strings.Contains(err.Error(), "query 4500") {
		t.Fatalf("a NaN in query 4500: %v, want ErrArgument naming query 4500", err)
	}
}

// badRow is r with a NaN in row at.
type badRow struct {
	r  index.Rows
	at int
}

func (b badRow) Len() int { return b.r.Len() }
func (b badRow) Dim() int { return b.r.Dim() }
func (b badRow) Row(i int, dst []float32) []float32 {
	dst = b.r.Row(i, dst)
	if i == b.at {
		dst[0] = float32(math.NaN())
	}
	return dst
}
