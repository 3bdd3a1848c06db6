package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"unsafe"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/fault"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/vecfile"
)

// Rows is a read-only matrix of vectors, such as a file opened with
// package vecfile: queries for SearchBatch.
type Rows = index.Rows

// Hit is one search result: the id of a vector, its payload (a copy; nil
// when it has none) and its distance to the query (smaller is nearer,
// whatever the metric: squared L2, negative inner product, or 1 - cosine).
// An l2 or cosine distance is never below 0: the code's estimate for a
// vector next to the query can be, and is returned as 0, in the
// estimate's order.
type Hit struct {
	ID       string
	Distance float32
	Payload  []byte
}

// Defaults of SearchOptions, the same as the CLI's.
const (
	DefaultK            = 10
	DefaultNProbe       = 16
	DefaultRerankFactor = 10
)

// SearchOptions sets what a search returns and how hard it looks. The
// zero value asks for the CLI's defaults.
type SearchOptions struct {
	K int // hits wanted (0: DefaultK); fewer when the index holds fewer
	// NProbe is the lists scanned, nearest anchors first (0:
	// DefaultNProbe; at most the number of lists). More lists, better
	// recall, slower search.
	NProbe int
	// Filter, when set, restricts the hits to the vectors it allows
	// (AllowIDs, Where).
	Filter Filter
	// Rerank, when set, gives the original vectors: the best
	// RerankFactor*K hits by code (0: DefaultRerankFactor) are scored
	// again exactly and the best K of those returned.
	Rerank       Originals
	RerankFactor int
	// Radius, when not 0, drops the hits farther than it (a search by
	// radius: at most K hits, so ask for a K that covers the
	// neighbourhood). Distances are as Hit's: under ip they are negative
	// inner products, so a bound there is negative.
	Radius float32
	// Ef is how wide a walk of a segment's graph searches (vlc graph
	// builds one into an index file): the rows its beam keeps (0:
	// graph.DefaultEf; raised to the hits kept, K or K*RerankFactor
	// when re-ranking). A search walks the graph of every segment that
	// holds one and scans NProbe lists of the others; a negative Ef
	// scans the lists of every segment, graph or not. A store opened on
	// a device scans the lists, whatever Ef.
	Ef int
	// SeedProbe, when above 0, also starts each graph's walk from the
	// hits of its segment's own search of this many lists (unfiltered:
	// they only start the walk): what keeps a walk in the query's
	// cluster where clusters lie far apart (graph/README.md), at the
	// cost of that search. An error with a negative Ef.
	SeedProbe int
	// ScanLists, when above 0, also starts each graph's walk from every
	// row of the query's this many nearest lists, scored by the graph's
	// own codes (graph.SearchOptions.ScanLists): SeedProbe's effect
	// without reading the segment's list codes. An error with a
	// negative Ef.
	ScanLists int
}

// Originals looks up the original vector of an id, for re-ranking.
type Originals interface {
	// Vector writes the vector of id to dst (Dim long) and returns it.
	Vector(id string, dst []float32) ([]float32, error)
}

// RowOriginals serves Originals from a matrix whose row i is the vector
// with id i in decimal: the input file of an index compressed without
// ids (vecfile.Open gives one). A search re-ranks from it only the rows
// that still hold their row of that file (Info.FromInput): a row added
// later, even under an id that a deleted row of the file had, keeps the
// distance its code estimates, and so does every row of an index written
// with ids of its own.
func RowOriginals(rows Rows) Originals { return rowOriginals{rows} }

type rowOriginals struct{ rows Rows }

func (r rowOriginals) Vector(id string, dst []float32) ([]float32, error) {
	var i int
	if _, err := fmt.Sscan(id, &i); err != nil || i < 0 || i >= r.rows.Len() || fmt.Sprint(i) != id {
		return nil, fmt.Errorf("%w: id %q is not a row of the re-rank vectors (%d rows)", index.ErrArgument, id, r.rows.Len())
	}
	return r.rows.Row(i, dst), nil
}

func (o SearchOptions) withDefaults() SearchOptions {
	o.K = cmp.Or(o.K, DefaultK)
	o.NProbe = cmp.Or(o.NProbe, DefaultNProbe)
	o.RerankFactor = cmp.Or(o.RerankFactor, DefaultRerankFactor)
	return o
}

// Search returns the K nearest live vectors to q that the filter allows,
// nearest first. It returns ctx's error once ctx is done (checked every
// few lists). Under cosine a zero q is refused (ErrZeroVector).
func (ix *Store) Search(ctx context.Context, q []float32, opt SearchOptions) ([]Hit, error) {
	snap, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer snap.release()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return snap.search(ctx, q, opt.withDefaults())
}

// SearchBatch searches for every query, on all cores, and returns each
// one's hits in order, as Search would. The first error stops the work:
// a query's names it; ctx's comes back as it is.
func (ix *Store) SearchBatch(ctx context.Context, queries [][]float32, opt SearchOptions) ([][]Hit, error) {
	return ix.SearchRows(ctx, matrix(queries), opt)
}

// SearchRows is SearchBatch over queries held as Rows (a query file).
func (ix *Store) SearchRows(ctx context.Context, queries Rows, opt SearchOptions) ([][]Hit, error) {
	snap, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer snap.release()
	opt = opt.withDefaults()
	io, err := snap.options(opt)
	if err != nil {
		return nil, err
	}
	var raw [][]index.Hit
	if snap.walks(opt) {
		raw, err = snap.searchWalkBatch(ctx, queries, io, opt)
	} else {
		raw, err = snap.group.SearchBatch(ctx, queries, io)
	}
	if err != nil {
		return nil, err
	}
	// The hits become records on all cores: about 1 us a query of 10 hits
	// on one core (BenchmarkStoreDeviceHost's profile, 2-core machine),
	// 10 ms a batch of 10,000, longer than the index's whole search of it
	// on a GPU. A query's vector is read again only to re-rank.
	out := make([][]Hit, len(raw))
	errs := make([]error, len(raw))
	par.For(len(raw), 64, func(lo, hi int) {
		var x []float32
		if opt.Rerank != nil {
			x = make([]float32, queries.Dim())
		}
		for i := lo; i < hi; i++ {
			var q []float32
			if opt.Rerank != nil {
				q = queries.Row(i, x)
			}
			hs, err := snap.hits(q, raw[i], opt)
			if err != nil {
				errs[i] = fmt.Errorf("query %d: %w", i, err)
				return
			}
			out[i] = within(hs, opt.Radius)
		}
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// matrix presents [][]float32 as Rows; a row of the wrong length is
// passed on as it is, for the search to refuse.
type matrix [][]float32

func (m matrix) Len() int { return len(m) }
func (m matrix) Dim() int {
	if len(m) == 0 {
		return 0
	}
	return len(m[0])
}
func (m matrix) Row(i int, dst []float32) []float32 { return append(dst[:0], m[i]...) }

func (snap *snapshot) search(ctx context.Context, q []float32, opt SearchOptions) ([]Hit, error) {
	io, err := snap.options(opt)
	if err != nil {
		return nil, err
	}
	var raw []index.Hit
	if snap.walks(opt) {
		raw, err = snap.searchWalk(ctx, q, io, opt)
	} else {
		raw, err = snap.group.Search(ctx, q, io)
	}
	if err != nil {
		return nil, err
	}
	hits, err := snap.hits(q, raw, opt)
	return within(hits, opt.Radius), err
}

// within drops the hits farther than radius (none when it is 0); hits
// are sorted nearest first.
func within(hits []Hit, radius float32) []Hit {
	if radius == 0 {
		return hits
	}
	n, _ := slices.BinarySearchFunc(hits, radius, func(h Hit, r float32) int {
		if h.Distance <= r {
			return -1
		}
		return 1
	})
	return hits[:n]
}

// options turns opt into the group's: the filter joined with the
// deletions, and K widened for re-ranking.
func (snap *snapshot) options(opt SearchOptions) (index.SearchOptions, error) {
	io := index.SearchOptions{K: opt.K, NProbe: opt.NProbe}
	if opt.Radius != opt.Radius {
		return io, fmt.Errorf("%w: radius NaN", index.ErrArgument)
	}
	if opt.K < 1 || opt.NProbe < 1 || opt.RerankFactor < 1 {
		return io, fmt.Errorf("%w: K %d, NProbe %d, RerankFactor %d: each must be at least 1 (0: the default)", index.ErrArgument, opt.K, opt.NProbe, opt.RerankFactor)
	}
	if err := checkWalk(opt); err != nil {
		return io, err
	}
	if opt.Rerank != nil {
		io.K = math.MaxInt32 // K * RerankFactor, without overflow
		if opt.RerankFactor <= math.MaxInt32/opt.K {
			io.K = opt.K * opt.RerankFactor
		}
	}
	switch {
	case opt.Filter != nil:
		f, err := opt.Filter.resolve(snap)
		if err != nil {
			return io, err
		}
		io.Filter = f
	case !snap.gone.IsEmpty():
		io.Filter = snap.liveFilter()
	}
	return io, nil
}

// hits turns the group's hits into ids and payloads, re-ranked when asked.
// The re-rank vectors are an input like the queries: a vector that is not
// finite is an error naming its id, and a mapped file truncated meanwhile
// gives vecfile.ErrChanged naming it (internal/fault), not a crash.
func (snap *snapshot) hits(q []float32, raw []index.Hit, opt SearchOptions) (_ []Hit, err error) {
	defer fault.Catch(&err, debug.SetPanicOnFault(true), "the re-rank vectors", vecfile.ErrChanged)
	out := make([]Hit, len(raw))
	for i, h := range raw {
		rec, err := snap.record(h.ID)
		if err != nil {
			return nil, err
		}
		out[i] = Hit{ID: rec.ID, Payload: rec.Payload, Distance: h.Distance}
	}
	if opt.Rerank == nil {
		return out, nil
	}
	metric := snap.segs[0].ix.Meta().Metric
	qq := append([]float32(nil), q...)
	scale := 1.0
	switch metric {
	case index.Cosine:
		vec.Normalize(qq)
	case index.IP:
		scale = index.ScaleIPQuery(qq) // a tiny query keeps its digits
	}
	file, fromFile := opt.Rerank.(rowOriginals)
	if n := snap.inputRows(); fromFile && n > 0 && file.rows.Len() != n {
		return nil, fmt.Errorf("%w: the re-rank vectors have %d rows, the input the index was built from %d", index.ErrArgument, file.rows.Len(), n)
	}
	x := make([]float32, len(q))
	for i := range out {
		if fromFile && !snap.fromInput(raw[i].ID, out[i].ID) {
			// Not a row of the file: the code's estimate stands (in the
			// scaled units of the others until they are scaled back).
			out[i].Distance = float32(float64(out[i].Distance) * scale)
			continue
		}
		v, err := opt.Rerank.Vector(out[i].ID, x)
		if err != nil {
			return nil, err
		}
		if len(v) != len(q) {
			return nil, fmt.Errorf("%w: re-rank vector of %q has %d values, the index %d", index.ErrDim, out[i].ID, len(v), len(q))
		}
		for j, x := range v {
			if x-x != 0 {
				return nil, fmt.Errorf("%w: re-rank vector of %q: value %d is %v", index.ErrArgument, out[i].ID, j, x)
			}
		}
		switch metric {
		case index.L2:
			out[i].Distance = vec.L2(qq, v)
		case index.IP:
			out[i].Distance = -vec.Dot(qq, v) // scaled back after the sort
		case index.Cosine:
			vec.Normalize(v)
			out[i].Distance = vec.L2(qq, v) / 2
		}
	}
	slices.SortStableFunc(out, func(a, b Hit) int { return cmp.Compare(a.Distance, b.Distance) })
	if scale != 1 {
		for i := range out {
			out[i].Distance = float32(float64(out[i].Distance) / scale)
		}
	}
	if metric != index.IP {
		// Squared L2 and 1 - cos are never below 0; once sorted, so
		// that the order stays (vec.L2 sums squares, so this is a guard).
		for i := range out {
			out[i].Distance = max(out[i].Distance, 0)
		}
	}
	return out[:min(len(out), opt.K)], nil
}

// bitset is a dense set of group rows: the filters' Allows, asked of
// every row a search scans, costs a shift and a mask, not a lookup in a
// roaring bitmap's containers.
type bitset []uint64

func newBitset(b *roaring.Bitmap, n int) bitset {
	s := make(bitset, (n+63)/64)
	it := b.Iterator()
	for it.HasNext() {
		if r := it.Next(); int(r) < n {
			s[r>>6] |= 1 << (r & 63)
		}
	}
	return s
}

func (s bitset) has(row int) bool {
	return row >= 0 && row>>6 < len(s) && s[row>>6]&(1<<(row&63)) != 0
}

// notIn allows the rows a bitset does not hold: the live rows.
type notIn struct{ gone bitset }

func (f notIn) Allows(row int) bool { return !f.gone.has(row) }

// MaskKey is the bitset's address: a snapshot builds its bitset once, so
// equal keys are the same rows (index.KeyedFilter); held in a key, the
// bitset stays allocated, and its address is not reused.
func (f notIn) MaskKey() any { return unsafe.SliceData(f.gone) }

var _ index.KeyedFilter = notIn{}

// liveFilter allows the live rows, built once per snapshot.
func (snap *snapshot) liveFilter() index.Filter {
	snap.goneOnce.Do(func() { snap.goneBits = newBitset(snap.gone, snap.group.Len()) })
	return notIn{snap.goneBits}
}

// A Filter restricts a search to some vectors: AllowIDs or Where.
type Filter interface {
	// resolve returns the filter for a snapshot's rows, live ones only.
	resolve(*snapshot) (index.Filter, error)
}

// AllowIDs is a filter that allows only the given ids (ids the index does
// not hold are ignored). Resolving the ids costs a lookup each; a Filter
// kept and used again resolves them once per version of the index.
// When it allows few vectors, the search scores each of them (an exact
// scan of the allowed set by code); otherwise it probes
// NProbe*sqrt(live/allowed) lists, and more lists while fewer than K
// allowed hits are found.
func AllowIDs(ids ...string) Filter { return &idFilter{ids: ids} }

type idFilter struct {
	ids  []string
	mu   sync.Mutex
	snap *snapshot // the snapshot set was resolved for
	set  rowSet
}

func (f *idFilter) resolve(snap *snapshot) (index.Filter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.snap == snap {
		return f.set, nil
	}
	b := roaring.New()
	for _, id := range f.ids {
		if r, ok := snap.find(id); ok {
			b.Add(uint32(r))
		}
	}
	b.RunOptimize()
	f.snap, f.set = snap, newRowSet(b, snap.group.Len())
	return f.set, nil
}

// rowSet is an index.RowSet over a bitmap of group rows (and the same
// rows as a bitset, for Allows).
type rowSet struct {
	b    *roaring.Bitmap
	n    int
	bits bitset
}

// newRowSet makes the bitset only for a set dense enough to be probed
// (a sparse one is scored row by row, and Allows is rarely asked).
func newRowSet(b *roaring.Bitmap, rows int) rowSet {
	s := rowSet{b: b, n: int(b.GetCardinality())}
	if s.n >= rows/256 {
		s.bits = newBitset(b, rows)
	}
	return s
}

func (s rowSet) Allows(row int) bool {
	if s.bits == nil {
		return s.b.Contains(uint32(row))
	}
	return s.bits.has(row)
}
func (s rowSet) Count() int { return s.n }
func (s rowSet) Each(yield func(int) bool) {
	it := s.b.Iterator()
	for it.HasNext() {
		if !yield(int(it.Next())) {
			return
		}
	}
}

// Where is a filter that allows the vectors for which keep, given the id
// and payload (a view, valid during the call), returns true. It is asked
// of each candidate the search considers, and the search reads more lists
// while fewer than K allowed hits are found; a selective predicate is
// better turned into AllowIDs. keep must be safe for concurrent use.
func Where(keep func(id string, payload []byte) bool) Filter { return whereFilter{keep} }

type whereFilter struct {
	keep func(id string, payload []byte) bool
}

func (f whereFilter) resolve(snap *snapshot) (index.Filter, error) {
	return predicate{snap, f.keep}, nil
}

type predicate struct {
	snap *snapshot
	keep func(id string, payload []byte) bool
}

func (p predicate) Allows(row int) bool {
	if p.snap.gone.Contains(uint32(row)) {
		return false
	}
	i, r := p.snap.group.Locate(row)
	ix := p.snap.segs[i].ix
	k, err := ix.Key(r)
	if err != nil {
		return false
	}
	pl, err := ix.Payload(r)
	if err != nil {
		return false
	}
	return p.keep(string(k), pl)
}
