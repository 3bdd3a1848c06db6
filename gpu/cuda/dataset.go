//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/vlc-embed/vlc/anneal"
)

// Tile sizes shared with kernels.cu.
const (
	tileM      = 128 // BM: points per assign block; X rows are padded to it
	tileK      = 64  // the largest BK: X and A16 columns are padded to it
	anchorPad  = 256 // A16 rows padded to the largest BN of any variant
	scalarSize = 16  // struct Scalars: float64 energy, uint32 changed, pad
)

type dataset struct {
	dev *Device

	n, d, dp, np int // points, dimension, padded dimension, padded rows
	m, mp        int // anchors, padded anchors

	x, assign, dist, keys, sc uint64 // device buffers of the points
	a32, a16, anorm, stats    uint64 // device buffers of the anchors
	sum, sq, wsum, cnt        uint64 // parts of stats
	statsWords                int64

	toDev, toHost atomic.Int64

	pp ppState // k-means++ (SampleDistances)

	variant assignVariant // assign tile shape, from the Device
	timing  bool
	ev      [5]uintptr
	last    KernelTimes
	closed  bool
}

var _ anneal.Dataset = (*dataset)(nil)
var _ Profiler = (*dataset)(nil)

func roundUp(v, to int) int { return (v + to - 1) / to * to }

// Load uploads the points once: n x d float16, stored with rows padded to
// a multiple of 128 and columns to a multiple of 32 (zeros, which change no
// dot product). Data larger than the free device memory is refused:
// batching is not implemented yet.
func (d *Device) Load(p anneal.Points) (anneal.Dataset, error) {
	if p.Dim < 1 || p.N < 1 || len(p.Data) != p.N*p.Dim {
		return nil, fmt.Errorf("cuda: %d values do not make %d points of dimension %d", len(p.Data), p.N, p.Dim)
	}
	if p.N > math.MaxInt32-tileM {
		return nil, fmt.Errorf("cuda: %d points: at most %d per dataset", p.N, math.MaxInt32-tileM)
	}
	s := &dataset{dev: d, n: p.N, d: p.Dim, dp: roundUp(p.Dim, tileK), np: roundUp(p.N, tileM), variant: d.variant}
	err := d.run(func() error {
		xBytes := int64(s.np) * int64(s.dp) * 2
		if err := d.checkFits(s.n, s.d); err != nil {
			return err
		}
		var err error
		for _, b := range []struct {
			p     *uint64
			bytes int64
		}{{&s.x, xBytes}, {&s.assign, int64(s.n) * 4}, {&s.dist, int64(s.n) * 4}, {&s.keys, int64(s.np) * 8}, {&s.sc, scalarSize}} {
			if *b.p, err = d.alloc(b.bytes); err != nil {
				s.freeAll()
				return err
			}
		}
		if err := s.upload(p.Data); err != nil {
			s.freeAll()
			return err
		}
		// No previous assignment (-1): the first assign changes every point.
		for _, z := range []struct {
			p     uint64
			v     byte
			bytes int64
		}{{s.assign, 0xff, int64(s.n) * 4}, {s.keys, 0xff, int64(s.np) * 8}, {s.sc, 0, scalarSize}} {
			if err := d.memset8(z.p, z.v, z.bytes); err != nil {
				s.freeAll()
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// checkFits refuses, before any allocation, a point set whose resident
// buffers exceed the device's free memory (on the worker).
func (d *Device) checkFits(n, dim int) error {
	np, dp := int64(roundUp(n, tileM)), int64(roundUp(dim, tileK))
	need := np*dp*2 + int64(n)*8 + np*8 + scalarSize
	free, _, err := d.memInfo()
	if err != nil {
		return err
	}
	if need > free {
		return fmt.Errorf("cuda: %d points of dimension %d need %.2f GiB on %s, %.2f GiB are free; data larger than device memory is not supported yet (no batching)",
			n, dim, float64(need)/(1<<30), d.info.Name, float64(free)/(1<<30))
	}
	return nil
}

// upload copies the points into X (on the worker): in one copy when no
// column padding is needed, else through a padded staging buffer.
func (s *dataset) upload(data []uint16) error {
	d := s.dev
	if s.dp == s.d {
		if err := d.htod(s.x, unsafe.Pointer(&data[0]), int64(len(data))*2); err != nil {
			return err
		}
		s.toDev.Add(int64(len(data)) * 2)
	} else {
		const chunkBytes = 32 << 20
		rows := max(1, chunkBytes/(s.dp*2))
		stage := make([]uint16, rows*s.dp)
		for lo := 0; lo < s.n; lo += rows {
			hi := min(lo+rows, s.n)
			for i := lo; i < hi; i++ {
				copy(stage[(i-lo)*s.dp:(i-lo)*s.dp+s.d], data[i*s.d:(i+1)*s.d])
			}
			b := int64(hi-lo) * int64(s.dp) * 2
			if err := d.htod(s.x+uint64(lo*s.dp*2), unsafe.Pointer(&stage[0]), b); err != nil {
				return err
			}
			s.toDev.Add(b)
		}
	}
	// Padding rows are zero.
	return d.memset8(s.x+uint64(s.n)*uint64(s.dp)*2, 0, int64(s.np-s.n)*int64(s.dp)*2)
}

// freeAll releases every buffer (on the worker).
func (s *dataset) freeAll() {
	s.freePP()
	for _, p := range []*uint64{&s.x, &s.assign, &s.dist, &s.keys, &s.sc, &s.a32, &s.a16, &s.anorm, &s.stats} {
		s.dev.free(*p)
		*p = 0
	}
	for i, e := range s.ev {
		if e != 0 {
			s.dev.drv.call("cuEventDestroy", s.dev.drv.cuEventDestroy, e)
			s.ev[i] = 0
		}
	}
}

func (s *dataset) freeAnchors() {
	for _, p := range []*uint64{&s.a32, &s.a16, &s.anorm, &s.stats} {
		s.dev.free(*p)
		*p = 0
	}
	s.m = 0
}

func (s *dataset) run(f func() error) error {
	if s.closed {
		return errors.New("cuda: dataset closed")
	}
	return s.dev.run(f)
}

// SetAnchors uploads m anchors (float32) and makes their float16 copy and
// norms on the device.
func (s *dataset) SetAnchors(a []float32, m int) error {
	if m < 1 || len(a) < m*s.d {
		return fmt.Errorf("cuda: %d values do not make %d anchors of dimension %d", len(a), m, s.d)
	}
	return s.run(func() error {
		d := s.dev
		if m != s.m {
			s.freeAnchors()
			mp := roundUp(m, anchorPad)
			words := 2*int64(m)*int64(s.d) + 2*int64(m)
			var err error
			for _, b := range []struct {
				p     *uint64
				bytes int64
			}{{&s.a32, int64(m) * int64(s.d) * 4}, {&s.a16, int64(mp) * int64(s.dp) * 2}, {&s.anorm, int64(mp) * 4}, {&s.stats, words * 4}} {
				if *b.p, err = d.alloc(b.bytes); err != nil {
					s.freeAnchors()
					return err
				}
			}
			if err := d.memset8(s.a16, 0, int64(mp)*int64(s.dp)*2); err != nil {
				return err
			}
			if err := d.memset8(s.stats, 0, words*4); err != nil {
				return err
			}
			s.m, s.mp, s.statsWords = m, mp, words
			md := uint64(m) * uint64(s.d) * 4
			s.sum, s.sq, s.wsum, s.cnt = s.stats, s.stats+md, s.stats+2*md, s.stats+2*md+uint64(m)*4
		}
		b := int64(m) * int64(s.d) * 4
		if err := d.htod(s.a32, unsafe.Pointer(&a[0]), b); err != nil {
			return err
		}
		s.toDev.Add(b)
		return s.launchUpdate(anneal.StepParams{}, false)
	})
}

// launchUpdate: vlc_update over mp blocks. With move it moves the anchors
// as p says; always it refreshes A16 and anorm.
func (s *dataset) launchUpdate(p anneal.StepParams, move bool) error {
	capped := move && !math.IsInf(float64(p.MaxMove), 1)
	return s.dev.launch("vlc_update", s.mp, 1, 128, 0,
		s.a32, s.a16, s.anorm, s.sum, s.wsum, s.cnt, i32(s.m), i32(s.d), i32(s.dp),
		f32(p.Rate), f32(p.MaxMove), b32(capped), b32(move))
}

// split chooses how many blocks share the anchors of one row block, so
// that small point sets still fill the GPU.
func (s *dataset) split(v assignVariant) (ntiles, perSplit, splits int) {
	ntiles = s.mp / v.bn
	rowBlocks := s.np / tileM
	slots := v.blocksPerSMGuess * s.dev.info.SMs
	want := max(1, (slots+rowBlocks-1)/rowBlocks)
	splits = min(ntiles, want)
	perSplit = (ntiles + splits - 1) / splits
	splits = (ntiles + perSplit - 1) / perSplit
	return
}

func (s *dataset) launchAssign(v assignVariant) error {
	ntiles, per, splits := s.split(v)
	return s.dev.launch("vlc_assign_"+v.name, s.np/tileM, splits, 256, v.smem(),
		s.x, s.a16, s.anorm, s.keys, i32(s.dp), i32(ntiles), i32(per))
}

func (s *dataset) record(i int) error {
	if !s.timing {
		return nil
	}
	dr := s.dev.drv
	if s.ev[i] == 0 {
		if err := dr.call("cuEventCreate", dr.cuEventCreate, uintptr(unsafe.Pointer(&s.ev[i])), 0); err != nil {
			return err
		}
	}
	return dr.call("cuEventRecord", dr.cuEventRecord, s.ev[i], 0)
}

func (s *dataset) elapsed(a, b int) (float64, error) {
	var ms float32
	err := s.dev.drv.call("cuEventElapsedTime", s.dev.drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), s.ev[a], s.ev[b])
	return float64(ms), err
}

// pass runs one assign + reduce (+ update when move) and brings back the
// 16 bytes of scalars: the only transfer of a steady-state Step.
func (s *dataset) pass(p anneal.StepParams, move bool) (anneal.StepStats, error) {
	if s.m == 0 {
		return anneal.StepStats{}, errors.New("cuda: Step before SetAnchors")
	}
	var st anneal.StepStats
	err := s.run(func() error {
		d := s.dev
		if err := d.memset8(s.sc, 0, scalarSize); err != nil {
			return err
		}
		steps := []func() error{
			func() error { return s.launchAssign(s.variant) },
			func() error {
				return d.launch("vlc_finalize", (s.n+255)/256, 1, 256, 0,
					s.keys, s.assign, s.stats, i64(s.statsWords), s.sc, i32(s.n), i32(s.m))
			},
			func() error {
				huber := move && !math.IsInf(float64(p.Tau), 1)
				blocks := min((s.n+7)/8, 8*d.info.SMs)
				return d.launch("vlc_reduce", blocks, 1, 256, 0,
					s.x, s.assign, s.a32, s.dist, s.sum, s.sq, s.wsum, s.cnt, s.sc,
					i32(s.n), i32(s.d), i32(s.dp), f32(p.Tau), b32(huber), b32(move))
			},
			func() error {
				if !move {
					return nil
				}
				return s.launchUpdate(p, true)
			},
		}
		for i, f := range steps {
			if err := s.record(i); err != nil {
				return err
			}
			if err := f(); err != nil {
				return err
			}
		}
		if err := s.record(len(steps)); err != nil {
			return err
		}
		var sc struct {
			energy  float64
			changed uint32
			_       uint32
		}
		if err := d.dtoh(unsafe.Pointer(&sc), s.sc, scalarSize); err != nil {
			return fmt.Errorf("cuda: step: %w", err)
		}
		s.toHost.Add(scalarSize)
		st = anneal.StepStats{Energy: sc.energy / float64(s.n), Changed: int(sc.changed)}
		if s.timing {
			var t [4]float64
			for i := range t {
				var err error
				if t[i], err = s.elapsed(i, i+1); err != nil {
					return err
				}
			}
			s.last = KernelTimes{Assign: t[0], Finalize: t[1], Reduce: t[2], Update: t[3]}
		}
		return nil
	})
	return st, err
}

func (s *dataset) Step(p anneal.StepParams) (anneal.StepStats, error) { return s.pass(p, true) }

func (s *dataset) Assign() (anneal.StepStats, error) { return s.pass(anneal.StepParams{}, false) }

func (s *dataset) Anchors(dst []float32) error {
	if s.m == 0 {
		return errors.New("cuda: Anchors before SetAnchors")
	}
	md := s.m * s.d
	buf := dst
	if len(dst) < md {
		buf = make([]float32, md)
	}
	err := s.run(func() error {
		if err := s.dev.dtoh(unsafe.Pointer(&buf[0]), s.a32, int64(md)*4); err != nil {
			return err
		}
		s.toHost.Add(int64(md) * 4)
		return nil
	})
	if len(dst) < md {
		copy(dst, buf)
	}
	return err
}

func (s *dataset) Stats(counts []int64, variance []float32) error {
	if s.m == 0 {
		return errors.New("cuda: Stats before SetAnchors")
	}
	md := s.m * s.d
	sq := make([]float32, md)
	cnt := make([]uint32, s.m)
	err := s.run(func() error {
		if err := s.dev.dtoh(unsafe.Pointer(&sq[0]), s.sq, int64(md)*4); err != nil {
			return err
		}
		if err := s.dev.dtoh(unsafe.Pointer(&cnt[0]), s.cnt, int64(s.m)*4); err != nil {
			return err
		}
		s.toHost.Add(int64(md)*4 + int64(s.m)*4)
		return nil
	})
	if err != nil {
		return err
	}
	for a := 0; a < s.m && a < len(counts); a++ {
		counts[a] = int64(cnt[a])
	}
	for i := 0; i < md && i < len(variance); i++ {
		if c := cnt[i/s.d]; c > 0 {
			variance[i] = sq[i] / float32(c)
		} else {
			variance[i] = 0
		}
	}
	return nil
}

func (s *dataset) Assignments(dst []int32) error {
	buf := dst
	if len(dst) < s.n {
		buf = make([]int32, s.n)
	}
	err := s.run(func() error {
		if err := s.dev.dtoh(unsafe.Pointer(&buf[0]), s.assign, int64(s.n)*4); err != nil {
			return err
		}
		s.toHost.Add(int64(s.n) * 4)
		return nil
	})
	if len(dst) < s.n {
		copy(dst, buf)
	}
	return err
}

func (s *dataset) Transfer() (toDevice, toHost int64) { return s.toDev.Load(), s.toHost.Load() }

func (s *dataset) Close() error {
	if s.closed {
		return nil
	}
	err := s.dev.run(func() error { s.freeAll(); return nil })
	s.closed = true
	return err
}

func (s *dataset) SetTiming(on bool)      { s.timing = on }
func (s *dataset) LastTimes() KernelTimes { return s.last }
func (s *dataset) AssignVariant() string  { return s.variant.name }

// TimeAssign times the assign kernel alone with CUDA events. The keys it
// leaves are reset, so the next Step is unaffected.
func (s *dataset) TimeAssign(variant string, reps int) ([]float64, error) {
	v, ok := s.variant, true
	if variant != "" {
		v, ok = variantNamed(variant)
	}
	if !ok {
		return nil, fmt.Errorf("cuda: unknown assign variant %q", variant)
	}
	if s.m == 0 {
		return nil, errors.New("cuda: TimeAssign before SetAnchors")
	}
	times := make([]float64, reps)
	err := s.run(func() error {
		was := s.timing
		s.timing = true
		defer func() { s.timing = was }()
		for r := range reps {
			if err := s.record(0); err != nil {
				return err
			}
			if err := s.launchAssign(v); err != nil {
				return err
			}
			if err := s.record(1); err != nil {
				return err
			}
			dr := s.dev.drv
			if err := dr.call("cuEventSynchronize", dr.cuEventSynchronize, s.ev[1]); err != nil {
				return err
			}
			var err error
			if times[r], err = s.elapsed(0, 1); err != nil {
				return err
			}
		}
		return s.dev.memset8(s.keys, 0xff, int64(s.np)*8)
	})
	return times, err
}
