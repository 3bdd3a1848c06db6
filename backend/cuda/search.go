//go:build cuda

package cuda

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
)

// searchPTX is search.cu compiled to PTX for compute_80 (see generate.go),
// loaded as a second module the first time an index is uploaded.
//
//go:embed search.ptx
var searchPTX []byte

// searchSteps name a pass's steps, for VLC_CUDA_SEARCH_TIMES: the memset
// of the list counts, then the kernels in launch order (scan: vlc_s_scanB
// or vlc_s_mmaB for the code's bits).
var searchSteps = []string{"memset", "vlc_s_rotate", "vlc_s_dots", "vlc_s_probe", "vlc_s_starts", "vlc_s_tiles", "vlc_s_order", "scan", "vlc_s_topk"}

const (
	scanGroup   = 8                   // GQ: the most queries a scan block scores together
	mmaTile     = 32                  // QT: the queries of a tensor-core scan block (vlc_s_mmaB)
	mmaHalf     = 16                  // the queries of a vlc_s_mmahB block
	mmaChunk    = 4                   // KC: the k-steps of 16 dimensions the scan loads ahead
	fewQueries  = 8                   // up to this many, the dots go a warp per anchor (vlc_s_dots_few)
	searchBlock = 256                 // SBLOCK
	dotsTile    = 128                 // DT
	maxSmem     = 48 << 10            // shared memory without an opt-in
	maxBatch    = 1 << 15             // queries a launch (grid y of the scan <= 65535)
	batchShare  = 2                   // a batch may take 1/batchShare of free memory
	searchMaxD  = (maxSmem - 256) / 4 // a query held in shared memory as float32 (rotate's static memory aside)
	scanStatic  = 2 << 10             // room left for the scans' static shared memory (vlc_s_mmaB: 896 bytes by ncu on an H200 before s_q and s_sc, 256 more)
	topkStatic  = 20 << 10            // vlc_s_topk's static shared memory (17,568 bytes: 50,336 by ptxas -v for sm_90 before its selection moved to dynamic memory), rounded up
	probeStatic = 8 << 10             // vlc_s_probe's static shared memory (two take_smallest's and select_few's arrays, about 6.3 KiB in the PTX), rounded up
)

var _ device.Searcher = (*Device)(nil)

// loadSearch loads the search module once (on the worker).
func (d *Device) loadSearch() error {
	if d.smod != 0 {
		return nil
	}
	smem := map[string]int{"vlc_s_topk": d.topkSmem(), "vlc_s_probe": d.probeSmem()}
	for b := 1; b <= 8; b *= 2 {
		smem[fmt.Sprintf("vlc_s_scan%d", b)] = d.scanSmem()
		smem[fmt.Sprintf("vlc_s_mma%d", b)] = d.scanSmem()
		smem[fmt.Sprintf("vlc_s_mmah%d", b)] = d.scanSmem()
	}
	mod, err := d.loadModule("search kernels", "search.ptx", searchPTX, "VLC_CUDA_SEARCH_PTX", searchKernelNames, smem)
	if err != nil {
		return err
	}
	d.smod = mod
	return nil
}

// loadModule loads a module of PTX (from the file the environment
// variable env names when set, else the embedded ptx), looks up its
// kernels names into d.fn and raises the dynamic shared memory of those
// smem names; on an error nothing stays loaded (on the worker).
func (d *Device) loadModule(what, file string, ptx []byte, env string, names []string, smem map[string]int) (uintptr, error) {
	src := "embedded"
	if p := os.Getenv(env); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, fmt.Errorf("cuda: %s: %w", env, err)
		}
		ptx, src = b, p
	}
	image := append(append([]byte(nil), ptx...), 0)
	opts := []int32{cuJitErrorLogBuffer, cuJitErrorLogBufSize}
	vals := []uintptr{uintptr(unsafe.Pointer(&d.jitLog[0])), uintptr(len(d.jitLog))}
	var mod uintptr
	if err := d.drv.call("cuModuleLoadDataEx", d.drv.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&image[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0]))); err != nil {
		return 0, fmt.Errorf("cuda: %s (%s): %w", what, src, err)
	}
	fail := func(err error) (uintptr, error) {
		d.drv.call("cuModuleUnload", d.drv.cuModuleUnload, mod)
		return 0, err
	}
	for _, name := range names {
		var f uintptr
		cname := append([]byte(name), 0)
		if err := d.drv.call("cuModuleGetFunction", d.drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(&cname[0]))); err != nil {
			return fail(fmt.Errorf("%w (kernel %s: is %s stale? run make ptx)", err, name, file))
		}
		d.fn[name] = f
	}
	for name, bytes := range smem {
		if err := d.drv.call("cuFuncSetAttribute", d.drv.cuFuncSetAttribute, d.fn[name], cuFuncMaxDynSmem, uintptr(bytes)); err != nil {
			return fail(err)
		}
	}
	return mod, nil
}

// topkSmem is the dynamic shared memory vlc_s_topk may use for its
// cache of a query's candidate keys and its selection: the opt-in limit
// less its static arrays (the sample, the few keys under its threshold,
// the select's histogram and ties).
func (d *Device) topkSmem() int { return max(0, d.smemOptin-topkStatic) }

// probeSmem is the dynamic shared memory vlc_s_probe may use for the
// lists' keys: the opt-in limit less room for take_smallest's arrays.
func (d *Device) probeSmem() int { return max(0, d.smemOptin-probeStatic) }

// scanSmem is the dynamic shared memory the scan kernels may use: the
// device's opt-in limit (which counts static memory too) less room for
// their static arrays.
func (d *Device) scanSmem() int { return max(maxSmem, d.smemOptin-scanStatic) }

// resident is an index on the device (device.Resident).
type resident struct {
	d    *Device
	data *device.IndexData
	scan string // the scan kernel for the code's bits
	mma  string // the tensor-core scan for them, "" when its tile does not fit shared memory
	mmah string // the same with tiles of 16 queries (vlc_s_mmahB)
	tile string // VLC_CUDA_SEARCH_TILE: "16" or "32" forces that tile (tests)
	// cached, when positive, is VLC_CUDA_SEARCH_CACHED: the most
	// candidates the top-k holds in shared memory (tests; even)
	cached int
	pad    int    // levels a query residual is padded to: Words * 32/Bits
	kp     int    // pad rounded up to 16, the tensor-core scan's residual length
	force  string // VLC_CUDA_SEARCH_SCAN: "fma" or "mma" forces that scan (tests)
	// rotW is the warp-a-query rotation for the index's RotP
	// (vlc_s_rotateE), "" where it does not apply (RotP outside 32..1024
	// or not the largest power of two within Dim, or SBLOCK/32 queries'
	// values past the shared memory) or
	// VLC_CUDA_SEARCH_ROTATE=block keeps the block-a-query vlc_s_rotate
	// (warp, or unset: this one where it applies).
	rotW string
	// lanes is the threads that share an entry in the FMA scan of a few
	// pairs, the blocks of grid y that share a list being as many: 8, or
	// VLC_CUDA_SEARCH_LANES (4 or 8). One query of 1M x 768, 4,096
	// lists, nprobe 64, one build on an H200: its scan 18.8 us at 8, 24.9
	// at 4 (ncu).
	lanes int
	// dotsKind is VLC_CUDA_SEARCH_DOTS: "fma" keeps batches on the
	// float32 vlc_s_dots (tests); else past fewQueries they take
	// vlc_s_dots_mma.
	dotsKind string
	lists    []uint64
	// The index: rotated anchors, |a|^2, list offsets, s and sqrt(s),
	// level words, scalars, rotation signs.
	rotA, norms, offs, scale, sqrtS, words, scal, signs, frag uint64
	// The rotated anchors as two float16 halves (dp values a row, zero
	// past Dim), scaled by 1/ainv, for vlc_s_dots_mma.
	ah, al uint64
	dp     int
	ainv   float32
	fixed  int64 // their bytes

	// The batch buffers, for up to batch queries of cap candidates,
	// nprobe lists and keep results.
	batch, cap, nprobe, keep                                                   int
	q, rq, qq, dots, probe, coff, cnt, cursor, order, tiles, ntiles, cand, out uint64
	rqh, rql, qinv                                                             uint64 // the queries' halves and scales, for vlc_s_dots_mma
	batchBytes                                                                 int64
	// allow is the mask of the last masked search (allowWords words).
	allow      uint64
	allowWords int
	caps       map[int]int    // nprobe -> MaxCandidates
	sizes      map[[3]int]int // (cap, nprobe, keep) -> batchSize

	// With VLC_CUDA_SEARCH_TIMES set, each step's time (events around
	// the launches), summed over the passes and printed on Close.
	timing bool
	ev     [10]uintptr // len(searchSteps)+1
	times  [9]float64  // len(searchSteps)
	passes int
	copies [2]time.Duration // the host's wall time copying queries up and results down

	// A batch of up to fewQueries (one query, above all) replays its
	// launches as one CUDA graph on stream, captured the first time for
	// each (nq, nprobe, keep, masked): five launches cost more than the
	// kernels. The graphs hold the batch buffers' addresses, so they go
	// when those do, and the staging buffer's (the Device's for its life).
	stream  uintptr
	graphs  map[[4]int]uintptr
	noGraph bool // VLC_CUDA_SEARCH_GRAPH=0: every pass launches its kernels one by one

	mu     sync.Mutex
	closed bool
}

// UploadIndex copies the index d describes to the GPU (device.Searcher).
func (dev *Device) UploadIndex(data *device.IndexData) (device.Resident, error) {
	if data.Code != device.CodeRotated {
		return dev.uploadCodes(data) // search_codes.go
	}
	if data.Dim > searchMaxD {
		return nil, fmt.Errorf("%w: cuda: dimension %d: the search kernels hold a query in shared memory, at most %d values", device.ErrNoSearch, data.Dim, searchMaxD)
	}
	if pad := data.Words * 32 / data.Bits; 4*scanGroup*pad > dev.scanSmem() {
		return nil, fmt.Errorf("%w: cuda: dimension %d: the scan holds %d queries' residuals in shared memory, at most %d values each on %s", device.ErrNoSearch, data.Dim, scanGroup, dev.scanSmem()/4/scanGroup, dev.info.Name)
	}
	r := &resident{d: dev, data: data, scan: fmt.Sprintf("vlc_s_scan%d", data.Bits), pad: data.Words * 32 / data.Bits, caps: map[int]int{}, sizes: map[[3]int]int{},
		timing: os.Getenv("VLC_CUDA_SEARCH_TIMES") != "", noGraph: os.Getenv("VLC_CUDA_SEARCH_GRAPH") == "0", force: os.Getenv("VLC_CUDA_SEARCH_SCAN"), dotsKind: os.Getenv("VLC_CUDA_SEARCH_DOTS")}
	if r.force != "" && r.force != "fma" && r.force != "mma" {
		return nil, fmt.Errorf("cuda: VLC_CUDA_SEARCH_SCAN=%q: want fma or mma", r.force)
	}
	r.kp = (r.pad + 16*mmaChunk - 1) / (16 * mmaChunk) * (16 * mmaChunk)
	switch v := os.Getenv("VLC_CUDA_SEARCH_ROTATE"); v {
	case "", "warp":
		// vlc_s_rotateE loads a lane's 2E values: the block must be the
		// largest power of two within the dimension.
		if p := data.RotP; p >= 32 && p <= 1024 && p&(p-1) == 0 && p <= data.Dim && 2*p > data.Dim && searchBlock/32*4*data.Dim <= maxSmem {
			r.rotW = fmt.Sprintf("vlc_s_rotate%d", p/32)
		}
	case "block":
	default:
		return nil, fmt.Errorf("cuda: VLC_CUDA_SEARCH_ROTATE=%q: want warp or block", v)
	}
	switch v := os.Getenv("VLC_CUDA_SEARCH_LANES"); v {
	case "", "8":
		r.lanes = 8
	case "4":
		r.lanes = 4
	default:
		return nil, fmt.Errorf("cuda: VLC_CUDA_SEARCH_LANES=%q: want 4 or 8", v)
	}
	if r.mmaSmem(mmaTile) <= dev.scanSmem() {
		r.mma = fmt.Sprintf("vlc_s_mma%d", data.Bits)
		r.mmah = fmt.Sprintf("vlc_s_mmah%d", data.Bits)
	}
	if v := os.Getenv("VLC_CUDA_SEARCH_CACHED"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n%2 != 0 {
			return nil, fmt.Errorf("cuda: VLC_CUDA_SEARCH_CACHED=%q: want an even number of candidates, at least 2", v)
		}
		r.cached = n
	}
	switch r.tile = os.Getenv("VLC_CUDA_SEARCH_TILE"); r.tile {
	case "", "16", "32":
	default:
		return nil, fmt.Errorf("cuda: VLC_CUDA_SEARCH_TILE=%q: want 16 or 32", r.tile)
	}
	err := dev.run(func() error {
		if err := dev.loadSearch(); err != nil {
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
func (r *resident) upload() error {
	d, x := r.d, r.data
	put := func(dst *uint64, p unsafe.Pointer, bytes int64) error {
		var err error
		if *dst, err = d.alloc(bytes); err != nil {
			return err
		}
		r.fixed += bytes
		return d.htod(*dst, p, bytes)
	}
	signs := make([]float32, 0, len(x.Signs)*x.Dim)
	for _, s := range x.Signs {
		signs = append(signs, s...)
	}
	if len(x.Signs) != 3 {
		return fmt.Errorf("cuda: the search kernels rotate in 3 rounds, the index has %d", len(x.Signs))
	}
	for _, b := range []struct {
		dst   *uint64
		p     unsafe.Pointer
		bytes int
	}{
		{&r.rotA, unsafe.Pointer(&x.RotAnchors[0]), 4 * len(x.RotAnchors)},
		{&r.norms, unsafe.Pointer(&x.Norms[0]), 4 * len(x.Norms)},
		{&r.offs, unsafe.Pointer(&x.Offsets[0]), 8 * len(x.Offsets)},
		{&r.scale, unsafe.Pointer(&x.Scale[0]), 4 * len(x.Scale)},
		{&r.sqrtS, unsafe.Pointer(&x.SqrtScale[0]), 4 * len(x.SqrtScale)},
		{&r.signs, unsafe.Pointer(&signs[0]), 4 * len(signs)},
	} {
		if err := put(b.dst, b.p, int64(b.bytes)); err != nil {
			return err
		}
	}
	if err := r.upAnchorHalves(put); err != nil {
		return err
	}
	tiles := x.Tiles()
	tileWords := x.Words * device.Tile
	var err error
	if r.words, err = d.alloc(int64(tiles) * int64(tileWords) * 4); err != nil {
		return err
	}
	r.fixed += int64(tiles) * int64(tileWords) * 4
	if r.scal, err = d.alloc(int64(tiles) * device.Tile * 4); err != nil {
		return err
	}
	r.fixed += int64(tiles) * device.Tile * 4
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
		if err := d.htod(r.scal+uint64(t0*device.Tile*4), unsafe.Pointer(&s[0]), int64(len(s))*4); err != nil {
			return err
		}
	}
	r.lists = x.Offsets
	if r.mma != "" && tiles > 0 {
		// The tensor-core scan's copy of the levels, in its fragment
		// layout: RW words a lane, 32 lanes a k-step, kp/16 k-steps a tile.
		rw := max(1, x.Bits/2)
		bytes := int64(tiles) * int64(r.kp/16) * 32 * int64(rw) * 4
		if r.frag, err = d.alloc(bytes); err != nil {
			return err
		}
		r.fixed += bytes
		if err := d.launch(fmt.Sprintf("vlc_s_frag%d", x.Bits), tiles, 1, searchBlock, 0, r.words, i32(x.Words), i32(r.kp/16), r.frag); err != nil {
			return err
		}
	}
	return nil
}

// upAnchorHalves uploads the rotated anchors as vlc_s_dots_mma takes
// them: scaled by a power of two that brings the largest magnitude below
// 2^14, split into float16 hi and lo = float16(v - hi), dp values a row.
func (r *resident) upAnchorHalves(put func(*uint64, unsafe.Pointer, int64) error) error {
	x := r.data
	r.dp = (x.Dim + 31) &^ 31
	var big float32
	for _, v := range x.RotAnchors {
		big = max(big, v, -v)
	}
	_, e := math.Frexp(float64(big))
	sh := min(max(14-e, -100), 100)
	sc := float32(math.Ldexp(1, sh))
	r.ainv = float32(math.Ldexp(1, -sh))
	hi := make([]uint16, x.Lists*r.dp)
	lo := make([]uint16, x.Lists*r.dp)
	par.For(x.Lists, 64, func(a0, a1 int) {
		for a := a0; a < a1; a++ {
			for j, v := range x.RotAnchors[a*x.Dim : (a+1)*x.Dim] {
				h := f16.FromFloat32(v * sc)
				hi[a*r.dp+j] = h
				lo[a*r.dp+j] = f16.FromFloat32(v*sc - f16.ToFloat32(h))
			}
		}
	})
	if err := put(&r.ah, unsafe.Pointer(&hi[0]), int64(len(hi))*2); err != nil {
		return err
	}
	return put(&r.al, unsafe.Pointer(&lo[0]), int64(len(lo))*2)
}

// free releases every buffer (on the worker).
func (r *resident) free() {
	r.freeBatch()
	for _, p := range []*uint64{&r.rotA, &r.norms, &r.offs, &r.scale, &r.sqrtS, &r.words, &r.scal, &r.signs, &r.allow, &r.frag, &r.ah, &r.al} {
		r.d.free(*p)
		*p = 0
	}
	r.fixed, r.allowWords = 0, 0
}

// mmaSmem is the dynamic shared memory of the tensor-core scan: QT rows
// of the residuals' two float16 halves, kp + 8 values a row.
func (r *resident) mmaSmem(tile int) int { return 2 * tile * (r.kp + 8) * 2 }

// dropGraphs destroys the captured graphs (on the worker).
func (r *resident) dropGraphs() {
	for k, g := range r.graphs {
		r.d.drv.call("cuGraphExecDestroy", r.d.drv.cuGraphExecDestroy, g)
		delete(r.graphs, k)
	}
}

func (r *resident) freeBatch() {
	r.dropGraphs()
	for _, p := range []*uint64{&r.q, &r.rq, &r.qq, &r.dots, &r.probe, &r.coff, &r.cnt, &r.cursor, &r.order, &r.tiles, &r.ntiles, &r.cand, &r.out, &r.rqh, &r.rql, &r.qinv} {
		r.d.free(*p)
		*p = 0
	}
	r.batch, r.batchBytes = 0, 0
}

// Bytes is the device memory held: the index and the batch buffers.
func (r *resident) Bytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fixed + r.batchBytes
}

// Close frees the device memory.
func (r *resident) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.timing && r.passes > 0 {
		var b strings.Builder
		for i, name := range searchSteps {
			fmt.Fprintf(&b, ", %s %.3f ms", strings.TrimPrefix(name, "vlc_s_"), r.times[i])
		}
		fmt.Fprintf(os.Stderr, "cuda search, %d passes%s; copies (host wall time): up %.3f ms, down %.3f ms\n", r.passes, b.String(),
			r.copies[0].Seconds()*1e3, r.copies[1].Seconds()*1e3)
	}
	return r.d.run(func() error {
		for _, e := range r.ev {
			if e != 0 {
				r.d.drv.call("cuEventDestroy", r.d.drv.cuEventDestroy, e)
			}
		}
		r.free()
		if r.stream != 0 {
			r.d.destroyStream(r.stream)
			r.stream = 0
		}
		return nil
	})
}

// perQuery is the device memory one query of a batch takes.
func (r *resident) perQuery(cap, nprobe, keep int) int64 {
	x := r.data
	return int64(8*x.Dim+4+4*x.Lists+8*nprobe+4*(nprobe+1)+8*nprobe/mmaHalf+8+4*r.dp+4) + 4*int64(cap) + 8*int64(keep)
}

// ensure makes the batch buffers hold batch queries of cap candidates
// (on the worker).
func (r *resident) ensure(batch, cap, nprobe, keep int) error {
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
		{&r.cnt, int64(x.Lists) * 4},
		{&r.cursor, int64(x.Lists) * 4},
		{&r.order, int64(batch) * int64(nprobe) * 4},
		{&r.tiles, (int64(batch)*int64(nprobe)/mmaHalf + int64(x.Lists) + 1) * 8},
		{&r.ntiles, 4},
		{&r.rqh, int64(batch) * int64(r.dp) * 2},
		{&r.rql, int64(batch) * int64(r.dp) * 2},
		{&r.qinv, int64(batch) * 4},
		{&r.cand, int64(batch) * int64(max(cap, 1)) * 4},
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
// 1/batchShare of the free memory (with the buffers held now counted as
// free), at most maxBatch, or VLC_CUDA_SEARCH_BATCH (tests).
func (r *resident) batchSize(cap, nprobe, keep int) (int, error) {
	per := r.perQuery(cap, nprobe, keep)
	if v := os.Getenv("VLC_CUDA_SEARCH_BATCH"); v != "" {
		b, err := strconv.Atoi(v)
		if err != nil || b < 1 {
			return 0, fmt.Errorf("cuda: VLC_CUDA_SEARCH_BATCH=%q: want a positive number of queries", v)
		}
		return b, nil
	}
	var free int64
	err := r.d.run(func() (err error) { free, err = r.d.usage(); return err })
	if err != nil {
		return 0, err
	}
	b := (free + r.batchBytes) / batchShare / per
	if b < 1 {
		return 0, fmt.Errorf("cuda: %w: one query of nprobe %d needs %.1f MiB on %s (candidates of the largest lists), %.1f MiB are free",
			errOutOfMemory, nprobe, float64(per)/(1<<20), r.d.info.Name, float64(free)/(1<<20))
	}
	return int(min(b, maxBatch)), nil
}

// Search runs the search for nq prepared queries (device.Resident).
func (r *resident) Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	return r.search(ctx, queries, nq, nprobe, keep, nil, entries, dists)
}

// SearchMasked is Search over the entries allow permits
// (device.MaskedResident): the mask is copied to the device with the
// batch, and a masked entry scores +Inf, which the selection returns as
// entry -1.
func (r *resident) SearchMasked(ctx context.Context, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error {
	if len(allow) < (r.data.N+63)/64 {
		return fmt.Errorf("%w: cuda search: a mask of %d words for %d entries", device.ErrArgument, len(allow), r.data.N)
	}
	if allow == nil { // an index of no entries
		allow = []uint64{0}
	}
	return r.search(ctx, queries, nq, nprobe, keep, allow, entries, dists)
}

var _ device.MaskedResident = (*resident)(nil)

func (r *resident) search(ctx context.Context, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error {
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
		cap = (x.MaxCandidates(nprobe) + 3) &^ 3 // a multiple of 4: the top-k reads a query's slots 16 bytes at a time
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
	batch = min(batch, nq, math.MaxInt32/nprobe) // pair numbers are int32 in the kernels
	if allow != nil {
		if err := r.d.run(func() error { return r.upAllow(allow[:(x.N+63)/64]) }); err != nil {
			return err
		}
	}
	for lo := 0; lo < nq; lo += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+batch, nq)
		err := r.d.run(func() error {
			if err := r.ensure(batch, cap, nprobe, keep); err != nil {
				return err
			}
			return r.pass(queries[lo*x.Dim:hi*x.Dim], hi-lo, nprobe, keep, cap, allow != nil, entries[lo*keep:hi*keep], dists[lo*keep:hi*keep])
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// upAllow copies a search's mask to the device (on the worker).
func (r *resident) upAllow(allow []uint64) error {
	if len(allow) == 0 {
		allow = []uint64{0}
	}
	if len(allow) > r.allowWords {
		r.dropGraphs() // they hold the old mask's address
		r.d.free(r.allow)
		r.fixed -= 8 * int64(r.allowWords)
		r.allow, r.allowWords = 0, 0
		p, err := r.d.alloc(8 * int64(len(allow)))
		if err != nil {
			return err
		}
		r.allow, r.allowWords = p, len(allow)
		r.fixed += 8 * int64(len(allow))
	}
	// Through the page-locked staging buffer when it fits: that copy is
	// done when htod returns (one from pageable memory may not be), which
	// the graphs' stream, not ordered after the default one, relies on.
	if stage, err := r.d.staging(); err == nil && 8*len(allow) <= len(stage) {
		copy(unsafe.Slice((*uint64)(unsafe.Pointer(&stage[0])), len(allow)), allow)
		return r.d.htod(r.allow, unsafe.Pointer(&stage[0]), 8*int64(len(allow)))
	}
	return r.d.htod(r.allow, unsafe.Pointer(&allow[0]), 8*int64(len(allow)))
}

// pass searches nq queries (at most r.batch) on the worker.
func (r *resident) pass(queries []float32, nq, nprobe, keep, cap int, masked bool, entries []int32, dists []float32) error {
	d, x := r.d, r.data
	qb := int64(len(queries)) * 4
	ip := b32(x.IP)
	npairs := nq * nprobe
	var allow uint64
	if masked {
		allow = r.allow
	}
	// Queries per scan block: 1 while that leaves too few blocks to fill
	// the GPU (small batches, single queries; the pairs are then scanned
	// as they come), else scanGroup, the pairs ordered by list first so
	// that a block finds several queries of one list. Batches that give
	// a list several queries take the tensor-core scan (up to 32 or 16
	// pairs of a list a block: the tile below) where its tile fits shared
	// memory.
	g := min(scanGroup, max(1, npairs/(8*d.info.SMs)))
	useMMA := r.mma != "" && g == scanGroup
	switch r.force {
	case "fma":
		useMMA = false
	case "mma":
		useMMA = r.mma != ""
	}
	ordered := g > 1 || useMMA
	lanes, split := 1, 1
	if npairs < 4*d.info.SMs {
		// A few pairs: each entry's words split between r.lanes threads,
		// and each list's entries between as many blocks.
		lanes, split = r.lanes, r.lanes
	}
	var cnt, order uint64
	if ordered {
		cnt, order = r.cnt, r.order
	}
	dots := step{"vlc_s_dots", (x.Lists + dotsTile - 1) / dotsTile, (nq + dotsTile - 1) / dotsTile, 0, []uint64{r.rq, r.rotA, i32(nq), i32(x.Lists), i32(x.Dim), r.dots}}
	var rqh, rql uint64 // the rotated queries' halves: written by vlc_s_rotate for vlc_s_dots_mma
	if nq > fewQueries && r.dotsKind != "fma" {
		rqh, rql = r.rqh, r.rql
		dots = step{"vlc_s_dots_mma", (x.Lists + 127) / 128, (nq + 63) / 64, 0, []uint64{r.rqh, r.rql, r.qinv, r.ah, r.al, f32(r.ainv), i32(nq), i32(x.Lists), i32(r.dp), r.dots}}
	}
	if nq <= fewQueries {
		dots = step{"vlc_s_dots_few", (x.Lists + searchBlock/32 - 1) / (searchBlock / 32), 1, 0, []uint64{r.rq, r.rotA, i32(nq), i32(x.Lists), i32(x.Dim), r.dots}}
	}
	scan := step{r.scan, (npairs + g - 1) / g, split, 4 * scanGroup * r.pad, []uint64{r.rq, r.qq, r.dots, r.rotA, r.norms, r.offs, r.scale, r.sqrtS, r.words, r.scal,
		i32(x.Dim), i32(x.Lists), i32(x.Words), ip, b32(x.IPCodes), i32(nprobe), r.probe, r.coff, i32(cap), r.cand, order, i32(npairs), i32(g), i32(lanes), allow}}
	// The tensor-core scan's tile: 32 queries, or 16 where the lists have
	// fewer than 24 pairs each on average. 1M x 768, 4,096 lists, nprobe
	// 64, batches of 1,000 (15.6 pairs a list), one H200: the scan took
	// 457 us a batch in tiles of 16, 529 in tiles of 32 (ncu).
	tile, mma := mmaTile, r.mma
	if (r.tile == "" && npairs < 24*x.Lists) || r.tile == "16" {
		tile, mma = mmaHalf, r.mmah
	}
	if useMMA {
		scan = step{mma, npairs/tile + x.Lists, 1, r.mmaSmem(tile), []uint64{r.rq, r.qq, r.dots, r.rotA, r.norms, r.offs, r.scale, r.sqrtS, r.frag, r.scal,
			i32(x.Dim), i32(x.Lists), i32(x.Words), ip, b32(x.IPCodes), i32(nprobe), r.coff, i32(cap), r.cand, r.order, r.cursor, r.tiles, r.ntiles, i32(r.kp), allow}}
	}
	// The candidates a query's top-k reads into shared memory: as many as
	// fit, or, for a batch of several waves, as many as let two blocks
	// share a multiprocessor where that holds most queries' (the mean
	// query's candidates with a margin); a query with more selects from
	// memory. Sized for the largest query (nprobe 64 of 1M x 768 in 4,096
	// lists, one H200) a block took the whole multiprocessor: occupancy
	// 12.5 % by ncu, 145 us a batch of 1,000.
	selBytes := 8 * (1 << bits.Len(uint(keep-1)))
	cached := max(0, min(cap, (d.topkSmem()-selBytes)/4&^1)) // even: the selection after it is 8-byte aligned (cap is a multiple of 4)
	if two := (d.smemSM/2 - 1024 - topkStatic - selBytes) / 4 &^ 1; nq > d.info.SMs && cached > two && float64(two) >= 1.3*float64(nprobe)*float64(x.N)/float64(x.Lists) {
		cached = two
	}
	if r.cached > 0 {
		cached = min(cached, r.cached)
	}
	rotate := step{"vlc_s_rotate", nq, 1, 4 * x.Dim, []uint64{r.q, r.signs, i32(x.Dim), i32(x.RotP), f32(x.RotScale), r.rq, r.qq, rqh, rql, r.qinv, i32(r.dp)}}
	if r.rotW != "" {
		const per = searchBlock / 32 // queries a block
		rotate = step{r.rotW, (nq + per - 1) / per, 1, per * 4 * x.Dim, append(rotate.args, i32(nq))}
	}
	probeKeys, probeSmem := 0, 0 // the lists' keys the probe holds in shared memory
	if 4*x.Lists <= d.probeSmem() {
		probeKeys, probeSmem = x.Lists, 4*x.Lists
	}
	steps := []step{
		rotate,
		dots,
		{"vlc_s_probe", nq, 1, probeSmem, []uint64{r.dots, r.norms, r.offs, i32(x.Lists), ip, i32(nprobe), r.probe, r.coff, cnt, i32(probeKeys), b32(nq <= fewQueries)}},
		{"vlc_s_starts", 1, 1, 0, []uint64{r.cnt, i32(x.Lists), r.cursor}},
		{"vlc_s_tiles", 1, 1, 0, []uint64{r.cnt, r.cursor, i32(x.Lists), i32(tile), r.tiles, r.ntiles}},
		{"vlc_s_order", nq, 1, 0, []uint64{r.probe, i32(nprobe), r.cursor, r.order}},
		scan,
		{"vlc_s_topk", nq, 1, 4*cached + selBytes, []uint64{r.cand, i32(cap), r.coff, r.probe, r.offs, i32(nprobe), i32(keep), i32(cached), r.out, r.out + uint64(nq*keep*4)}},
	}
	var live []step // the steps this pass launches
	for _, s := range steps {
		if (!ordered && (s.name == "vlc_s_starts" || s.name == "vlc_s_order")) || (!useMMA && s.name == "vlc_s_tiles") {
			s.name = "" // skipped (timed as nothing)
		}
		if s.smem > maxSmem && ((s.name != r.scan && s.name != r.mma && s.name != r.mmah && s.name != "vlc_s_topk" && s.name != "vlc_s_probe") || s.smem > max(d.scanSmem(), d.topkSmem(), d.probeSmem())) {
			return fmt.Errorf("cuda: %s needs %d bytes of shared memory", s.name, s.smem)
		}
		live = append(live, s)
	}
	if nq <= fewQueries && !ordered && !r.timing && d.drv.graphs && !r.noGraph {
		// The queries go up and the results come back inside the graph,
		// through the staging buffer: one launch and one wait a pass.
		stage, err := d.staging()
		if err != nil {
			return err
		}
		out := (qb + 255) &^ 255 // the results' place in the stage
		n := nq * keep
		if out+8*int64(n) <= int64(len(stage)) {
			copy(stage[:qb], unsafe.Slice((*byte)(unsafe.Pointer(&queries[0])), qb))
			io := graphIO{in: unsafe.Pointer(&stage[0]), inBytes: qb, out: unsafe.Pointer(&stage[out]), outBytes: 8 * int64(n)}
			if err := r.replay([4]int{nq, nprobe, keep, int(b32(masked))}, live, io); err != nil {
				return err
			}
			copy(entries[:n], unsafe.Slice((*int32)(unsafe.Pointer(&stage[out])), n))
			copy(dists[:n], unsafe.Slice((*float32)(unsafe.Pointer(&stage[out+4*int64(n)])), n))
			return nil
		}
	}
	t0 := time.Now()
	if err := r.upQueries(queries, qb); err != nil {
		return err
	}
	r.copies[0] += time.Since(t0)
	if err := r.record(0); err != nil {
		return err
	}
	if ordered {
		if err := d.memset8(r.cnt, 0, int64(x.Lists)*4); err != nil {
			return err
		}
	}
	for i, s := range live {
		if err := r.record(i + 1); err != nil {
			return err
		}
		if s.name == "" {
			continue
		}
		if err := d.launch(s.name, s.gx, s.gy, searchBlock, s.smem, s.args...); err != nil {
			return err
		}
	}
	if err := r.record(len(steps) + 1); err != nil {
		return err
	}
	t0 = time.Now()
	if err := r.down(nq*keep, entries, dists); err != nil {
		return err
	}
	r.copies[1] += time.Since(t0) // with the wait for the kernels
	if r.timing {
		r.passes++
		for i := range r.times {
			var ms float32
			if err := d.drv.call("cuEventElapsedTime", d.drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), r.ev[i], r.ev[i+1]); err != nil {
				return err
			}
			r.times[i] += float64(ms)
		}
	}
	return nil
}

// graphIO is a replayed pass's copies: inBytes of queries from in to the
// device before its kernels, outBytes of results from the device to out
// after them (both page-locked host memory at fixed addresses: the graph
// holds them).
type graphIO struct {
	in, out           unsafe.Pointer
	inBytes, outBytes int64
}

// replay launches steps, between io's copies, as the graph captured for
// key, capturing it on the first call, and waits for it (on the worker).
func (r *resident) replay(key [4]int, steps []step, io graphIO) error {
	d, dr := r.d, r.d.drv
	if r.stream == 0 {
		st, err := d.newStream()
		if err != nil {
			return err
		}
		r.stream = st
	}
	if r.graphs == nil {
		r.graphs = map[[4]int]uintptr{}
	}
	exec, ok := r.graphs[key]
	if !ok {
		const relaxed = 2 // CU_STREAM_CAPTURE_MODE_RELAXED
		if err := dr.call("cuStreamBeginCapture", dr.cuStreamBeginCapture, r.stream, relaxed); err != nil {
			return err
		}
		lerr := dr.call("cuMemcpyHtoDAsync", dr.cuMemcpyHtoDAsync, uintptr(r.q), uintptr(io.in), uintptr(io.inBytes), r.stream)
		for _, s := range steps {
			if s.name != "" && lerr == nil {
				lerr = d.launchOn(r.stream, s.name, s.gx, s.gy, searchBlock, s.smem, s.args...)
			}
		}
		if lerr == nil {
			lerr = dr.call("cuMemcpyDtoHAsync", dr.cuMemcpyDtoHAsync, uintptr(io.out), uintptr(r.out), uintptr(io.outBytes), r.stream)
		}
		var g uintptr
		err := dr.call("cuStreamEndCapture", dr.cuStreamEndCapture, r.stream, uintptr(unsafe.Pointer(&g)))
		if lerr != nil || err != nil {
			if g != 0 {
				dr.call("cuGraphDestroy", dr.cuGraphDestroy, g)
			}
			return cmp.Or(lerr, err)
		}
		err = dr.call("cuGraphInstantiate", dr.cuGraphInstantiate, uintptr(unsafe.Pointer(&exec)), g, 0)
		dr.call("cuGraphDestroy", dr.cuGraphDestroy, g)
		if err != nil {
			return err
		}
		r.graphs[key] = exec
	}
	if err := dr.call("cuGraphLaunch", dr.cuGraphLaunch, exec, r.stream); err != nil {
		return err
	}
	return dr.call("cuStreamSynchronize", dr.cuStreamSynchronize, r.stream)
}

// record records event i when timing (on the worker).
func (r *resident) record(i int) error {
	if !r.timing {
		return nil
	}
	dr := r.d.drv
	if r.ev[i] == 0 {
		if err := dr.call("cuEventCreate", dr.cuEventCreate, uintptr(unsafe.Pointer(&r.ev[i])), 0); err != nil {
			return err
		}
	}
	return dr.call("cuEventRecord", dr.cuEventRecord, r.ev[i], 0)
}

// down copies the pass's results back: entries then distances, n of
// each, in one copy through the staging buffer when they fit it.
func (r *resident) down(n int, entries []int32, dists []float32) error {
	d := r.d
	stage, err := d.staging()
	if err != nil {
		return err
	}
	if 8*n > len(stage) {
		if err := d.dtoh(unsafe.Pointer(&entries[0]), r.out, int64(n)*4); err != nil {
			return err
		}
		return d.dtoh(unsafe.Pointer(&dists[0]), r.out+uint64(4*n), int64(n)*4)
	}
	if err := d.dtoh(unsafe.Pointer(&stage[0]), r.out, int64(n)*8); err != nil {
		return err
	}
	copy(entries[:n], unsafe.Slice((*int32)(unsafe.Pointer(&stage[0])), n))
	copy(dists[:n], unsafe.Slice((*float32)(unsafe.Pointer(&stage[4*n])), n))
	return nil
}

// step is one kernel launch of a pass.
type step struct {
	name         string
	gx, gy, smem int
	args         []uint64
}

// pinnedBuf is page-locked host memory for a batch's queries.
type pinnedBuf struct {
	buf   []float32
	inUse bool
}

// HostBuffer hands out n float32 of page-locked memory for queries
// (device.HostBuffers): a free one of the Device's large enough, or a new
// one. Searches read queries in such memory without the staging copy.
func (r *resident) HostBuffer(n int) ([]float32, func(), error) {
	d := r.d
	n = max(n, 1)
	release := func(b *pinnedBuf) func() {
		return func() {
			d.pinMu.Lock()
			b.inUse = false
			d.pinMu.Unlock()
		}
	}
	d.pinMu.Lock()
	var b *pinnedBuf
	for _, p := range d.pinned {
		if !p.inUse && len(p.buf) >= n && (b == nil || len(p.buf) < len(b.buf)) {
			b = p
		}
	}
	full := len(d.pinned) >= maxPinned
	if b != nil {
		b.inUse = true
	}
	d.pinMu.Unlock()
	if b != nil {
		return b.buf[:n:n], release(b), nil
	}
	if full {
		return make([]float32, n), func() {}, nil // plain memory: still right, copied through the stage
	}
	// Allocated on the worker, without pinMu: the worker takes it in
	// upQueries.
	var p unsafe.Pointer
	portable := d.drv.cuMemHostAlloc != 0
	err := d.run(func() error {
		if portable {
			return d.drv.call("cuMemHostAlloc", d.drv.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(4*n), hostAllocPortable)
		}
		return d.drv.call("cuMemAllocHost", d.drv.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(4*n))
	})
	if err != nil {
		return nil, nil, err
	}
	b = &pinnedBuf{buf: unsafe.Slice((*float32)(p), n), inUse: true}
	d.pinMu.Lock()
	d.pinned = append(d.pinned, b)
	d.pinMu.Unlock()
	if portable {
		portableBufs.add(b)
	}
	return b.buf[:n:n], release(b), nil
}

// hostAllocPortable is CU_MEMHOSTALLOC_PORTABLE: memory page-locked for
// every context, not only the one that allocated it.
const hostAllocPortable = 0x01

// portableBufs is every query buffer that is page-locked for all
// contexts, whichever Device lent it: a replicated search prepares a
// chunk in the first device's buffer, and the device that searches it
// copies it up directly (measured: 10M x 768, batches of 10,000, two
// H200s: the second GPU took 0.7 ms a pass of 2,500 queries to copy them
// from memory it saw as pageable, the first 0.18 ms).
var portableBufs pinnedSet

// pinnedSet is a set of page-locked buffers, safe for concurrent use.
type pinnedSet struct {
	mu   sync.Mutex
	bufs []*pinnedBuf
}

func (s *pinnedSet) add(b *pinnedBuf) {
	s.mu.Lock()
	s.bufs = append(s.bufs, b)
	s.mu.Unlock()
}

// remove drops b (before it is freed).
func (s *pinnedSet) remove(b *pinnedBuf) {
	s.mu.Lock()
	s.bufs = slices.DeleteFunc(s.bufs, func(x *pinnedBuf) bool { return x == b })
	s.mu.Unlock()
}

// holds reports whether x lies in one of the set's buffers.
func (s *pinnedSet) holds(x []float32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return within(s.bufs, x)
}

// within reports whether x (not empty) lies in one of bufs.
func within(bufs []*pinnedBuf, x []float32) bool {
	p := uintptr(unsafe.Pointer(&x[0]))
	for _, b := range bufs {
		lo := uintptr(unsafe.Pointer(&b.buf[0]))
		if p >= lo && p+4*uintptr(len(x)) <= lo+4*uintptr(len(b.buf)) {
			return true
		}
	}
	return false
}

// maxPinned bounds the page-locked query buffers a Device keeps: a
// pipelined batch holds up to five at once (one chunk being prepared, one
// waiting, one searched, one waiting, one finished), and a query that
// reads on one more; past the bound, queries go in heap memory.
const maxPinned = 8

// isPinned reports whether x lies in a buffer HostBuffer handed out: by
// this Device, or by any as portable memory.
func (d *Device) isPinned(x []float32) bool {
	if len(x) == 0 {
		return false
	}
	d.pinMu.Lock()
	mine := within(d.pinned, x)
	d.pinMu.Unlock()
	return mine || portableBufs.holds(x)
}

var _ device.HostBuffers = (*resident)(nil)

// upQueries copies the queries to the device: straight from page-locked
// memory HostBuffer gave, else through the staging buffer when they fit
// it.
func (r *resident) upQueries(queries []float32, bytes int64) error {
	d := r.d
	if d.isPinned(queries) {
		return d.htod(r.q, unsafe.Pointer(&queries[0]), bytes)
	}
	stage, err := d.staging()
	if err != nil {
		return err
	}
	if bytes <= int64(len(stage)) {
		src := unsafe.Slice((*byte)(unsafe.Pointer(&queries[0])), bytes)
		par.For(int(bytes), 1<<20, func(lo, hi int) { copy(stage[lo:hi], src[lo:hi]) })
		return d.htod(r.q, unsafe.Pointer(&stage[0]), bytes)
	}
	return d.htod(r.q, unsafe.Pointer(&queries[0]), bytes)
}
