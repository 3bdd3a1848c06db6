package index

import (
	"context"
	"fmt"
	"math"
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
// searches run there, and only the hits come back. Searches with a Filter
// run on the CPU (Index's). Safe for concurrent use; searches on the
// device run one at a time. Close it before the device, and before the
// Index it came from.
type DeviceIndex struct {
	ix  *Index
	res device.Resident
	mu  sync.Mutex // one device search at a time
	// queries, entries and dists are the buffers of the last batch.
	queries []float32
	entries []int32
	dists   []float32
	closed  bool
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
	return &DeviceIndex{ix: ix, res: res}, nil
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

// Close frees the device's copy; the Index stays open.
func (di *DeviceIndex) Close() error {
	di.mu.Lock()
	defer di.mu.Unlock()
	if di.closed {
		return nil
	}
	di.closed = true
	di.queries, di.entries, di.dists = nil, nil, nil
	return di.res.Close()
}

// Search is SearchBatch for one query.
func (di *DeviceIndex) Search(q []float32, opt SearchOptions) ([]Hit, error) {
	if opt.Filter != nil {
		return di.ix.Search(q, opt)
	}
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

// deviceChunk is the most queries prepared on the host at a time (about
// 50 MB of float32 at dimension 768); the device splits further as its
// memory requires.
const deviceChunk = 1 << 14

// SearchBatch searches for every row of queries on the device and returns
// each one's hits: Index.SearchBatch's, up to float rounding and ties (see
// device.IndexData). A search with a Filter runs on the CPU. K (times
// RerankFactor when re-ranking) is at most device.MaxKeep.
func (di *DeviceIndex) SearchBatch(ctx context.Context, queries Rows, opt SearchOptions) ([][]Hit, error) {
	ix := di.ix
	if opt.Filter != nil {
		return ix.SearchBatch(ctx, queries, opt)
	}
	if queries.Dim() != ix.d {
		return nil, fmt.Errorf("%w: queries have dimension %d, the index %d", ErrDim, queries.Dim(), ix.d)
	}
	di.mu.Lock()
	defer di.mu.Unlock()
	if di.closed {
		return nil, ErrClosed
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil, ErrClosed
	}
	// k and keep as Search takes them; each query is checked below.
	k, keep, err := ix.want(opt)
	if err != nil {
		return nil, err
	}
	if keep > device.MaxKeep {
		return nil, fmt.Errorf("%w: a device search keeps at most %d candidates a query, this one %d (k %d, times the re-rank factor): search on the CPU", ErrArgument, device.MaxKeep, keep, opt.K)
	}
	nprobe := ix.EffectiveNProbe(opt.NProbe)
	n := queries.Len()
	hits := make([][]Hit, n)
	for lo := 0; lo < n; lo += deviceChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := di.searchChunk(ctx, queries, lo, min(lo+deviceChunk, n), opt, k, keep, nprobe, hits); err != nil {
			return nil, err
		}
	}
	return hits, nil
}

// searchChunk searches queries lo to hi-1: prepared on all cores,
// searched on the device, finished on all cores.
func (di *DeviceIndex) searchChunk(ctx context.Context, queries Rows, lo, hi int, opt SearchOptions, k, keep, nprobe int, hits [][]Hit) (err error) {
	ix := di.ix
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	nq, d := hi-lo, ix.d
	di.queries = grow(di.queries, nq*d)
	di.entries = slices.Grow(di.entries[:0], nq*keep)[:nq*keep]
	di.dists = grow(di.dists, nq*keep)
	scales := make([]float64, nq)
	var errs firstError
	par.For(nq, 64, func(a, b int) {
		errs.run(ctx, fmt.Sprintf("queries %d..%d", lo+a, lo+b-1), func() (err error) {
			defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
			s := ix.getScratch()
			defer ix.pool.Put(s)
			for i := a; i < b; i++ {
				q := queries.Row(lo+i, s.row)
				if _, _, err := ix.check(q, opt); err != nil {
					return fmt.Errorf("query %d: %w", lo+i, err)
				}
				ix.load(s, q)
				copy(di.queries[i*d:(i+1)*d], s.q)
				scales[i] = s.scale
			}
			return nil
		})
	})
	if err := errs.get(); err != nil {
		return err
	}
	if err := di.res.Search(ctx, di.queries[:nq*d], nq, nprobe, keep, di.entries, di.dists); err != nil {
		return err
	}
	par.For(nq, 64, func(a, b int) {
		errs.run(ctx, fmt.Sprintf("queries %d..%d", lo+a, lo+b-1), func() (err error) {
			defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
			s := ix.getScratch()
			defer ix.pool.Put(s)
			for i := a; i < b; i++ {
				copy(s.q, di.queries[i*d:(i+1)*d])
				s.scale = scales[i]
				s.total = ix.n
				s.top.reset(keep)
				for j := range keep {
					e := di.entries[i*keep+j]
					if e < 0 {
						break
					}
					if int(e) >= ix.n {
						return fmt.Errorf("device search returned entry %d of %d", e, ix.n)
					}
					s.top.push(Hit{ID: ix.ids.at(int(e)), Distance: di.dists[i*keep+j]})
				}
				h, err := ix.finish(nil, s, opt, k)
				if err != nil {
					return fmt.Errorf("query %d: %w", lo+i, err)
				}
				hits[lo+i] = h
			}
			return nil
		})
	})
	return errs.get()
}
