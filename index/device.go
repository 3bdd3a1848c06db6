package index

import (
	"context"
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"
	"math"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/quant"
)

// Search on a device (a GPU): the backend holds an index's lists in its
// own memory and answers batches of queries there; this file is the seam.
// The index prepares what the device needs (DeviceData) and the queries
// (checked, normalised, scaled as Search does), and turns what comes back
// (entries and estimated distances) into hits: row ids, re-ranking and the
// metric's distances, exactly as Search's last step. The backends
// (gpu/cuda, gpu/webgpu) only compute.

// ErrNoDeviceSearch is returned by OnDevice for an index a device cannot
// search (its code is not the rotated one, or the backend has no search).
var ErrNoDeviceSearch = errs.New(errs.Unavailable, "no device search")

// SearchDevice is a backend that can search an index in its own memory:
// the training devices of gpu/cuda and gpu/webgpu implement it (OnDevice
// takes any value and checks).
type SearchDevice interface {
	// UploadIndex copies what d describes to the device, where it stays
	// until the Resident is closed.
	UploadIndex(d *DeviceData) (Resident, error)
}

// Resident is an index held in a device's memory.
type Resident interface {
	// Search finds, for each of the nq queries (row i at queries[i*Dim:],
	// prepared: see DeviceData), the keep entries of least distance in
	// its nprobe nearest lists, nearest first: entries[i*keep+j] and
	// dists[i*keep+j], -1 and +Inf where a query's lists hold fewer. It
	// splits a batch larger than its memory allows, and stops between
	// parts when ctx is done. DeviceIndex calls it one call at a time.
	Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error
	// Bytes is the device memory the index holds now: the resident
	// lists and the batch buffers of the largest batch so far.
	Bytes() int64
	// Close frees the device memory.
	Close() error
}

// MaxDeviceKeep is the most candidates a device search keeps per query
// (K, times RerankFactor when re-ranking): its final selection sorts them
// in one block's shared memory.
const MaxDeviceKeep = 4096

// DeviceTile is the number of entries whose level words are interleaved
// (see DeviceData).
const DeviceTile = 32

// DeviceData is an index of the rotated code (quant.Rotated) as a device
// searches it, and the definition of that search.
//
// A query q arrives prepared: normalised under cosine, scaled by a power
// of two under ip when far from 1 (ScaleIPQuery). The device rotates it,
// q~ = P q (Signs, RotP, RotScale: quant.Rotation's steps, which are exact
// in float32 when repeated in the same order), and takes its squared
// length qq. The probe ranks the lists by Norms[a] - 2 qa (L2 and cosine)
// or -qa (ip), qa = <q~, RotAnchors[a]>, and takes the nprobe least, ties
// to the lower list. Each entry e of a probed list a then gets
//
//	dist = mul * score + bias,
//
// where, with q' = q~ - RotAnchors[a] (the L2 form) or q' = q~ (the dot
// form), levels l_j of the entry (Bits each, in Words words), L = 2^Bits-1,
// qu = sum_j q'_j l_j - (L/2) sum_j q'_j, beta = B16 * SqrtScale[a] and
// norm = N16 * Scale[a] (the entry's two float16 scalars):
//
//   - L2 form: score = |q'|^2 + norm - 2 beta qu; dot form: beta qu;
//   - ip with IPCodes, when qq - 2 qa + Norms[a] < qq: the L2 form,
//     mul 0.5, bias -(qq + Norms[a])/2;
//   - else ip: the dot form, mul -1, bias -qa;
//   - else (L2, cosine): the L2 form, mul 1, bias 0.
//
// These are Scorer.Score's estimate and Index.listForm's, computed for
// every entry of the probed lists: the CPU's first, cheaper estimate only
// rules entries out, so results agree up to float rounding, ties, and
// the rare entry whose first estimate's bound failed on the CPU
// (quant.EstimateSigmas).
//
// Entry e is the e-th of the index (lists are entries Offsets[a] to
// Offsets[a+1]-1). Its levels are Words uint32 words, level j at bits
// j*Bits.. of the stream, least significant first (the entry code's
// packed bytes, little endian); in Fill's layout word w of entry e is at
// (e/DeviceTile)*Words*DeviceTile + w*DeviceTile + e%DeviceTile, so that a
// warp reading word w of 32 neighbouring entries reads 128 contiguous
// bytes. Its scalars are one uint32: N16 (|r|^2/s, or the ip slot) in the
// low half, B16 (B/sqrt(s)) in the high half.
type DeviceData struct {
	N, Dim, Lists int
	Metric        Metric
	IPCodes       bool
	Bits, Words   int
	// The rotation: rounds of Dim signs (+-1), each followed by the
	// orthonormal Walsh-Hadamard transform of the first RotP coordinates
	// and then of the last RotP (when RotP < Dim), whose scale is RotScale.
	Signs      [][]float32
	RotP       int
	RotScale   float32
	RotAnchors []float32 // Lists*Dim: P a
	Norms      []float32 // |a|^2, as the CPU's probe takes it
	Offsets    []uint64  // Lists+1
	Scale      []float32 // each list's s
	SqrtScale  []float32 // float32(sqrt(s))
	// ix fills the tiles.
	ix *Index
}

// Tiles is the number of DeviceTile-entry tiles, the last one padded with
// zero entries.
func (d *DeviceData) Tiles() int { return (d.N + DeviceTile - 1) / DeviceTile }

// Fill writes tiles t0 to t1-1: words ((t1-t0)*Words*DeviceTile) and
// scalars ((t1-t0)*DeviceTile), entries past N as zeros. It reads the
// mapped file, on all cores; an error names a fault in the mapping.
func (d *DeviceData) Fill(t0, t1 int, words, scalars []uint32) (err error) {
	ix := d.ix
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	w, cb := d.Words, ix.code.CodeBytes()
	packed := cb - 4
	tw := w * DeviceTile
	par.For(t1-t0, 64, func(lo, hi int) {
		code := make([]byte, cb)
		word := make([]byte, 4*w)
		for t := t0 + lo; t < t0+hi; t++ {
			tile := words[(t-t0)*tw : (t-t0+1)*tw]
			sc := scalars[(t-t0)*DeviceTile : (t-t0+1)*DeviceTile]
			for v := range DeviceTile {
				e := t*DeviceTile + v
				if e >= d.N {
					for k := range w {
						tile[k*DeviceTile+v] = 0
					}
					sc[v] = 0
					continue
				}
				ix.entryCode(e, code)
				clear(word)
				copy(word, code[:packed])
				for k := range w {
					tile[k*DeviceTile+v] = uint32(word[4*k]) | uint32(word[4*k+1])<<8 | uint32(word[4*k+2])<<16 | uint32(word[4*k+3])<<24
				}
				sc[v] = uint32(code[packed]) | uint32(code[packed+1])<<8 | uint32(code[packed+2])<<16 | uint32(code[packed+3])<<24
			}
		}
	})
	return nil
}

// MaxCandidates is the most entries a search of nprobe lists can score
// for one query: the sizes of the nprobe largest lists, summed.
func (d *DeviceData) MaxCandidates(nprobe int) int {
	sizes := make([]int, d.Lists)
	for a := range sizes {
		sizes[a] = int(d.Offsets[a+1] - d.Offsets[a])
	}
	slices.Sort(sizes)
	total := 0
	for _, s := range sizes[max(0, d.Lists-nprobe):] {
		total += s
	}
	return total
}

// lockedDeviceData is deviceData with the index held open and a fault in
// its mapping (PARM) returned as an error naming the file.
func (ix *Index) lockedDeviceData() (d *DeviceData, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil, ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	return ix.deviceData()
}

// deviceData describes ix for a device, or says why it cannot.
func (ix *Index) deviceData() (*DeviceData, error) {
	rc, ok := ix.code.(*quant.Rotated)
	if !ok {
		return nil, fmt.Errorf("%w: %s: the %s code is searched on the CPU only (a device searches the rotated code)", ErrNoDeviceSearch, ix.path, ix.meta.CodeSpec())
	}
	lay := rc.Layout()
	d := &DeviceData{
		N: ix.n, Dim: ix.d, Lists: ix.m, Metric: ix.meta.Metric, IPCodes: ix.ipCodes,
		Bits: lay.Bits, Words: (lay.Packed + 3) / 4,
		Signs: lay.Signs, RotP: lay.P, RotScale: lay.Scale, RotAnchors: lay.RotAnchors,
		Norms: ix.norms, Offsets: ix.lists,
		Scale: make([]float32, ix.m), SqrtScale: make([]float32, ix.m),
		ix: ix,
	}
	pb := ix.code.ParamBytes()
	for a := range ix.m {
		s := math.Float32frombits(uint32(ix.params[a*pb]) | uint32(ix.params[a*pb+1])<<8 | uint32(ix.params[a*pb+2])<<16 | uint32(ix.params[a*pb+3])<<24)
		d.Scale[a] = s
		d.SqrtScale[a] = float32(math.Sqrt(float64(s)))
	}
	return d, nil
}

// DeviceIndex is an index whose lists are resident on a device: its
// searches run there, and only the hits come back. Searches with a Filter
// run on the CPU (Index's). Safe for concurrent use; searches on the
// device run one at a time. Close it before the device, and before the
// Index it came from.
type DeviceIndex struct {
	ix  *Index
	res Resident
	mu  sync.Mutex // one device search at a time
	// queries, entries and dists are the buffers of the last batch.
	queries []float32
	entries []int32
	dists   []float32
	closed  bool
}

// OnDevice uploads the index to dev, a backend's training device (see
// SearchDevice). The error wraps ErrNoDeviceSearch when dev cannot search
// or the index's code is not the rotated one.
func (ix *Index) OnDevice(dev any) (*DeviceIndex, error) {
	sd, ok := dev.(SearchDevice)
	if !ok {
		return nil, fmt.Errorf("%w: the backend %T has no device search", ErrNoDeviceSearch, dev)
	}
	d, err := ix.lockedDeviceData()
	if err != nil {
		return nil, err
	}
	res, err := sd.UploadIndex(d)
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

// DeviceBytes is the device memory the index holds (see Resident.Bytes).
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
// DeviceData). A search with a Filter runs on the CPU. K (times
// RerankFactor when re-ranking) is at most MaxDeviceKeep.
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
	if keep > MaxDeviceKeep {
		return nil, fmt.Errorf("%w: a device search keeps at most %d candidates a query, this one %d (k %d, times the re-rank factor): search on the CPU", ErrArgument, MaxDeviceKeep, keep, opt.K)
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
