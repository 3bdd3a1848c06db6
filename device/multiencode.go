package device

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/vlc-embed/vlc/internal/enctrace"
	"github.com/vlc-embed/vlc/internal/par"
)

// A split point set (Multi) encodes on every device at once: each shard
// encodes the entries whose points it holds. A list's parameter is the
// largest |r|^2 over the whole list, whatever shares its points are on,
// so the encode runs in two phases: every shard finds its lists' largest
// |r|^2 (ShardEncoder.RotatedListMax), the parameters are taken from the
// largest over the shards, and every shard encodes its entries against
// them (EncodeRotatedShare) into a buffer of its own, whose codes go to
// their entries' places. A maximum is the same in any order, and every
// entry's code depends only on its point, its anchor and its list's
// parameter: the bytes are those of one device.

// ShardEncoder is a Shard that writes the rotated code of its own points
// (RotatedEncoder) in the two phases a split encode needs. Entries are
// given by the row of their point in the share (0 its first row), in
// entry order; an entry's list is its point's assignment (Assignments),
// as the caller's offsets say.
type ShardEncoder interface {
	Shard
	// RotatedListMax sets lmax[a] (m of them) to the largest |r|^2 of
	// list a over the entries ids, in float64 as the host's Fit sums it
	// (r: the point's float16 values less the stored anchor), and to 0
	// for a list none of them is in. It returns an error wrapping
	// ErrNotResident, having written nothing, when the share cannot
	// encode its points itself; having returned nil, it answers
	// EncodeRotatedShare no ErrNotResident.
	RotatedListMax(l RotatedLayout, anchors []float32, ids []uint32, lmax []float64) error
	// EncodeRotatedShare writes the code of entries ids against list
	// parameters slist (one a list, RotatedScale of its largest |r|^2
	// over all shares), entry e at codes[places[e]*CodeBytes:] (places
	// nil: at codes[e*CodeBytes:]), and calls ready(lo, hi), when not
	// nil, as RotatedStreamEncoder does: runs of entries in order, once
	// each is written. With places, codes is the whole index's, which
	// every share writes at once, each its own entries' places.
	EncodeRotatedShare(l RotatedLayout, anchors []float32, ids []uint32, slist []float32, codes []byte, places []uint32, ready func(lo, hi int)) error
}

// RotatedScale is a list's parameter s as a device writes it, from the
// list's largest |r|^2: that value as float32, or 1 for a list with none
// or all zero. The host raises some lists' s above it
// (quant.Rotated.NonFinite) and encodes them again.
func RotatedScale(lmax float64) float32 {
	if lmax == 0 {
		return 1
	}
	return float32(lmax)
}

// ShareTime is one share's part of the last split encode.
type ShareTime struct {
	Device  int           // the device's place in Multi's list
	Entries int           // entries whose points the share holds
	Time    time.Duration // from the list parameters to its last code in place, handing its runs over included
}

// ShareTimer is a Dataset split over devices that reports what each
// share's device did in the last encode (RotatedEncoder).
type ShareTimer interface {
	EncodeShares() []ShareTime
}

// encodingSet is a split set whose every shard is a ShardEncoder: Multi's
// Load returns one in place of a plain multiSet, so that a split set is a
// RotatedEncoder only where it can encode (elsewhere the pipeline encodes
// on the host without asking).
type encodingSet struct{ *multiSet }

var (
	_ RotatedStreamEncoder = (*encodingSet)(nil)
	_ ShareTimer           = (*encodingSet)(nil)
	_ Dataset              = (*encodingSet)(nil)
	_ PlusPlusDrawer       = (*encodingSet)(nil)
)

// encoders reports whether every shard is a ShardEncoder.
func (s *multiSet) encoders() bool {
	for _, sh := range s.shards {
		if _, ok := sh.(ShardEncoder); !ok {
			return false
		}
	}
	return true
}

// EncodeShares returns each share's part of the last encode, in share
// order; nil when it did not succeed.
func (s *encodingSet) EncodeShares() []ShareTime { return s.encoded }

func (s *encodingSet) EncodeRotated(l RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte) error {
	return s.EncodeRotatedStream(l, anchors, ids, offsets, codes, params, nil)
}

// EncodeRotatedStream encodes on every shard at once when all are
// ShardEncoders (else ErrNotResident: the host encodes). ready sees a run
// once every entry before its end is in place, whichever shards hold
// them.
func (s *encodingSet) EncodeRotatedStream(l RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte, ready func(lo, hi int)) error {
	s.encoded = nil
	m, n, cb := len(offsets)-1, len(ids), l.CodeBytes()
	switch {
	case m < 1 || len(anchors) != m*l.Dim || l.Dim != s.pts.Dim:
		return fmt.Errorf("device: encode: %d anchor values for %d lists of dimension %d, points of dimension %d", len(anchors), m, l.Dim, s.pts.Dim)
	case n != s.pts.N || len(codes) != n*cb || len(params) != m*l.ParamBytes() || offsets[m] != uint64(n):
		return fmt.Errorf("device: encode: %d entries (offsets end at %d), %d code bytes, %d parameter bytes for %d points in %d lists",
			n, offsets[m], len(codes), len(params), s.pts.N, m)
	}
	encs := make([]ShardEncoder, len(s.shards))
	for i, sh := range s.shards {
		enc, ok := sh.(ShardEncoder)
		if !ok {
			return fmt.Errorf("device: encode: share %d (%T) cannot encode its points: %w", i, sh, ErrNotResident)
		}
		encs[i] = enc
	}
	t0 := time.Now()
	parts, err := s.splitEntries(ids)
	if err != nil {
		return err
	}
	tSplit := time.Since(t0)

	lmax := make([][]float64, len(encs))
	if err := s.each(func(i int, _ Shard) error {
		lmax[i] = make([]float64, m)
		return encs[i].RotatedListMax(l, anchors, parts[i].local, lmax[i])
	}); err != nil {
		return err
	}
	tMax := time.Since(t0)
	slist := make([]float32, m)
	for a := range m {
		// The largest of the float64 bits as unsigned integers: the
		// order of non-negative values, and what a device's atomic
		// maximum over all the entries would keep.
		var top uint64
		for _, lm := range lmax {
			top = max(top, math.Float64bits(lm[a]))
		}
		slist[a] = RotatedScale(math.Float64frombits(top))
		putFloat32(params[a*4:], slist[a])
	}

	st := streamState{ready: ready, n: n, done: make([]int, len(parts)), at: make([]int, len(parts))}
	for i, p := range parts {
		st.at[i] = p.at(0, n)
	}
	times := make([]ShareTime, len(parts))
	err = s.each(func(i int, _ Shard) error {
		p := parts[i]
		start := time.Now()
		// Each share writes its entries' codes in their places, and
		// the runs every share has finished are handed over.
		err := encs[i].EncodeRotatedShare(l, anchors, p.local, slist, codes, p.entry, func(lo, hi int) {
			st.finished(i, hi, p.at(hi, n))
		})
		if err == nil && st.done[i] != len(p.local) {
			err = fmt.Errorf("device: encode: share %d handed over %d of its %d entries", i, st.done[i], len(p.local))
		}
		times[i] = ShareTime{Device: s.devs[i], Entries: len(p.local), Time: time.Since(start)}
		return err
	})
	if err != nil {
		return err
	}
	if st.sent != n {
		return fmt.Errorf("device: encode: %d of %d entries handed over", st.sent, n)
	}
	s.encoded = times
	enctrace.Printf("multi encode trace: split %v, list maxima by %v, all by %v\n",
		tSplit.Round(time.Millisecond), tMax.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	return nil
}

// shareEntries are the entries whose points one share holds, in entry
// order: the points' rows in the share, and the entries' places.
type shareEntries struct {
	local []uint32
	entry []uint32
}

// at is the place of the share's k-th entry, or n past its last: every
// entry before it that the share holds is done once its first k are.
func (p shareEntries) at(k, n int) int {
	if k < len(p.entry) {
		return int(p.entry[k])
	}
	return n
}

// splitBlock is the entries splitEntries counts and places per block.
const splitBlock = 1 << 16

// splitEntries sorts the entries by the share that holds their point, on
// all cores, keeping entry order within each share.
func (s *multiSet) splitEntries(ids []uint32) ([]shareEntries, error) {
	n, k := len(ids), len(s.shards)
	blocks := (n + splitBlock - 1) / splitBlock
	counts := make([]int, blocks*k) // counts[b*k+i]: block b's entries in share i
	var bad sync.Once
	badID := -1
	share := func(id uint32) int {
		i := 0
		for i+1 < k && int(id) >= s.lo[i+1] {
			i++
		}
		return i
	}
	par.For(blocks, 1, func(b0, b1 int) {
		for b := b0; b < b1; b++ {
			c := counts[b*k : (b+1)*k]
			for e := b * splitBlock; e < min(n, (b+1)*splitBlock); e++ {
				if int(ids[e]) >= s.pts.N {
					bad.Do(func() { badID = e })
					continue
				}
				c[share(ids[e])]++
			}
		}
	})
	if badID >= 0 {
		return nil, fmt.Errorf("device: encode: entry %d is point %d of %d", badID, ids[badID], s.pts.N)
	}
	parts := make([]shareEntries, k)
	for i := range k {
		total := 0
		for b := range blocks {
			c := counts[b*k+i]
			counts[b*k+i] = total // becomes where block b's entries begin
			total += c
		}
		parts[i] = shareEntries{local: make([]uint32, total), entry: make([]uint32, total)}
	}
	par.For(blocks, 1, func(b0, b1 int) {
		for b := b0; b < b1; b++ {
			next := counts[b*k : (b+1)*k]
			for e := b * splitBlock; e < min(n, (b+1)*splitBlock); e++ {
				i := share(ids[e])
				parts[i].local[next[i]] = ids[e] - uint32(s.lo[i])
				parts[i].entry[next[i]] = uint32(e)
				next[i]++
			}
		}
	})
	return parts, nil
}

// streamState hands the runs of a split encode over in entry order.
type streamState struct {
	mu    sync.Mutex
	ready func(lo, hi int)
	n     int
	done  []int // entries each share has put in place
	at    []int // the place of each share's first entry not in place, n past its last
	sent  int   // entries handed over
}

// finished records that share i has put its first done entries in place,
// the next at place next, and hands over the entries now all in place.
func (st *streamState) finished(i, done, next int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done[i], st.at[i] = done, next
	upTo := st.n
	for _, a := range st.at {
		upTo = min(upTo, a)
	}
	if upTo > st.sent && st.ready != nil {
		st.ready(st.sent, upTo)
	}
	st.sent = max(st.sent, upTo)
}

func putFloat32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}
