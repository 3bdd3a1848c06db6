//go:build cuda

package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/par"
)

// A share of a point set split over several devices (device.Multi) is a
// dataset of its rows whose pass stops before the update: Reduce assigns
// and reduces the share with the scales of the whole set (its n, gn, and
// the bound over every share, agreed in Link), and brings back the
// scalars and, unless a point was beyond the scales, the partial sums
// the update needs (counts; for a Step, the weighted sums and weights).
// Fold adds them on the host: they are 64-bit fixed point, so the total
// is the integer one device would have summed, whatever the split, even
// where a sum wrapped. When some point was beyond the scales (Again), every
// share reduces once more with scales for the largest distance of all, as
// finishPass does on one device. Apply uploads the total to every share
// and runs vlc_update there: every share moves its anchors to the same
// bits, those of one device. The variances' sums stay on the devices
// until Stats asks for them.
//
// Per Step and share: 16 bytes of scalars, m x 4 of counts, m x d x 8 of
// sums and m x 8 of weights come back; the totals of the last three go up.

var (
	_ device.ShardDevice = (*Device)(nil)
	_ device.Shard       = (*dataset)(nil)
)

// share is what a dataset keeps as a share: its part of the last round.
type share struct {
	sc      scalars
	fix     fixScales // the scales of the round
	round   int       // 0, or 1 when reduced again
	move    bool
	fetched bool // cnt, and for a Step sum and wsum, came back
	sum     []int64
	wsum    []int64
	cnt     []uint32
	own     *fixedSums // the total this share begins when it folds first
}

// LoadShard uploads rows lo to hi-1 of p: a share of p (device.Multi).
func (d *Device) LoadShard(p device.Points, lo, hi int) (device.Shard, error) {
	if p.Dim < 1 || len(p.Data) != p.N*p.Dim || lo < 0 || lo >= hi || hi > p.N {
		return nil, fmt.Errorf("cuda: rows %d to %d of %d points of dimension %d (%d values)", lo, hi, p.N, p.Dim, len(p.Data))
	}
	s, err := d.load(p, lo, hi)
	if err != nil {
		return nil, err
	}
	s.share = &share{}
	return s, nil
}

// Link takes the largest |x| of every share as the bound of the scales.
func (s *dataset) Link(all []device.Shard) error {
	for _, o := range all {
		od, ok := o.(*dataset)
		if !ok || od.share == nil {
			return fmt.Errorf("cuda: a share cannot be split with %T", o)
		}
		if od.gn != s.gn || od.d != s.d {
			return fmt.Errorf("cuda: shares of %d x %d and %d x %d points", s.gn, s.d, od.gn, od.d)
		}
		s.xBound = max(s.xBound, od.xBound)
	}
	return nil
}

// Reduce runs the assign (first round only), finalize and reduce of a
// pass on the share, or with again the reduce alone with scales for the
// largest distance of every share, and brings back its part.
func (s *dataset) Reduce(p device.StepParams, move bool, again device.ShardSums) error {
	sh := s.share
	if sh == nil {
		return fmt.Errorf("cuda: Reduce on a dataset that is not a share")
	}
	if s.m == 0 {
		return fmt.Errorf("cuda: Step before SetAnchors")
	}
	var prev *fixedSums
	if again != nil {
		var ok bool
		if prev, ok = again.(*fixedSums); !ok {
			return fmt.Errorf("cuda: cannot reduce again after %T", again)
		}
	}
	return s.run(func() error {
		d := s.dev
		if prev == nil {
			if err := d.memset8(s.sc, 0, scalarSize); err != nil {
				return err
			}
			if s.batch > 0 {
				// As passBatched: the keys the last batch's padding
				// rows left behind are reset first.
				if err := d.memset8(s.keys, 0xff, int64(s.batch)*8); err != nil {
					return err
				}
				if err := s.batches(p, move, true); err != nil {
					return err
				}
			} else {
				if err := s.launchAssign(s.variant, s.n); err != nil {
					return err
				}
				if err := d.launch("vlc_finalize", (s.n+255)/256, 1, 256, 0,
					s.keys, s.assign, s.stats, i64(s.statsWords), s.sc, i32(s.n), i32(s.m)); err != nil {
					return err
				}
				if err := s.launchReduce(p, move); err != nil {
					return err
				}
			}
			sh.round = 0
		} else {
			s.fix = scalesFor(s.gn, 2*float64(prev.maxDist))
			if err := s.zeroSums(); err != nil {
				return err
			}
			var err error
			if s.batch > 0 {
				err = s.batches(p, move, false)
			} else {
				err = s.launchReduce(p, move)
			}
			if err != nil {
				return err
			}
			s.rescaled++
			sh.round = prev.round + 1
		}
		if err := d.dtoh(unsafe.Pointer(&sh.sc), s.sc, scalarSize); err != nil {
			return fmt.Errorf("cuda: step: %w", err)
		}
		s.toHost.Add(scalarSize)
		sh.fix, sh.move = s.fix, move
		// A share that met a point beyond the scales knows that every
		// share reduces again: its sums are not needed.
		sh.fetched = prev != nil || sh.sc.maxDist <= s.fix.smax
		if !sh.fetched {
			return nil
		}
		md := s.m * s.d
		if len(sh.cnt) != s.m || len(sh.sum) != md {
			sh.cnt, sh.wsum, sh.sum = make([]uint32, s.m), make([]int64, s.m), make([]int64, md)
		}
		if err := d.dtoh(unsafe.Pointer(&sh.cnt[0]), s.cnt, int64(s.m)*4); err != nil {
			return err
		}
		s.toHost.Add(int64(s.m) * 4)
		if !move {
			return nil
		}
		if err := d.dtoh(unsafe.Pointer(&sh.sum[0]), s.sum, int64(md)*8); err != nil {
			return err
		}
		if err := d.dtoh(unsafe.Pointer(&sh.wsum[0]), s.wsum, int64(s.m)*8); err != nil {
			return err
		}
		s.toHost.Add(int64(md)*8 + int64(s.m)*8)
		return nil
	})
}

// fixedSums is the total of a pass over the shares: integer sums, exact.
type fixedSums struct {
	m, d, gn int
	fix      fixScales
	round    int
	move     bool
	complete bool // every share's sums are in

	energy  int64 // fixed point, scale fix.energy
	changed int
	maxDist float32
	sum     []int64 // m*d, Steps only
	wsum    []int64 // m, Steps only
	cnt     []uint32
	shards  []*dataset // for Stats
}

// Again: the first round met a point beyond its scales (on any share).
func (t *fixedSums) Again() bool { return t.round == 0 && t.maxDist > t.fix.smax }

// StepStats is finishPass's, of the whole set.
func (t *fixedSums) StepStats() device.StepStats {
	return device.StepStats{Energy: float64(t.energy) / float64(t.fix.energy) / float64(t.gn), Changed: t.changed}
}

// Fold adds the share's part to the total.
func (s *dataset) Fold(acc device.ShardSums) (device.ShardSums, error) {
	sh := s.share
	if sh == nil {
		return nil, fmt.Errorf("cuda: Fold on a dataset that is not a share")
	}
	m, d := s.m, s.d
	var t *fixedSums
	if acc == nil {
		t = sh.own
		if t == nil || t.m != m || t.d != d {
			t = &fixedSums{m: m, d: d, sum: make([]int64, m*d), wsum: make([]int64, m), cnt: make([]uint32, m)}
			sh.own = t
		}
		clear(t.sum)
		clear(t.wsum)
		clear(t.cnt)
		t.gn, t.fix, t.round, t.move, t.complete = s.gn, sh.fix, sh.round, sh.move, true
		t.energy, t.changed, t.maxDist, t.shards = 0, 0, 0, t.shards[:0]
	} else {
		var ok bool
		t, ok = acc.(*fixedSums)
		switch {
		case !ok:
			return nil, fmt.Errorf("cuda: cannot fold a share into %T", acc)
		case t.m != m || t.d != d || t.gn != s.gn || t.fix != sh.fix || t.round != sh.round || t.move != sh.move:
			return nil, fmt.Errorf("cuda: shares of one pass disagree (anchors %d / %d, scales %+v / %+v, round %d / %d)", t.m, m, t.fix, sh.fix, t.round, sh.round)
		}
	}
	t.energy += sh.sc.energy // wraps as the device's sum does
	t.changed += int(sh.sc.changed)
	t.maxDist = max(t.maxDist, sh.sc.maxDist)
	t.shards = append(t.shards, s)
	if !sh.fetched {
		t.complete = false
		return t, nil
	}
	for a, c := range sh.cnt {
		t.cnt[a] += c
	}
	if t.move {
		for a, w := range sh.wsum {
			t.wsum[a] += w
		}
		par.For(len(t.sum), 1<<16, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				t.sum[i] += sh.sum[i]
			}
		})
	}
	return t, nil
}

// Apply uploads the total's sums and counts and moves the anchors (vlc_update),
// then takes the next pass's scales, as finishPass.
func (s *dataset) Apply(p device.StepParams, move bool, total device.ShardSums) error {
	t, ok := total.(*fixedSums)
	switch {
	case !ok:
		return fmt.Errorf("cuda: cannot apply %T", total)
	case !t.complete || t.fix != s.fix || t.m != s.m || t.move != move:
		return fmt.Errorf("cuda: the total of a pass is incomplete or not this pass's")
	}
	return s.run(func() error {
		if move {
			d := s.dev
			md := int64(s.m) * int64(s.d)
			for _, c := range []struct {
				dst   uint64
				src   unsafe.Pointer
				bytes int64
			}{{s.sum, unsafe.Pointer(&t.sum[0]), md * 8}, {s.wsum, unsafe.Pointer(&t.wsum[0]), int64(s.m) * 8}, {s.cnt, unsafe.Pointer(&t.cnt[0]), int64(s.m) * 4}} {
				if err := d.htod(c.dst, c.src, c.bytes); err != nil {
					return err
				}
				s.toDev.Add(c.bytes)
			}
			if err := s.launchUpdate(p, true); err != nil {
				return err
			}
		}
		s.statFix = s.fix
		s.fix = scalesFor(s.gn, 4*float64(t.maxDist))
		return nil
	})
}

// Stats brings back every share's sums of squares (they stay on the
// devices during the passes) and adds them, as the one device's Stats.
func (t *fixedSums) Stats(counts []int64, variance []float32) error {
	if !t.complete {
		return fmt.Errorf("cuda: Stats of an incomplete pass")
	}
	md := t.m * t.d
	parts := make([][]int64, len(t.shards))
	errs := make([]error, len(t.shards))
	var wg sync.WaitGroup
	for i, s := range t.shards {
		parts[i] = make([]int64, md)
		wg.Go(func() {
			errs[i] = s.run(func() error {
				if err := s.dev.dtoh(unsafe.Pointer(&parts[i][0]), s.sq, int64(md)*8); err != nil {
					return err
				}
				s.toHost.Add(int64(md) * 8)
				return nil
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	sq := parts[0]
	for _, q := range parts[1:] {
		for i, v := range q {
			sq[i] += v // wraps as the device's sum does
		}
	}
	for a := 0; a < t.m && a < len(counts); a++ {
		counts[a] = int64(t.cnt[a])
	}
	for i := 0; i < md && i < len(variance); i++ {
		if c := t.cnt[i/t.d]; c > 0 {
			variance[i] = float32(float64(sq[i]) / float64(t.fix.sq) / float64(c))
		} else {
			variance[i] = 0
		}
	}
	return nil
}
