//go:build webgpu

package webgpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/vlc-embed/vlc/backend/webgpu/shaders"
	"github.com/vlc-embed/vlc/device"
)

// Sizes of the uniform and scalar blocks (struct Params, struct Chunk and
// the head of the scalars buffer in common.wgsl).
const (
	paramsSize = 48
	chunkSize  = 16
	scalarHead = 16 // changed, energy hi, energy lo, unused
)

// Flags of Params (common.wgsl).
const (
	flagMove   = 1
	flagHuber  = 2
	flagCapped = 4
)

// chunk is one binding's worth of points and everything kept per point.
type chunk struct {
	rows, base, np int // real rows, index of the first, padded rows

	x       *wgpu.Buffer // np x dw u32: float16 pairs
	xnorm   *wgpu.Buffer // np f32: |x|^2
	asg     *wgpu.Buffer // np u32: anchor + 1 (0 before the first assign)
	dist    *wgpu.Buffer // np f32: squared distance to the anchor
	members *wgpu.Buffer // rows u32: the chunk's rows grouped by anchor
	uni     *wgpu.Buffer // struct Chunk
	bg      map[string]*wgpu.BindGroup
}

type dataset struct {
	dev *core

	n, d, dp, dw int // points, dimension, padded dimension, words per row
	m, mp        int // anchors, padded anchors
	chunks       []*chunk
	tile         shaders.AssignTile

	params, scal, stage              *wgpu.Buffer               // uniform, scalars + partials, 16-byte read-back
	a32, anorm, stats, counts, start *wgpu.Buffer               // anchors and their statistics
	bg                               map[string]*wgpu.BindGroup // scan, update, finish

	toDev, toHost atomic.Int64
	closed        bool
}

var _ device.Dataset = (*dataset)(nil)

func roundUp(v, to int) int { return (v + to - 1) / to * to }

// testChunkRows, when positive, caps the rows of a chunk (tests use it to
// split small point sets as the binding limit splits large ones).
var testChunkRows int

// chunkRows is the most rows a chunk holds: its points must fit one storage
// binding and one buffer.
func (d *core) chunkRows(dw int) int {
	lim := min(d.info.MaxBinding, d.info.MaxBuffer)
	rows := int(lim/uint64(dw*4)) / shaders.RowPad * shaders.RowPad
	if testChunkRows > 0 {
		rows = min(rows, roundUp(testChunkRows, shaders.RowPad))
	}
	return rows
}

const storage = wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst | wgpu.BufferUsageCopySrc

// Load uploads the points once: rows padded to a multiple of 32 float16
// values and split into chunks under the adapter's maxStorageBufferBindingSize,
// and computes their squared norms on the device.
func (h *Device) Load(p device.Points) (device.Dataset, error) {
	if h.closed.Load() {
		return nil, errors.New("webgpu: device closed")
	}
	d := h.core
	if p.Dim < 1 || p.N < 1 || len(p.Data) != p.N*p.Dim {
		return nil, fmt.Errorf("webgpu: %d values do not make %d points of dimension %d", len(p.Data), p.N, p.Dim)
	}
	if p.N > math.MaxInt32-shaders.RowPad {
		return nil, fmt.Errorf("webgpu: %d points: at most %d per dataset", p.N, math.MaxInt32-shaders.RowPad)
	}
	d.lock()
	defer d.unlock()
	s := &dataset{dev: d, n: p.N, d: p.Dim, dp: roundUp(p.Dim, shaders.DimPad), bg: map[string]*wgpu.BindGroup{}}
	s.dw = s.dp / 2
	var err error
	if s.tile, err = d.pickTile(p.N); err != nil {
		return nil, err
	}
	per := d.chunkRows(s.dw)
	if per < shaders.RowPad {
		return nil, fmt.Errorf("webgpu: dimension %d: %d rows of %d bytes do not fit one storage binding of %s (%d bytes)",
			p.Dim, shaders.RowPad, s.dw*4, d.info.Name, d.info.MaxBinding)
	}
	if err := s.alloc(per); err != nil {
		s.release()
		return nil, err
	}
	if err := s.upload(p.Data); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

// pickTile chooses the assign shape: VLC_WEBGPU_TILE names one (a name
// this adapter cannot run is an error that lists those it can); else the
// large tile once there are enough points to fill a big GPU with it.
func (d *core) pickTile(n int) (shaders.AssignTile, error) {
	if name := os.Getenv("VLC_WEBGPU_TILE"); name != "" {
		var names []string
		for _, t := range d.tiles {
			if t.Name == name {
				return t, nil
			}
			names = append(names, t.Name)
		}
		return shaders.AssignTile{}, fmt.Errorf("webgpu: VLC_WEBGPU_TILE=%q: want one of %s", name, strings.Join(names, ", "))
	}
	t := d.tiles[0]
	if len(d.tiles) > 1 && d.tiles[1].Name == shaders.AssignTiles[1].Name && n/d.tiles[1].TM >= 1024 {
		t = d.tiles[1]
	}
	return t, nil
}

func (s *dataset) alloc(per int) error {
	d := s.dev
	var err error
	for base := 0; base < s.n; base += per {
		rows := min(per, s.n-base)
		c := &chunk{rows: rows, base: base, np: roundUp(rows, shaders.RowPad), bg: map[string]*wgpu.BindGroup{}}
		s.chunks = append(s.chunks, c)
		for _, b := range []struct {
			p     **wgpu.Buffer
			label string
			size  int
			usage wgpu.BufferUsage
		}{
			{&c.x, "points", c.np * s.dw * 4, storage},
			{&c.xnorm, "xnorm", c.np * 4, storage},
			{&c.asg, "assign", c.np * 4, storage},
			{&c.dist, "dist", c.np * 4, storage},
			{&c.members, "members", c.rows * 4, storage},
			{&c.uni, "chunk", chunkSize, wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst},
		} {
			if *b.p, err = d.buffer(b.label, uint64(b.size), b.usage); err != nil {
				return err
			}
		}
		var u [chunkSize]byte
		binary.LittleEndian.PutUint32(u[0:], uint32(c.rows))
		binary.LittleEndian.PutUint32(u[4:], uint32(c.base))
		binary.LittleEndian.PutUint32(u[8:], uint32(c.np))
		if err := s.write(c.uni, 0, u[:]); err != nil {
			return err
		}
	}
	minTM := shaders.AssignTiles[0].TM
	for _, t := range d.tiles {
		minTM = min(minTM, t.TM)
	}
	parts := (s.n + minTM - 1) / minTM
	if s.params, err = d.buffer("params", paramsSize, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst); err != nil {
		return err
	}
	if s.scal, err = d.buffer("scalars", uint64(scalarHead+4*parts), storage); err != nil {
		return err
	}
	if s.stage, err = d.buffer("scalars read-back", scalarHead, wgpu.BufferUsageMapRead|wgpu.BufferUsageCopyDst); err != nil {
		return err
	}
	for _, c := range s.chunks {
		if c.bg["norms"], err = d.bind("norms", map[uint32]*wgpu.Buffer{0: s.params, 1: c.uni, 2: c.x, 3: c.xnorm}); err != nil {
			return err
		}
	}
	s.bg["finish"], err = d.bind("finish", map[uint32]*wgpu.Buffer{0: s.params, 1: s.scal})
	return err
}

// write queues bytes for buffer b and counts them.
func (s *dataset) write(b *wgpu.Buffer, off uint64, data []byte) error {
	if err := s.dev.queue.WriteBuffer(b, off, data); err != nil {
		return fmt.Errorf("webgpu: writing %d bytes: %w", len(data), err)
	}
	s.toDev.Add(int64(len(data)))
	return nil
}

// upload copies the points into the chunks' buffers, in pieces of at most
// 16 MiB, letting the queue drain every 256 MiB so that wgpu's staging
// memory stays bounded. Padding (rows and columns) is the buffers' zero
// initialisation. Then the norms kernel runs once.
func (s *dataset) upload(data []uint16) error {
	d := s.dev
	const piece, drain = 16 << 20, 256 << 20
	rowBytes := s.dw * 4
	rowsPer := max(1, piece/rowBytes)
	var stage []uint16
	if s.dp != s.d {
		stage = make([]uint16, rowsPer*s.dp)
	}
	pending := 0
	for _, c := range s.chunks {
		for lo := 0; lo < c.rows; lo += rowsPer {
			hi := min(lo+rowsPer, c.rows)
			src := data[(c.base+lo)*s.d : (c.base+hi)*s.d]
			if s.dp != s.d {
				for i := range hi - lo {
					row := stage[i*s.dp : (i+1)*s.dp]
					copy(row, src[i*s.d:(i+1)*s.d])
					clear(row[s.d:])
				}
				src = stage[:(hi-lo)*s.dp]
			}
			b := unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), len(src)*2)
			if err := s.write(c.x, uint64(lo*rowBytes), b); err != nil {
				return err
			}
			if pending += len(b); pending >= drain {
				if err := d.idle(); err != nil {
					return err
				}
				pending = 0
			}
		}
	}
	if err := s.writeParams(device.StepParams{}, 0); err != nil {
		return err
	}
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return err
	}
	pass := enc.BeginComputePass(nil)
	for _, c := range s.chunks {
		dispatch(pass, d.pipes["norms"], c.bg["norms"], (c.np+shaders.WG-1)/shaders.WG)
	}
	err = pass.End()
	pass.Release()
	if err != nil {
		enc.Release()
		return err
	}
	if err := d.submit(enc); err != nil {
		return err
	}
	return d.idle()
}

// writeParams queues struct Params for the next submission.
func (s *dataset) writeParams(p device.StepParams, flags uint32) error {
	if flags&flagHuber != 0 && (math.IsInf(float64(p.Tau), 1) || math.IsNaN(float64(p.Tau))) {
		flags &^= flagHuber
	}
	if flags&flagCapped != 0 && (math.IsInf(float64(p.MaxMove), 1) || math.IsNaN(float64(p.MaxMove))) {
		flags &^= flagCapped
	}
	var b [paramsSize]byte
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(s.m))
	le.PutUint32(b[4:], uint32(s.d))
	le.PutUint32(b[8:], uint32(s.dp))
	le.PutUint32(b[12:], uint32(s.dw))
	le.PutUint32(b[16:], math.Float32bits(finite(p.Tau)))
	le.PutUint32(b[20:], math.Float32bits(finite(p.Rate)))
	le.PutUint32(b[24:], math.Float32bits(finite(p.MaxMove)))
	le.PutUint32(b[28:], flags)
	le.PutUint32(b[32:], uint32((s.n+s.tile.TM-1)/s.tile.TM))
	le.PutUint32(b[36:], uint32(s.n))
	return s.write(s.params, 0, b[:])
}

// finite keeps infinities out of the kernels (WGSL may assume there are
// none); the flags say whether the value is used.
func finite(v float32) float32 {
	if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
		return math.MaxFloat32
	}
	return v
}

func (s *dataset) release() {
	for _, c := range s.chunks {
		for _, g := range c.bg {
			if g != nil {
				g.Release()
			}
		}
		for _, b := range []*wgpu.Buffer{c.x, c.xnorm, c.asg, c.dist, c.members, c.uni} {
			if b != nil {
				b.Release()
			}
		}
	}
	s.chunks = nil
	for _, b := range []*wgpu.Buffer{s.params, s.scal, s.stage} {
		if b != nil {
			b.Release()
		}
	}
	s.params, s.scal, s.stage = nil, nil, nil
	s.releaseAnchors()
	for k, g := range s.bg {
		if g != nil {
			g.Release()
		}
		delete(s.bg, k)
	}
}

func (s *dataset) releaseAnchors() {
	for _, c := range s.chunks {
		for _, k := range []string{"assign", "scatter", "reduce"} {
			if g := c.bg[k]; g != nil {
				g.Release()
				delete(c.bg, k)
			}
		}
	}
	for _, k := range []string{"scan", "update"} {
		if g := s.bg[k]; g != nil {
			g.Release()
			delete(s.bg, k)
		}
	}
	for _, b := range []*wgpu.Buffer{s.a32, s.anorm, s.stats, s.counts, s.start} {
		if b != nil {
			b.Release()
		}
	}
	s.a32, s.anorm, s.stats, s.counts, s.start = nil, nil, nil, nil, nil
	s.m, s.mp = 0, 0
}

func (s *dataset) lock() error {
	if s.closed {
		return errors.New("webgpu: dataset closed")
	}
	s.dev.lock()
	return nil
}

// statsWords is the length of the statistics buffer in 4-byte words: sum
// and sq (m x dp each), wsum (m), count (m, u32 bits).
func (s *dataset) statsWords() int { return 2*s.m*s.dp + 2*s.m }

// SetAnchors uploads m anchors (float32, rows padded to dp) and computes
// their norms on the device. A new m reallocates the anchor buffers.
func (s *dataset) SetAnchors(a []float32, m int) error {
	if m < 1 || len(a) < m*s.d {
		return fmt.Errorf("webgpu: %d values do not make %d anchors of dimension %d", len(a), m, s.d)
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.dev.unlock()
	if m != s.m {
		s.releaseAnchors()
		if err := s.allocAnchors(m); err != nil {
			s.releaseAnchors()
			return err
		}
	}
	buf := a[:m*s.d]
	if s.dp != s.d {
		buf = make([]float32, m*s.dp)
		for k := range m {
			copy(buf[k*s.dp:k*s.dp+s.d], a[k*s.d:(k+1)*s.d])
		}
	}
	if err := s.write(s.a32, 0, unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*4)); err != nil {
		return err
	}
	if err := s.writeParams(device.StepParams{}, 0); err != nil {
		return err
	}
	enc, err := s.dev.dev.CreateCommandEncoder(nil)
	if err != nil {
		return err
	}
	pass := enc.BeginComputePass(nil)
	dispatch(pass, s.dev.pipes["update"], s.bg["update"], s.m)
	err = pass.End()
	pass.Release()
	if err != nil {
		enc.Release()
		return err
	}
	return s.dev.submit(enc)
}

func (s *dataset) allocAnchors(m int) error {
	d := s.dev
	s.m, s.mp = m, roundUp(m, shaders.AnchorPad)
	var err error
	for _, b := range []struct {
		p     **wgpu.Buffer
		label string
		size  int
	}{
		{&s.a32, "anchors", s.mp * s.dp * 4},
		{&s.anorm, "anchor norms", s.mp * 4},
		{&s.stats, "statistics", s.statsWords() * 4},
		{&s.counts, "counts", s.m * 4},
		{&s.start, "starts", (s.m + 1) * 4},
	} {
		if *b.p, err = d.buffer(b.label, uint64(b.size), storage); err != nil {
			return err
		}
	}
	for _, t := range d.tiles {
		key := "assign_" + t.Name
		for _, c := range s.chunks {
			if c.bg[key], err = d.bind(key, map[uint32]*wgpu.Buffer{0: s.params, 1: c.uni, 2: c.x, 3: c.xnorm, 4: s.a32, 5: s.anorm,
				6: c.asg, 7: c.dist, 8: s.counts, 9: s.scal}); err != nil {
				return err
			}
		}
	}
	for _, c := range s.chunks {
		if c.bg["scatter"], err = d.bind("scatter", map[uint32]*wgpu.Buffer{1: c.uni, 2: c.asg, 3: s.start, 4: s.counts, 5: c.members}); err != nil {
			return err
		}
		if c.bg["reduce"], err = d.bind("reduce", map[uint32]*wgpu.Buffer{0: s.params, 2: c.x, 3: c.dist, 4: c.members, 5: s.start,
			6: s.a32, 7: s.stats, 8: s.counts}); err != nil {
			return err
		}
	}
	if s.bg["scan"], err = d.bind("scan", map[uint32]*wgpu.Buffer{0: s.params, 2: s.counts, 3: s.start}); err != nil {
		return err
	}
	s.bg["update"], err = d.bind("update", map[uint32]*wgpu.Buffer{0: s.params, 2: s.a32, 3: s.anorm, 4: s.stats})
	return err
}

// pass runs assign, the counting sort and the reduce over every chunk,
// then the update when move, in one submission, and brings back the 16
// bytes of scalars: the only transfer of a steady-state Step besides the
// 48 bytes of parameters.
func (s *dataset) pass(p device.StepParams, move bool) (device.StepStats, error) {
	if err := s.lock(); err != nil {
		return device.StepStats{}, err
	}
	defer s.dev.unlock()
	if s.m == 0 {
		return device.StepStats{}, errors.New("webgpu: Step before SetAnchors")
	}
	d := s.dev
	var flags uint32
	if move {
		flags = flagMove | flagHuber | flagCapped
	}
	if err := s.writeParams(p, flags); err != nil {
		return device.StepStats{}, err
	}
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return device.StepStats{}, err
	}
	if err := enc.ClearBuffer(s.stats, 0, uint64(s.statsWords()*4)); err != nil {
		enc.Release()
		return device.StepStats{}, err
	}
	if err := enc.ClearBuffer(s.scal, 0, scalarHead); err != nil {
		enc.Release()
		return device.StepStats{}, err
	}
	pass := enc.BeginComputePass(nil)
	assign := "assign_" + s.tile.Name
	for _, c := range s.chunks {
		dispatch(pass, d.pipes[assign], c.bg[assign], (c.rows+s.tile.TM-1)/s.tile.TM)
		dispatch(pass, d.pipes["scan"], s.bg["scan"], 1)
		dispatch(pass, d.pipes["scatter"], c.bg["scatter"], (c.rows+shaders.WG-1)/shaders.WG)
		dispatch(pass, d.pipes["reduce"], c.bg["reduce"], s.m)
	}
	if move {
		dispatch(pass, d.pipes["update"], s.bg["update"], s.m)
	}
	dispatch(pass, d.pipes["finish"], s.bg["finish"], 1)
	err = pass.End()
	pass.Release() // before Finish: this binding requires it
	if err != nil {
		enc.Release()
		return device.StepStats{}, err
	}
	if err := enc.CopyBufferToBuffer(s.scal, 0, s.stage, 0, scalarHead); err != nil {
		enc.Release()
		return device.StepStats{}, err
	}
	if err := d.submit(enc); err != nil {
		return device.StepStats{}, err
	}
	var sc [scalarHead]byte
	if err := d.mapCopy(sc[:], s.stage); err != nil {
		return device.StepStats{}, fmt.Errorf("webgpu: step: %w", err)
	}
	s.toHost.Add(scalarHead)
	le := binary.LittleEndian
	hi := float64(math.Float32frombits(le.Uint32(sc[4:])))
	lo := float64(math.Float32frombits(le.Uint32(sc[8:])))
	return device.StepStats{Energy: (hi + lo) / float64(s.n), Changed: int(le.Uint32(sc[0:]))}, nil
}

func (s *dataset) Step(p device.StepParams) (device.StepStats, error) { return s.pass(p, true) }

func (s *dataset) Assign() (device.StepStats, error) { return s.pass(device.StepParams{}, false) }

// readBack copies len(dst) bytes at off of b to the host and counts them.
func (s *dataset) readBack(dst []byte, b *wgpu.Buffer, off uint64) error {
	if err := s.dev.read(dst, b, off); err != nil {
		return err
	}
	s.toHost.Add(int64(len(dst)))
	return nil
}

func (s *dataset) Anchors(dst []float32) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.dev.unlock()
	if s.m == 0 {
		return errors.New("webgpu: Anchors before SetAnchors")
	}
	buf := make([]float32, s.m*s.dp)
	if err := s.readBack(unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*4), s.a32, 0); err != nil {
		return err
	}
	for k := 0; k < s.m && k*s.d < len(dst); k++ {
		copy(dst[k*s.d:min(len(dst), (k+1)*s.d)], buf[k*s.dp:k*s.dp+s.d])
	}
	return nil
}

func (s *dataset) Stats(counts []int64, variance []float32) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.dev.unlock()
	if s.m == 0 {
		return errors.New("webgpu: Stats before SetAnchors")
	}
	md := s.m * s.dp
	sq := make([]float32, md)
	cnt := make([]uint32, s.m)
	if err := s.readBack(unsafe.Slice((*byte)(unsafe.Pointer(&sq[0])), md*4), s.stats, uint64(md*4)); err != nil {
		return err
	}
	if err := s.readBack(unsafe.Slice((*byte)(unsafe.Pointer(&cnt[0])), s.m*4), s.stats, uint64((2*md+s.m)*4)); err != nil {
		return err
	}
	for a := 0; a < s.m && a < len(counts); a++ {
		counts[a] = int64(cnt[a])
	}
	for a := range s.m {
		for j := range s.d {
			i := a*s.d + j
			if i >= len(variance) {
				return nil
			}
			if cnt[a] > 0 {
				variance[i] = sq[a*s.dp+j] / float32(cnt[a])
			} else {
				variance[i] = 0
			}
		}
	}
	return nil
}

func (s *dataset) Assignments(dst []int32) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.dev.unlock()
	for _, c := range s.chunks {
		if c.base >= len(dst) {
			break
		}
		rows := min(c.rows, len(dst)-c.base)
		buf := make([]uint32, rows)
		if err := s.readBack(unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), rows*4), c.asg, 0); err != nil {
			return err
		}
		for i, v := range buf {
			dst[c.base+i] = int32(v) - 1 // 0 (no assign yet) -> -1
		}
	}
	return nil
}

func (s *dataset) Transfer() (toDevice, toHost int64) { return s.toDev.Load(), s.toHost.Load() }

func (s *dataset) Close() error {
	if s.closed {
		return nil
	}
	s.dev.lock()
	defer s.dev.unlock()
	s.release()
	s.closed = true
	return nil
}

var _ Profiler = (*dataset)(nil)

func (s *dataset) Tile() string { return s.tile.Name }

func (s *dataset) TimeAssign(reps int) ([]float64, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.dev.unlock()
	if s.m == 0 {
		return nil, errors.New("webgpu: TimeAssign before SetAnchors")
	}
	d := s.dev
	if err := s.writeParams(device.StepParams{}, 0); err != nil {
		return nil, err
	}
	times := make([]float64, reps)
	assign := "assign_" + s.tile.Name
	for r := range reps {
		t0 := time.Now()
		enc, err := d.dev.CreateCommandEncoder(nil)
		if err != nil {
			return nil, err
		}
		pass := enc.BeginComputePass(nil)
		for _, c := range s.chunks {
			dispatch(pass, d.pipes[assign], c.bg[assign], (c.rows+s.tile.TM-1)/s.tile.TM)
		}
		err = pass.End()
		pass.Release()
		if err != nil {
			enc.Release()
			return nil, err
		}
		if err := d.submit(enc); err != nil {
			return nil, err
		}
		if err := d.idle(); err != nil {
			return nil, err
		}
		times[r] = float64(time.Since(t0).Nanoseconds()) / 1e6
	}
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return nil, err
	}
	if err := enc.ClearBuffer(s.counts, 0, uint64(s.m*4)); err != nil {
		enc.Release()
		return nil, err
	}
	if err := d.submit(enc); err != nil {
		return nil, err
	}
	return times, d.idle()
}
