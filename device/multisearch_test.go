package device_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
)

// refs is k reference devices.
func refs(k int) []device.Searcher {
	return slices.Repeat([]device.Searcher{devicetest.Reference()}, k)
}

// fewLists is an index of fewer lists (2, and the suite's empty one)
// than devices.
var fewLists = devicetest.Case{Name: "l2-d32-b4-2lists", N: 300, Dim: 32, Lists: 2, Bits: 4, Metric: index.L2, Queries: 20}

// Split over 1, 2, 3 and 5 reference devices, an index is searched as on
// one: the conformance suite passes on an index of fewer lists than
// devices (some devices hold nothing) and on a few of the suite's cases,
// and on all of them over 3 and 5 devices (not under -short).
func TestSplitSearchParity(t *testing.T) {
	few := []devicetest.Case{devicetest.DefaultCases[4], devicetest.DefaultCases[8], fewLists}
	all := append(slices.Clone(devicetest.DefaultCases), fewLists)
	for _, k := range []int{1, 2, 3, 5} {
		cases := few
		if k >= 3 && !testing.Short() {
			cases = all
		}
		t.Run(fmt.Sprintf("devices=%d", k), func(t *testing.T) {
			devicetest.Parity(t, device.SplitSearch(refs(k)...), devicetest.Options{Cases: cases})
		})
	}
}

// grab is a reference device that keeps the IndexData it is given.
type grab struct {
	mu  sync.Mutex
	got []*device.IndexData
}

func (g *grab) UploadIndex(d *device.IndexData) (device.Resident, error) {
	g.mu.Lock()
	g.got = append(g.got, d)
	g.mu.Unlock()
	return devicetest.Reference().UploadIndex(d)
}

// indexData builds c's index and returns what it gives a device, and its
// queries (raw: both sides of a comparison read the same).
func indexData(t *testing.T, c devicetest.Case) (*device.IndexData, []float32) {
	t.Helper()
	b := devicetest.Build(t, t.TempDir(), c)
	g := &grab{}
	di, err := b.Index.OnDevice(g)
	if err != nil {
		t.Fatal(err)
	}
	di.Close()
	q := make([]float32, 0, c.Queries*c.Dim)
	for i := range c.Queries {
		q = append(q, b.Queries.Row(i, nil)...)
	}
	return g.got[0], q
}

// search runs one batch on r and returns its entries and distances.
func search(t *testing.T, r device.Resident, q []float32, nq, nprobe, keep int) ([]int32, []float32) {
	t.Helper()
	e, d := make([]int32, nq*keep), make([]float32, nq*keep)
	if err := r.Search(context.Background(), q, nq, nprobe, keep, e, d); err != nil {
		t.Fatal(err)
	}
	return e, d
}

// sameResults fails unless the entries and the distances' bits agree.
func sameResults(t *testing.T, what string, we, ge []int32, wd, gd []float32) {
	t.Helper()
	for i := range we {
		if we[i] != ge[i] || math.Float32bits(wd[i]) != math.Float32bits(gd[i]) {
			t.Fatalf("%s: result %d: entry %d at %g, one device %d at %g", what, i, ge[i], gd[i], we[i], wd[i])
		}
	}
}

// The merge changes nothing: split over 2, 3 and 5 reference devices,
// every query gets one reference device's entries and distances, bit for
// bit, keep 1 to more than the probed lists hold (the -1/+Inf padding).
func TestSplitSearchSameAsOne(t *testing.T) {
	cases := []devicetest.Case{devicetest.DefaultCases[0], devicetest.DefaultCases[6], fewLists}
	for _, c := range cases {
		d, q := indexData(t, c)
		nq := min(c.Queries, 24)
		one, err := devicetest.Reference().UploadIndex(d)
		if err != nil {
			t.Fatal(err)
		}
		ks := []int{2, 3, 5}
		split := make([]device.Resident, len(ks))
		for i, k := range ks {
			if split[i], err = device.SplitSearch(refs(k)...).UploadIndex(d); err != nil {
				t.Fatal(err)
			}
			if b := split[i].Bytes(); b <= 0 || b > 2*one.Bytes() {
				t.Errorf("%s/devices=%d: %d bytes held, one device %d", c.Name, k, b, one.Bytes())
			}
		}
		for _, nprobe := range []int{1, 3, c.Lists + 1} {
			for _, keep := range []int{1, 10, c.N + 7} {
				we, wd := search(t, one, q, nq, nprobe, keep)
				for i, k := range ks {
					ge, gd := search(t, split[i], q, nq, nprobe, keep)
					sameResults(t, fmt.Sprintf("%s/devices=%d/nprobe=%d/keep=%d", c.Name, k, nprobe, keep), we, ge, wd, gd)
				}
			}
		}
		for _, r := range split {
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if err := r.Search(context.Background(), q, 1, 1, 1, make([]int32, 1), make([]float32, 1)); !errors.Is(err, device.ErrClosed) {
				t.Errorf("search after Close: %v", err)
			}
		}
	}
}

// Each device gets the whole index's lists and anchors, its range's
// entries renumbered from its first, and tiles re-packed from the whole
// index's: the same words and scalars entry for entry, zeros past its
// last, whether Fill is asked for every tile at once or a few at a time.
func TestSplitSearchShares(t *testing.T) {
	d, _ := indexData(t, devicetest.DefaultCases[0]) // 2001 entries in 25 lists
	whole := make([]uint32, d.Tiles()*d.Words*device.Tile)
	wholeScal := make([]uint32, d.Tiles()*device.Tile)
	if err := d.Fill(0, d.Tiles(), whole, wholeScal); err != nil {
		t.Fatal(err)
	}
	const k = 3
	gs := make([]device.Searcher, k)
	for i := range gs {
		gs[i] = &grab{}
	}
	r, err := device.SplitSearch(gs...).UploadIndex(d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bounds := device.SplitLists(d.Offsets, k)
	for i, g := range gs {
		s := g.(*grab).got[0]
		base := int(d.Offsets[bounds[i]])
		if s.N != int(d.Offsets[bounds[i+1]])-base || s.Lists != d.Lists || &s.RotAnchors[0] != &d.RotAnchors[0] {
			t.Fatalf("share %d: %d entries in %d lists, want lists %d to %d of %d", i, s.N, s.Lists, bounds[i], bounds[i+1]-1, d.Lists)
		}
		if base%device.Tile == 0 && i > 0 {
			t.Errorf("share %d begins at entry %d, on a tile: the test misses re-packing", i, base)
		}
		for a := range d.Lists {
			want := min(max(d.Offsets[a], uint64(base)), uint64(base+s.N)) - uint64(base)
			if s.Offsets[a] != want {
				t.Fatalf("share %d: list %d begins at %d, want %d", i, a, s.Offsets[a], want)
			}
		}
		for _, step := range []int{s.Tiles(), 1, 3} {
			words := make([]uint32, s.Tiles()*s.Words*device.Tile)
			scal := make([]uint32, s.Tiles()*device.Tile)
			for t0 := 0; t0 < s.Tiles(); t0 += step {
				t1 := min(t0+step, s.Tiles())
				// Fill writes only its tiles: 0xff guards the rest.
				w := words[t0*s.Words*device.Tile : t1*s.Words*device.Tile]
				sc := scal[t0*device.Tile : t1*device.Tile]
				for j := range w {
					w[j] = 0xffffffff
				}
				for j := range sc {
					sc[j] = 0xffffffff
				}
				if err := s.Fill(t0, t1, w, sc); err != nil {
					t.Fatal(err)
				}
			}
			for e := range s.Tiles() * device.Tile {
				ge := base + e
				for w := range s.Words {
					got := words[(e/device.Tile)*s.Words*device.Tile+w*device.Tile+e%device.Tile]
					want := uint32(0)
					if e < s.N {
						want = whole[(ge/device.Tile)*d.Words*device.Tile+w*device.Tile+ge%device.Tile]
					}
					if got != want {
						t.Fatalf("share %d, tiles of %d: entry %d word %d is %#x, want %#x", i, step, e, w, got, want)
					}
				}
				want := uint32(0)
				if e < s.N {
					want = wholeScal[ge]
				}
				if scal[e] != want {
					t.Fatalf("share %d, tiles of %d: entry %d scalars %#x, want %#x", i, step, e, scal[e], want)
				}
			}
		}
	}
}

// SplitLists cuts at the list boundaries nearest to equal shares of the
// entries; a list larger than a share, or fewer lists than devices,
// leaves some shares empty.
func TestSplitLists(t *testing.T) {
	for _, c := range []struct {
		offsets []uint64
		k       int
		want    []int
	}{
		{[]uint64{0, 10, 20, 30, 40}, 2, []int{0, 2, 4}},
		{[]uint64{0, 10, 20, 30, 40}, 4, []int{0, 1, 2, 3, 4}},
		{[]uint64{0, 10, 20, 30, 40}, 3, []int{0, 1, 3, 4}},                // 13.3 is nearer 10, 26.7 nearer 30
		{[]uint64{0, 1, 100, 101}, 2, []int{0, 1, 3}},                      // the large list goes whole to one share
		{[]uint64{0, 1, 100, 101}, 3, []int{0, 1, 2, 3}},                   // 33.7 and 67.3: nearer 1 and 100
		{[]uint64{0, 0, 0, 50, 50, 100}, 2, []int{0, 3, 5}},                // empty lists
		{[]uint64{0, 7, 9}, 5, []int{0, 0, 0, 1, 1, 2}},                    // fewer lists than devices
		{[]uint64{0, 0, 0}, 3, []int{0, 0, 0, 2}},                          // no entries
		{[]uint64{0, 5}, 1, []int{0, 1}},                                   // one device
		{[]uint64{0, 3, 6, 9, 12, 15, 18}, 3, []int{0, 2, 4, 6}},           // exact thirds
		{[]uint64{0, 2, 4, 6, 8, 10, 12, 14}, 2, []int{0, 4, 7}},           // 7 is as near 6 as 8: the later boundary
		{[]uint64{0, 2, 4, 6, 8, 10, 12, 14, 16}, 4, []int{0, 2, 4, 6, 8}}, // even quarters
	} {
		if got := device.SplitLists(c.offsets, c.k); !slices.Equal(got, c.want) {
			t.Errorf("SplitLists(%v, %d) = %v, want %v", c.offsets, c.k, got, c.want)
		}
	}
}

// maskedRef is a reference device whose residents search with a mask:
// every entry found, the masked ones dropped, the best keep kept.
type maskedRef struct{}

type maskedRes struct {
	device.Resident
	n int
}

func (maskedRef) UploadIndex(d *device.IndexData) (device.Resident, error) {
	r, err := devicetest.Reference().UploadIndex(d)
	return maskedRes{r, d.N}, err
}

func (r maskedRes) SearchMasked(ctx context.Context, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error {
	if len(allow) < (r.n+63)/64 {
		return fmt.Errorf("mask of %d words for %d entries", len(allow), r.n)
	}
	all := r.n + 1
	e, d := make([]int32, nq*all), make([]float32, nq*all)
	if err := r.Search(ctx, queries, nq, nprobe, all, e, d); err != nil {
		return err
	}
	for i := range nq {
		j := 0
		for p, x := range e[i*all : (i+1)*all] {
			if x >= 0 && allow[x/64]>>(x%64)&1 != 0 && j < keep {
				entries[i*keep+j], dists[i*keep+j] = x, d[i*all+p]
				j++
			}
		}
		for ; j < keep; j++ {
			entries[i*keep+j], dists[i*keep+j] = -1, float32(math.Inf(1))
		}
	}
	return nil
}

// A mask reaches each share shifted to its first entry: split over 2, 3
// and 5 masked devices, a masked search gives one masked device's
// results. Where one share's device cannot mask, the split cannot.
func TestSplitSearchMasked(t *testing.T) {
	c := devicetest.DefaultCases[1]
	d, q := indexData(t, c)
	allow := make([]uint64, (d.N+63)/64)
	for e := range d.N {
		if e%3 != 0 && e%7 != 1 {
			allow[e/64] |= 1 << (e % 64)
		}
	}
	one, err := maskedRef{}.UploadIndex(d)
	if err != nil {
		t.Fatal(err)
	}
	const nprobe, keep = 5, 20
	we, wd := make([]int32, c.Queries*keep), make([]float32, c.Queries*keep)
	if err := one.(device.MaskedResident).SearchMasked(context.Background(), q, c.Queries, nprobe, keep, allow, we, wd); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{2, 3, 5} {
		r, err := device.SplitSearch(slices.Repeat([]device.Searcher{maskedRef{}}, k)...).UploadIndex(d)
		if err != nil {
			t.Fatal(err)
		}
		mr, ok := r.(device.MaskedResident)
		if !ok {
			t.Fatalf("devices=%d: every share masks, the split does not", k)
		}
		ge, gd := make([]int32, c.Queries*keep), make([]float32, c.Queries*keep)
		if err := mr.SearchMasked(context.Background(), q, c.Queries, nprobe, keep, allow, ge, gd); err != nil {
			t.Fatal(err)
		}
		sameResults(t, fmt.Sprintf("masked, devices=%d", k), we, ge, wd, gd)
		if err := mr.SearchMasked(context.Background(), q, c.Queries, nprobe, keep, allow[:len(allow)-1], ge, gd); !errors.Is(err, device.ErrArgument) {
			t.Errorf("devices=%d: a mask one word short: %v", k, err)
		}
		r.Close()
	}
	r, err := device.SplitSearch(maskedRef{}, devicetest.Unmasked(devicetest.Reference())).UploadIndex(d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.(device.MaskedResident); ok {
		t.Error("a share's device cannot mask, the split says it can")
	}
}

// failing fails its uploads, or its searches when search is set, and
// counts its residents' closes.
type failing struct {
	search bool
	closed *int
}

var errBroken = errors.New("broken device")

func (f failing) UploadIndex(d *device.IndexData) (device.Resident, error) {
	if !f.search {
		return nil, errBroken
	}
	r, err := devicetest.Reference().UploadIndex(d)
	return failingRes{r, f.closed}, err
}

type failingRes struct {
	device.Resident
	closed *int
}

func (r failingRes) Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	return errBroken
}

func (r failingRes) Close() error { *r.closed++; return r.Resident.Close() }

// An upload or a search that fails on one device fails the split with an
// error naming that device; a failed upload frees the shares that were
// uploaded.
func TestSplitSearchErrors(t *testing.T) {
	d, q := indexData(t, devicetest.DefaultCases[0])
	closed := 0
	_, err := device.SplitSearch(failing{search: true, closed: &closed}, failing{}, devicetest.Reference()).UploadIndex(d)
	if !errors.Is(err, errBroken) || !strings.Contains(err.Error(), "device 1, lists") {
		t.Errorf("upload on a broken device 1: %v", err)
	}
	if closed != 1 {
		t.Errorf("a failed upload closed %d of the uploaded shares, want 1", closed)
	}
	r, err := device.SplitSearch(devicetest.Reference(), failing{search: true, closed: &closed}).UploadIndex(d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = r.Search(context.Background(), q, 3, 2, 10, make([]int32, 30), make([]float32, 30))
	if !errors.Is(err, errBroken) || !strings.HasPrefix(err.Error(), "device 1: ") {
		t.Errorf("search on a broken device 1: %v", err)
	}
	if err := r.Search(context.Background(), q, 3, 2, 10, make([]int32, 29), make([]float32, 30)); !errors.Is(err, device.ErrArgument) {
		t.Errorf("29 entries for 3 queries keeping 10: %v", err)
	}
	if _, err := device.SplitSearch().UploadIndex(d); !errors.Is(err, device.ErrArgument) {
		t.Errorf("no devices: %v", err)
	}
}
