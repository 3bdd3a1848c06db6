package index

import (
	"bytes"
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"strconv"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/spill"
	"github.com/vlc-embed/vlc/quant"
)

// MergePart is an index whose rows Merge copies, and which of them.
type MergePart struct {
	Index *Index
	Keep  func(row int) bool // nil keeps every row
	// FirstID names the rows of a part without keys where the merge
	// writes keys: row r is the decimal FirstID + r (a part's rows are
	// named by number, so a second part's are numbered on past the
	// first's).
	FirstID int
	// Payloads, when set, replaces the payloads of the rows it holds
	// (a nil value removes one): the codes are copied as they are.
	Payloads map[int][]byte
}

// MergeOptions are Merge's choices beyond its parts.
type MergeOptions struct {
	// WithKeys writes the ids (KEYS) even where no part has them (a part
	// without keys names its rows FirstID + row).
	WithKeys bool
	// SpillDir, as Plan's, keeps the merged code arrays in files.
	SpillDir string
}

// CanMerge reports whether Merge can join several parts of this index's
// code whatever their lists' parameters: codes whose list parameters can
// be re-expressed (quant.Merger). Other codes join parts whose lists
// share their parameters (encoded under one model, Plan.Params), and any
// code can be rewritten from a single part.
func (ix *Index) CanMerge() bool {
	_, ok := ix.code.(quant.Merger)
	return ok
}

// Merge writes to path, atomically, one index holding the kept rows of
// parts (encoded against the same anchors and code: NewGroup's check),
// part after part, each in row order. The codes are carried over, never
// encoded again: a list whose parts hold the same parameters (encoded
// under one frozen model, Plan.Params) is a concatenation, byte for byte;
// where the parts' lists were fitted apart, they are re-expressed under
// merged parameters (quant.Merger; the rotated code rounds two float16
// scalars anew), and other codes refuse. The ids are written (KEYS) when
// opt.WithKeys or any part has them: an index without keys names its
// rows by number, FirstID on (MergePart); payloads
// when any part has them. meta gives the metric and training
// statistics; N, Dim and M are set, and the code (Code, Bits, Subspaces,
// Seed, FlagIPCodes) is the parts'. It returns the rows written.
func Merge(ctx context.Context, path string, parts []MergePart, meta Meta, opt MergeOptions) (rows int, err error) {
	withKeys := opt.WithKeys
	idx := make([]*Index, len(parts))
	for i, p := range parts {
		idx[i] = p.Index
	}
	if _, err := NewGroup(idx...); err != nil {
		return 0, err
	}
	for _, p := range idx {
		p.mu.RLock()
		defer p.mu.RUnlock()
		if p.file == nil {
			return 0, ErrClosed
		}
	}
	p0 := idx[0]
	defer format.CatchFault(p0.path, &err, debug.SetPanicOnFault(true))
	code := p0.code
	merger, canMerge := code.(quant.Merger)
	// newRow[i][r]: the output row of part i's row r, or -1.
	newRow := make([][]int32, len(parts))
	for i, p := range parts {
		newRow[i] = make([]int32, p.Index.n)
		for r := range p.Index.n {
			if p.Keep == nil || p.Keep(r) {
				newRow[i][r] = int32(rows)
				rows++
				withKeys = withKeys || p.Index.HasKeys()
			} else {
				newRow[i][r] = -1
				withKeys = true
			}
		}
	}
	if rows == 0 {
		return 0, fmt.Errorf("%w: no rows to keep", ErrArgument)
	}
	m, cb, pb := p0.m, code.CodeBytes(), code.ParamBytes()
	offsets := make([]uint64, m+1)
	ids := make([]uint32, 0, rows)
	params := make([]byte, m*pb)
	arena := &spill.Arena{Dir: opt.SpillDir, Min: spillMin}
	defer arena.Close()
	codes, err := arena.Bytes(rows * cb)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, cb)
	from := make([][]byte, 0, len(parts))
	for a := range m {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		from = from[:0]
		for _, p := range idx {
			if p.lists[a+1] > p.lists[a] {
				from = append(from, p.params[a*pb:(a+1)*pb])
			}
		}
		to := params[a*pb : (a+1)*pb]
		rescale := !allEqual(from)
		switch {
		case len(from) == 0:
			copy(to, p0.params[a*pb:(a+1)*pb])
		case !rescale:
			copy(to, from[0])
		case !canMerge:
			return 0, fmt.Errorf("%w: the %s code cannot merge list %d, fitted apart in two parts (its list parameters cannot be re-expressed; encode the parts under one model, vlc compress -anchors-from)", ErrArgument, quant.Kind(p0.meta.Code), a)
		default:
			merger.MergeParams(to, from...)
		}
		for i, p := range idx {
			prm := p.params[a*pb : (a+1)*pb]
			for e := int(p.lists[a]); e < int(p.lists[a+1]); e++ {
				r := p.ids.at(e)
				if r >= p.n {
					return 0, fmt.Errorf("%s: %w: entry %d refers to row %d of %d", p.path, ErrCorrupt, e, r, p.n)
				}
				if newRow[i][r] < 0 {
					continue
				}
				p.entryCode(e, buf)
				if rescale {
					merger.Rescale(buf, prm, to)
				}
				copy(codes[len(ids)*cb:], buf)
				ids = append(ids, uint32(newRow[i][r]))
			}
		}
		offsets[a+1] = uint64(len(ids))
	}
	if len(ids) != rows {
		return 0, fmt.Errorf("%s: %w: the lists hold %d kept rows, the rows %d", p0.path, ErrCorrupt, len(ids), rows)
	}
	var keys []string
	var payloads [][]byte
	withPayloads := false
	for i, p := range idx {
		withPayloads = withPayloads || p.HasPayloads() || len(parts[i].Payloads) > 0
	}
	if withKeys {
		keys = make([]string, rows)
	}
	if withPayloads {
		payloads = make([][]byte, rows)
	}
	for i, p := range idx {
		for r, nr := range newRow[i] {
			if nr < 0 {
				continue
			}
			if withKeys {
				if p.HasKeys() {
					k, err := p.Key(r)
					if err != nil {
						return 0, err
					}
					keys[nr] = string(k)
				} else {
					keys[nr] = strconv.Itoa(parts[i].FirstID + r)
				}
			}
			if pl, ok := parts[i].Payloads[r]; ok {
				payloads[nr] = pl
			} else if withPayloads {
				pl, err := p.Payload(r)
				if err != nil {
					return 0, err
				}
				payloads[nr] = pl
			}
		}
	}
	if keys != nil {
		if err := CheckKeys(keys); err != nil {
			return 0, fmt.Errorf("merged ids: %w", err)
		}
	}
	// The codes are the parts', copied: so is what reads them (a caller's
	// META might name the flat code's 32 bits as 0, which reads the same
	// but would keep the file from a Group with the parts).
	meta.Code, meta.Bits, meta.Subspaces, meta.Seed = p0.meta.Code, p0.meta.Bits, p0.meta.Subspaces, p0.meta.Seed
	meta.Flags = meta.Flags&^(FlagSegment|FlagIPCodes) | p0.meta.Flags&FlagIPCodes
	if uint64(m) > uint64(rows) {
		meta.Flags |= FlagSegment
	}
	anchors, _ := p0.file.Section(secAnchors)
	secs, err := assemble(code, meta, anchors, offsets, ids, params, codes, p0.Global(), keys, payloads, arena, nil)
	if err != nil {
		return 0, err
	}
	return rows, format.WriteFileContext(ctx, path, secs)
}

// allEqual reports whether every parameter block in ps holds the same bytes.
func allEqual(ps [][]byte) bool {
	for _, p := range ps[min(1, len(ps)):] {
		if !bytes.Equal(p, ps[0]) {
			return false
		}
	}
	return true
}

// entryCode writes entry e's code (CodeBytes) to dst, unpacked from the
// blocked layout where the file has it.
func (ix *Index) entryCode(e int, dst []byte) {
	if ix.blocked != nil {
		ix.blocked.Unpack(ix.blocks, ix.codes, e, dst)
		return
	}
	cb := ix.code.CodeBytes()
	copy(dst, ix.codes[e*cb:(e+1)*cb])
}

// Reconstruct calls fn with every row and its vector as the codes give it
// back (its anchor plus the decoded residual; the originals are not
// kept), list by list; x is reused between calls.
func (ix *Index) Reconstruct(fn func(row int, x []float32) error) (err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	d, pb := ix.d, ix.code.ParamBytes()
	buf := make([]byte, ix.code.CodeBytes())
	x := make([]float32, d)
	for a := range ix.m {
		prm := ix.params[a*pb : (a+1)*pb]
		anchor := ix.anchors[a*d : (a+1)*d]
		for e := int(ix.lists[a]); e < int(ix.lists[a+1]); e++ {
			ix.entryCode(e, buf)
			ix.code.Decode(x, prm, buf)
			for j := range x {
				x[j] += anchor[j]
			}
			if err := fn(ix.ids.at(e), x); err != nil {
				return err
			}
		}
	}
	return nil
}

// Vector writes to dst (Dim long) the vector row's code gives back: its
// anchor plus the decoded residual, as Reconstruct gives it.
func (ix *Index) Vector(row int, dst []float32) (_ []float32, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil, ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	e, ok := ix.entryOf(row)
	if !ok {
		return nil, fmt.Errorf("%w: row %d of %d", ErrArgument, row, ix.n)
	}
	a := sort.Search(ix.m, func(a int) bool { return uint64(ix.lists[a+1]) > uint64(e) })
	if a >= ix.m {
		return nil, fmt.Errorf("%s: %w: entry %d lies in no list", ix.path, ErrCorrupt, e)
	}
	d, pb := ix.d, ix.code.ParamBytes()
	buf := make([]byte, ix.code.CodeBytes())
	ix.entryCode(int(e), buf)
	dst = dst[:d]
	ix.code.Decode(dst, ix.params[a*pb:(a+1)*pb], buf)
	anchor := ix.anchors[a*d : (a+1)*d]
	for j := range dst {
		dst[j] += anchor[j]
	}
	return dst, nil
}
