//go:build cuda

package cuda

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
)

// codesPTX is search_codes.cu compiled to PTX for compute_80 (see
// generate.go), loaded as its own module the first time a pq or sq8
// index is uploaded.
//
//go:embed search_codes.ptx
var codesPTX []byte

// codesStatic is room left for the pq scan's static shared memory.
const codesStatic = 1024

// loadCodes loads the pq and sq8 search module once (on the worker), from
// VLC_CUDA_CODES_PTX when set.
func (d *Device) loadCodes() error {
	if d.cmod != 0 {
		return nil
	}
	mod, err := d.loadModule("pq and sq8 search kernels", "search_codes.ptx", codesPTX, "VLC_CUDA_CODES_PTX", codeKernelNames,
		map[string]int{"vlc_c_scan_pq": d.codesSmem()})
	if err != nil {
		return err
	}
	d.cmod = mod
	return nil
}

// codesSmem is the dynamic shared memory the pq scan may use for a query's
// table.
func (d *Device) codesSmem() int { return max(maxSmem, d.smemOptin-codesStatic) }

// codesResident is a pq or sq8 index on the device (device.Resident): the
// search device.CodeData defines, in the kernels of search_codes.cu.
type codesResident struct {
	d    *Device
	data *device.IndexData
	pq   bool
	// pq's tables: ntab a query, the first of kind first (0: the L2
	// form's, 1: the dot form's).
	ntab, first int
	smemLut     bool // the pq scan holds a table in shared memory
	// The index: anchors (rotated for pq), |a|^2, list offsets, level
	// words, sign rounds; pq: scalar words, grids, centroids, P mu; sq8:
	// ranges.
	rotA, norms, offs, words, signs, scal, grids, cb, mean, lo, step uint64
	fixed                                                            int64

	batch, cap, nprobe, keep                     int
	q, rq, qq, dots, probe, coff, lut, cand, out uint64
	batchBytes                                   int64
	caps                                         map[int]int
	sizes                                        map[[3]int]int

	mu     sync.Mutex
	closed bool
}

// uploadCodes is UploadIndex for the pq and sq8 codes.
func (dev *Device) uploadCodes(data *device.IndexData) (device.Resident, error) {
	if data.Code != device.CodePQ && data.Code != device.CodeSQ8 {
		return nil, fmt.Errorf("%w: cuda: no search for the %s code", device.ErrNoSearch, data.Code)
	}
	if data.Dim > searchMaxD {
		return nil, fmt.Errorf("%w: cuda: dimension %d: the search kernels hold a query in shared memory, at most %d values", device.ErrNoSearch, data.Dim, searchMaxD)
	}
	if data.Code == device.CodeSQ8 && 8*data.Dim > maxSmem-codesStatic {
		return nil, fmt.Errorf("%w: cuda: dimension %d: the sq8 scan holds 2 values a dimension in shared memory, at most %d dimensions", device.ErrNoSearch, data.Dim, (maxSmem-codesStatic)/8)
	}
	if len(data.Signs) != 0 && len(data.Signs) != 3 {
		return nil, fmt.Errorf("cuda: the search kernels rotate in 0 or 3 rounds, the index has %d", len(data.Signs))
	}
	r := &codesResident{d: dev, data: data, pq: data.Code == device.CodePQ, caps: map[int]int{}, sizes: map[[3]int]int{}}
	if r.pq {
		r.ntab, r.first = 1, 0
		switch {
		case data.IP && data.IPCodes:
			r.ntab = 2
		case data.IP:
			r.first = 1
		}
		r.smemLut = 4*device.PQCentroids*data.Subspaces <= dev.codesSmem()
	}
	err := dev.run(func() error {
		if err := dev.loadCodes(); err != nil {
			return err
		}
		if err := r.upload(); err != nil {
			r.free()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// upload runs on the worker.
func (r *codesResident) upload() error {
	d, x := r.d, r.data
	put := func(dst *uint64, v []float32) error {
		if len(v) == 0 {
			return nil
		}
		var err error
		bytes := int64(4 * len(v))
		if *dst, err = d.alloc(bytes); err != nil {
			return err
		}
		r.fixed += bytes
		return d.htod(*dst, unsafe.Pointer(&v[0]), bytes)
	}
	var signs []float32
	for _, s := range x.Signs {
		signs = append(signs, s...)
	}
	for _, b := range []struct {
		dst *uint64
		v   []float32
	}{
		{&r.rotA, x.RotAnchors}, {&r.norms, x.Norms}, {&r.signs, signs},
		{&r.grids, x.Grids}, {&r.cb, x.Codebooks}, {&r.mean, x.RotMean}, {&r.lo, x.Lo}, {&r.step, x.Step},
	} {
		if err := put(b.dst, b.v); err != nil {
			return err
		}
	}
	var err error
	if r.offs, err = d.alloc(int64(8 * len(x.Offsets))); err != nil {
		return err
	}
	r.fixed += int64(8 * len(x.Offsets))
	if err := d.htod(r.offs, unsafe.Pointer(&x.Offsets[0]), int64(8*len(x.Offsets))); err != nil {
		return err
	}
	tiles := x.Tiles()
	tileWords := x.Words * device.Tile
	if r.words, err = d.alloc(int64(tiles) * int64(tileWords) * 4); err != nil {
		return err
	}
	r.fixed += int64(tiles) * int64(tileWords) * 4
	if r.pq {
		if r.scal, err = d.alloc(int64(tiles) * device.Tile * 4); err != nil {
			return err
		}
		r.fixed += int64(tiles) * device.Tile * 4
	}
	stage, err := d.staging()
	if err != nil {
		return err
	}
	per := len(stage) / (4 * (tileWords + device.Tile))
	if per < 1 {
		return fmt.Errorf("cuda: one tile of %d words does not fit the %d-byte staging buffer", tileWords, len(stage))
	}
	all := unsafe.Slice((*uint32)(unsafe.Pointer(&stage[0])), len(stage)/4)
	for t0 := 0; t0 < tiles; t0 += per {
		t1 := min(t0+per, tiles)
		nt := t1 - t0
		w, s := all[:nt*tileWords], all[nt*tileWords:nt*(tileWords+device.Tile)]
		if err := x.Fill(t0, t1, w, s); err != nil {
			return err
		}
		if err := d.htod(r.words+uint64(t0*tileWords*4), unsafe.Pointer(&w[0]), int64(len(w))*4); err != nil {
			return err
		}
		if r.pq {
			if err := d.htod(r.scal+uint64(t0*device.Tile*4), unsafe.Pointer(&s[0]), int64(len(s))*4); err != nil {
				return err
			}
		}
	}
	return nil
}

// free releases every buffer (on the worker).
func (r *codesResident) free() {
	r.freeBatch()
	for _, p := range []*uint64{&r.rotA, &r.norms, &r.offs, &r.words, &r.signs, &r.scal, &r.grids, &r.cb, &r.mean, &r.lo, &r.step} {
		r.d.free(*p)
		*p = 0
	}
	r.fixed = 0
}

func (r *codesResident) freeBatch() {
	for _, p := range []*uint64{&r.q, &r.rq, &r.qq, &r.dots, &r.probe, &r.coff, &r.lut, &r.cand, &r.out} {
		r.d.free(*p)
		*p = 0
	}
	r.batch, r.batchBytes = 0, 0
}

// Bytes is the device memory held: the index and the batch buffers.
func (r *codesResident) Bytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fixed + r.batchBytes
}

// Close frees the device memory.
func (r *codesResident) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return r.d.run(func() error { r.free(); return nil })
}

// lutFloats is the size of one query's pq tables.
func (r *codesResident) lutFloats() int64 {
	if !r.pq {
		return 0
	}
	return int64(r.ntab) * device.PQCentroids * int64(r.data.Subspaces)
}

// perQuery is the device memory one query of a batch takes.
func (r *codesResident) perQuery(cap, nprobe, keep int) int64 {
	x := r.data
	return int64(8*x.Dim+4+4*x.Lists+4*nprobe+4*(nprobe+1)) + 4*r.lutFloats() + 8*int64(cap) + 8*int64(keep)
}

// ensure makes the batch buffers hold batch queries (on the worker).
func (r *codesResident) ensure(batch, cap, nprobe, keep int) error {
	if batch <= r.batch && cap <= r.cap && nprobe <= r.nprobe && keep <= r.keep {
		return nil
	}
	r.freeBatch()
	x := r.data
	for _, b := range []struct {
		p     *uint64
		bytes int64
	}{
		{&r.q, int64(batch) * int64(x.Dim) * 4},
		{&r.rq, int64(batch) * int64(x.Dim) * 4},
		{&r.qq, int64(batch) * 4},
		{&r.dots, int64(batch) * int64(x.Lists) * 4},
		{&r.probe, int64(batch) * int64(nprobe) * 4},
		{&r.coff, int64(batch) * int64(nprobe+1) * 4},
		{&r.lut, max(4, int64(batch)*4*r.lutFloats())},
		{&r.cand, int64(batch) * int64(max(cap, 1)) * 8},
		{&r.out, int64(batch) * int64(keep) * 8},
	} {
		var err error
		if *b.p, err = r.d.alloc(b.bytes); err != nil {
			r.freeBatch()
			return err
		}
		r.batchBytes += b.bytes
	}
	r.batch, r.cap, r.nprobe, r.keep = batch, cap, nprobe, keep
	return nil
}

// batchSize is the most queries one pass takes: what fits in
// 1/batchShare of the free memory, at most maxBatch, or
// VLC_CUDA_SEARCH_BATCH (tests).
func (r *codesResident) batchSize(cap, nprobe, keep int) (int, error) {
	per := r.perQuery(cap, nprobe, keep)
	if v := os.Getenv("VLC_CUDA_SEARCH_BATCH"); v != "" {
		b, err := strconv.Atoi(v)
		if err != nil || b < 1 {
			return 0, fmt.Errorf("cuda: VLC_CUDA_SEARCH_BATCH=%q: want a positive number of queries", v)
		}
		return b, nil
	}
	var free int64
	if err := r.d.run(func() (err error) { free, err = r.d.usage(); return err }); err != nil {
		return 0, err
	}
	b := (free + r.batchBytes) / batchShare / per
	if b < 1 {
		return 0, fmt.Errorf("cuda: %w: one query of nprobe %d needs %.1f MiB on %s, %.1f MiB are free",
			errOutOfMemory, nprobe, float64(per)/(1<<20), r.d.info.Name, float64(free)/(1<<20))
	}
	return int(min(b, maxBatch)), nil
}

// Search runs the search for nq prepared queries (device.Resident).
func (r *codesResident) Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return device.ErrClosed
	}
	x := r.data
	if nprobe < 1 || nprobe > x.Lists || keep < 1 || keep > device.MaxKeep || len(queries) < nq*x.Dim || len(entries) < nq*keep || len(dists) < nq*keep {
		return fmt.Errorf("%w: cuda search of %d queries, nprobe %d, keep %d", device.ErrArgument, nq, nprobe, keep)
	}
	cap, ok := r.caps[nprobe]
	if !ok {
		cap = x.MaxCandidates(nprobe)
		r.caps[nprobe] = cap
	}
	key := [3]int{cap, nprobe, keep}
	batch, ok := r.sizes[key]
	if !ok {
		var err error
		if batch, err = r.batchSize(cap, nprobe, keep); err != nil {
			return err
		}
		r.sizes[key] = batch
	}
	batch = min(batch, nq, math.MaxInt32/nprobe)
	for lo := 0; lo < nq; lo += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+batch, nq)
		err := r.d.run(func() error {
			if err := r.ensure(batch, cap, nprobe, keep); err != nil {
				return err
			}
			return r.pass(queries[lo*x.Dim:hi*x.Dim], hi-lo, nprobe, keep, cap, entries[lo*keep:hi*keep], dists[lo*keep:hi*keep])
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// pass searches nq queries (at most r.batch) on the worker: rotate, dots,
// probe, pq's tables, the scan a block per (query, list) pair, top-k.
func (r *codesResident) pass(queries []float32, nq, nprobe, keep, cap int, entries []int32, dists []float32) error {
	d, x := r.d, r.data
	qb := int64(len(queries)) * 4
	if err := r.upQueries(queries, qb); err != nil {
		return err
	}
	ip := b32(x.IP)
	npairs := nq * nprobe
	steps := []step{
		{"vlc_c_rotate", nq, 1, 4 * x.Dim, []uint64{r.q, r.signs, i32(len(x.Signs)), i32(x.Dim), i32(x.RotP), f32(x.RotScale), r.rq, r.qq}},
		{"vlc_c_dots", (x.Lists + dotsTile - 1) / dotsTile, (nq + dotsTile - 1) / dotsTile, 0, []uint64{r.rq, r.rotA, i32(nq), i32(x.Lists), i32(x.Dim), r.dots}},
		{"vlc_c_probe", nq, 1, 0, []uint64{r.dots, r.norms, r.offs, i32(x.Lists), ip, i32(nprobe), r.probe, r.coff}},
	}
	if r.pq {
		smem := 0
		if r.smemLut {
			smem = 4 * device.PQCentroids * x.Subspaces
		}
		steps = append(steps,
			step{"vlc_c_lut", nq, r.ntab, 4 * x.Dim, []uint64{r.rq, r.mean, r.cb, i32(x.Dim), i32(x.Subspaces), i32(r.ntab), i32(r.first), r.lut}},
			step{"vlc_c_scan_pq", npairs, 1, smem, []uint64{r.rq, r.qq, r.dots, r.rotA, r.norms, r.offs, r.grids, r.words, r.scal, r.lut,
				i32(x.Dim), i32(x.Lists), i32(x.Words), i32(x.Subspaces), i32(r.ntab), i32(r.first), ip, b32(x.IPCodes),
				i32(nprobe), r.probe, r.coff, i32(cap), r.cand, b32(r.smemLut)}})
	} else {
		steps = append(steps, step{"vlc_c_scan_sq8", npairs, 1, 8 * x.Dim, []uint64{r.rq, r.qq, r.dots, r.rotA, r.norms, r.offs, r.lo, r.step, r.words,
			i32(x.Dim), i32(x.Lists), i32(x.Words), ip, b32(x.IPCodes), i32(nprobe), r.probe, r.coff, i32(cap), r.cand}})
	}
	steps = append(steps, step{"vlc_c_topk", nq, 1, 0, []uint64{r.cand, i32(cap), r.coff, i32(nprobe), i32(keep), r.out, r.out + uint64(nq*keep*4)}})
	for _, s := range steps {
		if err := d.launch(s.name, s.gx, s.gy, searchBlock, s.smem, s.args...); err != nil {
			return err
		}
	}
	return r.down(nq*keep, entries, dists)
}

// upQueries copies the queries to the device, through the page-locked
// staging buffer when they fit it.
func (r *codesResident) upQueries(queries []float32, bytes int64) error {
	d := r.d
	stage, err := d.staging()
	if err != nil {
		return err
	}
	if bytes <= int64(len(stage)) {
		copy(stage, unsafe.Slice((*byte)(unsafe.Pointer(&queries[0])), bytes))
		return d.htod(r.q, unsafe.Pointer(&stage[0]), bytes)
	}
	return d.htod(r.q, unsafe.Pointer(&queries[0]), bytes)
}

// down copies the pass's results back: entries then distances, n of each.
func (r *codesResident) down(n int, entries []int32, dists []float32) error {
	if err := r.d.dtoh(unsafe.Pointer(&entries[0]), r.out, int64(n)*4); err != nil {
		return err
	}
	return r.d.dtoh(unsafe.Pointer(&dists[0]), r.out+uint64(4*n), int64(n)*4)
}
