package device

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/vlc-embed/vlc/internal/par"
)

// Search split over several devices (SplitSearch): an index's lists are
// cut into contiguous ranges, one a device, balanced by entries; each
// device holds the whole index's anchors and only its range's entries, so
// that it probes every list as one device would and scans only its own.
// A batch goes to every device at once, and each query's best entries
// are merged on the host. Every share keeps the keep best of its entries,
// so the merge gives exactly the entries and distances one device gives.
//
// A share's IndexData is the whole index's with the lists outside its
// range emptied and its entries renumbered from the range's first. Its
// Fill re-packs the share's tiles from the whole index's Fill (a share
// rarely begins on a tile boundary): one host copy of the share's codes
// during the upload, where an entry offset in IndexData would have made
// every backend and the index's Fill handle unaligned tiles.

// SplitSearch returns a Searcher that splits each index it uploads over
// devs, in order (a device whose share is empty holds nothing), and
// searches every batch on all of them at once. Its Residents are
// MaskedResidents when every share's is. Closing its Resident closes the
// shares; the devices stay open.
func SplitSearch(devs ...Searcher) Searcher {
	return splitSearcher(append([]Searcher(nil), devs...))
}

type splitSearcher []Searcher

// SplitLists cuts lists (Offsets: len(offsets)-1 lists, list a holding
// entries offsets[a] to offsets[a+1]-1) into k contiguous ranges balanced
// by entries: range i is lists b[i] to b[i+1]-1 of the k+1 boundaries
// returned, each boundary the list boundary nearest to i*N/k entries. A
// range may be empty when lists are few or large.
func SplitLists(offsets []uint64, k int) []int {
	lists := len(offsets) - 1
	n := offsets[lists]
	b := make([]int, k+1)
	b[k] = lists
	for i := 1; i < k; i++ {
		target := uint64(i) * n / uint64(k)
		a := sort.Search(lists+1, func(a int) bool { return offsets[a] >= target })
		if a > 0 && target-offsets[a-1] < offsets[a]-target {
			a--
		}
		b[i] = max(a, b[i-1])
	}
	return b
}

// deviceName names device i of a split for errors: its place, and its
// Name when it has one.
func deviceName(i int, s Searcher) string {
	if nd, ok := s.(interface{ Name() string }); ok {
		return fmt.Sprintf("device %d (%s)", i, nd.Name())
	}
	return fmt.Sprintf("device %d", i)
}

// UploadIndex splits d's lists over the devices (SplitLists) and uploads
// every non-empty share, all at once.
func (devs splitSearcher) UploadIndex(d *IndexData) (Resident, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w: device: a split search over no devices", ErrArgument)
	}
	if err := checkOffsets(d); err != nil {
		return nil, err
	}
	bounds := SplitLists(d.Offsets, len(devs))
	r := &splitResident{n: d.N}
	for i, dev := range devs {
		lo, hi := bounds[i], bounds[i+1]
		base, end := d.Offsets[lo], d.Offsets[hi]
		if base == end {
			continue
		}
		r.shares = append(r.shares, &share{name: deviceName(i, dev), dev: dev, base: int(base), n: int(end - base), lists: [2]int{lo, hi}})
	}
	errs := make([]error, len(r.shares))
	var wg sync.WaitGroup
	for i, s := range r.shares {
		wg.Go(func() {
			res, err := s.dev.UploadIndex(shareData(d, s.base, s.n))
			if err != nil {
				errs[i] = fmt.Errorf("%s, lists %d to %d (%d entries): %w", s.name, s.lists[0], s.lists[1]-1, s.n, err)
				return
			}
			s.res = res
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		r.Close()
		return nil, err
	}
	for _, s := range r.shares {
		if _, ok := s.res.(MaskedResident); !ok {
			return r, nil
		}
	}
	return maskedSplitResident{r}, nil
}

// checkOffsets checks what splitting reads of d: Lists+1 offsets, from 0
// to N, never decreasing.
func checkOffsets(d *IndexData) error {
	if len(d.Offsets) != d.Lists+1 || d.Offsets[0] != 0 || d.Offsets[d.Lists] != uint64(d.N) {
		return fmt.Errorf("%w: device: %d list offsets for %d lists of %d entries", ErrArgument, len(d.Offsets), d.Lists, d.N)
	}
	for a := range d.Lists {
		if d.Offsets[a+1] < d.Offsets[a] {
			return fmt.Errorf("%w: device: list %d ends at entry %d, before it begins (%d)", ErrArgument, a, d.Offsets[a+1], d.Offsets[a])
		}
	}
	return nil
}

// shareData is d restricted to its entries base to base+n-1: the same
// lists and anchors, the lists outside the share empty, entries numbered
// from base.
func shareData(d *IndexData, base, n int) *IndexData {
	s := *d
	s.N = n
	s.Offsets = make([]uint64, len(d.Offsets))
	lo, hi := uint64(base), uint64(base+n)
	for a, o := range d.Offsets {
		s.Offsets[a] = min(max(o, lo), hi) - lo
	}
	s.Fill = func(t0, t1 int, words, scalars []uint32) error { return fillShare(d, base, n, t0, t1, words, scalars) }
	return &s
}

// fillShare writes tiles t0 to t1-1 of the share of d whose entries are
// base to base+n-1 (IndexData.Fill), re-packed from the whole index's
// tiles: share entry e is entry base+e of d.
func fillShare(d *IndexData, base, n, t0, t1 int, words, scalars []uint32) error {
	tw := d.Words * Tile
	first, last := base+t0*Tile, min(base+t1*Tile, base+n) // the whole index's entries wanted
	g0 := first / Tile
	g1 := max(g0, (last+Tile-1)/Tile)
	src, srcScal := words, scalars
	aligned := first%Tile == 0
	if !aligned {
		src, srcScal = make([]uint32, (g1-g0)*tw), make([]uint32, (g1-g0)*Tile)
	}
	if g1 > g0 {
		if err := d.Fill(g0, g1, src, srcScal); err != nil {
			return err
		}
	}
	par.For(t1-t0, 64, func(lo, hi int) {
		for t := t0 + lo; t < t0+hi; t++ {
			tile := words[(t-t0)*tw : (t-t0+1)*tw]
			sc := scalars[(t-t0)*Tile : (t-t0+1)*Tile]
			for v := range Tile {
				e := t*Tile + v
				if e >= n {
					for w := range d.Words {
						tile[w*Tile+v] = 0
					}
					sc[v] = 0
					continue
				}
				if aligned {
					continue
				}
				ge := base + e
				from := (ge/Tile - g0) * tw
				for w := range d.Words {
					tile[w*Tile+v] = src[from+w*Tile+ge%Tile]
				}
				sc[v] = srcScal[(ge/Tile-g0)*Tile+ge%Tile]
			}
		}
	})
	return nil
}

// share is one device's part of a split index: entries base to base+n-1,
// lists lists[0] to lists[1]-1.
type share struct {
	name  string
	dev   Searcher
	res   Resident
	base  int
	n     int
	lists [2]int
	// The share's results of the last batch, and its slice of the last
	// mask.
	entries []int32
	dists   []float32
	allow   []uint64
}

// splitResident is an index split over devices: the shares that hold
// entries, in entry order.
type splitResident struct {
	n      int
	shares []*share
	closed bool
}

// maskedSplitResident is a splitResident whose every share can search
// with a mask.
type maskedSplitResident struct{ *splitResident }

var _ MaskedResident = maskedSplitResident{}

func (r *splitResident) Bytes() int64 {
	var b int64
	for _, s := range r.shares {
		if s.res != nil && !r.closed {
			b += s.res.Bytes()
		}
	}
	return b
}

// Close closes every share's Resident.
func (r *splitResident) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, s := range r.shares {
		if s.res != nil {
			if err := s.res.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			}
		}
		s.entries, s.dists, s.allow = nil, nil, nil
	}
	return errors.Join(errs...)
}

// HostBuffer lends the first share's host memory for queries when its
// device lends any (HostBuffers): that device copies them up without a
// staging pass, the others as from any memory.
func (r *splitResident) HostBuffer(n int) ([]float32, func(), error) {
	if len(r.shares) > 0 {
		if hb, ok := r.shares[0].res.(HostBuffers); ok {
			return hb.HostBuffer(n)
		}
	}
	return make([]float32, n), func() {}, nil
}

var _ HostBuffers = (*splitResident)(nil)

func (r *splitResident) Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	return r.search(ctx, nq, keep, entries, dists, func(ctx context.Context, s *share, e []int32, d []float32) error {
		return s.res.Search(ctx, queries, nq, nprobe, keep, e, d)
	})
}

// SearchMasked gives each share its entries' bits of allow, from its
// first entry's.
func (r maskedSplitResident) SearchMasked(ctx context.Context, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error {
	if len(allow) < (r.n+63)/64 {
		return fmt.Errorf("%w: device: a mask of %d words for %d entries", ErrArgument, len(allow), r.n)
	}
	return r.search(ctx, nq, keep, entries, dists, func(ctx context.Context, s *share, e []int32, d []float32) error {
		s.allow = shiftBits(s.allow, allow, s.base, s.n)
		return s.res.(MaskedResident).SearchMasked(ctx, queries, nq, nprobe, keep, s.allow, e, d)
	})
}

// shiftBits returns bits base to base+n-1 of allow as bits 0 to n-1, in
// dst's memory when it is large enough.
func shiftBits(dst, allow []uint64, base, n int) []uint64 {
	words := (n + 63) / 64
	if cap(dst) < words {
		dst = make([]uint64, words)
	}
	dst = dst[:words]
	w0, sh := base/64, uint(base%64)
	for w := range dst {
		v := allow[w0+w] >> sh
		if sh != 0 && w0+w+1 < len(allow) {
			v |= allow[w0+w+1] << (64 - sh)
		}
		dst[w] = v
	}
	if tail := uint(n % 64); tail != 0 {
		dst[words-1] &= 1<<tail - 1
	}
	return dst
}

// search runs one batch on every share at once (run searches share s
// into its buffers) and merges each query's results into entries and
// dists. A share that fails cancels the others; the error names the
// first that failed.
func (r *splitResident) search(ctx context.Context, nq, keep int, entries []int32, dists []float32, run func(context.Context, *share, []int32, []float32) error) error {
	if r.closed {
		return ErrClosed
	}
	if nq < 0 || keep < 1 || len(entries) < nq*keep || len(dists) < nq*keep {
		return fmt.Errorf("%w: device: %d queries keeping %d into %d entries and %d distances", ErrArgument, nq, keep, len(entries), len(dists))
	}
	if len(r.shares) == 1 { // no merge: the share's results are the index's
		s := r.shares[0]
		if err := run(ctx, s, entries, dists); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		return s.rebase(entries[:nq*keep])
	}
	if len(r.shares) == 0 {
		for i := range nq * keep {
			entries[i], dists[i] = -1, float32(math.Inf(1))
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for _, s := range r.shares {
		s.entries = grow(s.entries, nq*keep)
		s.dists = grow(s.dists, nq*keep)
		wg.Go(func() {
			err := run(ctx, s, s.entries, s.dists)
			if err == nil {
				err = s.rebase(s.entries)
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("%s: %w", s.name, err)
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	par.For(nq, 256, func(lo, hi int) {
		at := make([]int, len(r.shares))
		for i := lo; i < hi; i++ {
			clear(at)
			r.merge(i, keep, at, entries[i*keep:(i+1)*keep], dists[i*keep:(i+1)*keep])
		}
	})
	return nil
}

// merge writes query i's keep best of the shares' results (each sorted,
// -1 past its last) into entries and dists: nearest first in
// cmp.Compare's order, ties to the lower entry, -1 and +Inf past the
// last. at holds each share's next rank, zero at the start.
func (r *splitResident) merge(i, keep int, at []int, entries []int32, dists []float32) {
	for j := range keep {
		best := -1
		var be int32
		var bd float32
		for k, s := range r.shares {
			if at[k] == keep {
				continue
			}
			e := s.entries[i*keep+at[k]]
			if e < 0 {
				at[k] = keep
				continue
			}
			d := s.dists[i*keep+at[k]]
			if best < 0 || cmp.Or(cmp.Compare(d, bd), cmp.Compare(e, be)) < 0 {
				best, be, bd = k, e, d
			}
		}
		if best < 0 {
			for ; j < keep; j++ {
				entries[j], dists[j] = -1, float32(math.Inf(1))
			}
			return
		}
		entries[j], dists[j] = be, bd
		at[best]++
	}
}

// rebase turns the share's entries into the whole index's, and refuses
// one that the share does not hold.
func (s *share) rebase(entries []int32) error {
	for i, e := range entries {
		if e < 0 {
			continue
		}
		if int(e) >= s.n {
			return fmt.Errorf("search returned entry %d of a share of %d", e, s.n)
		}
		entries[i] = e + int32(s.base)
	}
	return nil
}

// grow returns s with length n, reusing its memory when large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// SearcherOf is what dev searches with: dev itself, or for several
// devices (a MultiDevice) the index spread over them as how says
// (SplitSearch, ReplicaSearch), when every one can search.
func SearcherOf(dev Device, how Spread) (Searcher, bool) {
	md, ok := dev.(*MultiDevice)
	if !ok {
		sd, ok := dev.(Searcher)
		return sd, ok
	}
	var all []Searcher
	for _, d := range md.Devices() {
		sd, ok := d.(Searcher)
		if !ok {
			return nil, false
		}
		all = append(all, sd)
	}
	if how == SpreadQueries {
		return ReplicaSearch(all...), true
	}
	return SplitSearch(all...), true
}
