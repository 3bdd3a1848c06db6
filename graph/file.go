package graph

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"runtime/debug"
	"unsafe"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/errs"
)

// SectionKind is the index-file section that holds a graph. A file with
// one is written under format version 3 (docs/FORMAT.md, "GRPH").
var SectionKind = format.KindOf("GRPH")

// ErrNoGraph is returned by Open for an index whose file holds no graph.
var ErrNoGraph = errs.New(errs.ErrNotFound, "graph: the index holds no graph")

// The section is a 64-byte header, then the adjacency, the starting rows
// and the node records, each from a multiple of 64 bytes (zeros between),
// so that each is used in place from the mapping.
const headerBytes = 64

// Header fields, by byte offset.
const (
	hRows       = 0  // uint32 N, the index's rows
	hDim        = 4  // uint32 D
	hAnchors    = 8  // uint32 M, the index's lists
	hBits       = 12 // uint32, bits a level of the node records
	hDegree     = 16 // uint32 R, slots a row
	hSlotBits   = 20 // uint32 W = bits.Len(N)
	hEntry      = 24 // uint32, the row every row is reached from
	hPerList    = 28 // uint32, starting rows an anchor
	hFlags      = 32 // uint32, bit 0: Decoded
	hAlpha      = 36 // float32
	hCandidates = 40 // uint32
	hNProbe     = 44 // uint32
	hPasses     = 48 // int32
	hBuildEf    = 52 // uint32
	hReserved   = 56 // 8 zero bytes
)

const flagDecoded = 1

// sectionLayout is where the parts of a section of these sizes start,
// and its length.
func sectionLayout(n, r, w, m, perList, stride int64) (adj, starts, nodes, end int64) {
	up := func(x int64) int64 { return (x + 63) &^ 63 }
	adj = headerBytes
	starts = up(adj + (n*r*w+7)/8 + 8)
	nodes = up(starts + m*perList*4)
	return adj, starts, nodes, nodes + n*stride
}

// Options returns the options the graph was built with, defaults filled
// in (Degree and StartsPerList as the graph has them).
func (g *Graph) Options() BuildOptions { return g.opt }

// appendSection appends the graph's section data to dst.
func (g *Graph) appendSection(dst []byte) []byte {
	m := len(g.reps) / g.perList
	adjAt, startsAt, nodesAt, end := sectionLayout(int64(g.n), int64(g.r), int64(g.adj.w), int64(m), int64(g.perList), int64(g.nodes.stride))
	out := make([]byte, end)
	le := binary.LittleEndian
	o := g.opt
	le.PutUint32(out[hRows:], uint32(g.n))
	le.PutUint32(out[hDim:], uint32(g.d))
	le.PutUint32(out[hAnchors:], uint32(m))
	le.PutUint32(out[hBits:], uint32(g.nodes.bits))
	le.PutUint32(out[hDegree:], uint32(g.r))
	le.PutUint32(out[hSlotBits:], uint32(g.adj.w))
	le.PutUint32(out[hEntry:], g.entry)
	le.PutUint32(out[hPerList:], uint32(g.perList))
	if o.Decoded {
		le.PutUint32(out[hFlags:], flagDecoded)
	}
	le.PutUint32(out[hAlpha:], math.Float32bits(o.Alpha))
	le.PutUint32(out[hCandidates:], uint32(o.Candidates))
	le.PutUint32(out[hNProbe:], uint32(o.NProbe))
	le.PutUint32(out[hPasses:], uint32(int32(o.Passes)))
	le.PutUint32(out[hBuildEf:], uint32(o.BuildEf))
	copy(out[adjAt:], g.adj.data)
	for i, v := range g.reps {
		le.PutUint32(out[startsAt+int64(i)*4:], v)
	}
	copy(out[nodesAt:], g.nodes.data)
	return append(dst, out...)
}

// WriteFile writes ix's file anew to path (atomically: a temporary file
// renamed over it, format.WriteFileContext) with g as its graph, in place
// of any graph the file held; path may be ix's own file, which ix keeps
// mapped as it was. g must have been built over ix (Build).
func WriteFile(ctx context.Context, path string, ix *index.Index, g *Graph) error {
	if ix == nil || g == nil {
		return argErr("no index or no graph")
	}
	if g.compact != nil || g.refine != nil {
		return fmt.Errorf("%w: a compact adjacency or a split code is not stored in the file yet", ErrUnsupported)
	}
	if g.n != ix.Len() || g.d != ix.Dim() || len(g.reps)/g.perList != ix.Lists() || g.nodes.bits != int(ix.Meta().Bits) {
		return argErr("graph of %d x %d over %d lists at %d bits, the index %d x %d over %d at %d: build the graph over this index",
			g.n, g.d, len(g.reps)/g.perList, g.nodes.bits, ix.Len(), ix.Dim(), ix.Lists(), ix.Meta().Bits)
	}
	var secs []format.Section
	for _, s := range ix.Sections() {
		if s.Kind == SectionKind {
			continue
		}
		data, ok := ix.Section(s.Kind)
		if !ok {
			return fmt.Errorf("graph: write %s: %w", path, index.ErrClosed)
		}
		secs = append(secs, format.Section{Kind: s.Kind, Data: data})
	}
	secs = append(secs, format.Section{Kind: SectionKind, Data: g.appendSection(nil)})
	return writeGuarded(ctx, path, ix.Path(), secs)
}

// writeGuarded writes the sections, the old file's mapped sections among
// them: a fault there (the file truncated meanwhile) is an error naming
// it.
func writeGuarded(ctx context.Context, path, mapped string, secs []format.Section) (err error) {
	defer format.CatchFault(mapped, &err, debug.SetPanicOnFault(true))
	return format.WriteFileContext(ctx, path, secs)
}

// Open returns the graph ix's file holds (ErrNoGraph when none), its
// adjacency, starting rows and node records read in place from the
// mapping: the graph is valid while ix is open, and a search of it after
// ix.Close is undefined. Every field is checked against the index and the
// section's size, every neighbour and starting row against the rows and
// every record's list against the lists, so that a damaged section gives
// an error wrapping index.ErrCorrupt that names the field, never a wrong
// read; the checks read the whole section once.
func Open(ix *index.Index) (g *Graph, err error) {
	if ix == nil {
		return nil, argErr("no index")
	}
	b, ok := ix.Section(SectionKind)
	if !ok {
		return nil, fmt.Errorf("%s: %w", ix.Path(), ErrNoGraph)
	}
	defer format.CatchFault(ix.Path(), &err, debug.SetPanicOnFault(true))
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: %w: section %q: %s", ix.Path(), index.ErrCorrupt, SectionKind, fmt.Sprintf(format, a...))
	}
	nc, err := newNodeFrame(ix)
	if err != nil {
		return nil, bad("the index cannot carry a graph: %v", err)
	}
	if len(b) < headerBytes {
		return nil, bad("%d bytes, shorter than its %d-byte header", len(b), headerBytes)
	}
	le := binary.LittleEndian
	u := func(at int) uint32 { return le.Uint32(b[at:]) }
	n, d, m := ix.Len(), ix.Dim(), ix.Lists()
	field := func(name string, at int, want int) error {
		if got := u(at); int64(got) != int64(want) {
			return bad("field %s is %d, the index's %d", name, got, want)
		}
		return nil
	}
	for _, f := range []struct {
		name     string
		at, want int
	}{{"rows", hRows, n}, {"dim", hDim, d}, {"anchors", hAnchors, m}, {"bits", hBits, nc.bits}, {"slot bits", hSlotBits, bits.Len(uint(n))}} {
		if err := field(f.name, f.at, f.want); err != nil {
			return nil, err
		}
	}
	opt := BuildOptions{
		Degree: int(u(hDegree)), StartsPerList: int(u(hPerList)),
		Alpha: math.Float32frombits(u(hAlpha)), Candidates: int(u(hCandidates)),
		NProbe: int(u(hNProbe)), Passes: int(int32(u(hPasses))), BuildEf: int(u(hBuildEf)),
		Decoded: u(hFlags)&flagDecoded != 0,
	}
	entry := u(hEntry)
	switch {
	case opt.Degree < 1 || opt.Degree > 1024:
		return nil, bad("field degree is %d, outside 1..1024", opt.Degree)
	case opt.StartsPerList < 1 || opt.StartsPerList > 1024:
		return nil, bad("field starts per list is %d, outside 1..1024", opt.StartsPerList)
	case int64(entry) >= int64(n):
		return nil, bad("field entry is row %d of %d", entry, n)
	case u(hFlags)&^flagDecoded != 0:
		return nil, bad("field flags is %#x, only bit 0 is defined", u(hFlags))
	case !(opt.Alpha >= 1) || math.IsInf(float64(opt.Alpha), 0):
		return nil, bad("field alpha is %v, want a finite value of at least 1", opt.Alpha)
	case opt.Candidates < 1 || opt.BuildEf < 1 || opt.NProbe < 0:
		return nil, bad("fields candidates %d, build ef %d, nprobe %d: want at least 1, 1 and 0", opt.Candidates, opt.BuildEf, opt.NProbe)
	case le.Uint64(b[hReserved:]) != 0:
		return nil, bad("reserved header bytes are not zero")
	}
	r, w := opt.Degree, bits.Len(uint(n))
	adjAt, startsAt, nodesAt, end := sectionLayout(int64(n), int64(r), int64(w), int64(m), int64(opt.StartsPerList), int64(nc.stride))
	if int64(len(b)) != end {
		return nil, bad("%d bytes, want %d for %d rows of degree %d, %d lists of %d starting rows and %d-byte node records",
			len(b), end, n, r, m, opt.StartsPerList, nc.stride)
	}
	adjEnd := adjAt + (int64(n)*int64(r)*int64(w)+7)/8
	for _, z := range []struct {
		name     string
		from, to int64
	}{{"adjacency padding", adjEnd, startsAt}, {"starting rows padding", startsAt + int64(m*opt.StartsPerList*4), nodesAt}} {
		if i := firstNonZero(b[z.from:z.to]); i >= 0 {
			return nil, bad("%s is not zero (byte %d of the section)", z.name, z.from+int64(i))
		}
	}
	adj := packedSlots{data: b[adjAt : adjEnd+8 : adjEnd+8], r: r, w: w, none: uint32(n)}
	var nbs []uint32
	for i := range n {
		nbs = adj.neighbours(nbs[:0], uint32(i))
		for k, v := range nbs {
			if v > uint32(n) {
				return nil, bad("adjacency: row %d, slot %d holds row %d of %d", i, k, v, n)
			}
		}
	}
	reps := viewU32(b[startsAt : startsAt+int64(m*opt.StartsPerList*4)])
	for i, v := range reps {
		if v != noEdge && int64(v) >= int64(n) {
			return nil, bad("starting rows: list %d, start %d is row %d of %d", i/opt.StartsPerList, i%opt.StartsPerList, v, n)
		}
	}
	nc.data = b[nodesAt:end:end]
	p := nc.packed
	for i := range n {
		rec := nc.data[i*nc.stride : (i+1)*nc.stride]
		k, beta := math.Float32frombits(le.Uint32(rec[p:])), math.Float32frombits(le.Uint32(rec[p+4:]))
		if a := le.Uint32(rec[p+8:]); int64(a) >= int64(m) {
			return nil, bad("node record %d: list %d of %d", i, a, m)
		}
		if !finite32(k) || !finite32(beta) {
			return nil, bad("node record %d: scalars %v and %v are not finite", i, k, beta)
		}
	}
	return &Graph{n: n, d: d, r: r, adj: adj, entry: entry, reps: reps, perList: opt.StartsPerList,
		nodes: nc, opt: opt, path: ix.Path()}, nil
}

func finite32(v float32) bool { return v-v == 0 }

func firstNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

// viewU32 reads a 4-byte-aligned part of a mapped section in place (the
// index refuses hosts that are not little-endian).
func viewU32(b []byte) []uint32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}
