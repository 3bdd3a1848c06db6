//go:build cuda

package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/par"
)

// A share of a point set split over several devices (device.Multi) is a
// dataset of its rows whose pass stops before the update: Reduce assigns
// and reduces the share with the scales of the whole set (its n, gn, and
// the bound over every share, agreed in Link) and brings back its
// scalars alone (16 bytes). Fold adds the scalars on the host. Apply
// combines the partial sums the update needs (counts; for a Step, the
// weighted sums and weights) on the devices themselves, and each share
// then runs vlc_update on the total: every share moves its anchors to the
// same bits, those of one device. The sums are 64-bit fixed point, so the
// total is the integer one device would have summed, whatever the split
// and the order of the adds, even where a sum wrapped. When some point was
// beyond the scales (Again), every share reduces once more with scales for
// the largest distance of all, as finishPass does on one device.
//
// The combination (exchange.go) is a reduce-scatter and an all-gather
// over the shares' own buffers: share i adds every other share's part i of
// the sums to its own (copied device to device), then, once every share
// has its part, copies part j of the total from share j. The squared sums
// of the variances are combined the same way, and only their reduce-scatter,
// when Stats asks: each share then brings back its part.

var (
	_ device.ShardDevice = (*Device)(nil)
	_ device.Shard       = (*dataset)(nil)
)

// share is what a dataset keeps as a share: its part of the last round.
type share struct {
	sc    scalars
	fix   fixScales // the scales of the round
	round int       // 0, or 1 when reduced again
	move  bool
	own   *fixedSums // the total this share begins when it folds first
	group *exchange  // every share of the set, from Link
	index int        // this share's place in group
	// scratch receives another share's part of the sums before it is
	// added (device memory, scratchBytes long).
	scratch      uint64
	scratchBytes int64
	// exchanged is the wall time of this share's exchanges (Apply, Stats).
	exchanged time.Duration
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

// Link takes the largest |x| of every share as the bound of the scales,
// and joins the shares' exchange (its peer access, between GPUs).
func (s *dataset) Link(all []device.Shard) error {
	shares := make([]*dataset, len(all))
	for i, o := range all {
		od, ok := o.(*dataset)
		if !ok || od.share == nil {
			return fmt.Errorf("cuda: a share cannot be split with %T", o)
		}
		if od.gn != s.gn || od.d != s.d {
			return fmt.Errorf("cuda: shares of %d x %d and %d x %d points", s.gn, s.d, od.gn, od.d)
		}
		s.xBound = max(s.xBound, od.xBound)
		shares[i] = od
		if od == s {
			s.share.index = i
		}
	}
	if s.share.index == 0 && shares[0] == s {
		s.share.group = newExchange(shares)
	} else {
		// The first share made the group in its own Link (Multi links
		// the shares in order).
		if shares[0].share.group == nil {
			return fmt.Errorf("cuda: share %d linked before the first", s.share.index)
		}
		s.share.group = shares[0].share.group
	}
	return s.share.group.enablePeers(s)
}

// Reduce runs the assign (first round only), finalize and reduce of a
// pass on the share, or with again the reduce alone with scales for the
// largest distance of every share, and brings back its scalars.
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
		// The copy waits for the pass's kernels: when it returns, the
		// share's sums are complete for the others to read.
		if err := d.dtoh(unsafe.Pointer(&sh.sc), s.sc, scalarSize); err != nil {
			return fmt.Errorf("cuda: step: %w", err)
		}
		s.toHost.Add(scalarSize)
		sh.fix, sh.move = s.fix, move
		return nil
	})
}

// fixedSums is the total of a pass over the shares: its scalars, summed on
// the host; the sums themselves are combined on the devices (Apply).
type fixedSums struct {
	m, d, gn int
	fix      fixScales
	round    int
	move     bool

	energy  int64 // fixed point, scale fix.energy
	changed int
	maxDist float32
	shards  []*dataset // in share order
	// stats: Stats brought back the variances' sums, into sq and cnt;
	// statsErr: it failed, perhaps after some shares had added the
	// others' parts into their own (a second try would add them twice).
	stats    bool
	statsErr error
	sq       []int64
	cnt      []uint32
}

// Again: the first round met a point beyond its scales (on any share).
func (t *fixedSums) Again() bool { return t.round == 0 && t.maxDist > t.fix.smax }

// StepStats is finishPass's, of the whole set.
func (t *fixedSums) StepStats() device.StepStats {
	return device.StepStats{Energy: float64(t.energy) / float64(t.fix.energy) / float64(t.gn), Changed: t.changed}
}

// Fold adds the share's scalars to the total.
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
			t = &fixedSums{m: m, d: d}
			sh.own = t
		}
		t.gn, t.fix, t.round, t.move = s.gn, sh.fix, sh.round, sh.move
		t.energy, t.changed, t.maxDist, t.shards, t.stats, t.statsErr = 0, 0, 0, t.shards[:0], false, nil
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
	if len(t.shards) != sh.index || sh.group == nil || (len(t.shards) > 0 && t.shards[0].share.group != sh.group) {
		return nil, fmt.Errorf("cuda: share %d folded out of order or into another set's total", sh.index)
	}
	t.energy += sh.sc.energy // wraps as the device's sum does
	t.changed += int(sh.sc.changed)
	t.maxDist = max(t.maxDist, sh.sc.maxDist)
	t.shards = append(t.shards, s)
	return t, nil
}

// complete: every share of the set folded into t.
func (t *fixedSums) complete() bool {
	return len(t.shards) > 0 && len(t.shards) == len(t.shards[0].share.group.shares)
}

// Apply combines the shares' counts, and for a Step their weighted sums
// and weights, on the devices, then moves the anchors from the total
// (vlc_update) and takes the next pass's scales, as finishPass. Every
// share's Apply must run at once (device.Shard): the exchange waits for
// all of them between its halves.
func (s *dataset) Apply(p device.StepParams, move bool, total device.ShardSums) error {
	t, ok := total.(*fixedSums)
	var err error
	switch {
	case s.share == nil:
		return fmt.Errorf("cuda: Apply on a dataset that is not a share")
	case !ok:
		err = fmt.Errorf("cuda: cannot apply %T", total)
	case !t.complete() || t.fix != s.fix || t.m != s.m || t.move != move || t.shards[s.share.index] != s:
		err = fmt.Errorf("cuda: the total of a pass is incomplete or not this pass's")
	}
	parts := []statsPart{partCnt}
	if move {
		parts = []statsPart{partSum, partWsum, partCnt}
	}
	return s.share.group.allReduce(s, parts, err, func() error {
		// vlc_update moves nothing when the share's own largest
		// distance passed smax: never here, since no share's is above
		// the set's, which Again kept within smax.
		if move {
			if err := s.launchUpdate(p, true); err != nil {
				return err
			}
		}
		s.statFix = s.fix
		s.fix = scalesFor(s.gn, 4*float64(t.maxDist))
		return nil
	})
}

// Stats combines the shares' sums of squares on the devices (they stay
// there during the passes), brings each share's part of the total back
// and the counts from the first, as the one device's Stats.
func (t *fixedSums) Stats(counts []int64, variance []float32) error {
	if !t.complete() {
		return fmt.Errorf("cuda: Stats of an incomplete pass")
	}
	md := t.m * t.d
	if t.statsErr != nil {
		return fmt.Errorf("cuda: Stats after a failed Stats of the same pass: %w", t.statsErr)
	}
	if !t.stats {
		if len(t.sq) != md || len(t.cnt) != t.m {
			t.sq, t.cnt = make([]int64, md), make([]uint32, t.m)
		}
		if err := t.shards[0].share.group.fetchSq(t.shards, t.sq, t.cnt); err != nil {
			t.statsErr = err
			return err
		}
		t.stats = true
	}
	for a := 0; a < t.m && a < len(counts); a++ {
		counts[a] = int64(t.cnt[a])
	}
	scale := float64(t.fix.sq)
	par.For(min(md, len(variance)), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if c := t.cnt[i/t.d]; c > 0 {
				variance[i] = float32(float64(t.sq[i]) / scale / float64(c))
			} else {
				variance[i] = 0
			}
		}
	})
	return nil
}
