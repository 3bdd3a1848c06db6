//go:build webgpu

package webgpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/vlc-embed/vlc/backend/webgpu/shaders"
	"github.com/vlc-embed/vlc/device"
)

// Search on the device: device.IndexData's search, in five kernels per
// batch of queries (backend/webgpu/shaders/search_*.wgsl): rotate,
// coarse, probe, score (once per part of the index) and topk. docs/WEBGPU.md describes
// them and their buffers.

var _ device.Searcher = (*Device)(nil)

// Knobs the tests turn down to force what large indexes and batches do.
var (
	// testPartTiles, when positive, caps the tiles of a part of the index
	// (as the binding limit splits large indexes).
	testPartTiles int
	// testSortLen, when positive, caps the candidates topk sorts in
	// workgroup memory (as a large keep does), so that it sorts in place
	// in its output buffer.
	testSortLen int
	// searchBudget is the most device memory a batch's buffers take
	// together; a batch that would take more is split (and a query whose
	// candidates alone would, scored in rounds).
	searchBudget int64 = 1 << 30
)

// liveSearchBytes is the device memory held by every open resident index
// of the process (tests check that Close gives it all back).
var liveSearchBytes atomic.Int64

// part is one storage binding's worth of the index's entries: tiles t0
// to t1-1, their level words (tiled layout) then their scalars.
type part struct {
	t0, t1 int
	buf    *wgpu.Buffer
	uni    *wgpu.Buffer // struct Part
	bg     *wgpu.BindGroup
}

// resident is an index held on the device (device.Resident).
type resident struct {
	dev *core

	n, dim, lists, bits, words int
	flags                      uint32 // F_IP, F_IPCODES
	rounds, rotp               int
	rotScale                   float32
	prefix                     []int // prefix[p]: the p largest lists' sizes summed (MaxCandidates)
	maxList                    int

	keys                    map[string]string // kernel -> pipeline key
	parts                   []*part
	signs, anchors, listBuf *wgpu.Buffer

	// The pq and sq8 codes (device.CodeData): the code, pq's subspaces and
	// tables (ntab a query, of kinds first..), and codeBuf: pq's centroids
	// and P mu, or sq8's ranges (lo then step, per list). lut holds a
	// batch's pq tables.
	code              device.Code
	nsub, ntab, first int
	codeBuf, lut      *wgpu.Buffer

	// The batch buffers, grown to the largest batch so far.
	params, qbuf, coarse, probes, cand, out, stage *wgpu.Buffer
	bg                                             map[string]*wgpu.BindGroup
	host                                           []byte // the read-back

	bytes         int64 // device memory held
	toDev, toHost atomic.Int64
	closed        bool
}

// UploadIndex copies the index d describes to the device: its entries
// (level words and scalars, in parts under the storage binding limit),
// the rotated anchors, the lists and the rotation's signs. They stay
// there until the Resident is closed; a Search moves only the queries up
// and the results (entries and distances) down.
func (h *Device) UploadIndex(d *device.IndexData) (device.Resident, error) {
	if h.closed.Load() {
		return nil, errors.New("webgpu: device closed")
	}
	if err := checkData(d); err != nil {
		return nil, err
	}
	c := h.core
	c.lock()
	defer c.unlock()
	r := &resident{dev: c, n: d.N, dim: d.Dim, lists: d.Lists, bits: d.Bits, words: d.Words,
		rounds: len(d.Signs), rotp: d.RotP, rotScale: d.RotScale, keys: map[string]string{}, bg: map[string]*wgpu.BindGroup{},
		code: d.Code, nsub: d.Subspaces}
	if d.Code == device.CodePQ {
		r.ntab = 1
		switch {
		case d.IP && d.IPCodes:
			r.ntab = 2
		case d.IP:
			r.first = 1
		}
	}
	// As IndexData reads: IPCodes picks the form before the metric does.
	if d.IP {
		r.flags |= shaders.FlagIP
	}
	if d.IPCodes {
		r.flags |= shaders.FlagIPCodes
	}
	sizes := make([]int, d.Lists)
	for a := range sizes {
		sizes[a] = int(d.Offsets[a+1] - d.Offsets[a])
	}
	slices.Sort(sizes)
	slices.Reverse(sizes)
	r.prefix = make([]int, d.Lists+1)
	for a, s := range sizes {
		r.prefix[a+1] = r.prefix[a] + s
	}
	r.maxList = sizes[0]
	if err := r.compile(); err != nil {
		return nil, err
	}
	if err := r.upload(d); err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

// checkData refuses a description the kernels cannot search, saying why.
func checkData(d *device.IndexData) error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("webgpu: index to upload: "+f, a...)
	}
	switch {
	case d.Dim < 1 || d.Lists < 1 || d.N < 0:
		return bad("%d entries of dimension %d in %d lists", d.N, d.Dim, d.Lists)
	case d.N > math.MaxInt32-device.Tile:
		return bad("%d entries: at most %d", d.N, math.MaxInt32-device.Tile)
	case d.Code != device.CodeRotated:
		if err := checkCodeData(d); err != nil {
			return bad("%v", err)
		}
	case d.Bits != 1 && d.Bits != 2 && d.Bits != 4 && d.Bits != 8:
		return bad("%d bits per level: the kernels take 1, 2, 4 or 8", d.Bits)
	case d.Words < 1 || d.Words*32 < d.Dim*d.Bits:
		return bad("%d words per entry hold fewer than %d levels of %d bits", d.Words, d.Dim, d.Bits)
	}
	switch {
	case len(d.Signs) > 0 && (d.RotP < 1 || d.RotP > d.Dim || d.RotP&(d.RotP-1) != 0):
		return bad("rotation length %d: want a power of two up to the dimension %d", d.RotP, d.Dim)
	case len(d.RotAnchors) != d.Lists*d.Dim || len(d.Norms) != d.Lists || len(d.Offsets) != d.Lists+1 ||
		d.Code == device.CodeRotated && (len(d.Scale) != d.Lists || len(d.SqrtScale) != d.Lists):
		return bad("%d lists of dimension %d, but %d anchor values, %d norms, %d scales, %d square roots, %d offsets",
			d.Lists, d.Dim, len(d.RotAnchors), len(d.Norms), len(d.Scale), len(d.SqrtScale), len(d.Offsets))
	case d.Offsets[0] != 0 || d.Offsets[d.Lists] != uint64(d.N):
		return bad("list offsets run from %d to %d, want 0 to %d", d.Offsets[0], d.Offsets[d.Lists], d.N)
	}
	for a := range d.Lists {
		if d.Offsets[a+1] < d.Offsets[a] {
			return bad("list %d ends (%d) before it starts (%d)", a, d.Offsets[a+1], d.Offsets[a])
		}
	}
	for r, s := range d.Signs {
		if len(s) != d.Dim {
			return bad("rotation round %d has %d signs, want %d", r, len(s), d.Dim)
		}
	}
	return nil
}

// compile makes (or finds) the pipelines of this index's shapes: rotate
// for its dimension, score for its bits and words, topk for the sort
// this adapter's workgroup memory holds.
func (r *resident) compile() error {
	d := r.dev
	wg := int(d.dev.GetLimits().Limits.MaxComputeWorkgroupStorageSize)
	per := 32 / r.bits
	c := shaders.SearchConsts{
		DimLen: roundUp(r.dim, 64),
		Bits:   r.bits,
		QLen:   roundUp(r.words*per, shaders.ScoreWG),
	}
	for sl := 2; sl <= device.MaxKeep; sl *= 2 {
		if (shaders.SearchConsts{SortLen: sl}).WorkgroupBytes("topk") > wg || (testSortLen > 0 && sl > testSortLen) {
			break
		}
		c.SortLen = sl
	}
	if c.SortLen == 0 {
		return fmt.Errorf("webgpu: %s allows %d bytes of workgroup memory; the search's selection needs %d", d.info.Name, wg, c.WorkgroupBytes("probe")+16)
	}
	keys := map[string]string{
		"rotate": fmt.Sprintf("search_rotate_d%d", c.DimLen),
		"coarse": "search_coarse",
		"probe":  "search_probe",
		"score":  fmt.Sprintf("search_score_b%d_q%d", c.Bits, c.QLen),
		"topk":   fmt.Sprintf("search_topk_s%d", c.SortLen),
	}
	kernels := shaders.SearchKernels
	switch r.code {
	case device.CodePQ:
		kernels = []string{"rotate", "coarse", "probe", "lut", "score_pq", "topk"}
		keys["lut"], keys["score_pq"] = "search_lut", "search_score_pq"
	case device.CodeSQ8:
		kernels = []string{"rotate", "coarse", "probe", "score_sq8", "topk"}
		keys["score_sq8"] = fmt.Sprintf("search_score_sq8_q%d", c.QLen)
	}
	for _, name := range kernels {
		if need := c.WorkgroupBytes(name); need > wg {
			return fmt.Errorf("webgpu: searching dimension %d (%d words of %d-bit levels): kernel %s needs %d bytes of workgroup memory, %s allows %d",
				r.dim, r.words, r.bits, name, need, d.info.Name, wg)
		}
		key := keys[name]
		r.keys[name] = key
		if strings.HasPrefix(name, "score_") {
			r.keys["score"] = key // the code's score runs as the score stage
		}
		if d.pipes[key] != nil {
			continue
		}
		src, err := shaders.SearchSource(name, c)
		if err != nil {
			return err
		}
		if err := d.compileSource(key, "search_"+name, src); err != nil {
			return err
		}
	}
	return nil
}

// bindingLimit is the most bytes one storage binding of this device
// takes; kept under 2 GiB so that every u32 index of the kernels fits.
func (d *core) bindingLimit() int64 {
	return int64(min(d.info.MaxBinding, d.info.MaxBuffer, 1<<31-256))
}

func (r *resident) alloc(label string, size int64, usage wgpu.BufferUsage) (*wgpu.Buffer, error) {
	size = max(16, (size+15)/16*16)
	b, err := r.dev.buffer(label, uint64(size), usage)
	if err != nil {
		return nil, err
	}
	r.bytes += size
	liveSearchBytes.Add(size)
	return b, nil
}

func (r *resident) free(b **wgpu.Buffer) {
	if *b == nil {
		return
	}
	size := int64((*b).GetSize())
	(*b).Release()
	*b = nil
	r.bytes -= size
	liveSearchBytes.Add(-size)
}

// write queues data for buffer b at off and counts it.
func (r *resident) write(b *wgpu.Buffer, off uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if err := r.dev.queue.WriteBuffer(b, off, data); err != nil {
		return fmt.Errorf("webgpu: writing %d bytes: %w", len(data), err)
	}
	r.toDev.Add(int64(len(data)))
	return nil
}

func f32bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
}

func u32bytes(v []uint32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
}

// upload allocates the resident buffers and fills them: the anchors,
// lists and signs, then the entries part by part, in pieces of at most
// 16 MiB filled on the host by d.Fill, letting the queue drain every
// 256 MiB so that wgpu's staging memory stays bounded.
func (r *resident) upload(d *device.IndexData) error {
	lim := r.dev.bindingLimit()
	name := r.dev.info.Name
	if int64(r.lists)*int64(r.dim)*4 > lim {
		return fmt.Errorf("webgpu: the %d anchors of dimension %d (%.1f MiB) exceed one storage binding of %s (%.1f MiB)",
			r.lists, r.dim, float64(r.lists*r.dim*4)/(1<<20), name, float64(lim)/(1<<20))
	}
	var err error
	if r.anchors, err = r.alloc("search anchors", int64(r.lists*r.dim*4), storage); err != nil {
		return err
	}
	if err := r.write(r.anchors, 0, f32bytes(d.RotAnchors)); err != nil {
		return err
	}
	lists := make([]uint32, 4*(r.lists+1), 4*(2*r.lists+1))
	for a := range r.lists {
		lists[4*a] = math.Float32bits(d.Norms[a])
		if d.Code == device.CodeRotated {
			lists[4*a+1] = math.Float32bits(d.Scale[a])
			lists[4*a+2] = math.Float32bits(d.SqrtScale[a])
		}
		lists[4*a+3] = uint32(d.Offsets[a])
	}
	lists[4*r.lists+3] = uint32(d.Offsets[r.lists])
	if d.Code == device.CodePQ { // the grids after the lists: lists[lists+1+a]
		for _, g := range d.Grids {
			lists = append(lists, math.Float32bits(g))
		}
	}
	if err := r.uploadCode(d); err != nil {
		return err
	}
	if r.listBuf, err = r.alloc("search lists", int64(len(lists)*4), storage); err != nil {
		return err
	}
	if err := r.write(r.listBuf, 0, u32bytes(lists)); err != nil {
		return err
	}
	signs := make([]float32, 0, r.rounds*r.dim)
	for _, s := range d.Signs {
		signs = append(signs, s...)
	}
	if r.signs, err = r.alloc("search signs", int64(len(signs)*4), storage); err != nil {
		return err
	}
	if err := r.write(r.signs, 0, f32bytes(signs)); err != nil {
		return err
	}

	tileWords := r.words*device.Tile + device.Tile // words and scalars of a tile
	perPart := int(lim / int64(tileWords*4))
	if testPartTiles > 0 {
		perPart = min(perPart, testPartTiles)
	}
	if perPart < 1 {
		return fmt.Errorf("webgpu: one tile of %d entries (%d bytes) exceeds a storage binding of %s", device.Tile, tileWords*4, name)
	}
	tiles := d.Tiles()
	const piece, drain = 16 << 20, 256 << 20
	pieceTiles := max(1, piece/(tileWords*4))
	words := make([]uint32, pieceTiles*r.words*device.Tile)
	scalars := make([]uint32, pieceTiles*device.Tile)
	pending := 0
	for t0 := 0; t0 < tiles; t0 += perPart {
		p := &part{t0: t0, t1: min(tiles, t0+perPart)}
		r.parts = append(r.parts, p)
		nt := p.t1 - p.t0
		scOff := nt * r.words * device.Tile
		if p.buf, err = r.alloc("search entries", int64(nt*tileWords*4), storage); err != nil {
			return err
		}
		if p.uni, err = r.alloc("search part", shaders.PartSize, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst); err != nil {
			return err
		}
		var u [shaders.PartSize]byte
		binary.LittleEndian.PutUint32(u[0:], uint32(p.t0*device.Tile))
		binary.LittleEndian.PutUint32(u[4:], uint32(min(r.n, p.t1*device.Tile)))
		binary.LittleEndian.PutUint32(u[8:], uint32(scOff))
		if err := r.write(p.uni, 0, u[:]); err != nil {
			return err
		}
		for t := p.t0; t < p.t1; t += pieceTiles {
			k := min(pieceTiles, p.t1-t)
			w, s := words[:k*r.words*device.Tile], scalars[:k*device.Tile]
			if err := d.Fill(t, t+k, w, s); err != nil {
				return err
			}
			if err := r.write(p.buf, uint64((t-p.t0)*r.words*device.Tile*4), u32bytes(w)); err != nil {
				return err
			}
			if err := r.write(p.buf, uint64((scOff+(t-p.t0)*device.Tile)*4), u32bytes(s)); err != nil {
				return err
			}
			if pending += 4 * (len(w) + len(s)); pending >= drain {
				if err := r.dev.idle(); err != nil {
					return err
				}
				pending = 0
			}
		}
	}
	return r.dev.idle()
}

// Bytes is the device memory the index holds: the resident buffers and
// the batch buffers of the largest batch so far.
func (r *resident) Bytes() int64 {
	r.dev.lock()
	defer r.dev.unlock()
	return r.bytes
}

// Transfer is the bytes moved to the device and to the host so far.
func (r *resident) Transfer() (toDevice, toHost int64) { return r.toDev.Load(), r.toHost.Load() }

// Close frees the device memory; the Resident refuses to search after it.
func (r *resident) Close() error {
	r.dev.lock()
	defer r.dev.unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.release()
	return nil
}

func (r *resident) release() {
	r.releaseBatch()
	for _, p := range r.parts {
		if p.bg != nil {
			p.bg.Release()
			p.bg = nil
		}
		r.free(&p.buf)
		r.free(&p.uni)
	}
	r.parts = nil
	r.free(&r.signs)
	r.free(&r.anchors)
	r.free(&r.listBuf)
	r.free(&r.codeBuf)
}

func (r *resident) releaseBinds() {
	for k, g := range r.bg {
		g.Release()
		delete(r.bg, k)
	}
	for _, p := range r.parts {
		if p.bg != nil {
			p.bg.Release()
			p.bg = nil
		}
	}
}

func (r *resident) releaseBatch() {
	r.releaseBinds()
	for _, b := range []**wgpu.Buffer{&r.params, &r.qbuf, &r.coarse, &r.probes, &r.cand, &r.out, &r.stage, &r.lut} {
		r.free(b)
	}
	r.host = nil
}

// plan is how a Search call splits: batches of nb queries, each query's
// candidates scored in rounds of win offsets (one round unless a single
// query's candidates exceed the budget or a binding).
type plan struct {
	nb, win, rounds, slices int
	nprobe, keep            int
}

// sizes are the batch buffers' sizes in bytes for p.
func (r *resident) sizes(p plan) (qbuf, coarse, probes, cand, out int64) {
	nb := int64(p.nb)
	return nb * int64(r.dim+1) * 4, nb * int64(r.lists) * 8, nb * int64(2*p.nprobe+1) * 4,
		nb * int64(p.keep+p.win) * 8, nb * int64(p.keep) * 8
}

// planSearch splits nq queries so that every batch buffer fits one
// storage binding and together they fit searchBudget.
func (r *resident) planSearch(nq, nprobe, keep int) (plan, error) {
	lim := r.dev.bindingLimit()
	budget := searchBudget
	maxCand := r.prefix[nprobe]
	p := plan{nprobe: nprobe, keep: keep, win: maxCand, rounds: 1}
	p.slices = min(64, max(1, (r.maxList+4*shaders.ScoreWG-1)/(4*shaders.ScoreWG)))
	// Bytes per query of every batch buffer but the candidates (the
	// read-back's staging copy of out included).
	lut := r.lutBytes()
	fixed := int64(r.dim+1)*4 + int64(r.lists)*8 + int64(2*nprobe+1)*4 + 2*int64(keep)*8 + lut
	for _, b := range []int64{int64(r.dim+1) * 4, int64(r.lists) * 8, int64(2*nprobe+1) * 4, int64(keep) * 8, lut} {
		if b > lim {
			return p, fmt.Errorf("webgpu: one query's buffers (%d bytes) exceed a storage binding of %s (%d bytes): dimension %d, %d lists, nprobe %d, keep %d",
				b, r.dev.info.Name, lim, r.dim, r.lists, nprobe, keep)
		}
	}
	cand := int64(keep+maxCand) * 8
	if cand <= lim && fixed+cand <= budget {
		// The score grid (nb x nprobe x slices workgroups) folds into
		// x and y, each at most MaxGroupsX.
		grid := int64(shaders.MaxGroupsX) * shaders.MaxGroupsX / int64(nprobe*p.slices)
		nb := min(int64(nq), budget/(fixed+cand), lim/cand, lim/(int64(r.dim+1)*4), lim/(int64(r.lists)*8),
			lim/(int64(2*nprobe+1)*4), lim/(int64(keep)*8), lim/max(lut, 1), grid)
		p.nb = int(max(1, nb))
		return p, nil
	}
	// One query at a time, its candidates in rounds of win offsets; a
	// round's best keep wait in the region's first slots for the next.
	p.nb = 1
	p.win = int(min(lim, max(0, budget-fixed))/8) - keep
	p.win = max(p.win, keep, 256) // at least keep (topk's front slots are a round's best), and not absurdly small
	p.rounds = max(1, (maxCand+p.win-1)/p.win)
	return p, nil
}

// ensure grows the batch buffers to hold plan p, and makes the bind
// groups again when any buffer changed.
func (r *resident) ensure(p plan) error {
	qb, co, pr, ca, ou := r.sizes(p)
	changed := false
	for _, b := range []struct {
		p     **wgpu.Buffer
		label string
		size  int64
		usage wgpu.BufferUsage
	}{
		{&r.params, "search params", shaders.SearchParamsSize, wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst},
		{&r.qbuf, "search queries", qb, storage},
		{&r.coarse, "search coarse", co, storage},
		{&r.probes, "search probes", pr, storage},
		{&r.cand, "search candidates", ca, storage},
		{&r.out, "search results", ou, storage},
		{&r.stage, "search read-back", ou, wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst},
		{&r.lut, "search pq tables", int64(p.nb) * r.lutBytes(), storage},
	} {
		if *b.p != nil && int64((*b.p).GetSize()) >= b.size {
			continue
		}
		r.free(b.p)
		var err error
		if *b.p, err = r.alloc(b.label, b.size, b.usage); err != nil {
			return err
		}
		changed = true
	}
	if !changed && len(r.bg) > 0 {
		return nil
	}
	r.releaseBinds()
	d := r.dev
	var err error
	type bufs = map[uint32]*wgpu.Buffer
	for _, g := range []struct {
		name string
		bufs bufs
	}{
		{"rotate", bufs{0: r.params, 1: r.qbuf, 2: r.signs}},
		{"coarse", bufs{0: r.params, 1: r.qbuf, 2: r.anchors, 3: r.listBuf, 4: r.coarse}},
		{"probe", bufs{0: r.params, 1: r.coarse, 2: r.listBuf, 3: r.probes}},
		{"topk", bufs{0: r.params, 1: r.probes, 2: r.cand, 3: r.out}},
	} {
		if r.bg[g.name], err = d.bind(r.keys[g.name], g.bufs); err != nil {
			return err
		}
	}
	if r.code == device.CodePQ {
		if r.bg["lut"], err = d.bind(r.keys["lut"], bufs{0: r.params, 1: r.qbuf, 2: r.codeBuf, 3: r.lut}); err != nil {
			return err
		}
	}
	for _, pt := range r.parts {
		b := bufs{0: r.params, 1: pt.uni, 2: pt.buf, 3: r.qbuf, 4: r.coarse, 5: r.probes, 6: r.listBuf, 7: r.anchors, 8: r.cand}
		switch r.code {
		case device.CodePQ:
			b[9] = r.lut
		case device.CodeSQ8:
			b[9] = r.codeBuf
		}
		if pt.bg, err = d.bind(r.keys["score"], b); err != nil {
			return err
		}
	}
	return nil
}

// Search finds each query's keep best entries in its nprobe nearest lists
// (device.Resident): batches of queries (see planSearch), one submission
// per batch (per round of candidates where a query has more than a round
// holds), each bringing back its entries and distances only.
func (r *resident) Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	if err := r.checkSearch(queries, nq, nprobe, keep, entries, dists); err != nil {
		return err
	}
	if nq == 0 {
		return nil
	}
	nprobe = min(nprobe, r.lists)
	r.dev.lock()
	closed := r.closed
	r.dev.unlock()
	if closed {
		return errors.New("webgpu: search: resident index closed")
	}
	p, err := r.planSearch(nq, nprobe, keep)
	if err != nil {
		return err
	}
	for b0 := 0; b0 < nq; b0 += p.nb {
		if err := ctx.Err(); err != nil {
			return err
		}
		nb := min(p.nb, nq-b0)
		if err := r.batch(p, queries[b0*r.dim:(b0+nb)*r.dim], nb, entries[b0*keep:(b0+nb)*keep], dists[b0*keep:(b0+nb)*keep]); err != nil {
			return err
		}
	}
	return nil
}

// searchParams writes struct SP (search_common.wgsl).
func (r *resident) searchParams(p plan, nb, round int) []byte {
	b := make([]byte, shaders.SearchParamsSize)
	flags := r.flags
	if round > 0 {
		flags |= shaders.FlagFront
	}
	if round < p.rounds-1 {
		flags |= shaders.FlagMore
	}
	levels := float32(int(1)<<r.bits - 1)
	for i, v := range []uint32{
		uint32(nb), uint32(r.dim), uint32(r.lists), uint32(p.nprobe),
		uint32(p.keep), uint32(p.win), uint32(round * p.win), uint32(p.keep + p.win),
		uint32(r.words), flags, uint32(p.slices), uint32(r.rounds),
		uint32(r.rotp), math.Float32bits(r.rotScale), math.Float32bits(levels),
		uint32(nb * r.dim), uint32(nb * r.lists), uint32(nb * p.nprobe), uint32(nb * p.keep),
		uint32(r.nsub | r.ntab<<16 | r.first<<24),
	} {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// searchStages are the kernels of a round, in order (the first three in
// round 0 only).
var searchStages = []string{"rotate", "coarse", "probe", "score", "topk"}

// stages are searchStages for the index's code: pq's tables after the
// probe.
func (r *resident) stages() []string {
	if r.code == device.CodePQ {
		return []string{"rotate", "coarse", "probe", "lut", "score", "topk"}
	}
	return searchStages
}

// record adds kernel stage of round to pass, for a batch of nb queries.
func (r *resident) record(pass *wgpu.ComputePassEncoder, p plan, nb, round int, stage string) {
	d := r.dev
	pipe := d.pipes[r.keys[stage]]
	switch stage {
	case "rotate", "probe", "topk":
		if round == 0 || stage == "topk" {
			dispatch(pass, pipe, r.bg[stage], nb)
		}
	case "lut":
		if round == 0 {
			dispatch(pass, pipe, r.bg[stage], nb*r.ntab)
		}
	case "coarse":
		if round == 0 {
			dispatch(pass, pipe, r.bg[stage], ((nb+shaders.CoarseQ-1)/shaders.CoarseQ)*((r.lists+shaders.CoarseA-1)/shaders.CoarseA))
		}
	case "score":
		for _, pt := range r.parts {
			dispatch(pass, pipe, pt.bg, nb*p.nprobe*p.slices)
		}
	}
}

// encode records the stages of round in one compute pass and, when last,
// the copy of the results to the read-back buffer, and submits them.
func (r *resident) encode(p plan, nb, round int, stages []string, last bool) error {
	d := r.dev
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return err
	}
	if len(stages) > 0 {
		pass := enc.BeginComputePass(nil)
		for _, st := range stages {
			r.record(pass, p, nb, round, st)
		}
		err = pass.End()
		pass.Release() // before Finish: this binding requires it
		if err != nil {
			enc.Release()
			return err
		}
	}
	if last {
		if err := enc.CopyBufferToBuffer(r.out, 0, r.stage, 0, uint64(nb*p.keep*8)); err != nil {
			enc.Release()
			return err
		}
	}
	return d.submit(enc)
}

// prepare makes the batch buffers ready and queues the queries.
func (r *resident) prepare(p plan, queries []float32) error {
	if r.closed {
		return errors.New("webgpu: search: resident index closed")
	}
	if err := r.ensure(p); err != nil {
		return err
	}
	return r.write(r.qbuf, 0, f32bytes(queries))
}

// readResults maps the read-back buffer and splits it into entries and
// distances.
func (r *resident) readResults(n int, entries []int32, dists []float32) error {
	if cap(r.host) < 8*n {
		r.host = make([]byte, 8*n)
	}
	host := r.host[:8*n]
	if err := r.dev.mapCopy(host, r.stage); err != nil {
		return fmt.Errorf("webgpu: search: %w", err)
	}
	r.toHost.Add(int64(len(host)))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&entries[0])), 4*n), host[:4*n])
	copy(f32bytes(dists[:n]), host[4*n:])
	return nil
}

// batch searches nb queries: one submission per round; the last copies
// the results to the read-back buffer, which is mapped and read.
func (r *resident) batch(p plan, queries []float32, nb int, entries []int32, dists []float32) error {
	d := r.dev
	d.lock()
	defer d.unlock()
	if err := r.prepare(p, queries); err != nil {
		return err
	}
	for round := range p.rounds {
		if err := r.write(r.params, 0, r.searchParams(p, nb, round)); err != nil {
			return err
		}
		if err := r.encode(p, nb, round, r.stages(), round == p.rounds-1); err != nil {
			return err
		}
	}
	return r.readResults(nb*p.keep, entries, dists)
}

// checkSearch checks Search's arguments.
func (r *resident) checkSearch(queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	switch {
	case nq < 0 || len(queries) < nq*r.dim:
		return fmt.Errorf("webgpu: search: %d query values for %d queries of dimension %d", len(queries), nq, r.dim)
	case keep < 1 || keep > device.MaxKeep:
		return fmt.Errorf("webgpu: search: keep %d: want 1 to %d", keep, device.MaxKeep)
	case nprobe < 1:
		return fmt.Errorf("webgpu: search: nprobe %d: want at least 1", nprobe)
	case len(entries) < nq*keep || len(dists) < nq*keep:
		return fmt.Errorf("webgpu: search: room for %d entries and %d distances, want %d (%d queries, keep %d)", len(entries), len(dists), nq*keep, nq, keep)
	}
	return nil
}

var _ SearchProfiler = (*resident)(nil)

// ProfileSearch times the first batch of a search (see SearchProfiler).
func (r *resident) ProfileSearch(queries []float32, nq, nprobe, keep, reps int) (SearchTimes, error) {
	var st SearchTimes
	if nq < 1 || reps < 1 {
		return st, fmt.Errorf("webgpu: profile: %d queries, %d repetitions: want at least 1 of each", nq, reps)
	}
	ent, dist := make([]int32, nq*keep), make([]float32, nq*keep)
	if err := r.checkSearch(queries, nq, nprobe, keep, ent, dist); err != nil {
		return st, err
	}
	p, err := r.planSearch(nq, min(nprobe, r.lists), keep)
	if err != nil {
		return st, err
	}
	nb := min(p.nb, nq)
	st.Batch, st.Rounds = nb, p.rounds
	queries = queries[:nb*r.dim]
	names := append([]string{"upload"}, append(r.stages(), "read")...)
	ms := make([][]float64, len(names))
	var whole []float64
	since := func(t0 time.Time) float64 { return float64(time.Since(t0).Nanoseconds()) / 1e6 }
	for range reps {
		t0 := time.Now()
		if err := r.batch(p, queries, nb, ent, dist); err != nil {
			return st, err
		}
		whole = append(whole, since(t0))
		if err := r.profileStages(p, queries, nb, ent, dist, func(i int, t float64) { ms[i] = append(ms[i], t) }, since); err != nil {
			return st, err
		}
	}
	st.Batched = median(whole)
	for i, n := range names {
		st.Stages = append(st.Stages, StageTime{Name: n, Ms: median(ms[i])})
	}
	return st, nil
}

// profileStages runs one batch with every stage in a submission of its
// own, waiting for each; add(i, ms) gets stage i's time (summed over
// rounds), in the order upload, the kernels, read.
func (r *resident) profileStages(p plan, queries []float32, nb int, ent []int32, dist []float32, add func(int, float64), since func(time.Time) float64) error {
	d := r.dev
	d.lock()
	defer d.unlock()
	t0 := time.Now()
	if err := r.prepare(p, queries); err != nil {
		return err
	}
	if err := d.idle(); err != nil {
		return err
	}
	add(0, since(t0))
	sums := make([]float64, len(r.stages())+1)
	for round := range p.rounds {
		if err := r.write(r.params, 0, r.searchParams(p, nb, round)); err != nil {
			return err
		}
		for i, stage := range r.stages() {
			t0 := time.Now()
			if err := r.encode(p, nb, round, []string{stage}, false); err != nil {
				return err
			}
			if err := d.idle(); err != nil {
				return err
			}
			sums[i] += since(t0)
		}
	}
	t0 = time.Now()
	if err := r.encode(p, nb, p.rounds-1, nil, true); err != nil {
		return err
	}
	if err := r.readResults(nb*p.keep, ent, dist); err != nil {
		return err
	}
	sums[len(r.stages())] = since(t0)
	for i, s := range sums {
		add(i+1, s)
	}
	return nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
