package cpu

import (
	"fmt"
	"sync"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// A share of a point set split over several devices (device.Multi) is a
// dataset of its rows. Its float64 sums do not split: they are carried
// from share to share instead. Fold adds the share's points to the sums
// the shares before it left, anchor by anchor in ascending point order
// (addPoints, as reduce adds them), and the energy the same way (addDist);
// the total then ends each anchor as reduce does (finishAnchor). The sums
// see the same additions in the same order as on one dataset, so a split
// set gives the one-dataset bits, for any number of shares and any split.
// The assigns of the shares run at once; the folds one after another.

var _ device.ShardDevice = (*Device)(nil)

// share is what a dataset keeps as a share.
type share struct {
	gn      int // points in the whole set
	changed int // of the last Reduce
	p       device.StepParams
	move    bool
	own     *sums // the total this share begins when it folds first
}

// LoadShard keeps a reference to rows lo to hi-1 of p.
func (*Device) LoadShard(p device.Points, lo, hi int) (device.Shard, error) {
	if p.Dim < 1 || len(p.Data) != p.N*p.Dim || lo < 0 || lo >= hi || hi > p.N {
		return nil, fmt.Errorf("cpu: rows %d to %d of %d points of dimension %d (%d values)", lo, hi, p.N, p.Dim, len(p.Data))
	}
	ds := newDataset(p.Data[lo*p.Dim:hi*p.Dim], hi-lo, p.Dim)
	ds.share = &share{gn: p.N}
	return ds, nil
}

// Link has nothing to agree on: the carried sums need no common scale.
func (s *dataset) Link([]device.Shard) error { return nil }

// Reduce assigns the share's points; Fold reduces them.
func (s *dataset) Reduce(p device.StepParams, move bool, again device.ShardSums) error {
	switch {
	case s.share == nil:
		return fmt.Errorf("cpu: Reduce on a dataset that is not a share")
	case s.m == 0:
		return fmt.Errorf("cpu: Step before SetAnchors")
	case again != nil:
		return fmt.Errorf("cpu: a split set is reduced once a pass")
	}
	s.share.p, s.share.move = p, move
	s.share.changed = s.assignRows()
	return nil
}

// sums are the carried sums of a pass over a split set.
type sums struct {
	m, d, gn  int
	move      bool
	p         device.StepParams
	sum, sq   []float64 // m*d
	wsum      []float64
	cnt       []int64
	energy    float64 // the distances added so far, in point order
	changed   int
	variance  []float32 // m*d, by finish
	next      []float32 // the moved anchors, by finish
	finishing sync.Once
}

func (t *sums) Again() bool { return false }

func (t *sums) StepStats() device.StepStats {
	return device.StepStats{Energy: t.energy / float64(t.gn), Changed: t.changed}
}

func (t *sums) Stats(counts []int64, variance []float32) error {
	copy(counts, t.cnt)
	copy(variance, t.variance)
	return nil
}

// Fold adds the share's points to the carried sums, anchor by anchor
// (all cores), and its distances to the energy, in point order.
func (s *dataset) Fold(acc device.ShardSums) (device.ShardSums, error) {
	sh := s.share
	if sh == nil {
		return nil, fmt.Errorf("cpu: Fold on a dataset that is not a share")
	}
	d, m := s.d, s.m
	var t *sums
	if acc == nil {
		t = sh.own
		if t == nil || t.m != m || t.d != d {
			t = &sums{m: m, d: d, sum: make([]float64, m*d), sq: make([]float64, m*d), wsum: make([]float64, m), cnt: make([]int64, m),
				variance: make([]float32, m*d), next: make([]float32, m*d)}
			sh.own = t
		}
		clear(t.sum)
		clear(t.sq)
		clear(t.wsum)
		clear(t.cnt)
		t.gn, t.move, t.p, t.energy, t.changed, t.finishing = sh.gn, sh.move, sh.p, 0, 0, sync.Once{}
	} else {
		var ok bool
		if t, ok = acc.(*sums); !ok || t.m != m || t.d != d || t.gn != sh.gn {
			return nil, fmt.Errorf("cpu: cannot fold a share into %T", acc)
		}
	}
	var p *device.StepParams
	if t.move {
		p = &t.p
	}
	start, members := s.byAnchor()
	par.For(m, 1, func(lo, hi int) {
		x := make([]float32, d)
		for a := lo; a < hi; a++ {
			pts := members[start[a]:start[a+1]]
			t.wsum[a] = s.addPoints(pts, s.anc[a*d:(a+1)*d], p, x, t.sum[a*d:(a+1)*d], t.sq[a*d:(a+1)*d], t.wsum[a])
			t.cnt[a] += int64(len(pts))
		}
	})
	t.energy = addDist(t.energy, s.dist)
	t.changed += sh.changed
	return t, nil
}

// finish ends every anchor from the total, once a pass: the variances
// and, for a Step, the moved anchors (from anc, the anchors of the pass).
func (t *sums) finish(anc []float32) {
	t.finishing.Do(func() {
		var p *device.StepParams
		if t.move {
			p = &t.p
		}
		d := t.d
		copy(t.next, anc)
		par.For(t.m, 1, func(lo, hi int) {
			for a := lo; a < hi; a++ {
				finishAnchor(t.next[a*d:(a+1)*d], t.sum[a*d:(a+1)*d], t.sq[a*d:(a+1)*d], t.wsum[a], t.cnt[a], t.variance[a*d:(a+1)*d], p)
			}
		})
	})
}

// Apply takes the moved anchors of a Step.
func (s *dataset) Apply(_ device.StepParams, move bool, total device.ShardSums) error {
	t, ok := total.(*sums)
	if !ok || t.m != s.m || t.d != s.d {
		return fmt.Errorf("cpu: cannot apply %T", total)
	}
	t.finish(s.anc)
	if move {
		copy(s.anc, t.next)
		vec.Norms(s.norms, s.anc, s.d)
		s.panels.Set(s.anc, s.m, s.d)
	}
	return nil
}
