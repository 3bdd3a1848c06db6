package index

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/quant"
)

// Search on a device (a GPU): the backend holds an index's lists in its
// own memory and answers batches of queries there (device.Searcher). The
// index describes its lists (device.IndexData) and prepares the queries
// (checked, normalised, scaled as Search does), and turns what comes back
// (entries and estimated distances) into hits: row ids, re-ranking and the
// metric's distances, exactly as Search's last step. The backends
// (backend/cuda, backend/webgpu) only compute.

// fill writes tiles t0 to t1-1 of d (device.IndexData.Fill) from the
// mapped file, on all cores; an error names a fault in the mapping.
func (ix *Index) fill(d *device.IndexData, t0, t1 int, words, scalars []uint32) (err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	w, cb := d.Words, ix.code.CodeBytes()
	packed := cb - 4
	tw := w * device.Tile
	par.For(t1-t0, 64, func(lo, hi int) {
		code := make([]byte, cb)
		word := make([]byte, 4*w)
		for t := t0 + lo; t < t0+hi; t++ {
			tile := words[(t-t0)*tw : (t-t0+1)*tw]
			sc := scalars[(t-t0)*device.Tile : (t-t0+1)*device.Tile]
			for v := range device.Tile {
				e := t*device.Tile + v
				if e >= d.N {
					for k := range w {
						tile[k*device.Tile+v] = 0
					}
					sc[v] = 0
					continue
				}
				ix.entryCode(e, code)
				clear(word)
				copy(word, code[:packed])
				for k := range w {
					tile[k*device.Tile+v] = uint32(word[4*k]) | uint32(word[4*k+1])<<8 | uint32(word[4*k+2])<<16 | uint32(word[4*k+3])<<24
				}
				sc[v] = uint32(code[packed]) | uint32(code[packed+1])<<8 | uint32(code[packed+2])<<16 | uint32(code[packed+3])<<24
			}
		}
	})
	return nil
}

// lockedDeviceData is deviceData with the index held open and a fault in
// its mapping (PARM) returned as an error naming the file.
func (ix *Index) lockedDeviceData() (d *device.IndexData, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil, ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	return ix.deviceData()
}

// deviceData describes ix for a device, or says why it cannot.
func (ix *Index) deviceData() (*device.IndexData, error) {
	switch c := ix.code.(type) {
	case *quant.PQ:
		return ix.pqDeviceData(c), nil
	case *quant.SQ8:
		return ix.sq8DeviceData(), nil
	}
	rc, ok := ix.code.(*quant.Rotated)
	if !ok {
		return nil, fmt.Errorf("%w: %s: the %s code is searched on the CPU only (a device searches the rotated, pq and sq8 codes)", device.ErrNoSearch, ix.path, ix.meta.CodeSpec())
	}
	lay := rc.Layout()
	d := &device.IndexData{
		N: ix.n, Dim: ix.d, Lists: ix.m, IP: ix.meta.Metric == IP, IPCodes: ix.ipCodes,
		Bits: lay.Bits, Words: (lay.Packed + 3) / 4,
		Signs: lay.Signs, RotP: lay.P, RotScale: lay.Scale, RotAnchors: lay.RotAnchors,
		Norms: ix.norms, Offsets: ix.lists,
		Scale: make([]float32, ix.m), SqrtScale: make([]float32, ix.m),
	}
	d.Fill = func(t0, t1 int, words, scalars []uint32) error { return ix.fill(d, t0, t1, words, scalars) }
	pb := ix.code.ParamBytes()
	for a := range ix.m {
		s := math.Float32frombits(uint32(ix.params[a*pb]) | uint32(ix.params[a*pb+1])<<8 | uint32(ix.params[a*pb+2])<<16 | uint32(ix.params[a*pb+3])<<24)
		d.Scale[a] = s
		d.SqrtScale[a] = float32(math.Sqrt(float64(s)))
	}
	return d, nil
}

// pqDeviceData is deviceData for the pq code (device.CodeData).
func (ix *Index) pqDeviceData(c *quant.PQ) *device.IndexData {
	rot, codebooks, rotMean := c.Layout()
	d := &device.IndexData{
		N: ix.n, Dim: ix.d, Lists: ix.m, IP: ix.meta.Metric == IP, IPCodes: ix.ipCodes,
		Bits: 8, Words: (c.Spec().Subspaces + 3) / 4,
		Signs: rot.Signs, RotP: rot.P, RotScale: rot.Scale, RotAnchors: rot.RotAnchors,
		Norms: ix.norms, Offsets: ix.lists,
		Code: device.CodePQ,
		CodeData: device.CodeData{
			Subspaces: c.Spec().Subspaces, Codebooks: codebooks, RotMean: rotMean,
			Grids: ix.paramFloats(4),
		},
	}
	d.Fill = func(t0, t1 int, words, scalars []uint32) error { return ix.fillCodes(d, t0, t1, words, scalars) }
	return d
}

// sq8DeviceData is deviceData for the sq8 code (device.CodeData): no
// rotation, the anchors as they are.
func (ix *Index) sq8DeviceData() *device.IndexData {
	prm := ix.paramFloats(2 * ix.d) // per list: lo then step, Dim each
	d := &device.IndexData{
		N: ix.n, Dim: ix.d, Lists: ix.m, IP: ix.meta.Metric == IP, IPCodes: ix.ipCodes,
		Bits: 8, Words: (ix.d + 3) / 4,
		Signs: nil, RotP: ix.d, RotScale: 1, RotAnchors: ix.anchors,
		Norms: ix.norms, Offsets: ix.lists,
		Code: device.CodeSQ8,
		CodeData: device.CodeData{
			Lo: make([]float32, ix.m*ix.d), Step: make([]float32, ix.m*ix.d),
		},
	}
	for a := range ix.m {
		copy(d.Lo[a*ix.d:(a+1)*ix.d], prm[2*a*ix.d:])
		copy(d.Step[a*ix.d:(a+1)*ix.d], prm[(2*a+1)*ix.d:])
	}
	d.Fill = func(t0, t1 int, words, scalars []uint32) error { return ix.fillCodes(d, t0, t1, words, scalars) }
	return d
}

// paramFloats is the lists' parameters as float32s, per list of the
// little-endian float32s each.
func (ix *Index) paramFloats(per int) []float32 {
	out := make([]float32, ix.m*per)
	for i := range out {
		out[i] = math.Float32frombits(uint32(ix.params[4*i]) | uint32(ix.params[4*i+1])<<8 | uint32(ix.params[4*i+2])<<16 | uint32(ix.params[4*i+3])<<24)
	}
	return out
}

// fillCodes is fill for the pq and sq8 codes: an entry's d.CodeBytes()
// bytes of levels become its words, the bytes after them (pq's C and B)
// its scalar word, little endian.
func (ix *Index) fillCodes(d *device.IndexData, t0, t1 int, words, scalars []uint32) (err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	w, cb, packed := d.Words, ix.code.CodeBytes(), d.CodeBytes()
	tw := w * device.Tile
	par.For(t1-t0, 64, func(lo, hi int) {
		code := make([]byte, cb)
		level := make([]byte, 4*w)
		for t := t0 + lo; t < t0+hi; t++ {
			tile := words[(t-t0)*tw : (t-t0+1)*tw]
			sc := scalars[(t-t0)*device.Tile : (t-t0+1)*device.Tile]
			for v := range device.Tile {
				e := t*device.Tile + v
				clear(code)
				if e < d.N {
					ix.entryCode(e, code)
				}
				clear(level)
				copy(level, code[:packed])
				for k := range w {
					b := level[4*k : 4*k+4]
					tile[k*device.Tile+v] = uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
				}
				var s uint32
				for i, b := range code[packed:cb] {
					s |= uint32(b) << (8 * i)
				}
				sc[v] = s
			}
		}
	})
	return nil
}

// DeviceIndex is an index whose lists are resident on a device: its
// searches run there, and only the hits come back. A search with a Filter
// runs there too, over the entries the filter allows (see SearchBatch).
// Safe for concurrent use; searches on the device run one at a time.
// Close it before the device, and before the Index it came from.
type DeviceIndex struct {
	ix     *Index
	res    device.Resident
	mu     sync.RWMutex // one device search at a time, or (read-locked) one a lane
	closed bool
	// masks are the last masks built from KeyedFilters, under maskMu.
	maskMu sync.Mutex
	masks  []keyedMask
	// alone is the index as the one part of its searches.
	alone partsOnDevice
}

// OnDevice uploads the index to dev, a backend that searches in its own
// memory. The error wraps device.ErrNoSearch when the index's code is not
// one a device searches (rotated, pq, sq8), or the index is beyond the
// device's limits.
func (ix *Index) OnDevice(dev device.Searcher) (*DeviceIndex, error) {
	d, err := ix.lockedDeviceData()
	if err != nil {
		return nil, err
	}
	res, err := dev.UploadIndex(d)
	if err != nil {
		return nil, err
	}
	di := &DeviceIndex{ix: ix, res: res}
	di.alone = partsOnDevice{parts: []*Index{ix}, bases: []int{0, ix.n}, devs: []*DeviceIndex{di}}
	return di, nil
}

// Index is the index the lists came from.
func (di *DeviceIndex) Index() *Index { return di.ix }

// Len, Dim, EffectiveNProbe, BytesPerVector and SizeRatio are the index's.
func (di *DeviceIndex) Len() int                       { return di.ix.Len() }
func (di *DeviceIndex) Dim() int                       { return di.ix.Dim() }
func (di *DeviceIndex) EffectiveNProbe(nprobe int) int { return di.ix.EffectiveNProbe(nprobe) }
func (di *DeviceIndex) BytesPerVector() float64        { return di.ix.BytesPerVector() }
func (di *DeviceIndex) SizeRatio() float64             { return di.ix.SizeRatio() }
func (di *DeviceIndex) String() string                 { return fmt.Sprintf("%s on a device", di.ix.path) }

// DeviceBytes is the device memory the index holds (see device.Resident.Bytes).
func (di *DeviceIndex) DeviceBytes() int64 {
	di.mu.Lock()
	defer di.mu.Unlock()
	if di.closed {
		return 0
	}
	return di.res.Bytes()
}

// Masked reports whether the device leaves masked entries out of its
// search itself (device.MaskedResident); else a filtered search asks it
// for more candidates and drops the masked ones on the host.
func (di *DeviceIndex) Masked() bool {
	_, ok := di.res.(device.MaskedResident)
	return ok
}

// Close frees the device's copy; the Index stays open.
func (di *DeviceIndex) Close() error {
	di.mu.Lock()
	defer di.mu.Unlock()
	if di.closed {
		return nil
	}
	di.closed = true
	return di.res.Close()
}

// Search is SearchBatch for one query.
func (di *DeviceIndex) Search(q []float32, opt SearchOptions) ([]Hit, error) {
	hits, err := di.SearchBatch(context.Background(), oneRow(q), opt)
	if err != nil {
		return nil, err
	}
	return hits[0], nil
}

// oneRow is a single query as Rows.
type oneRow []float32

func (r oneRow) Len() int                           { return 1 }
func (r oneRow) Dim() int                           { return len(r) }
func (r oneRow) Row(i int, dst []float32) []float32 { return r }

// SearchBatch searches for every row of queries on the device and returns
// each one's hits: Index.SearchBatch's, up to float rounding and ties (see
// device.IndexData). A Filter becomes a mask over the index's entries
// (asked of every row once per batch) and the device searches only the
// entries it allows, reading more lists where the CPU would (see
// partsOnDevice). K (times RerankFactor when re-ranking) is at most
// device.MaxKeep.
func (di *DeviceIndex) SearchBatch(ctx context.Context, queries Rows, opt SearchOptions) ([][]Hit, error) {
	return di.alone.searchBatch(ctx, queries, opt)
}

// searchOn runs nq prepared queries (qs) on the device over nprobe lists,
// keeping keep entries each, only those allow allows (every entry when
// allow is nil): entries and dists as device.Resident.Search fills them.
// A device without masks (not a device.MaskedResident) is asked for more
// candidates, widening while too few survive the mask, up to
// device.MaxKeep: the queries still short then (the mask drops more than
// MaxKeep-keep of their nearest entries, which no unmasked search of the
// device can return) come back in short, for the CPU to search.
func (di *DeviceIndex) searchOn(ctx context.Context, qs []float32, nq, nprobe, keep int, allow []uint64) (entries []int32, dists []float32, short []int, err error) {
	di.mu.Lock()
	defer di.mu.Unlock()
	if di.closed {
		return nil, nil, nil, ErrClosed
	}
	entries, dists = make([]int32, nq*keep), make([]float32, nq*keep)
	if allow == nil {
		return entries, dists, nil, di.res.Search(ctx, qs, nq, nprobe, keep, entries, dists)
	}
	if mr, ok := di.res.(device.MaskedResident); ok {
		return entries, dists, nil, mr.SearchMasked(ctx, qs, nq, nprobe, keep, allow, entries, dists)
	}
	short, err = di.searchDropping(ctx, qs, nq, nprobe, keep, allow, entries, dists)
	return entries, dists, short, err
}

// lanes is how many calls the device copy takes at once, with masks
// when masked (device.LanedResident; 1 for any other).
func (di *DeviceIndex) lanes(masked bool) int {
	lr, ok := di.res.(device.LanedResident)
	if !ok {
		return 1
	}
	if _, ok := di.res.(device.MaskedResident); masked && !ok {
		return 1
	}
	return max(lr.Lanes(), 1)
}

// searchLane is searchOn on one lane of a device.LanedResident (see
// lanes), beside the other lanes' calls.
func (di *DeviceIndex) searchLane(ctx context.Context, lane int, qs []float32, nq, nprobe, keep int, allow []uint64) (entries []int32, dists []float32, err error) {
	di.mu.RLock()
	defer di.mu.RUnlock()
	if di.closed {
		return nil, nil, ErrClosed
	}
	entries, dists = make([]int32, nq*keep), make([]float32, nq*keep)
	return entries, dists, di.res.(device.LanedResident).SearchLane(ctx, lane, qs, nq, nprobe, keep, allow, entries, dists)
}

// searchDropping is searchOn's widening search on a device without masks.
func (di *DeviceIndex) searchDropping(ctx context.Context, qs []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) (short []int, err error) {
	n, d := di.ix.n, di.ix.d
	allowed := 0
	for _, w := range allow[:(n+63)/64] {
		allowed += bits.OnesCount64(w)
	}
	all := di.ix.maxCandidates(nprobe)
	most := min(device.MaxKeep, all)
	// As many as should hold keep allowed entries, a quarter more.
	want := keep
	if allowed > 0 {
		want = min(most, max(keep, int(float64(keep)*float64(n)/float64(allowed)*1.25)))
	}
	pending := make([]int, nq)
	for i := range pending {
		pending[i] = i
	}
	sub := qs
	for len(pending) > 0 {
		nq := len(pending)
		if nq != len(qs)/d {
			sub = make([]float32, nq*d)
			for t, i := range pending {
				copy(sub[t*d:(t+1)*d], qs[i*d:(i+1)*d])
			}
		}
		got, gotDists := make([]int32, nq*want), make([]float32, nq*want)
		if err := di.res.Search(ctx, sub, nq, nprobe, want, got, gotDists); err != nil {
			return nil, err
		}
		var again []int
		for t, i := range pending {
			kept, exhausted := 0, false
			for j := range want {
				e := got[t*want+j]
				if e < 0 {
					exhausted = true
					break
				}
				if int(e) < n && allow[e/64]&(1<<(e%64)) == 0 {
					continue
				}
				entries[i*keep+kept], dists[i*keep+kept] = e, gotDists[t*want+j]
				if kept++; kept == keep {
					break
				}
			}
			for j := kept; j < keep; j++ {
				entries[i*keep+j], dists[i*keep+j] = -1, float32(math.Inf(1))
			}
			switch {
			case kept == keep || exhausted || want >= all:
			case want < most:
				again = append(again, i)
			default:
				short = append(short, i)
			}
		}
		pending = again
		want = min(most, 4*want)
	}
	return short, nil
}

// maxCandidates is the most entries nprobe lists hold: the sizes of the
// nprobe largest, summed (device.IndexData.MaxCandidates).
func (ix *Index) maxCandidates(nprobe int) int {
	sizes := make([]int, ix.m)
	for a := range sizes {
		sizes[a] = int(ix.lists[a+1] - ix.lists[a])
	}
	slices.Sort(sizes)
	total := 0
	for _, s := range sizes[max(0, ix.m-nprobe):] {
		total += s
	}
	return total
}

// CodeReads is what searches over nprobe lists read of an index's codes
// (Index.CodeReads).
type CodeReads struct {
	// PerQuery is the mean bytes a query reads alone: the entries of the
	// lists it probes, as Search chooses them, times an entry's code
	// bytes.
	PerQuery float64
	// PerBatch is the bytes a batch reads when its queries share each
	// list they probe (as the device's batch scan does): every list that
	// Followed of the queries probe, once.
	PerBatch float64
	Followed int
}

// CodeReads follows the probes of queries (every one when most is 0 or
// more than their number, else most spread evenly over them): the mean
// bytes of codes a query reads alone, and the bytes of the lists that
// the first batch of the followed queries probe between them, each once.
func (ix *Index) CodeReads(queries Rows, nprobe, most, batch int) (CodeReads, error) {
	if queries.Dim() != ix.d {
		return CodeReads{}, fmt.Errorf("%w: queries have dimension %d, the index %d", ErrDim, queries.Dim(), ix.d)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return CodeReads{}, ErrClosed
	}
	n := queries.Len()
	if n == 0 {
		return CodeReads{}, nil
	}
	if most <= 0 || most > n {
		most = n
	}
	if batch <= 0 || batch > most {
		batch = most
	}
	s := ix.getScratch()
	defer ix.pool.Put(s)
	nprobe = ix.EffectiveNProbe(nprobe)
	var entries, shared float64
	seen := make([]bool, ix.m)
	for j := range most {
		i := j * n / most
		q := queries.Row(i, s.row)
		if err := ix.checkQuery(q); err != nil {
			return CodeReads{}, fmt.Errorf("query %d: %w", i, err)
		}
		ix.load(s, q)
		ix.panels.Dots1(s.q, s.dots)
		ix.probeLists(s, nprobe)
		for _, p := range s.probe {
			size := float64(ix.lists[p.ID+1] - ix.lists[p.ID])
			entries += size
			if j < batch && !seen[p.ID] {
				seen[p.ID] = true
				shared += size
			}
		}
	}
	cb := float64(ix.code.CodeBytes())
	return CodeReads{PerQuery: entries / float64(most) * cb, PerBatch: shared * cb, Followed: batch}, nil
}
