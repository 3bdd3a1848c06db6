// Package index is the vlc index: building one from trained anchors and
// codes, opening it read-only through mmap, and searching it.
//
// A format v1 file is a format container (package index/format) holding, in
// this order: META (sizes, code, metric, training statistics), ANCH (the
// anchors, float16), LIST (list offsets, uint64, M+1), ROWS (the input row
// of every entry, grouped by list, bit-packed in ceil(log2 N) bits each),
// PARM (each list's code parameters), CODE (each entry's residual code)
// and, for codes with parameters shared by all lists (the pq code's
// codebooks, quant.Trainer), QGLB. A model file (Model) holds an index's
// META (as MODL), ANCH, PARM and QGLB alone: what encoding more rows
// under it needs. docs/FORMAT.md draws the bytes.
package index

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"unsafe"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
)

// Index is an open index. Its methods are safe for concurrent use; Close
// waits for searches in flight and makes later calls return ErrClosed.
type Index struct {
	mu   sync.RWMutex
	file *format.File
	path string
	meta Meta
	code quant.Code
	n, d int
	m    int
	// The anchors, decoded from float16 on open and laid out for the
	// probe's blocked kernel, and |anchor|^2.
	panels  vec.Panels
	anchors []float32
	norms   []float32
	// ipCodes: an ip index whose codes are in the inner-product form
	// (FlagIPCodes), scored through the L2 estimate.
	ipCodes bool
	lists   []uint64 // list a is entries lists[a] to lists[a+1]-1 (copied from the mapping)
	ids     rowIDs   // this and the rest: views into the mapping
	params  []byte
	codes   []byte // entry codes; for a blocked code, the entries' low bits
	// blocked is the code when the file holds it in blocks (version 2 and
	// a quant.Blocked code), blocks the SCAN section; nil otherwise.
	blocked quant.Blocked
	blocks  []byte
	// Caller ids and payloads (keys.go), when the file has them.
	keys, payloads blobs
	keyIndex       []uint32
	// entries maps a row to its entry, built on the first search whose
	// filter allows few enough rows to score them one by one.
	entriesOnce sync.Once
	entries     []uint32
	pool        sync.Pool // *scratch
}

// Options controls Open.
type Options struct {
	// Verify checks every checksum before Open returns (the whole file is
	// read once). Without it only the header, the table and the sizes are
	// checked, and Verify can be called later.
	Verify bool
}

// Open maps the index at path read-only and validates it. Errors wrap
// ErrNotIndex, ErrVersion or ErrCorrupt and name the file.
func Open(path string, opt Options) (*Index, error) {
	if !littleEndian() {
		return nil, fmt.Errorf("%s: vlc indexes are read in place and need a little-endian host", path)
	}
	f, err := format.Open(path, format.OpenOptions{Verify: opt.Verify})
	if err != nil {
		return nil, err
	}
	return openFile(f, opt.Verify, opt.Verify)
}

// OpenFile is Open of a container already open (f.Path() names it in
// errors), for a caller that opened a path once to find out what it holds:
// it reads the same mapping, so the index is the file f is, whatever the
// path names meanwhile. The Index takes f over (its Close closes f), and
// f is closed on error. The container's checksums are the caller's to
// check (format.OpenOptions.Verify, or f.Verify); opt.Verify checks what
// they do not: that the row ids are a permutation, and the ids.
func OpenFile(f *format.File, opt Options) (*Index, error) {
	if !littleEndian() {
		f.Close()
		return nil, fmt.Errorf("%s: vlc indexes are read in place and need a little-endian host", f.Path())
	}
	return openFile(f, opt.Verify, true)
}

// openFile loads f, checking its checksums first when verify and they
// were not checked yet (verified).
func openFile(f *format.File, verify, verified bool) (*Index, error) {
	path := f.Path()
	if verify && !verified {
		if err := f.Verify(); err != nil {
			f.Close()
			return nil, err
		}
	}
	ix, err := load(f, path)
	if err == nil && verify {
		if err = ix.checkRowIDs(); err == nil {
			err = ix.checkKeys()
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return ix, nil
}

func load(f *format.File, path string) (ix *Index, err error) {
	defer format.CatchFault(path, &err, debug.SetPanicOnFault(true))
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", path, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if _, ok := f.Section(format.KindOf("STOR")); ok {
		return nil, fmt.Errorf("%s: %w: it is a store manifest (vectors were added or deleted), read it through vlc.Open (vlc merge writes its live vectors to one index file)", path, ErrNotIndex)
	}
	if _, ok := f.Section(secModel); ok {
		return nil, fmt.Errorf("%s: %w: it is a model file (anchors and code, no vectors), read by ReadModel and compress -anchors-from", path, ErrNotIndex)
	}
	sec := map[format.Kind][]byte{}
	for _, k := range []format.Kind{secMeta, secAnchors, secLists, secIDs, secParams, secCodes} {
		b, ok := f.Section(k)
		if !ok {
			return nil, bad("section %q missing", k)
		}
		sec[k] = b
	}
	meta, err := unmarshalMeta(sec[secMeta], secMeta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	size := uint64(f.Size())
	switch {
	case meta.N < 1 || meta.N > size/4: // every entry has a 4-byte row id
		return nil, bad("META says %d vectors in a %d-byte file", meta.N, size)
	case meta.Dim < 1 || meta.Dim > 1<<16:
		return nil, bad("META says dimension %d", meta.Dim)
	case meta.M < 1 || uint64(meta.M) > meta.N && meta.Flags&FlagSegment == 0:
		return nil, bad("META says %d anchors for %d vectors", meta.M, meta.N)
	case meta.Metric > Cosine:
		return nil, bad("META names unknown metric %d", meta.Metric)
	}
	code, err := quant.New(meta.CodeSpec())
	if err != nil {
		return nil, bad("%v", err)
	}
	n, d, m := int(meta.N), int(meta.Dim), int(meta.M)
	blocked, _ := code.(quant.Blocked)
	if f.Version() < 2 {
		blocked = nil // version 1 stored every code entry by entry
	}
	want := []struct {
		k     format.Kind
		bytes int
	}{ // in file order, so that the error names the first bad section
		{secAnchors, m * d * 2},
		{secLists, (m + 1) * 8},
		{secIDs, rowBytes(n, rowBits(n))},
		{secParams, m * code.ParamBytes()},
		{secCodes, n * code.CodeBytes()},
	}
	if blocked != nil {
		b, ok := f.Section(secBlocks)
		if !ok {
			return nil, bad("section %q missing", secBlocks)
		}
		sec[secBlocks] = b
		want[4].bytes = n*blocked.LowBytes() + quant.LowPad
		want = append(want, struct {
			k     format.Kind
			bytes int
		}{secBlocks, (n + quant.BlockLen - 1) / quant.BlockLen * blocked.BlockBytes()})
	}
	for _, w := range want {
		if len(sec[w.k]) != w.bytes {
			return nil, bad("section %q is %d bytes, want %d", w.k, len(sec[w.k]), w.bytes)
		}
	}
	ix = &Index{
		file: f, path: path, meta: meta, code: code, n: n, d: d, m: m,
		ipCodes: meta.Flags&FlagIPCodes != 0,
		// A copy, checked below: every scan takes its bounds from it, and
		// another program may rewrite the mapped file in place.
		lists:   slices.Clone(viewU64(sec[secLists])),
		ids:     newRowIDs(sec[secIDs], rowBits(n)),
		params:  sec[secParams],
		codes:   sec[secCodes],
		blocked: blocked,
		blocks:  sec[secBlocks],
	}
	if err := ix.loadKeys(f, bad); err != nil {
		return nil, err
	}
	if ix.lists[0] != 0 || ix.lists[m] != meta.N {
		return nil, bad("list offsets run from %d to %d, want 0 to %d", ix.lists[0], ix.lists[m], meta.N)
	}
	for a := range m {
		if ix.lists[a+1] < ix.lists[a] {
			return nil, bad("list %d ends before it starts", a)
		}
	}
	anch := make([]float32, m*d)
	for i, h := range viewU16(sec[secAnchors]) {
		if !f16.IsFinite(h) {
			return nil, bad("anchor %d is not finite", i/d)
		}
		anch[i] = f16.ToFloat32(h)
	}
	if tr, ok := code.(quant.Trainer); ok {
		g, found := f.Section(secGlobal)
		if !found || len(g) != tr.GlobalBytes() {
			return nil, bad("section %q is missing or %d bytes, want %d", secGlobal, len(g), tr.GlobalBytes())
		}
		if err := tr.SetGlobal(g); err != nil {
			return nil, bad("%v", err)
		}
	}
	code.SetAnchors(anch)
	ix.anchors = anch
	ix.norms = make([]float32, m)
	vec.Norms(ix.norms, anch, d)
	ix.panels.Set(anch, m, d)
	return ix, nil
}

// Verify checks every checksum of the file, and that the row ids are a
// permutation of 0..N-1 (each input row indexed exactly once).
func (ix *Index) Verify() error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return ErrClosed
	}
	if err := ix.file.Verify(); err != nil {
		return err
	}
	if err := ix.checkRowIDs(); err != nil {
		return err
	}
	return ix.checkKeys()
}

// checkRowIDs reports, as corrupt, a row id out of range or repeated: the
// checksums prove that the file is what was written, this that the writer
// indexed every row once (a search would otherwise return duplicates or
// miss rows). It costs one pass over ROWS and N/8 bytes.
func (ix *Index) checkRowIDs() (err error) {
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	seen := make([]uint64, (ix.n+63)/64)
	for e := range ix.n {
		id := ix.ids.at(e)
		if id >= ix.n {
			return fmt.Errorf("%s: %w: entry %d refers to row %d of %d", ix.path, ErrCorrupt, e, id, ix.n)
		}
		if seen[id/64]&(1<<(id%64)) != 0 {
			return fmt.Errorf("%s: %w: row %d is indexed twice (entry %d)", ix.path, ErrCorrupt, id, e)
		}
		seen[id/64] |= 1 << (id % 64)
	}
	return nil
}

// Close unmaps the file once searches in flight have finished.
func (ix *Index) Close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.file == nil {
		return nil
	}
	err := ix.file.Close()
	ix.file = nil
	ix.anchors = nil
	ix.panels, ix.lists, ix.ids, ix.params, ix.codes, ix.blocks = vec.Panels{}, nil, rowIDs{}, nil, nil, nil
	ix.keys, ix.payloads, ix.keyIndex = blobs{}, blobs{}, nil
	return err
}

// Meta returns the index's metadata.
func (ix *Index) Meta() Meta { return ix.meta }

// Len is the number of vectors; Dim their dimension.
func (ix *Index) Len() int { return ix.n }
func (ix *Index) Dim() int { return ix.d }

// Lists is the number of inverted lists: the anchors, and the most a search
// can probe.
func (ix *Index) Lists() int { return ix.m }

// Size is the file's size in bytes.
func (ix *Index) Size() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return 0
	}
	return ix.file.Size()
}

// Stat describes the file the index maps (format.File.Stat): with
// os.SameFile it tells whether a path still names this file. Nil once
// closed.
func (ix *Index) Stat() os.FileInfo {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil
	}
	return ix.file.Stat()
}

// Sections describes the file's sections, for `vlc info`.
func (ix *Index) Sections() []format.SectionInfo {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil
	}
	return ix.file.Sections()
}

// ListSizes returns the number of vectors in each list (nil after Close).
func (ix *Index) ListSizes() []int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil
	}
	out := make([]int, len(ix.lists)-1)
	for a := range out {
		out[a] = int(ix.lists[a+1] - ix.lists[a])
	}
	return out
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// The views below reinterpret 64-byte-aligned little-endian sections in
// place; Open has checked the host's byte order.
func viewU16(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

func viewU64(b []byte) []uint64 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}

func finite(v float32) bool { return v-v == 0 }

// Anchors returns a copy of the anchors as search uses them (the stored
// float16 values), M rows of Dim.
func (ix *Index) Anchors() []float32 {
	return append([]float32(nil), ix.anchors...)
}

// Params returns the lists' parameters (PARM: ParamBytes per list, as
// the code fitted them), a copy: with Anchors, Global and the META's
// code and seed, the frozen model another set of rows can be encoded
// under (Plan.Params).
func (ix *Index) Params() []byte {
	return append([]byte(nil), ix.params...)
}

// Global returns the code's shared parameters (the pq code's codebooks,
// section QGLB), nil for codes without them.
func (ix *Index) Global() []byte {
	if b, ok := ix.file.Section(secGlobal); ok {
		return b
	}
	return nil
}

// Nearest returns the anchor nearest to x in squared distance (the
// anchor training would assign it), and that distance.
// dots is scratch of at least NearestScratch values.
func (ix *Index) Nearest(x, dots []float32) (int, float32) {
	ix.panels.Dots1(x, dots)
	best, bd := 0, float32(math.Inf(1))
	for a, qa := range dots[:ix.m] {
		if d := ix.norms[a] - 2*qa; d < bd {
			best, bd = a, d
		}
	}
	return best, vec.L2(x, ix.anchors[best*ix.d:(best+1)*ix.d])
}

// NearestScratch is the scratch Nearest needs.
func (ix *Index) NearestScratch() int { return ix.panels.Stride() }
