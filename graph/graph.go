// Package graph builds and searches a proximity graph over the rows of a
// vlc index: every row keeps at most R neighbours, a search walks the graph
// with a beam of width ef from the starting rows of the anchors nearest the
// query, scoring rows from the index's own rotated codes (or a split code
// of the graph's own), and may re-rank its best candidates from the
// original vectors. Build makes one in memory
// (it copies what it reads from the index); WriteFile stores it in the
// index's file (section GRPH) and Open reads it back, mapped in place.
// README.md has the measurements behind its choices.
package graph

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vlc-embed/vlc/internal/errs"
)

var (
	// ErrArgument marks bad options or queries.
	ErrArgument = errs.ErrArgument
	// ErrEmpty is returned for an index without rows: a graph needs one.
	ErrEmpty = errs.New(errs.ErrArgument, "graph: the index has no rows")
	// ErrUnsupported is returned for an index the graph cannot score:
	// codes other than the rotated one, or a metric other than l2.
	ErrUnsupported = errs.New(errs.ErrArgument, "graph: index not supported")
)

// noEdge fills the unused neighbour slots of a row.
const noEdge = ^uint32(0)

// Graph is a proximity graph over an index's rows and the rows' codes, as
// the search scores them. Safe for concurrent searches.
type Graph struct {
	n, d, r int
	// adj holds each row's neighbours, nearest first, in r slots of
	// bits.Len(n) bits.
	adj packedSlots
	// compact, when set, is the adjacency in place of adj
	// (BuildOptions.Compact).
	compact *compactSlots
	entry   uint32 // the row nearest the mean, from which every row is reached
	// reps[a*perList:(a+1)*perList] are anchor a's starting rows, spread
	// over its list (noEdge past a short list's): a search starts from
	// those of the anchors nearest the query, so that it starts inside
	// the query's cluster even where an anchor's list holds several.
	reps    []uint32
	perList int
	nodes   nodeCodes
	// refine, when set, holds the low levels of a split code
	// (BuildOptions.Bits): nodes then holds its top 4 bits.
	refine *refineCodes
	pool   sync.Pool // *searcher
	// lists indexes the rows by list for SearchOptions.ScanLists, made
	// at the first search that asks (under listsMu).
	lists   atomic.Pointer[listIndex]
	listsMu sync.Mutex
	opt     BuildOptions // as built, defaults filled in
	// path names the index file whose mapping holds adj, reps and
	// nodes.data when the graph was read from one (Open); empty for a
	// graph built in memory.
	path string
}

// Len is the number of rows.
func (g *Graph) Len() int { return g.n }

// Dim is the rows' dimension.
func (g *Graph) Dim() int { return g.d }

// Degree is the most neighbours a row keeps.
func (g *Graph) Degree() int { return g.r }

// Entry is the row from which every row is reached.
func (g *Graph) Entry() int { return int(g.entry) }

// Neighbours returns row i's neighbours, nearest first.
// A compact adjacency (BuildOptions.Compact) gives them by row instead.
func (g *Graph) Neighbours(i int) []uint32 { return g.walkAdj().neighbours(nil, uint32(i)) }

// walkAdj is the adjacency a walk reads.
func (g *Graph) walkAdj() adjacency {
	if g.compact != nil {
		return g.compact
	}
	return g.adj
}

// Size is what a search reads at most, in bytes: the adjacency (Degree
// slots a row of bits.Len(Len()) bits, packed, or the compact lists and
// their block offsets) and the rows' codes (their packed levels and three
// 4-byte scalars; for a split code its top 4 bits, three 2-byte scalars,
// the low levels and two float16), re-rank vectors and a split code's
// scales (12 bytes a list) not included.
func (g *Graph) Size() (adjacency, codes int64) {
	adjacency, codes = int64(len(g.adj.data)), int64(len(g.nodes.data))
	if g.compact != nil {
		adjacency = g.compact.bytes()
	}
	if g.refine != nil {
		codes += int64(len(g.refine.data))
	}
	return adjacency, codes
}

// Float16Size is the bytes of the rows as float16, the unit of the
// project's size ratios.
func (g *Graph) Float16Size() int64 { return int64(g.n) * int64(g.d) * 2 }

func argErr(format string, a ...any) error {
	return fmt.Errorf("%w: graph: "+format, append([]any{ErrArgument}, a...)...)
}
