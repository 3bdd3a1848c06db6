//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/par"
)

type dataset struct {
	dev *Device

	n, d, dp, np int // points, dimension, padded dimension, padded rows
	m, mp        int // anchors, padded anchors

	// A share of a point set split over devices (shard.go) holds rows lo
	// to lo+n-1 of gn; its fixed-point scales and energy are the whole
	// set's. Otherwise lo is 0 and gn is n.
	lo, gn int
	// all is the whole set's values (the caller's slice, kept for the
	// Dataset's life) when the points stream in batches or the dataset
	// is a share: k-means++ gathers its sample there.
	all   []uint16
	share *share

	// batch > 0: only batch rows fit on the device beside everything
	// else, so X and keys hold one batch and every pass streams the
	// points from host (the caller's slice, kept for the Dataset's life).
	batch int
	host  []uint16

	x, assign, dist, keys, sc uint64 // device buffers of the points
	perm                      uint64 // points sorted by anchor (reduce by runs)
	a32, a16, anorm, stats    uint64 // device buffers of the anchors
	hcount, cursor            uint64 // points per anchor, and where each anchor's run starts
	// runs: reduce over points sorted by anchor (vlc_reduce_runs), for
	// resident points of d <= maxRunDim (which have perm), n >=
	// runMinPoints; else one atomic per point and dimension (vlc_reduce).
	runs               bool
	sum, sq, wsum, cnt uint64    // parts of stats: int64 fixed point (fixed.go), cnt uint32
	statsWords         int64     // 32-bit words of stats
	xBound             float64   // the largest |x|
	fix                fixScales // for the next pass (fixed.go)
	statFix            fixScales // those of the statistics on the device
	rescaled           int       // passes reduced twice (finishPass)
	// sqHost is Stats' host copy of the squared sums, kept for the next
	// call (maintenance reads them every few Steps).
	sqHost []int64

	toDev, toHost atomic.Int64

	pp ppState // k-means++ (DrawPlusPlus)

	variant    assignVariant // assign tile shape, from the Device
	xMap, aMap cachedMap     // tensor maps of X and A16 (tma variant)
	timing     bool
	ev         [5]uintptr
	last       KernelTimes
	closed     bool
}

var _ device.Dataset = (*dataset)(nil)
var _ Profiler = (*dataset)(nil)

func roundUp(v, to int) int { return (v + to - 1) / to * to }

// Load uploads the points once: n x d float16, stored with rows padded to
// a multiple of 128 and columns to a multiple of 64 (zeros, which change no
// dot product). Points that do not fit in the device's free memory stay on
// the host and stream through a batch buffer on every pass (residentRows).
func (d *Device) Load(p device.Points) (device.Dataset, error) {
	if p.Dim < 1 || p.N < 1 || len(p.Data) != p.N*p.Dim {
		return nil, fmt.Errorf("cuda: %d values do not make %d points of dimension %d", len(p.Data), p.N, p.Dim)
	}
	s, err := d.load(p, 0, p.N)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// load uploads rows lo to hi-1 of p (all of them, or a share).
func (d *Device) load(p device.Points, lo, hi int) (*dataset, error) {
	n := hi - lo
	if n > math.MaxInt32-tileM {
		return nil, fmt.Errorf("cuda: %d points: at most %d per dataset", n, math.MaxInt32-tileM)
	}
	data := p.Data[lo*p.Dim : hi*p.Dim]
	s := &dataset{dev: d, n: n, lo: lo, gn: p.N, d: p.Dim, dp: roundUp(p.Dim, tileK), np: roundUp(n, tileM), variant: d.variant}
	if n < p.N {
		s.all = p.Data
	}
	// The bound of the fixed-point sums is found on the host's cores
	// while the worker uploads the points.
	bound := make(chan error, 1)
	go func() {
		var err error
		s.xBound, err = maxAbsHalfRows(data, p.Dim, lo)
		bound <- err
	}()
	err := d.run(func() error {
		rows, err := d.residentRows(s.n, s.d)
		if err != nil {
			return err
		}
		xRows := s.np
		if rows < s.n {
			s.batch, s.host, s.all, xRows = rows, data, p.Data, rows
		}
		xBytes := int64(xRows) * int64(s.dp) * 2
		for _, b := range []struct {
			p     *uint64
			bytes int64
		}{{&s.x, xBytes}, {&s.assign, int64(s.n) * 4}, {&s.dist, int64(s.n) * 4}, {&s.keys, int64(xRows) * 8}, {&s.sc, scalarSize}} {
			if *b.p, err = d.alloc(b.bytes); err != nil {
				s.freeAll()
				return err
			}
		}
		if s.batch == 0 && s.d <= maxRunDim {
			if s.perm, err = d.alloc(int64(s.n) * 4); err != nil {
				s.freeAll()
				return err
			}
			s.runs = s.n >= runMinPoints
		}
		if s.batch == 0 {
			if err := s.upload(data, 0, s.n); err != nil {
				s.freeAll()
				return err
			}
		} else if err := d.memset8(s.x, 0, xBytes); err != nil {
			s.freeAll()
			return err
		}
		// No previous assignment (-1): the first assign changes every point.
		for _, z := range []struct {
			p     uint64
			v     byte
			bytes int64
		}{{s.assign, 0xff, int64(s.n) * 4}, {s.keys, 0xff, int64(xRows) * 8}, {s.sc, 0, scalarSize}} {
			if err := d.memset8(z.p, z.v, z.bytes); err != nil {
				s.freeAll()
				return err
			}
		}
		return nil
	})
	if berr := <-bound; err == nil && berr != nil {
		s.Close()
		err = berr
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// residentRows returns how many of n points of dimension dim to keep on
// the device (on the worker): n when all fit in seven eighths of the free
// memory (within SetMemoryLimit's cap) beside their assignments and distances (the rest for anchors,
// statistics and encoding scratch), else the most that do, a multiple of
// 128 (at most Device.batchRows when set). Not even 128 rows fitting is an
// error.
func (d *Device) residentRows(n, dim int) (int, error) {
	np, dp := int64(roundUp(n, tileM)), int64(roundUp(dim, tileK))
	perRow := dp*2 + 8 // a row of X and its key
	fixed := int64(n)*8 + scalarSize
	free, err := d.usage()
	if err != nil {
		return 0, err
	}
	budget := free - free/8 - fixed
	if d.batchRows == 0 && np*perRow <= budget {
		return n, nil
	}
	rows := budget / perRow
	if d.batchRows > 0 {
		rows = min(rows, int64(d.batchRows))
	}
	rows = rows / tileM * tileM
	if rows < tileM {
		return 0, fmt.Errorf("cuda: %d points of dimension %d: even one batch of %d rows with their assignments needs %.2f GiB on %s, %.2f GiB are free",
			n, dim, tileM, float64(fixed+tileM*perRow)/(1<<30), d.info.Name, float64(free)/(1<<30))
	}
	if rows >= np {
		return n, nil
	}
	return int(rows), nil
}

// uploadStaged copies src to the start of X through the page-locked
// staging buffer, in its two halves: the host's cores copy a piece into
// one half while the other half's piece crosses the bus (an asynchronous
// copy, waited for by an event before the half is filled again). The
// driver's copy from pageable memory does both in turn on one thread.
func (s *dataset) uploadStaged(src []byte) error {
	d := s.dev
	stage, err := d.staging()
	if err != nil {
		return err
	}
	half := len(stage) / 2
	var ev [2]uintptr
	defer func() {
		for _, e := range ev {
			if e != 0 {
				d.wait(e) // the half is not reused, nor the event destroyed, in flight
				d.destroyEvent(e)
			}
		}
	}()
	for i := range ev {
		if ev[i], err = d.newEvent(); err != nil {
			return err
		}
	}
	for k, off := 0, 0; off < len(src); k, off = k+1, off+half {
		buf := stage[k%2*half : (k%2+1)*half]
		if k >= 2 {
			if err := d.wait(ev[k%2]); err != nil {
				return err
			}
		}
		piece := src[off:min(len(src), off+half)]
		par.For(len(piece), 1<<20, func(lo, hi int) { copy(buf[lo:hi], piece[lo:hi]) })
		if err := d.drv.call("cuMemcpyHtoDAsync", d.drv.cuMemcpyHtoDAsync, uintptr(s.x)+uintptr(off), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(piece)), 0); err != nil {
			return err
		}
		if err := d.record(ev[k%2], 0); err != nil {
			return err
		}
	}
	return nil
}

// upload copies rows lo..hi of data into the first hi-lo rows of X (on
// the worker): through the page-locked staging buffer when no column
// padding is needed (uploadStaged), else through a padded staging buffer
// whose padding stays zero. Resident points also
// get their padding rows zeroed.
func (s *dataset) upload(data []uint16, lo, hi int) error {
	d := s.dev
	if s.dp == s.d {
		if err := s.uploadStaged(unsafe.Slice((*byte)(unsafe.Pointer(&data[lo*s.d])), (hi-lo)*s.d*2)); err != nil {
			return err
		}
		s.toDev.Add(int64(hi-lo) * int64(s.d) * 2)
	} else {
		const chunkBytes = 32 << 20
		rows := max(1, chunkBytes/(s.dp*2))
		stage := make([]uint16, min(rows, hi-lo)*s.dp)
		for c := lo; c < hi; c += rows {
			e := min(c+rows, hi)
			for i := c; i < e; i++ {
				copy(stage[(i-c)*s.dp:(i-c)*s.dp+s.d], data[i*s.d:(i+1)*s.d])
			}
			b := int64(e-c) * int64(s.dp) * 2
			if err := d.htod(s.x+uint64((c-lo)*s.dp*2), unsafe.Pointer(&stage[0]), b); err != nil {
				return err
			}
			s.toDev.Add(b)
		}
	}
	if s.batch > 0 {
		return nil // rows past a batch's end are never read back: keys are reset per pass
	}
	return d.memset8(s.x+uint64(s.n)*uint64(s.dp)*2, 0, int64(s.np-s.n)*int64(s.dp)*2)
}

// freeAll releases every buffer (on the worker).
func (s *dataset) freeAll() {
	s.freePP()
	if s.share != nil {
		s.dev.free(s.share.scratch)
		s.share.scratch, s.share.scratchBytes = 0, 0
	}
	for _, p := range []*uint64{&s.x, &s.assign, &s.dist, &s.keys, &s.sc, &s.perm, &s.a32, &s.a16, &s.anorm, &s.stats, &s.hcount, &s.cursor} {
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
	for _, p := range []*uint64{&s.a32, &s.a16, &s.anorm, &s.stats, &s.hcount, &s.cursor} {
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
	aBound, err := maxAbs32(a[:m*s.d], s.d)
	if err != nil {
		return err
	}
	// Before any pass (no statFix yet), scales for the bound on every
	// distance; after one, the scales the last pass chose go on (a pass
	// that meets a point beyond them reduces again).
	if bound := boundDist(s.d, max(s.xBound, aBound)); s.statFix.smax == 0 || float64(s.fix.smax) > bound {
		s.fix = scalesFor(s.gn, bound)
	}
	return s.run(func() error {
		d := s.dev
		if m != s.m {
			s.freeAnchors()
			mp := roundUp(m, anchorPad)
			words := 2*(2*int64(m)*int64(s.d)+int64(m)) + int64(m)
			var err error
			for _, b := range []struct {
				p     *uint64
				bytes int64
			}{{&s.a32, int64(m) * int64(s.d) * 4}, {&s.a16, int64(mp) * int64(s.dp) * 2}, {&s.anorm, int64(mp) * 4}, {&s.stats, words * 4},
				{&s.hcount, int64(m) * 4}, {&s.cursor, int64(m) * 4}} {
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
			md := uint64(m) * uint64(s.d) * 8
			s.sum, s.sq, s.wsum, s.cnt = s.stats, s.stats+md, s.stats+2*md, s.stats+2*md+uint64(m)*8
		}
		b := int64(m) * int64(s.d) * 4
		if err := d.htod(s.a32, unsafe.Pointer(&a[0]), b); err != nil {
			return err
		}
		s.toDev.Add(b)
		return s.launchUpdate(device.StepParams{}, false)
	})
}

// launchUpdate: vlc_update over mp blocks. With move it moves the anchors
// as p says; always it refreshes A16 and anorm.
func (s *dataset) launchUpdate(p device.StepParams, move bool) error {
	capped := move && !math.IsInf(float64(p.MaxMove), 1)
	return s.dev.launch("vlc_update", s.mp, 1, 128, 0,
		s.a32, s.a16, s.anorm, s.sum, s.wsum, s.cnt, i32(s.m), i32(s.d), i32(s.dp),
		f32(p.Rate), f32(p.MaxMove), b32(capped), b32(move), f32(1/s.fix.sum), f32(1/s.fix.w), s.sc, f32(s.fix.smax))
}

// split chooses how many blocks share the anchors of one row block, so
// that small point sets still fill the GPU.
func (s *dataset) split(v assignVariant, rows int) (ntiles, perSplit, splits int) {
	ntiles = s.mp / v.bn
	rowBlocks := roundUp(rows, tileM) / tileM
	slots := v.blocksPerSMGuess * s.dev.info.SMs
	want := max(1, (slots+rowBlocks-1)/rowBlocks)
	splits = min(ntiles, want)
	perSplit = (ntiles + splits - 1) / splits
	splits = (ntiles + perSplit - 1) / perSplit
	return
}

// launchAssign assigns the first rows rows of X (all points, or a batch).
func (s *dataset) launchAssign(v assignVariant, rows int) error {
	ntiles, per, splits := s.split(v, rows)
	gx := roundUp(rows, tileM) / tileM
	if !v.tma {
		return s.dev.launch("vlc_assign_"+v.name, gx, splits, v.threads(), v.smem(),
			s.x, s.a16, s.anorm, s.keys, i32(s.dp), i32(ntiles), i32(per))
	}
	xRows := s.np
	if s.batch > 0 {
		xRows = s.batch
	}
	xm, err := s.xMap.get(s.dev, s.x, s.dp, xRows, tileM)
	if err != nil {
		return err
	}
	am, err := s.aMap.get(s.dev, s.a16, s.dp, s.mp, v.bn)
	if err != nil {
		return err
	}
	return s.dev.launchMapped("vlc_assign_"+v.name, gx, splits, v.threads(), v.smem(), xm, am,
		s.anorm, s.keys, i32(s.dp), i32(ntiles), i32(per))
}

// cachedMap keeps the tensor map of one buffer until the buffer or its
// rows change (a new anchor count reallocates A16). Its box is fixed by the
// tma variant, the one user of maps.
type cachedMap struct {
	ptr        uint64
	rows, cols int
	m          tensorMap
}

func (c *cachedMap) get(d *Device, ptr uint64, cols, rows, boxRows int) (*tensorMap, error) {
	if c.ptr != ptr || c.rows != rows || c.cols != cols {
		m, err := d.encodeMap(ptr, cols, rows, boxRows)
		if err != nil {
			return nil, err
		}
		*c = cachedMap{ptr, rows, cols, m}
	}
	return &c.m, nil
}

func (s *dataset) record(i int) error {
	if !s.timing || s.batch > 0 {
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
func (s *dataset) pass(p device.StepParams, move bool) (device.StepStats, error) {
	if s.m == 0 {
		return device.StepStats{}, errors.New("cuda: Step before SetAnchors")
	}
	if s.batch > 0 {
		return s.passBatched(p, move)
	}
	var st device.StepStats
	err := s.run(func() error {
		d := s.dev
		if err := d.memset8(s.sc, 0, scalarSize); err != nil {
			return err
		}
		steps := []func() error{
			func() error { return s.launchAssign(s.variant, s.n) },
			func() error {
				return d.launch("vlc_finalize", (s.n+255)/256, 1, 256, 0,
					s.keys, s.assign, s.stats, i64(s.statsWords), s.sc, i32(s.n), i32(s.m))
			},
			func() error { return s.launchReduce(p, move) },
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
		var err error
		st, err = s.finishPass(p, move, func() error { return s.launchReduce(p, move) })
		if err != nil {
			return err
		}
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

// runMinPoints: below it the reduce by runs' four launches cost more than
// the atomics they save (10K x 128 x 256 on an H100: reduce 0.053 ms by
// runs, 0.013 ms per point). Above maxRunDim it does not apply either.
const runMinPoints = 1 << 16

// launchReduceRuns sorts the points by anchor (counting sort: histogram,
// scan, scatter) and reduces them run by run (on the worker).
func (s *dataset) launchReduceRuns(p device.StepParams, huber, move bool) error {
	d := s.dev
	if err := d.memset8(s.hcount, 0, int64(s.m)*4); err != nil {
		return err
	}
	grid := min((s.n+255)/256, 8*d.info.SMs)
	if err := d.launch("vlc_hist", grid, 1, 256, 0, s.assign, s.hcount, i32(s.n)); err != nil {
		return err
	}
	if err := d.launch("vlc_scan", 1, 1, 1024, 0, s.hcount, s.cursor, i32(s.m)); err != nil {
		return err
	}
	if err := d.launch("vlc_scatter", grid, 1, 256, 0, s.assign, s.cursor, s.perm, i32(s.n)); err != nil {
		return err
	}
	tasks := (s.n + 31) / 32
	// The variant for the fewest 256-dimension groups: its fixed-point
	// sums take 2 x 8 64-bit registers a group.
	name := fmt.Sprintf("vlc_reduce_runs%d", (s.d+255)/256)
	return d.launch(name, min((tasks+7)/8, 8*d.info.SMs), 1, 256, 0,
		s.x, s.assign, s.perm, s.a32, s.dist, s.sum, s.sq, s.wsum, s.cnt, s.sc,
		i32(s.n), i32(s.d), i32(s.dp), f32(p.Tau), b32(huber), b32(move),
		f32(s.fix.sum), f32(s.fix.sq), f32(s.fix.w), f32(s.fix.energy))
}

// launchReduce launches the reduce of a resident pass: by runs or per
// point, with the scales s.fix.
func (s *dataset) launchReduce(p device.StepParams, move bool) error {
	huber := move && !math.IsInf(float64(p.Tau), 1)
	if s.runs {
		return s.launchReduceRuns(p, huber, move)
	}
	d := s.dev
	blocks := min((s.n+7)/8, 8*d.info.SMs)
	return d.launch("vlc_reduce", blocks, 1, 256, 0,
		s.x, s.assign, s.a32, s.dist, s.sum, s.sq, s.wsum, s.cnt, s.sc,
		i32(s.n), i32(s.d), i32(s.dp), f32(p.Tau), b32(huber), b32(move),
		f32(s.fix.sum), f32(s.fix.sq), f32(s.fix.w), f32(s.fix.energy))
}

// scalars are the 16 bytes a pass brings back.
type scalars struct {
	energy  int64 // fixed point
	changed uint32
	maxDist float32
}

// finishPass brings back a pass's scalars (on the worker). When the pass
// met a point further than its scales allow, the update moved nothing and
// the sums may have overflowed: reduce (again, with scales for the
// distance measured) and update run once more; the changed count is the
// first run's. Then the next pass's scales follow this one's largest
// distance, with room to grow 4x.
func (s *dataset) finishPass(p device.StepParams, move bool, reduce func() error) (device.StepStats, error) {
	var sc scalars
	read := func() error {
		if err := s.dev.dtoh(unsafe.Pointer(&sc), s.sc, scalarSize); err != nil {
			return fmt.Errorf("cuda: step: %w", err)
		}
		s.toHost.Add(scalarSize)
		return nil
	}
	if err := read(); err != nil {
		return device.StepStats{}, err
	}
	changed := sc.changed
	if sc.maxDist > s.fix.smax {
		s.fix = scalesFor(s.gn, 2*float64(sc.maxDist))
		if err := s.zeroSums(); err != nil {
			return device.StepStats{}, err
		}
		if err := reduce(); err != nil {
			return device.StepStats{}, err
		}
		if move {
			if err := s.launchUpdate(p, true); err != nil {
				return device.StepStats{}, err
			}
		}
		if err := read(); err != nil {
			return device.StepStats{}, err
		}
		s.rescaled++
	}
	s.statFix = s.fix
	s.fix = scalesFor(s.gn, 4*float64(sc.maxDist))
	return device.StepStats{Energy: float64(sc.energy) / float64(s.statFix.energy) / float64(s.gn), Changed: int(changed)}, nil
}

// zeroSums zeroes the energy, the largest distance (not the changed
// count) and the statistics, for a second reduce of a pass (on the
// worker).
func (s *dataset) zeroSums() error {
	d := s.dev
	for _, z := range []struct {
		off, bytes int64
	}{{0, 8}, {12, 4}} { // energy, maxdist
		if err := d.memset8(s.sc+uint64(z.off), 0, z.bytes); err != nil {
			return err
		}
	}
	return d.memset8(s.stats, 0, s.statsWords*4)
}

// passBatched is pass for points that stream through X a batch at a
// time: per batch upload, assign, finalize (the statistics zeroed by the
// first batch only) and reduce into the same sums; then one update. A
// second reduce (finishPass) streams the batches again.
func (s *dataset) passBatched(p device.StepParams, move bool) (device.StepStats, error) {
	var st device.StepStats
	err := s.run(func() error {
		d := s.dev
		if err := d.memset8(s.sc, 0, scalarSize); err != nil {
			return err
		}
		// The last batch's padding rows left keys behind; the first
		// batch of this pass uses those slots.
		if err := d.memset8(s.keys, 0xff, int64(s.batch)*8); err != nil {
			return err
		}
		if err := s.batches(p, move, true); err != nil {
			return err
		}
		if move {
			if err := s.launchUpdate(p, true); err != nil {
				return err
			}
		}
		var err error
		st, err = s.finishPass(p, move, func() error { return s.batches(p, move, false) })
		return err
	})
	return st, err
}

// batches streams the points through X and reduces each batch, assigning
// it first when assign (on the worker).
func (s *dataset) batches(p device.StepParams, move, assign bool) error {
	d := s.dev
	huber := move && !math.IsInf(float64(p.Tau), 1)
	for lo := 0; lo < s.n; lo += s.batch {
		hi := min(lo+s.batch, s.n)
		if err := s.upload(s.host, lo, hi); err != nil {
			return err
		}
		off := uint64(lo) * 4
		if assign {
			if err := s.launchAssign(s.variant, hi-lo); err != nil {
				return err
			}
			words := s.statsWords
			if lo > 0 {
				words = 0
			}
			if err := d.launch("vlc_finalize", (hi-lo+255)/256, 1, 256, 0,
				s.keys, s.assign+off, s.stats, i64(words), s.sc, i32(hi-lo), i32(s.m)); err != nil {
				return err
			}
		}
		blocks := min((hi-lo+7)/8, 8*d.info.SMs)
		if err := d.launch("vlc_reduce", blocks, 1, 256, 0,
			s.x, s.assign+off, s.a32, s.dist+off, s.sum, s.sq, s.wsum, s.cnt, s.sc,
			i32(hi-lo), i32(s.d), i32(s.dp), f32(p.Tau), b32(huber), b32(move),
			f32(s.fix.sum), f32(s.fix.sq), f32(s.fix.w), f32(s.fix.energy)); err != nil {
			return err
		}
	}
	return nil
}

func (s *dataset) Step(p device.StepParams) (device.StepStats, error) { return s.pass(p, true) }

func (s *dataset) Assign() (device.StepStats, error) { return s.pass(device.StepParams{}, false) }

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
	if len(s.sqHost) != md {
		s.sqHost = make([]int64, md)
	}
	sq := s.sqHost
	cnt := make([]uint32, s.m)
	err := s.run(func() error {
		if err := s.dev.dtoh(unsafe.Pointer(&sq[0]), s.sq, int64(md)*8); err != nil {
			return err
		}
		if err := s.dev.dtoh(unsafe.Pointer(&cnt[0]), s.cnt, int64(s.m)*4); err != nil {
			return err
		}
		s.toHost.Add(int64(md)*8 + int64(s.m)*4)
		return nil
	})
	if err != nil {
		return err
	}
	for a := 0; a < s.m && a < len(counts); a++ {
		counts[a] = int64(cnt[a])
	}
	scale := float64(s.statFix.sq)
	par.For(min(md, len(variance)), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if c := cnt[i/s.d]; c > 0 {
				variance[i] = float32(float64(sq[i]) / scale / float64(c))
			} else {
				variance[i] = 0
			}
		}
	})
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
func (s *dataset) Variants() []string     { return s.dev.variantNames() }

// TimeAssign times the assign kernel alone with CUDA events. The keys it
// leaves are reset, so the next Step is unaffected.
func (s *dataset) TimeAssign(variant string, reps int) ([]float64, error) {
	v, ok := s.variant, true
	if variant != "" {
		v, ok = s.dev.variantNamed(variant)
	}
	if !ok {
		return nil, fmt.Errorf("cuda: unknown assign variant %q", variant)
	}
	if s.m == 0 {
		return nil, errors.New("cuda: TimeAssign before SetAnchors")
	}
	if s.batch > 0 {
		return nil, errors.New("cuda: TimeAssign needs the points resident (they stream in batches here)")
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
			if err := s.launchAssign(v, s.n); err != nil {
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

// jobBufs are device buffers that live for one worker job (encoding, the
// k-means++ rounds): free releases them all, on every return path.
type jobBufs struct {
	s    *dataset
	bufs []uint64
}

func (j *jobBufs) alloc(bytes int64) (uint64, error) {
	p, err := j.s.dev.alloc(bytes)
	if err == nil {
		j.bufs = append(j.bufs, p)
	}
	return p, err
}

// upload allocates bytes and copies them up from p, counted in Transfer.
func (j *jobBufs) upload(p unsafe.Pointer, bytes int64) (uint64, error) {
	b, err := j.alloc(bytes)
	if err != nil {
		return 0, err
	}
	if err := j.s.dev.htod(b, p, bytes); err != nil {
		return 0, err
	}
	j.s.toDev.Add(bytes)
	return b, nil
}

func (j *jobBufs) free() {
	for _, b := range j.bufs {
		j.s.dev.free(b)
	}
	j.bufs = nil
}
