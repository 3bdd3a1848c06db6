package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/enctrace"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/spill"
	"github.com/vlc-embed/vlc/quant"
)

// Rows is a read-only matrix of vectors, such as an input file
// (vecfile.Matrix). Row must be safe for concurrent use.
type Rows interface {
	Len() int
	Dim() int
	// Row decodes row i into dst (Dim long) and returns it.
	Row(i int, dst []float32) []float32
}

// Plan is everything Build needs: the vectors, the anchors training learned
// and every vector's anchor, the code, and what to record in META.
type Plan struct {
	Rows    Rows      // the vectors as the index will see them (normalised for cosine)
	Anchors []float32 // M*Dim
	Assign  []int32   // anchor of each row, len Rows.Len()
	// Meta sets the code (Code, Bits), the metric and the seed, which
	// also draws the code's randomness, and the training statistics; Build
	// fills in N, Dim and M.
	Meta Meta
	// Device, when set, writes the rotated code in place of the host: the
	// training device, whose resident points must be exactly Rows (the
	// caller's promise: float16 input, not normalised). Other codes
	// ignore it.
	Device device.RotatedEncoder
	// Keys, when set, are the rows' ids (KEYS and KIDX; each non-empty,
	// at most MaxKeyBytes, unique); Payloads, when set, their payloads
	// (PAYL; each at most MaxPayloadBytes, nil for none).
	Keys     []string
	Payloads [][]byte
	// Global, when set, are the shared parameters of a quant.Trainer code
	// (the pq code's codebooks) to encode with, in place of training them:
	// a segment added to a store uses the store's.
	Global []byte
	// Params, when set, are the list parameters (M*ParamBytes) of a
	// frozen model to encode under (quant.FrozenEncoder), in place of
	// fitting them to each list: rows encoded apart under one model then
	// get the codes they would get encoded together. A list whose rows
	// the parameters cannot hold is fitted as usual. Codes without
	// FrozenEncoder ignore it; so does a Device.
	Params []byte
	// SpillDir, when set, is a folder where Write keeps the entry codes
	// (the bulk of an index: CodeBytes per row; they are packed and
	// written a chunk at a time) in files
	// the kernel pages, rather than on the heap (internal/spill), so that
	// the process's anonymous memory stays small for any number of rows.
	SpillDir string
	// Progress, when set, is called with the rows encoded so far and
	// their total: with 0 before the first, then after each list the host
	// encodes, or after each run of rows the device hands over
	// (device.RotatedStreamEncoder). Calls do not overlap.
	Progress func(done, total int)
	// Times, when set, receives Write's wall times: encoding and
	// packing, the file written meanwhile, and what writing is left
	// after the last code is packed.
	Times *WriteTimes
}

// WriteTimes are the wall times of Write's two parts: Build until the
// last entry's code is packed, Write from then until the file is in
// place (the last codes and list parameters written, the sync, the
// rename).
type WriteTimes struct {
	Build, Write time.Duration
}

// Build encodes every vector as its anchor's list entry plus a residual code
// and returns the sections of a format v1 index, in file order. Lists are
// encoded in parallel; the bytes do not depend on the core count.
func Build(p Plan) ([]format.Section, error) {
	return BuildContext(context.Background(), p)
}

// BuildContext is Build that stops early, returning ctx's error, once ctx
// is done (checked before each list is encoded).
func BuildContext(ctx context.Context, p Plan) ([]format.Section, error) {
	return build(ctx, p, nil)
}

// build is BuildContext with the code arrays from arena (nil: the heap).
func build(ctx context.Context, p Plan, arena *spill.Arena) ([]format.Section, error) {
	b, err := prepare(ctx, p, arena)
	if err != nil {
		return nil, err
	}
	pk, err := newPacker(b.code, b.codes, len(b.ids), arena)
	if err != nil {
		return nil, err
	}
	if err := b.encode(ctx, p, pk.upTo); err != nil {
		return nil, err
	}
	return assemble(b.code, b.meta, b.anchors16, b.offsets, b.ids, b.params, b.codes, b.global, p.Keys, p.Payloads, arena, pk)
}

// prepared is a build up to its encoding: the rows grouped by anchor
// (entry e of list a is row ids[e], offsets[a] <= e < offsets[a+1]), the
// anchors as stored, the code set up, and the arrays encode fills.
type prepared struct {
	code      quant.Code
	meta      Meta // complete: N, Dim, M and the code's Bits and Subspaces set
	anchors16 []byte
	anchors   []float32 // anchors16's values
	offsets   []uint64
	ids       []uint32
	global    []byte // a quant.Trainer code's shared parameters
	codes     []byte // CodeBytes an entry, from the arena
	params    []byte // ParamBytes a list
}

// prepare checks p and does a build's work before encoding: grouping,
// storing the anchors, training a quant.Trainer code's shared parameters.
func prepare(ctx context.Context, p Plan, arena *spill.Arena) (*prepared, error) {
	n, d := p.Rows.Len(), p.Rows.Dim()
	m := len(p.Anchors) / max(d, 1)
	switch {
	case n < 1 || d < 1:
		return nil, fmt.Errorf("%w: nothing to index (%d rows of dimension %d)", ErrArgument, n, d)
	case m < 1 || len(p.Anchors) != m*d:
		return nil, fmt.Errorf("%w: %d anchor values are not a whole number of %d-dimensional anchors", ErrArgument, len(p.Anchors), d)
	case len(p.Assign) != n:
		return nil, fmt.Errorf("%w: %d assignments for %d rows", ErrArgument, len(p.Assign), n)
	case n > math.MaxUint32:
		return nil, fmt.Errorf("%w: %d rows: format v1 holds at most 2^32-1", ErrArgument, n)
	case p.Keys != nil && len(p.Keys) != n:
		return nil, fmt.Errorf("%w: %d ids for %d rows", ErrArgument, len(p.Keys), n)
	case p.Payloads != nil && len(p.Payloads) != n:
		return nil, fmt.Errorf("%w: %d payloads for %d rows", ErrArgument, len(p.Payloads), n)
	}
	if p.Keys != nil {
		if err := CheckKeys(p.Keys); err != nil {
			return nil, err
		}
	}
	if err := CheckPayloads(p.Payloads); err != nil {
		return nil, err
	}
	spec := p.Meta.CodeSpec()
	spec.Dim = d
	code, err := quant.New(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrArgument, err)
	}
	spec = code.Spec() // the product code's subspaces, when given as bits

	// Group the rows by anchor, ascending row order within a list.
	offsets := make([]uint64, m+1)
	for i, a := range p.Assign {
		if a < 0 || int(a) >= m {
			return nil, fmt.Errorf("%w: row %d assigned to anchor %d of %d", ErrArgument, i, a, m)
		}
		offsets[a+1]++
	}
	for a := range m {
		offsets[a+1] += offsets[a]
	}
	ids := make([]uint32, n)
	fill := append([]uint64(nil), offsets[:m]...)
	for i, a := range p.Assign {
		ids[fill[a]] = uint32(i)
		fill[a]++
	}

	// Anchors are stored as float16; residuals are taken from the stored
	// values so that search sees exactly the anchors the codes assume.
	anchors16 := make([]uint16, m*d)
	anchors := make([]float32, m*d)
	bad := make([]int, m) // per anchor, its first value beyond float16, or -1
	par.For(m, 64, func(lo, hi int) {
		for a := lo; a < hi; a++ {
			bad[a] = -1
			for i := a * d; i < (a+1)*d; i++ {
				anchors16[i] = f16.FromFloat32(p.Anchors[i])
				anchors[i] = f16.ToFloat32(anchors16[i])
				if !f16.IsFinite(anchors16[i]) && bad[a] < 0 {
					bad[a] = i
				}
			}
		}
	})
	for a, i := range bad {
		if i >= 0 {
			return nil, fmt.Errorf("%w: anchor %d holds %v, beyond float16", ErrArgument, a, p.Anchors[i])
		}
	}

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	code.SetAnchors(anchors)
	var global []byte
	if tr, ok := code.(quant.Trainer); ok {
		global = p.Global
		if global == nil {
			global = tr.Train(trainingResiduals(p.Rows, anchors, p.Assign, d))
		}
		if err := tr.SetGlobal(global); err != nil {
			return nil, err
		}
	}

	cb, pb := code.CodeBytes(), code.ParamBytes()
	if p.Params != nil && len(p.Params) != m*pb {
		return nil, fmt.Errorf("%w: %d bytes of list parameters for %d lists of %d", ErrArgument, len(p.Params), m, pb)
	}
	codes, err := arena.Bytes(n * cb)
	if err != nil {
		return nil, err
	}
	meta := p.Meta
	meta.Bits, meta.Subspaces = uint32(spec.Bits), uint32(spec.Subspaces)
	meta.N, meta.Dim, meta.M = uint64(n), uint32(d), uint32(m)
	return &prepared{code: code, meta: meta, anchors16: u16Bytes(anchors16), anchors: anchors, offsets: offsets, ids: ids,
		global: global, codes: codes, params: make([]byte, m*pb)}, nil
}

// encode writes every entry's code and every list's parameters: on
// p.Device when it can (the rotated code, no frozen parameters), else on
// the host's cores. It calls final(hi), one call at a time with hi
// growing to the entry count, once the codes of entries below hi are
// final (whole lists: a device's infinite scalars encoded again on the
// host), and reports progress as Plan.Progress says. It stops early,
// returning ctx's error, once ctx is done.
func (b *prepared) encode(ctx context.Context, p Plan, final func(hi int)) error {
	n, m := len(b.ids), len(b.offsets)-1
	progress := p.Progress
	if progress == nil {
		progress = func(int, int) {}
	}
	progress(0, n)
	if rc, ok := b.code.(*quant.Rotated); ok && p.Device != nil && p.Params == nil {
		// Each run of codes the device hands over is final once its
		// whole lists are checked, and goes on (packed, written) while
		// the device encodes the next.
		next, handed := 0, false
		ready := func(lo, hi int) {
			handed = true
			first := next
			for next < m && int(b.offsets[next+1]) <= hi {
				next++
			}
			reencodeNonFinite(p.Rows, rc, b.anchors, b.ids, b.offsets, b.codes, b.params, first, next)
			final(int(b.offsets[next]))
			progress(hi, n)
		}
		err := device.EncodeRotatedStream(p.Device, rc.Layout(), b.anchors, b.ids, b.offsets, b.codes, b.params, ready)
		switch {
		case err == nil && next == m:
			return ctx.Err()
		case err == nil:
			return fmt.Errorf("index: encode: the device handed over the codes of %d of %d lists", next, m)
		case !errors.Is(err, device.ErrNotResident):
			return err
		case handed:
			return fmt.Errorf("index: encode: the device gave up after handing codes over: %w", err)
		}
	}
	var mu sync.Mutex // orders final and progress
	listDone := make([]bool, m)
	next, encoded := 0, 0
	encodeLists(ctx, p.Rows, b.code, b.anchors, b.ids, b.offsets, b.codes, b.params, p.Params, func(a int) {
		mu.Lock()
		defer mu.Unlock()
		listDone[a] = true
		for next < m && listDone[next] {
			next++
		}
		final(int(b.offsets[next]))
		encoded += int(b.offsets[a+1] - b.offsets[a])
		progress(encoded, n)
	})
	return ctx.Err()
}

// packer re-lays the entry codes of a quant.Blocked code into its blocks
// and low bits (the store's layout), whole blocks at a time, as runs of
// codes become final.
type packer struct {
	b           quant.Blocked
	codes       []byte
	blocks, low []byte
	n, cb       int
	done        int // entries packed: a multiple of quant.BlockLen, or n
}

// newPacker returns a packer of n entry codes of code in codes, with its
// arrays from arena, or nil for a code that is not quant.Blocked.
func newPacker(code quant.Code, codes []byte, n int, arena *spill.Arena) (*packer, error) {
	b, ok := code.(quant.Blocked)
	if !ok {
		return nil, nil
	}
	blocks, err := arena.Bytes((n + quant.BlockLen - 1) / quant.BlockLen * b.BlockBytes())
	if err != nil {
		return nil, err
	}
	low, err := arena.Bytes(n*b.LowBytes() + quant.LowPad)
	if err != nil {
		return nil, err
	}
	return &packer{b: b, codes: codes, blocks: blocks, low: low, n: n, cb: code.CodeBytes()}, nil
}

// upTo packs the entries below hi not yet packed, in whole blocks (the
// last block with the last entry). Pack writes each block from its own
// entries alone, so packing in runs gives the bytes of packing at once.
func (p *packer) upTo(hi int) {
	if p == nil {
		return
	}
	if hi < p.n {
		hi -= hi % quant.BlockLen
	}
	if hi > p.done {
		p.pack(p.done, hi)
		p.done = hi
	}
}

// pack packs entries lo to hi-1, lo a multiple of quant.BlockLen, into
// their zeroed blocks and low bits.
func (p *packer) pack(lo, hi int) {
	bb, lb := p.b.BlockBytes(), p.b.LowBytes()
	p.b.Pack(p.codes[lo*p.cb:hi*p.cb], hi-lo, p.blocks[lo/quant.BlockLen*bb:], p.low[lo*lb:])
}

// assemble lays an index's parts out as its sections, in file order: the
// entry codes (CodeBytes each, in entry order) are packed into blocks for
// a quant.Blocked code, by pk where the caller packed them (some or all:
// pk packs the rest), else here. meta's N, Dim and M are set from the
// parts. The arrays of a blocked code come from arena (nil: the heap).
func assemble(code quant.Code, meta Meta, anchors16 []byte, offsets []uint64, ids []uint32, params, codes, global []byte, keys []string, payloads [][]byte, arena *spill.Arena, pk *packer) ([]format.Section, error) {
	n, m := len(ids), len(offsets)-1
	meta.N, meta.Dim, meta.M = uint64(n), uint32(code.Dim()), uint32(m)
	if pk == nil {
		var err error
		if pk, err = newPacker(code, codes, n, arena); err != nil {
			return nil, err
		}
	}
	var blocks []byte
	if pk != nil {
		// The store's layout: low bits in CODE, blocks in SCAN.
		pk.upTo(n)
		if err := arena.Free(codes); err != nil { // repacked: its disk space back
			return nil, err
		}
		codes, blocks = pk.low, pk.blocks
	}
	return sections(meta, anchors16, offsets, ids, params, codes, blocks, pk != nil, global, keys, payloads), nil
}

// sections lists an index's sections in file order: codes are the entry
// codes, or their low bits and blocks the blocks when blocked (a
// quant.Blocked code).
func sections(meta Meta, anchors16 []byte, offsets []uint64, ids []uint32, params, codes, blocks []byte, blocked bool, global []byte, keys []string, payloads [][]byte) []format.Section {
	secs := []format.Section{
		{Kind: secMeta, Data: meta.marshal()},
		{Kind: secAnchors, Data: anchors16},
		{Kind: secLists, Data: u64Bytes(offsets)},
		{Kind: secIDs, Data: packRows(ids, rowBits(len(ids)))},
		{Kind: secParams, Data: params},
		{Kind: secCodes, Data: codes},
	}
	if blocked {
		secs = append(secs, format.Section{Kind: secBlocks, Data: blocks})
	}
	if global != nil {
		secs = append(secs, format.Section{Kind: secGlobal, Data: global})
	}
	return append(secs, docSections(keys, payloads)...)
}

// encodeLists encodes the lists on the host's cores, one list at a time
// per core, in about list order, stopping early once ctx is done, and
// calls done(a) after list a is encoded (calls may overlap).
//
// With fixed (a frozen model's list parameters), lists are encoded under
// them where the code allows (quant.FrozenEncoder), else fitted.
func encodeLists(ctx context.Context, rows Rows, code quant.Code, anchors []float32, ids []uint32, offsets []uint64, codes, params, fixed []byte, done func(a int)) {
	d, m := rows.Dim(), len(offsets)-1
	cb, pb := code.CodeBytes(), code.ParamBytes()
	fe, _ := code.(quant.FrozenEncoder)
	if fe == nil {
		fixed = nil
	}
	par.For(m, 1, func(lo, hi int) {
		var res []float32
		for a := lo; a < hi; a++ {
			if ctx.Err() != nil {
				return
			}
			list := ids[offsets[a]:offsets[a+1]]
			res = grow(res, len(list)*d)
			anchor := anchors[a*d : (a+1)*d]
			for k, id := range list {
				r := rows.Row(int(id), res[k*d:(k+1)*d])
				for j := range r {
					r[j] -= anchor[j]
				}
			}
			at := int(offsets[a]) * cb
			dst, prm := codes[at:at+len(list)*cb], params[a*pb:(a+1)*pb]
			if fixed == nil || !fe.EncodeFrozen(dst, copy2(prm, fixed[a*pb:(a+1)*pb]), a, res, len(list)) {
				code.EncodeList(dst, prm, a, res, len(list))
			}
			done(a)
		}
	})
}

// reencodeNonFinite encodes on the host again the lists first to last-1
// in which a device wrote an infinite scalar: it takes s as the largest
// |r|^2, where the host raises s for the rare lists that need it (quant's
// listScale).
func reencodeNonFinite(rows Rows, code *quant.Rotated, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte, first, last int) {
	cb, pb := code.CodeBytes(), code.ParamBytes()
	// Lists apart on the host's cores: each writes only its own codes
	// and parameters.
	par.For(last-first, 16, func(lo, hi int) {
		for a := first + lo; a < first+hi; a++ {
			for e := offsets[a]; e < offsets[a+1]; e++ {
				if code.NonFinite(codes[int(e)*cb : int(e+1)*cb]) {
					list, d := ids[offsets[a]:offsets[a+1]], rows.Dim()
					res := make([]float32, len(list)*d)
					for k, id := range list {
						r := rows.Row(int(id), res[k*d:(k+1)*d])
						for j := range r {
							r[j] -= anchors[a*d+j]
						}
					}
					at := int(offsets[a]) * cb
					code.EncodeList(codes[at:at+len(list)*cb], params[a*pb:(a+1)*pb], a, res, len(list))
					break
				}
			}
		}
	})
}

// trainSample caps the residuals a Trainer code learns from.
const trainSample = 1 << 16

// trainingResiduals returns the residuals of an evenly spaced sample of at
// most trainSample rows (all rows when there are fewer), in row order.
func trainingResiduals(rows Rows, anchors []float32, assign []int32, d int) ([]float32, int) {
	n := rows.Len()
	count := min(n, trainSample)
	res := make([]float32, count*d)
	par.For(count, 256, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			i := int(int64(k) * int64(n) / int64(count))
			r := rows.Row(i, res[k*d:(k+1)*d])
			a := anchors[int(assign[i])*d:]
			for j := range r {
				r[j] -= a[j]
			}
		}
	})
	return res, count
}

// PrepareWrite readies path for an index before the work of building one:
// it removes the temporary files that interrupted writes to path left
// behind (format.RemoveStaleTemps), returning their names, and fails when
// the index could not be written there (format.CheckWritable).
func PrepareWrite(path string) (removed []string, err error) {
	removed = format.RemoveStaleTemps(path)
	return removed, format.CheckWritable(path)
}

// Write builds the index and writes it to path atomically (temp file, fsync,
// rename): an existing file at path is replaced only by a complete index.
func Write(path string, p Plan) error {
	return WriteContext(context.Background(), path, p)
}

// WriteContext is Write that gives up once ctx is done, while encoding or
// while writing: the temporary file is removed, an existing file at path
// is left as it was, and the error wraps ctx's. The file is written while
// the codes are encoded (format.FileWriter): all but the codes and list
// parameters first, then the codes as they become final, in list order.
func WriteContext(ctx context.Context, path string, p Plan) error {
	arena := &spill.Arena{Dir: p.SpillDir, Min: spillMin, Huge: arenaHuge}
	defer arena.Close()
	start := time.Now()
	b, err := prepare(ctx, p, arena)
	if err != nil {
		return err
	}
	enctrace.Printf("write trace: prepared in %v\n", time.Since(start).Round(time.Millisecond))
	return b.write(ctx, path, p, start)
}

// spillMin is the smallest array a Plan's SpillDir takes: smaller ones
// cost more in file handling than they save in memory.
const spillMin = 16 << 20

// arenaHuge is WriteContext's spill.Arena.Huge: 0, the arena's own
// threshold; a variable for tests that need small arrays mapped.
var arenaHuge = 0

// copy2 copies src to dst and returns dst.
func copy2(dst, src []byte) []byte {
	copy(dst, src)
	return dst
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func u16Bytes(v []uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

func u64Bytes(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}
