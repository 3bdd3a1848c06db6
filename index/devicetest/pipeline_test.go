package devicetest

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vlc-embed/vlc/device"
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

// lending is the reference with resident memory lent for queries
// (device.HostBuffers), counting what is out.
type lending struct{ out *atomic.Int64 }

type lendingResident struct {
	device.MaskedResident
	out *atomic.Int64
}

func (l lending) UploadIndex(d *device.IndexData) (device.Resident, error) {
	r, err := Reference().UploadIndex(d)
	if err != nil {
		return nil, err
	}
	return lendingResident{r.(device.MaskedResident), l.out}, nil
}

func (r lendingResident) HostBuffer(n int) ([]float32, func(), error) {
	r.out.Add(1)
	var once sync.Once
	return make([]float32, n), func() { once.Do(func() { r.out.Add(-1) }) }, nil
}

// Memory a device lends for queries is given back after every batch:
// pipelined or not, filtered, and failed.
func TestHostBuffersReturned(t *testing.T) {
	b := Build(t, t.TempDir(), Case{Name: "lend", N: 600, Dim: 16, Lists: 8, Bits: 4, Metric: index.L2, Queries: 5000})
	var out atomic.Int64
	di, err := b.Index.OnDevice(lending{&out})
	if err != nil {
		t.Fatal(err)
	}
	defer di.Close()
	ctx := context.Background()
	for _, q := range []index.Rows{b.Queries, part{b.Queries, 0, 100}} {
		for _, opt := range []index.SearchOptions{{K: 10, NProbe: 2}, {K: 5, NProbe: 1, Filter: NewFilter(b.Index.Len(), 0.05, false)}} {
			if _, err := di.SearchBatch(ctx, q, opt); err != nil {
				t.Fatal(err)
			}
			if n := out.Load(); n != 0 {
				t.Fatalf("%d buffers out after a batch of %d", n, q.Len())
			}
		}
	}
	if _, err := di.SearchBatch(ctx, badRow{b.Queries, 4500}, index.SearchOptions{K: 10, NProbe: 2}); err == nil {
		t.Fatal("a NaN query: no error")
	}
	if n := out.Load(); n != 0 {
		t.Fatalf("%d buffers out after a failed batch", n)
	}
}

// counting allows every other row, counts its calls, and says it allows
// the same rows as any counting filter of the same key.
type counting struct {
	key   int
	calls *atomic.Int64
}

func (c counting) Allows(row int) bool { c.calls.Add(1); return row%2 == 0 }
func (c counting) MaskKey() any        { return c.key }

// A filter with a mask key (a store version's deletions) is turned into
// a device mask once for its key: the next batch with the same key asks
// it nothing, one with another key builds anew; the hits are the same.
func TestKeyedFilterMaskOnce(t *testing.T) {
	b := Build(t, t.TempDir(), Case{Name: "keyed", N: 600, Dim: 16, Lists: 8, Bits: 4, Metric: index.L2, Queries: 50})
	di, err := b.Index.OnDevice(Reference())
	if err != nil {
		t.Fatal(err)
	}
	defer di.Close()
	var calls atomic.Int64
	ctx := context.Background()
	search := func(key int) [][]index.Hit {
		h, err := di.SearchBatch(ctx, b.Queries, index.SearchOptions{K: 10, NProbe: 3, Filter: counting{key, &calls}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	first := search(1)
	if n := calls.Load(); n < int64(b.Index.Len()) {
		t.Fatalf("the first batch asked the filter %d times, fewer than the %d rows", n, b.Index.Len())
	}
	calls.Store(0)
	if again := search(1); !reflect.DeepEqual(again, first) {
		t.Error("the same key gave other hits")
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the same key asked the filter %d times, want 0", n)
	}
	search(2)
	if n := calls.Load(); n < int64(b.Index.Len()) {
		t.Errorf("a new key asked the filter %d times, fewer than the %d rows", n, b.Index.Len())
	}
}

// sizing is the reference device recording the queries of each batch it
// is given (under mu, in sizes).
type sizing struct {
	mu    *sync.Mutex
	sizes *[]int
}

type sizingResident struct {
	device.MaskedResident
	s sizing
}

func (s sizing) UploadIndex(d *device.IndexData) (device.Resident, error) {
	r, err := Reference().UploadIndex(d)
	if err != nil {
		return nil, err
	}
	return sizingResident{r.(device.MaskedResident), s}, nil
}

func (r sizingResident) note(nq int) {
	r.s.mu.Lock()
	*r.s.sizes = append(*r.s.sizes, nq)
	r.s.mu.Unlock()
}

func (r sizingResident) Search(ctx context.Context, q []float32, nq, nprobe, keep int, e []int32, d []float32) error {
	r.note(nq)
	return r.MaskedResident.Search(ctx, q, nq, nprobe, keep, e, d)
}

func (r sizingResident) SearchMasked(ctx context.Context, q []float32, nq, nprobe, keep int, allow []uint64, e []int32, d []float32) error {
	r.note(nq)
	return r.MaskedResident.SearchMasked(ctx, q, nq, nprobe, keep, allow, e, d)
}

// A pipelined batch on replicas (device.ReplicaSearch, a LanedResident)
// gives each copy whole chunks, in flight beside the other's, and the
// hits of one device; a small batch is still cut over the copies.
func TestPipelinedLanes(t *testing.T) {
	b := Build(t, t.TempDir(), Case{Name: "lanes", N: 600, Dim: 16, Lists: 8, Bits: 4, Metric: index.L2, Queries: 5000})
	one, err := b.Index.OnDevice(Reference())
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	var mu sync.Mutex
	var sizes [2][]int
	two, err := b.Index.OnDevice(device.ReplicaSearch(sizing{&mu, &sizes[0]}, sizing{&mu, &sizes[1]}))
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	ctx := context.Background()
	for _, opt := range []index.SearchOptions{{K: 10, NProbe: 2}, {K: 5, NProbe: 3, Filter: NewFilter(b.Index.Len(), 0.5, false)}} {
		sizes = [2][]int{}
		want, err := one.SearchBatch(ctx, b.Queries, opt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := two.SearchBatch(ctx, b.Queries, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("filter %v: replicas' hits differ from one device's", opt.Filter != nil)
		}
		total := 0
		for i, s := range sizes {
			if len(s) == 0 {
				t.Fatalf("filter %v: copy %d searched nothing (batches %v)", opt.Filter != nil, i, sizes)
			}
			for _, n := range s {
				total += n
				if n < 900 { // the chunks are 2048, 2048 and 904 queries
					t.Fatalf("filter %v: copy %d searched a batch of %d, not a whole chunk (batches %v)", opt.Filter != nil, i, n, sizes)
				}
			}
		}
		if total != b.Queries.Len() {
			t.Fatalf("filter %v: the copies searched %d queries, want %d", opt.Filter != nil, total, b.Queries.Len())
		}
	}
	sizes = [2][]int{}
	if _, err := two.SearchBatch(ctx, part{b.Queries, 0, 100}, index.SearchOptions{K: 10, NProbe: 2}); err != nil {
		t.Fatal(err)
	}
	if len(sizes[0]) != 1 || len(sizes[1]) != 1 || sizes[0][0]+sizes[1][0] != 100 {
		t.Fatalf("a batch of 100: copies searched %v, want one part of it each", sizes)
	}
}
