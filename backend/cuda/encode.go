//go:build cuda

package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/enctrace"
	"github.com/vlc-embed/vlc/internal/par"
)

var _ device.RotatedStreamEncoder = (*dataset)(nil)

// encodeThreads is the number of encoding threads per SM: each keeps a
// residual and three arrays of sort keys (16 bytes a dimension) in scratch.
// Measured on an H100 (1M x 768, 4 bits): 128, 256, 512, 1024 and 2048 a
// SM gave compress times within the run-to-run spread (encoding and
// writing 1.9-2.3 s), so the smaller scratch wins.
const encodeThreads = 256

// maxEncodeDim is the largest dimension the encode kernel's 16-bit radix
// counts hold.
const maxEncodeDim = 65535

// EncodeRotated writes the rotated code of every point on the device, the
// bytes quant.Rotated.EncodeList writes on the host (TestEncodeRotatedParity):
// list parameters from the largest |r|^2 of each list, then one thread per
// entry. The points must be the float16 rows the host would encode (the
// caller checks), and assign the final assignment (after Assign).
func (s *dataset) EncodeRotated(l device.RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte) error {
	return s.EncodeRotatedStream(l, anchors, ids, offsets, codes, params, nil)
}

// encodeRuns is how many runs EncodeRotatedStream encodes the entries in,
// about (VLC_CUDA_ENCODE_RUNS overrides it): each run's codes come back,
// and the caller works on them, while the device encodes the next. The
// last run's work on the host is left after the device is done, so runs
// are short: 20M x 768 at 4 bits on two H200s took 8.41 s to encode and
// write in 8 runs and 6.98 s in 32, the devices' part 6.3 s either way.
const encodeRuns = 32

// EncodeRotatedStream is EncodeRotated in runs of entries: a launch of
// the kernel each, a whole number of rounds of its threads, its codes
// copied back, then ready called for it while the device encodes the
// next (nil: no call). It runs the two phases of a share's encode
// (device.ShardEncoder) over every point, in one job.
func (s *dataset) EncodeRotatedStream(l device.RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte, ready func(lo, hi int)) error {
	m, n := len(offsets)-1, len(ids)
	if err := s.encodable(l, anchors, m); err != nil {
		return err
	}
	if n != s.n || len(codes) != n*l.CodeBytes() || len(params) != m*l.ParamBytes() {
		return fmt.Errorf("cuda: encode: %d entries, %d code bytes, %d parameter bytes for %d points", n, len(codes), len(params), s.n)
	}
	return s.run(func() error {
		tmp := jobBufs{s: s}
		defer tmp.free()
		anch, idb, err := s.uploadEntries(&tmp, anchors, ids)
		if err != nil {
			return err
		}
		maxes := make([]float64, m)
		if err := s.listMax(&tmp, anch, idb, n, maxes); err != nil {
			return err
		}
		slist := make([]float32, m)
		for a, v := range maxes {
			slist[a] = device.RotatedScale(v)
			binary32(params[a*4:], slist[a])
		}
		return s.encodeEntries(&tmp, l, anch, idb, n, slist, codes, nil, ready)
	})
}

var _ device.ShardEncoder = (*dataset)(nil)

// RotatedListMax is the first phase of a share's encode: vlc_rot_sumsq
// over the entries ids (rows of the share).
func (s *dataset) RotatedListMax(l device.RotatedLayout, anchors []float32, ids []uint32, lmax []float64) error {
	m := len(lmax)
	if err := s.encodable(l, anchors, m); err != nil {
		return err
	}
	if err := s.ownRows(ids); err != nil {
		return err
	}
	clear(lmax)
	if len(ids) == 0 {
		return nil
	}
	return s.run(func() error {
		tmp := jobBufs{s: s}
		defer tmp.free()
		anch, idb, err := s.uploadEntries(&tmp, anchors, ids)
		if err != nil {
			return err
		}
		return s.listMax(&tmp, anch, idb, len(ids), lmax)
	})
}

// EncodeRotatedShare is the second phase of a share's encode:
// vlc_rot_encode over the entries ids (rows of the share), in runs as
// EncodeRotatedStream, each entry's code copied back to its place.
func (s *dataset) EncodeRotatedShare(l device.RotatedLayout, anchors []float32, ids []uint32, slist []float32, codes []byte, places []uint32, ready func(lo, hi int)) error {
	m, n := len(slist), len(ids)
	if err := s.encodable(l, anchors, m); err != nil {
		return err
	}
	if err := checkPlaces(codes, places, n, l.CodeBytes()); err != nil {
		return err
	}
	if err := s.ownRows(ids); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return s.run(func() error {
		tmp := jobBufs{s: s}
		defer tmp.free()
		anch, idb, err := s.uploadEntries(&tmp, anchors, ids)
		if err != nil {
			return err
		}
		return s.encodeEntries(&tmp, l, anch, idb, n, slist, codes, places, ready)
	})
}

// checkPlaces checks that codes holds n entry codes of cb bytes, or,
// with places, a code at each of the n places.
func checkPlaces(codes []byte, places []uint32, n, cb int) error {
	if places == nil {
		if len(codes) != n*cb {
			return fmt.Errorf("cuda: encode: %d code bytes for %d entries", len(codes), n)
		}
		return nil
	}
	if len(places) != n {
		return fmt.Errorf("cuda: encode: %d places for %d entries", len(places), n)
	}
	var bad atomic.Int64
	bad.Store(-1)
	par.For(n, 1<<16, func(lo, hi int) {
		for e := lo; e < hi; e++ {
			if (int(places[e])+1)*cb > len(codes) {
				bad.CompareAndSwap(-1, int64(e))
				return
			}
		}
	})
	if e := bad.Load(); e >= 0 {
		return fmt.Errorf("cuda: encode: entry %d's place %d is past the %d codes", e, places[e], len(codes)/cb)
	}
	return nil
}

// encodable checks what both phases need: m anchors of the points'
// dimension, the rotated anchors of the ip form, the kernel's three
// rounds, and points resident on the device (else ErrNotResident).
func (s *dataset) encodable(l device.RotatedLayout, anchors []float32, m int) error {
	d := s.d
	switch {
	case l.Dim != d || len(anchors) != m*d || m < 1:
		return fmt.Errorf("cuda: encode: %d anchors of dimension %d for points of dimension %d", m, l.Dim, d)
	case l.IP && len(l.RotAnchors) != m*d:
		return errors.New("cuda: encode: rotated anchors not set")
	case s.m == 0:
		return errors.New("cuda: encode before SetAnchors")
	case s.batch > 0:
		return fmt.Errorf("cuda: encode: %w (they stream in batches of %d rows)", device.ErrNotResident, s.batch)
	case d > maxEncodeDim:
		return fmt.Errorf("cuda: encode: dimension %d beyond the kernel's %d: %w", d, maxEncodeDim, device.ErrNotResident)
	case len(l.Signs) != 3:
		return fmt.Errorf("cuda: encode: %d rotation rounds, the kernel does 3", len(l.Signs))
	}
	for k, r := range l.Signs {
		if len(r) != d {
			return fmt.Errorf("cuda: encode: rotation round %d has %d signs for dimension %d", k, len(r), d)
		}
	}
	return nil
}

// ownRows checks that every entry is a row of the dataset: the kernels
// read the rows the ids name.
func (s *dataset) ownRows(ids []uint32) error {
	var bad atomic.Int64
	bad.Store(-1)
	par.For(len(ids), 1<<16, func(lo, hi int) {
		for e := lo; e < hi; e++ {
			if int(ids[e]) >= s.n {
				bad.CompareAndSwap(-1, int64(e))
				return
			}
		}
	})
	if e := bad.Load(); e >= 0 {
		return fmt.Errorf("cuda: encode: entry %d is row %d of a dataset of %d", e, ids[e], s.n)
	}
	return nil
}

// uploadEntries uploads the anchors and the entries' ids (at least one),
// into tmp. On the worker.
func (s *dataset) uploadEntries(tmp *jobBufs, anchors []float32, ids []uint32) (anch, idb uint64, err error) {
	if anch, err = tmp.upload(unsafe.Pointer(&anchors[0]), int64(len(anchors))*4); err != nil {
		return 0, 0, err
	}
	if idb, err = tmp.upload(unsafe.Pointer(&ids[0]), int64(len(ids))*4); err != nil {
		return 0, 0, err
	}
	return anch, idb, nil
}

// listMax sets lmax (one a list) to the largest |r|^2 of the n entries
// idb in each list (vlc_rot_sumsq), 0 for a list none is in. On the
// worker.
func (s *dataset) listMax(tmp *jobBufs, anch, idb uint64, n int, lmax []float64) error {
	dev, m := s.dev, len(lmax)
	buf, err := tmp.alloc(int64(m) * 8)
	if err != nil {
		return err
	}
	if err := dev.memset8(buf, 0, int64(m)*8); err != nil {
		return err
	}
	if err := dev.launch("vlc_rot_sumsq", min((n+127)/128, 8*dev.info.SMs), 1, 128, 0,
		s.x, i32(s.dp), s.assign, anch, idb, i32(n), i32(s.d), buf); err != nil {
		return err
	}
	if err := dev.dtoh(unsafe.Pointer(&lmax[0]), buf, int64(m)*8); err != nil {
		return err
	}
	s.toHost.Add(int64(m) * 8)
	return nil
}

// encodeEntries writes the codes of the n (at least one) entries idb
// against the list parameters slist (vlc_rot_encode), entry e at
// codes[places[e]*CodeBytes:] (places nil: codes[e*CodeBytes:]), in runs
// handed to ready (nil: none) as they come back. On the worker.
func (s *dataset) encodeEntries(tmp *jobBufs, l device.RotatedLayout, anch, idb uint64, n int, slist []float32, codes []byte, places []uint32, ready func(lo, hi int)) error {
	dev, d, m, cb := s.dev, s.d, len(slist), l.CodeBytes()
	threads := min(n, dev.encodePerSM*dev.info.SMs)
	grid := (threads + encodeBlock - 1) / encodeBlock
	threads = grid * encodeBlock
	alloc, up := tmp.alloc, tmp.upload
	signs := make([]float32, 0, len(l.Signs)*d)
	for _, r := range l.Signs {
		signs = append(signs, r...)
	}
	sg, err := up(unsafe.Pointer(&signs[0]), int64(len(signs))*4)
	if err != nil {
		return err
	}
	rotA := uint64(0)
	if l.IP {
		if rotA, err = up(unsafe.Pointer(&l.RotAnchors[0]), int64(m*d)*4); err != nil {
			return err
		}
	}
	sl, err := up(unsafe.Pointer(&slist[0]), int64(m)*4)
	if err != nil {
		return err
	}
	out, err := alloc(int64(n) * int64(l.Packed))
	if err != nil {
		return err
	}
	corr, err := alloc(int64(n) * 4)
	if err != nil {
		return err
	}
	rs, err := alloc(int64(threads) * int64(d) * 4)
	if err != nil {
		return fmt.Errorf("cuda: encode scratch: %w", err)
	}
	ks, err := alloc(2 * int64(threads) * int64(d) * 4)
	if err != nil {
		return fmt.Errorf("cuda: encode scratch: %w", err)
	}
	sorted, err := alloc(int64(threads) * int64(d) * 4)
	if err != nil {
		return fmt.Errorf("cuda: encode scratch: %w", err)
	}
	// Runs of whole rounds of the threads (a multiple of BlockLen
	// entries: threads is one of encodeBlock), so that no run ends
	// with part of its threads idle. The kernels go on a stream of
	// their own, so that a run's codes come back (on the default
	// stream, its event waited for) while the next run's kernel runs.
	runs := cmp.Or(dev.encodeRuns, encodeRuns)
	run := threads * max(1, (n+threads*runs-1)/(threads*runs))
	tr := newEncodeTrace(dev.ordinal, n, run)
	st, err := dev.newStream()
	if err != nil {
		return err
	}
	var ev [2]uintptr
	defer func() {
		dev.drv.call("cuCtxSynchronize", dev.drv.cuCtxSynchronize) // before the buffers go, on every path
		for _, e := range ev {
			if e != 0 {
				dev.destroyEvent(e)
			}
		}
		dev.destroyStream(st)
	}()
	for i := range ev {
		if ev[i], err = dev.newEvent(); err != nil {
			return err
		}
	}
	launch := func(lo int) error {
		hi := min(n, lo+run)
		g := (min(hi-lo, threads) + encodeBlock - 1) / encodeBlock
		if err := dev.launchOn(st, "vlc_rot_encode", g, 1, encodeBlock, 0,
			s.x, i32(s.dp), s.assign, anch, rotA, idb+uint64(lo)*4, i32(hi-lo), i32(d), i32(l.P), sg, f32(l.Scale),
			i32(l.Bits), i32(l.Packed), b32(l.IP), sl, out+uint64(lo*l.Packed), corr+uint64(lo)*4, rs, ks, sorted); err != nil {
			return err
		}
		return dev.record(ev[lo/run%2], st)
	}
	// The levels come back a chunk of entries at a time through the
	// page-locked staging buffer, and go straight to their place in
	// codes beside the corrections, on all cores (a pageable copy of
	// all 384 MB of 1M x 768 at 4 bits, then one core interleaving,
	// took 0.5 s).
	stage, err := dev.staging()
	if err != nil {
		return err
	}
	per := n
	if l.Packed > 0 {
		per = max(1, len(stage)/l.Packed)
	}
	cs := make([]byte, 4*n)
	// A copy up from pageable memory can return before its bytes
	// land: the stream of the kernels waits for nothing of the
	// default stream's, so all of that finishes first.
	if err := dev.drv.call("cuCtxSynchronize", dev.drv.cuCtxSynchronize); err != nil {
		return err
	}
	if err := launch(0); err != nil {
		return err
	}
	for lo := 0; lo < n; lo += run {
		hi := min(n, lo+run)
		tr.mark(encWait)
		if err := dev.wait(ev[lo/run%2]); err != nil {
			return err
		}
		tr.mark(encCopy)
		if hi < n {
			if err := launch(hi); err != nil {
				return err
			}
		}
		if err := dev.dtoh(unsafe.Pointer(&cs[4*lo]), corr+uint64(lo)*4, int64(4*(hi-lo))); err != nil {
			return err
		}
		for clo := lo; clo < hi; clo += per {
			chi := min(hi, clo+per)
			if l.Packed > 0 {
				if err := dev.dtoh(unsafe.Pointer(&stage[0]), out+uint64(clo*l.Packed), int64((chi-clo)*l.Packed)); err != nil {
					return err
				}
			}
			par.For(chi-clo, 4096, func(a, b int) {
				for e := clo + a; e < clo+b; e++ {
					k, at := e-clo, e
					if places != nil {
						at = int(places[e])
					}
					copy(codes[at*cb:], stage[k*l.Packed:(k+1)*l.Packed])
					copy(codes[at*cb+l.Packed:(at+1)*cb], cs[4*e:4*e+4])
				}
			})
		}
		tr.mark(encReady)
		if ready != nil {
			ready(lo, hi)
		}
		tr.mark(encLaunch)
	}
	tr.print()
	s.toHost.Add(int64(n*l.Packed + len(cs)))
	return nil
}

func binary32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

// encodeTrace sums, with VLC_ENCODE_TRACE set, where the worker's time
// went in encodeEntries: waiting for a run's kernel, copying its codes
// back, and the caller's ready; printed to standard error at the end.
type encodeTrace struct {
	ordinal, n, run int
	start, last     time.Time
	step            int
	sum             [encSteps]time.Duration
}

const (
	encLaunch = iota // from the next kernel's launch to waiting for the run's
	encWait          // waiting for the run's kernel
	encCopy          // copying its codes back
	encReady         // the caller's ready
	encSteps
)

func newEncodeTrace(ordinal, n, run int) *encodeTrace {
	if !enctrace.On() {
		return nil
	}
	now := time.Now()
	return &encodeTrace{ordinal: ordinal, n: n, run: run, start: now, last: now}
}

// mark ends the step under way and starts step.
func (t *encodeTrace) mark(step int) {
	if t == nil {
		return
	}
	now := time.Now()
	t.sum[t.step] += now.Sub(t.last)
	t.step, t.last = step, now
}

func (t *encodeTrace) print() {
	if t == nil {
		return
	}
	enctrace.Printf("encode trace: device %d, %d entries in runs of %d: %v; launch %v, kernel wait %v, copy back %v, ready %v\n",
		t.ordinal, t.n, t.run, time.Since(t.start).Round(time.Millisecond), t.sum[encLaunch].Round(time.Millisecond),
		t.sum[encWait].Round(time.Millisecond), t.sum[encCopy].Round(time.Millisecond), t.sum[encReady].Round(time.Millisecond))
}
