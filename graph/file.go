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

// The section is a 64-byte header, then the adjacency, the starting rows,
// the node records and, for a split code, its low levels, each from a
// multiple of 64 bytes (zeros between), so that each is used in place
// from the mapping.
const headerBytes = 64

// Header fields, by byte offset.
const (
	hRows       = 0  // uint32 N, the index's rows
	hDim        = 4  // uint32 D
	hAnchors    = 8  // uint32 M, the index's lists
	hBits       = 12 // uint32, bits a level of the node records; a split code's bits (5..8)
	hDegree     = 16 // uint32 R, slots a row
	hSlotBits   = 20 // uint32 W = bits.Len(N)
	hEntry      = 24 // uint32, the row every row is reached from
	hPerList    = 28 // uint32, starting rows an anchor
	hFlags      = 32 // uint32, flag* below
	hAlpha      = 36 // float32
	hCandidates = 40 // uint32
	hNProbe     = 44 // uint32
	hPasses     = 48 // int32
	hBuildEf    = 52 // uint32
	hReserved   = 56 // 8 zero bytes
)

// Header flags. Compact and split need format version 4: a reader of
// version 3 refuses the file (index/format's ErrVersion) rather than
// take the section for a corrupt one.
const (
	flagDecoded = 1 << iota // K of the decoded form (BuildOptions.Decoded)
	flagCompact             // the adjacency is compactSlots (BuildOptions.Compact)
	flagSplit               // a split code (BuildOptions.Bits): the node records its top 4 bits, its low levels after them
	knownFlags  = flagDecoded | flagCompact | flagSplit
)

// sectionVersion is the format version a section of these flags is
// written under.
func sectionVersion(flags uint32) uint32 {
	if flags&(flagCompact|flagSplit) != 0 {
		return 4
	}
	return 3
}

// parts is where the parts of a section start: the adjacency's data
// ends at adjEnd, 8 zero bytes at least follow it; scales is nodes, and
// lows end, where there is no split code.
type parts struct {
	adj, adjEnd, starts, scales, nodes, lows, end int64
}

// sectionParts lays out a section of adjBytes of adjacency (packed
// slots, or the compact lists with their length and block offsets),
// m*perList starting rows, n node records of nodeStride bytes and, for
// a split code (lowStride above 0), m anchors' scales and n low-level
// records of lowStride. The layout of version 3 is unchanged: its
// adjacency is (n*r*w+7)/8 bytes of packed slots.
func sectionParts(n, m, perList, adjBytes, nodeStride, lowStride int64) parts {
	up := func(x int64) int64 { return (x + 63) &^ 63 }
	var p parts
	p.adj = headerBytes
	p.adjEnd = p.adj + adjBytes
	p.starts = up(p.adjEnd + 8)
	p.scales = up(p.starts + m*perList*4)
	p.nodes = p.scales
	if lowStride > 0 {
		p.nodes = up(p.scales + m*scaleBytes)
	}
	p.lows = p.nodes + n*nodeStride
	p.end = p.lows
	if lowStride > 0 {
		p.lows = up(p.lows)
		p.end = p.lows + n*lowStride
	}
	return p
}

// scaleBytes is the bytes of an anchor's scales (nodeCodes.scales).
const scaleBytes = 12

// compactHead is the bytes of a compact adjacency before its lists: the
// lists' length (uint64) and a block offset (uint32) every compactRows
// rows.
func compactHead(n int64) int64 { return 8 + 4*((n+compactRows-1)/compactRows) }

// Options returns the options the graph was built with, defaults filled
// in (Degree and StartsPerList as the graph has them).
func (g *Graph) Options() BuildOptions { return g.opt }

// flags is the section's header flags for g.
func (g *Graph) flags() uint32 {
	var f uint32
	if g.opt.Decoded {
		f |= flagDecoded
	}
	if g.compact != nil {
		f |= flagCompact
	}
	if g.refine != nil {
		f |= flagSplit
	}
	return f
}

// appendSection appends the graph's section data to dst.
func (g *Graph) appendSection(dst []byte) []byte {
	m := len(g.reps) / g.perList
	w := bits.Len(uint(g.n))
	adjBytes := (int64(g.n)*int64(g.r)*int64(w) + 7) / 8
	if c := g.compact; c != nil {
		adjBytes = compactHead(int64(g.n)) + int64(len(c.data)-8)
	}
	var lowStride int64
	if g.refine != nil {
		lowStride = int64(g.refine.stride)
	}
	p := sectionParts(int64(g.n), int64(m), int64(g.perList), adjBytes, int64(g.nodes.stride), lowStride)
	out := make([]byte, p.end)
	le := binary.LittleEndian
	o := g.opt
	le.PutUint32(out[hRows:], uint32(g.n))
	le.PutUint32(out[hDim:], uint32(g.d))
	le.PutUint32(out[hAnchors:], uint32(m))
	if g.refine != nil {
		le.PutUint32(out[hBits:], uint32(g.refine.bits))
	} else {
		le.PutUint32(out[hBits:], uint32(g.nodes.bits))
	}
	le.PutUint32(out[hDegree:], uint32(g.r))
	le.PutUint32(out[hSlotBits:], uint32(w))
	le.PutUint32(out[hEntry:], g.entry)
	le.PutUint32(out[hPerList:], uint32(g.perList))
	le.PutUint32(out[hFlags:], g.flags())
	le.PutUint32(out[hAlpha:], math.Float32bits(o.Alpha))
	le.PutUint32(out[hCandidates:], uint32(o.Candidates))
	le.PutUint32(out[hNProbe:], uint32(o.NProbe))
	le.PutUint32(out[hPasses:], uint32(int32(o.Passes)))
	le.PutUint32(out[hBuildEf:], uint32(o.BuildEf))
	if c := g.compact; c != nil {
		le.PutUint64(out[p.adj:], uint64(len(c.data)-8))
		for i, v := range c.offs {
			le.PutUint32(out[p.adj+8+int64(i)*4:], v)
		}
		copy(out[p.adj+compactHead(int64(g.n)):p.adjEnd], c.data)
	} else {
		copy(out[p.adj:], g.adj.data)
	}
	for i, v := range g.reps {
		le.PutUint32(out[p.starts+int64(i)*4:], v)
	}
	for i, v := range g.nodes.scales {
		le.PutUint32(out[p.scales+int64(i)*4:], math.Float32bits(v))
	}
	copy(out[p.nodes:], g.nodes.data)
	if g.refine != nil {
		copy(out[p.lows:], g.refine.data)
	}
	return append(dst, out...)
}

// WriteFile writes ix's file anew to path (atomically: a temporary file
// renamed over it, format.WriteFileContext) with g as its graph, in place
// of any graph the file held; path may be ix's own file, which ix keeps
// mapped as it was. g must have been built over ix (Build). The file is
// format version 3, or 4 for a compact adjacency or a split code.
func WriteFile(ctx context.Context, path string, ix *index.Index, g *Graph) error {
	if ix == nil || g == nil {
		return argErr("no index or no graph")
	}
	bitsOK := g.refine != nil || g.nodes.bits == int(ix.Meta().Bits)
	if g.n != ix.Len() || g.d != ix.Dim() || len(g.reps)/g.perList != ix.Lists() || !bitsOK {
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
	secs = append(secs, format.Section{Kind: SectionKind, Data: g.appendSection(nil), Version: sectionVersion(g.flags())})
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
// section's size, every neighbour and starting row against the rows,
// every record's list against the lists and its scalars for finiteness,
// and a compact adjacency row by row, so that a damaged section gives an
// error wrapping index.ErrCorrupt that names the field, never a wrong
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
	g, err = openSection(ix, b)
	if err != nil {
		return nil, err
	}
	g.path = ix.Path()
	return g, nil
}

// openSection is Open of the section b, which the graph then reads in
// place.
func openSection(ix *index.Index, b []byte) (*Graph, error) {
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
	}{{"rows", hRows, n}, {"dim", hDim, d}, {"anchors", hAnchors, m}, {"slot bits", hSlotBits, bits.Len(uint(n))}} {
		if err := field(f.name, f.at, f.want); err != nil {
			return nil, err
		}
	}
	flags := u(hFlags)
	if flags&^knownFlags != 0 {
		return nil, bad("field flags is %#x, only bits 0 to 2 are defined", flags)
	}
	var rc *refineCodes
	if flags&flagSplit != 0 {
		if flags&flagDecoded != 0 {
			return nil, bad("field flags is %#x: a split code (bit 2) is not decoded (bit 0)", flags)
		}
		if sb := u(hBits); sb < 5 || sb > 8 {
			return nil, bad("field bits is %d, a split code's 5 to 8", sb)
		}
		rc = splitFrame(&nc, d, m, int(u(hBits)))
	} else if err := field("bits", hBits, nc.bits); err != nil {
		return nil, err
	}
	opt := BuildOptions{
		Degree: int(u(hDegree)), StartsPerList: int(u(hPerList)),
		Alpha: math.Float32frombits(u(hAlpha)), Candidates: int(u(hCandidates)),
		NProbe: int(u(hNProbe)), Passes: int(int32(u(hPasses))), BuildEf: int(u(hBuildEf)),
		Decoded: flags&flagDecoded != 0, Compact: flags&flagCompact != 0,
	}
	if rc != nil {
		opt.Bits = rc.bits
	}
	entry := u(hEntry)
	switch {
	case opt.Degree < 1 || opt.Degree > 1024:
		return nil, bad("field degree is %d, outside 1..1024", opt.Degree)
	case opt.StartsPerList < 1 || opt.StartsPerList > 1024:
		return nil, bad("field starts per list is %d, outside 1..1024", opt.StartsPerList)
	case int64(entry) >= int64(n):
		return nil, bad("field entry is row %d of %d", entry, n)
	case !(opt.Alpha >= 1) || math.IsInf(float64(opt.Alpha), 0):
		return nil, bad("field alpha is %v, want a finite value of at least 1", opt.Alpha)
	case opt.Candidates < 1 || opt.BuildEf < 1 || opt.NProbe < 0:
		return nil, bad("fields candidates %d, build ef %d, nprobe %d: want at least 1, 1 and 0", opt.Candidates, opt.BuildEf, opt.NProbe)
	case le.Uint64(b[hReserved:]) != 0:
		return nil, bad("reserved header bytes are not zero")
	}
	r, w := opt.Degree, bits.Len(uint(n))
	adjBytes := (int64(n)*int64(r)*int64(w) + 7) / 8
	var lists int64 // a compact adjacency's lists, in bytes
	if opt.Compact {
		if len(b) < headerBytes+8 {
			return nil, bad("%d bytes, too short for a compact adjacency", len(b))
		}
		if lists = int64(le.Uint64(b[headerBytes:])); lists < 0 || lists > int64(len(b)) {
			return nil, bad("compact adjacency: lists of %d bytes in a section of %d", uint64(lists), len(b))
		}
		adjBytes = compactHead(int64(n)) + lists
	}
	var lowStride int64
	if rc != nil {
		lowStride = int64(rc.stride)
	}
	p := sectionParts(int64(n), int64(m), int64(opt.StartsPerList), adjBytes, int64(nc.stride), lowStride)
	if int64(len(b)) != p.end {
		what := ""
		if rc != nil {
			what = fmt.Sprintf(", %d-bit split code", rc.bits)
		}
		if opt.Compact {
			what += fmt.Sprintf(", %d bytes of compact lists", lists)
		}
		return nil, bad("%d bytes, want %d for %d rows of degree %d, %d lists of %d starting rows and %d-byte node records%s",
			len(b), p.end, n, r, m, opt.StartsPerList, nc.stride, what)
	}
	startsEnd := p.starts + int64(m*opt.StartsPerList*4)
	scalesEnd := p.scales
	if rc != nil {
		scalesEnd += int64(m) * scaleBytes
	}
	for _, z := range []struct {
		name     string
		from, to int64
	}{{"adjacency padding", p.adjEnd, p.starts}, {"starting rows padding", startsEnd, p.scales},
		{"scales padding", scalesEnd, p.nodes}, {"node records padding", p.nodes + int64(n)*int64(nc.stride), p.lows}} {
		if i := firstNonZero(b[z.from:z.to]); i >= 0 {
			return nil, bad("%s is not zero (byte %d of the section)", z.name, z.from+int64(i))
		}
	}
	g := &Graph{n: n, d: d, r: r, entry: entry, perList: opt.StartsPerList, opt: opt, refine: rc}
	if opt.Compact {
		at := p.adj + compactHead(int64(n))
		c := &compactSlots{data: b[at : p.adjEnd+8 : p.adjEnd+8], offs: viewU32(b[p.adj+8 : at]), r: r, cb: bits.Len(uint(r)), w: w}
		if err := c.check(n); err != "" {
			return nil, bad("compact adjacency: %s", err)
		}
		g.compact = c
	} else {
		g.adj = packedSlots{data: b[p.adj : p.adjEnd+8 : p.adjEnd+8], r: r, w: w, none: uint32(n)}
		var nbs []uint32
		for i := range n {
			nbs = g.adj.neighbours(nbs[:0], uint32(i))
			for k, v := range nbs {
				if v > uint32(n) {
					return nil, bad("adjacency: row %d, slot %d holds row %d of %d", i, k, v, n)
				}
			}
		}
	}
	g.reps = viewU32(b[p.starts:startsEnd])
	for i, v := range g.reps {
		if v != noEdge && int64(v) >= int64(n) {
			return nil, bad("starting rows: list %d, start %d is row %d of %d", i/opt.StartsPerList, i%opt.StartsPerList, v, n)
		}
	}
	if rc != nil {
		nc.scales = viewF32(b[p.scales:scalesEnd])
		for a := range m {
			s := nc.scales[3*a : 3*a+3]
			if !finite32(s[0]) || !(s[1] >= 0) || !(s[2] >= 0) || !finite32(s[0]+65535*s[1]) || !finite32(65535*s[2]) {
				return nil, bad("scales: list %d has K offset %v and steps %v and %v", a, s[0], s[1], s[2])
			}
		}
	}
	nodesEnd := p.nodes + int64(n)*int64(nc.stride)
	nc.data = b[p.nodes:nodesEnd:nodesEnd]
	at := nc.packed
	for i := range n {
		rec := nc.data[i*nc.stride : (i+1)*nc.stride]
		var a uint32
		switch {
		case rc == nil:
			a = le.Uint32(rec[at+8:])
		case nc.listBytes == 2:
			a = uint32(le.Uint16(rec[at+4:]))
		default:
			a = le.Uint32(rec[at+4:])
		}
		if int64(a) >= int64(m) {
			return nil, bad("node record %d: list %d of %d", i, a, m)
		}
		if rc != nil {
			continue
		}
		k, beta := math.Float32frombits(le.Uint32(rec[at:])), math.Float32frombits(le.Uint32(rec[at+4:]))
		if !finite32(k) || !finite32(beta) {
			return nil, bad("node record %d: scalars %v and %v are not finite", i, k, beta)
		}
	}
	g.nodes = nc
	if rc != nil {
		rc.data = b[p.lows:p.end:p.end]
		if err := rc.check(n, d); err != "" {
			return nil, bad("split code: %s", err)
		}
	}
	return g, nil
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

// viewF32 reads a 4-byte-aligned part of a mapped section in place.
func viewF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// viewU32 reads a 4-byte-aligned part of a mapped section in place (the
// index refuses hosts that are not little-endian).
func viewU32(b []byte) []uint32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}
