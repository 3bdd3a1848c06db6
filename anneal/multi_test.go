package anneal_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/anneal/devicetest"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
)

// fixedDevice is a toy backend built as cuda's split path is: its reduce
// adds integer (fixed-point) terms, with scales for the whole set's n and
// a largest distance, taken from a bound on the points before the first
// pass and from the last pass after; a pass that meets a point beyond its
// scales reduces again. Split over shards it needs what Multi offers:
// Link (the bound over every share) and Again (the second round). Lloyd
// moves only (rate, no Huber weight), which is all it needs to show.
type fixedDevice struct{}

var _ device.ShardDevice = fixedDevice{}

func (fixedDevice) Name() string { return "fixed" }
func (fixedDevice) Close() error { return nil }

func (fixedDevice) Load(p device.Points) (device.Dataset, error) {
	s := newFixed(p, 0, p.N)
	return &fixedOne{s: s}, nil
}

func (fixedDevice) LoadShard(p device.Points, lo, hi int) (device.Shard, error) {
	return newFixed(p, lo, hi), nil
}

type fixedSet struct {
	x        []float64 // the share's rows
	n, gn, d int
	m        int
	bound    float64 // the largest |x|
	anc      []float32
	assign   []int32
	dist     []float64
	smax     float64 // the scales of the next pass are for this distance
	fresh    bool    // no pass yet
	rescaled int
	part     fixedSums // of the last Reduce
}

type fixedSums struct {
	smax    float64
	round   int
	energy  int64
	changed int
	maxDist float64
	sum, sq []int64
	cnt     []int64
	gn, d   int
}

func newFixed(p device.Points, lo, hi int) *fixedSet {
	s := &fixedSet{n: hi - lo, gn: p.N, d: p.Dim, fresh: true, assign: make([]int32, hi-lo), dist: make([]float64, hi-lo)}
	s.x = make([]float64, s.n*s.d)
	for i, h := range p.Data[lo*p.Dim : hi*p.Dim] {
		s.x[i] = float64(f16.ToFloat32(h))
		s.bound = max(s.bound, math.Abs(s.x[i]))
	}
	for i := range s.assign {
		s.assign[i] = -1
	}
	return s
}

// scale is the power of two that keeps gn terms of at most smax in 40 bits.
func scale(gn int, smax float64) float64 {
	return math.Ldexp(1, 40-int(math.Ceil(math.Log2(float64(gn)*max(smax, 1e-30)))))
}

func (s *fixedSet) Link(all []device.Shard) error {
	for _, o := range all {
		s.bound = max(s.bound, o.(*fixedSet).bound)
	}
	return nil
}

func (s *fixedSet) SetAnchors(a []float32, m int) error {
	s.anc, s.m = append([]float32(nil), a[:m*s.d]...), m
	if s.fresh {
		s.smax = float64(s.d) * 4 * s.bound * s.bound
	}
	return nil
}

// reduce sums the share's terms with the scales for smax.
func (s *fixedSet) reduce(assign bool) {
	d, sc := s.d, scale(s.gn, s.smax)
	t := &s.part
	t.smax, t.energy, t.changed, t.maxDist = s.smax, 0, 0, 0
	t.sum, t.sq, t.cnt = make([]int64, s.m*d), make([]int64, s.m*d), make([]int64, s.m)
	for i := range s.n {
		x := s.x[i*d : (i+1)*d]
		if assign {
			best, bd := int32(0), math.Inf(1)
			for a := range s.m {
				var v float64
				for j := range d {
					r := x[j] - float64(s.anc[a*d+j])
					v += r * r
				}
				if v < bd {
					best, bd = int32(a), v
				}
			}
			if s.assign[i] != best {
				t.changed++
			}
			s.assign[i], s.dist[i] = best, bd
		}
		a := int(s.assign[i])
		t.cnt[a]++
		t.energy += int64(math.Round(s.dist[i] * sc))
		t.maxDist = max(t.maxDist, s.dist[i])
		for j := range d {
			r := x[j] - float64(s.anc[a*d+j])
			t.sum[a*d+j] += int64(math.Round(r * sc))
			t.sq[a*d+j] += int64(math.Round(r * r * sc))
		}
	}
}

func (s *fixedSet) Reduce(p device.StepParams, move bool, again device.ShardSums) error {
	if again == nil {
		s.reduce(true)
		s.part.round = 0
	} else {
		s.smax = 2 * again.(*fixedSums).maxDist
		s.reduce(false)
		s.part.round = 1
		s.rescaled++
	}
	s.part.gn, s.part.d = s.gn, s.d
	return nil
}

func (s *fixedSet) Fold(acc device.ShardSums) (device.ShardSums, error) {
	if acc == nil {
		t := s.part
		t.sum, t.sq, t.cnt = append([]int64(nil), t.sum...), append([]int64(nil), t.sq...), append([]int64(nil), t.cnt...)
		return &t, nil
	}
	t := acc.(*fixedSums)
	if t.smax != s.part.smax || t.round != s.part.round {
		return nil, errors.New("fixed: shares disagree on the scales")
	}
	t.energy += s.part.energy
	t.changed += s.part.changed
	t.maxDist = max(t.maxDist, s.part.maxDist)
	for i := range t.sum {
		t.sum[i] += s.part.sum[i]
		t.sq[i] += s.part.sq[i]
	}
	for a := range t.cnt {
		t.cnt[a] += s.part.cnt[a]
	}
	return t, nil
}

func (t *fixedSums) Again() bool { return t.round == 0 && t.maxDist > t.smax }

func (t *fixedSums) StepStats() device.StepStats {
	return device.StepStats{Energy: float64(t.energy) / scale(t.gn, t.smax) / float64(t.gn), Changed: t.changed}
}

func (t *fixedSums) Stats(counts []int64, variance []float32) error {
	copy(counts, t.cnt)
	for i := range variance {
		variance[i] = 0
		if c := t.cnt[i/t.d]; c > 0 {
			variance[i] = float32(float64(t.sq[i]) / scale(t.gn, t.smax) / float64(c))
		}
	}
	return nil
}

func (s *fixedSet) Apply(p device.StepParams, move bool, total device.ShardSums) error {
	t := total.(*fixedSums)
	if move {
		sc := scale(s.gn, t.smax)
		for i := range s.anc {
			if c := t.cnt[i/s.d]; c > 0 {
				s.anc[i] += p.Rate * float32(float64(t.sum[i])/sc/float64(c))
			}
		}
	}
	// The next scales fit the last largest distance exactly (cuda leaves
	// room to grow 4x): any growth reduces again, so training meets
	// second rounds often.
	s.fresh, s.smax = false, t.maxDist
	return nil
}

func (s *fixedSet) Anchors(dst []float32) error   { copy(dst, s.anc); return nil }
func (s *fixedSet) Assignments(dst []int32) error { copy(dst, s.assign); return nil }
func (s *fixedSet) Transfer() (int64, int64)      { return 0, 0 }
func (s *fixedSet) Close() error                  { return nil }

// fixedOne is the one-device Dataset: a pass is the whole protocol on one
// share.
type fixedOne struct {
	s    *fixedSet
	last *fixedSums
}

func (o *fixedOne) pass(p device.StepParams, move bool) (device.StepStats, error) {
	var total device.ShardSums
	for {
		if err := o.s.Reduce(p, move, total); err != nil {
			return device.StepStats{}, err
		}
		total, _ = o.s.Fold(nil)
		if !total.Again() {
			break
		}
	}
	o.last = total.(*fixedSums)
	return total.StepStats(), o.s.Apply(p, move, total)
}

func (o *fixedOne) SetAnchors(a []float32, m int) error                { return o.s.SetAnchors(a, m) }
func (o *fixedOne) Step(p device.StepParams) (device.StepStats, error) { return o.pass(p, true) }
func (o *fixedOne) Assign() (device.StepStats, error)                  { return o.pass(device.StepParams{}, false) }
func (o *fixedOne) Anchors(dst []float32) error                        { return o.s.Anchors(dst) }
func (o *fixedOne) Stats(c []int64, v []float32) error                 { return o.last.Stats(c, v) }
func (o *fixedOne) Assignments(dst []int32) error                      { return o.s.Assignments(dst) }
func (o *fixedOne) Transfer() (int64, int64)                           { return 0, 0 }
func (o *fixedOne) Close() error                                       { return nil }

// blockScaled scales the points by blocks of rows: the first third by
// 1/64, the last by 16, so that the shares of a split have different
// bounds (the scales are wrong unless Link agrees on one).
func blockScaled(p device.Points) device.Points {
	out := p
	out.Data = make([]uint16, len(p.Data))
	for i, h := range p.Data {
		s := []float32{1.0 / 64, 1, 16}[3*(i/p.Dim)/p.N]
		out.Data[i] = f16.FromFloat32(f16.ToFloat32(h) * s)
	}
	return out
}

// rescaled is the number of second rounds every share of ds ran (-1 when
// they disagree).
func rescaled(ds device.Dataset) int {
	if o, ok := ds.(*fixedOne); ok {
		return o.s.rescaled
	}
	r := -2
	for _, sh := range ds.(interface{ Shards() []device.Shard }).Shards() {
		if v := sh.(*fixedSet).rescaled; r == -2 || r == v {
			r = v
		} else {
			r = -1
		}
	}
	return r
}

// counting is a device whose datasets record, as they close after
// training, how many times they reduced again (rescaled).
type counting struct {
	device.Device
	runs *[]int
}

func (c counting) Load(p device.Points) (device.Dataset, error) {
	ds, err := c.Device.Load(p)
	if err != nil {
		return nil, err
	}
	return countingSet{ds, c.runs}, nil
}

type countingSet struct {
	device.Dataset
	runs *[]int
}

func (s countingSet) Close() error {
	*s.runs = append(*s.runs, rescaled(s.Dataset))
	return s.Dataset.Close()
}

// Multi's protocol on the toy fixed-point backend: the bound agreed in
// Link, the whole set's n, second rounds (Again) on every share. Train
// split over 1 to 5 toy devices, evenly and not, gives the bits of the
// toy's one device, which itself reduced again several times.
func TestMultiProtocol(t *testing.T) {
	pts := blockScaled(synth.Clusters(1200, 12, 10, 5))
	var runs []int
	cfg := anneal.Config{M: 16, Seed: 9}
	one := devicetest.TrainTrace(t, counting{fixedDevice{}, &runs}, pts, cfg)
	if runs[0] < 2 {
		t.Fatalf("one device reduced again %d times: the test misses second rounds", runs[0])
	}
	t.Logf("one device: %d iterations, energy %.6g, %d second rounds", one.Model.Iterations, one.Model.Energy, runs[0])
	for _, k := range []int{1, 2, 3, 5} {
		for _, split := range []func(n, k int) []int{device.EvenSplit, devicetest.Skewed, devicetest.Sizes(1, 399)} {
			t.Run(fmt.Sprintf("devices=%d/split=%v", k, split(pts.N, k)), func(t *testing.T) {
				devs := make([]device.Device, k)
				for i := range devs {
					devs[i] = fixedDevice{}
				}
				devicetest.SameTrace(t, "one device / split", one, devicetest.TrainTrace(t, counting{device.Multi(devs...).WithSplit(split), &runs}, pts, cfg))
				if r := runs[len(runs)-1]; r != runs[0] {
					t.Errorf("the shares reduced again %d times, one device %d", r, runs[0])
				}
			})
		}
	}
}
