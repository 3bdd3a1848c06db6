package graph

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bitset"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// BuildOptions sets the graph's shape. Zero values take the defaults.
type BuildOptions struct {
	// Degree is the most neighbours a row keeps (R); default 32, the
	// entries of one fast-scan block (quant.BlockLen), though the search
	// scores neighbours one by one, not in that layout.
	Degree int
	// Alpha is the robust pruning's factor (at least 1): a candidate c
	// of row p is dropped when a kept neighbour n is nearer to c than
	// |p - c| / Alpha. Above 1 it keeps some long edges. Default 1.1:
	// the best recall at equal QPS of 1.0, 1.1, 1.2 and 1.4 on deep10k
	// and sift5k-ngt (graphbench, 2 cores).
	Alpha float32
	// Candidates is how many nearest rows each row's first neighbours
	// are pruned from; default 2*Degree.
	Candidates int
	// NProbe, when above 0, finds those candidates with the index's own
	// search (this many lists, estimates) and measures them exactly;
	// at 0 every pair of rows is measured (n^2 distances).
	NProbe int
	// Passes is how many times every row's neighbours are then chosen
	// again from the rows a search for it on the graph so far expands,
	// with its current neighbours (Vamana's pass); default 1, negative
	// for none.
	Passes int
	// BuildEf is the beam width of those searches; default 64.
	BuildEf int
	// Decoded makes a search score a row by its exact distance to the
	// vector the row's code decodes to (index.Index.Vector) rather than
	// by the index's estimate; same cost, measured slightly lower recall.
	Decoded bool
	// StartsPerList is how many rows of each anchor's list a search may
	// start from: the row nearest the anchor, then each time the row of
	// the list farthest from those picked, so that the starts cover
	// every cluster an anchor's list holds. Default 8.
	StartsPerList int
	// Bits, from 5 to 8, makes the graph code every row itself at this
	// width against the index's anchors and rotation (a split code,
	// refine.go): the walk scores the top 4 bits of each level, and the
	// best candidates are scored again at the full width. 0 (the
	// default) keeps the index's own codes.
	Bits int
	// Compact stores the neighbour lists sorted by row and delta-coded
	// in the fewest bits each row's gaps allow (compact.go), in place
	// of Degree fixed slots of bits.Len(n) bits a row.
	Compact bool
	// Searcher, when set, finds the candidates in place of the index's
	// Search row by row (NProbe, at least 1, is its nprobe): one batched
	// search of every row as a query, 65,536 rows at a time (a
	// batch searched while the one before is measured), each batch's
	// hits then measured exactly as above. It must search ix's rows as ix
	// numbers them: ix itself (the same graph, byte for byte, as without
	// it), ix on a device (index.DeviceIndex: its estimates may order
	// near ties otherwise, so the graph may differ; graph/README.md says
	// by how much), or a Group of ix alone. Not stored with the graph.
	Searcher BatchSearcher
	// Device, when set, measures every row's candidates found by
	// Searcher, does the pruning and runs the refinement passes'
	// searches on a device (a GPU), with the CPU's bits
	// (device.RowMeter): the graph's bytes are those of a build without
	// it. It takes the rows onto the device (float16 where the build
	// keeps them so, else float32). Used only where the dimension is a
	// multiple of 8 (the lane sums) and the device takes the rows
	// (BuildTimes.Device and DeviceSkipped say); the searches only where
	// BuildEf and Degree are within device.MaxWalkEf and MaxWalkSlots.
	// The medoid, the starting rows and the connecting stay on the CPU.
	// Not stored with the graph.
	Device device.RowMeter
	// Times, when set, receives how long each stage of the build took
	// (and reports each as it ends, BuildTimes.Report). Not stored with
	// the graph.
	Times *BuildTimes
}

// BatchSearcher searches for many queries at once: *index.Index,
// *index.DeviceIndex and *index.Group are ones.
type BatchSearcher interface {
	SearchBatch(ctx context.Context, queries index.Rows, opt index.SearchOptions) ([][]index.Hit, error)
}

// candidateBatch is the most rows a batched search for candidates
// (BuildOptions.Searcher) takes as queries at once: two batches' hits
// (K of Candidates+1 each, 16 bytes a hit) are held at a time, about
// 70 MB each at the default degree. A variable for the tests.
var candidateBatch = 1 << 16

// BuildTimes is how long each stage of a Build took (BuildOptions.Times),
// wall time; the stages run one after another, on all cores.
type BuildTimes struct {
	// Rows: the vectors read as float32 and checked, and the rows' codes
	// the search scores (the index's, or a split code's).
	Rows time.Duration
	// Candidates: every row's candidates found and measured exactly.
	Candidates time.Duration
	// Search is the batched searches' time (BuildOptions.Searcher),
	// summed: each batch is searched while the one before is measured,
	// so it overlaps the rest of Candidates.
	Search time.Duration
	// Wait is the part of Candidates spent waiting for a batch's hits,
	// the batch before measured (BuildOptions.Searcher): the search's
	// time not hidden behind the measuring.
	Wait time.Duration
	// Prune: the first neighbours pruned from the candidates.
	Prune time.Duration
	// Starts: the medoid, every row's nearest anchor and each anchor's
	// starting rows.
	Starts time.Duration
	// Reverse: the reverse edges added, after the pruning and after
	// each pass.
	Reverse time.Duration
	// Refine: the passes' searches and pruning (BuildOptions.Passes).
	Refine time.Duration
	// Connect: every row made reachable from the entry, in
	// ConnectRounds rounds with ConnectSearches searches for places to
	// link rows from.
	Connect                        time.Duration
	ConnectRounds, ConnectSearches int
	// Pack: the adjacency packed (or compacted) for the search.
	Pack time.Duration
	// Total is the whole Build.
	Total time.Duration
	// Device says that BuildOptions.Device measured and pruned;
	// DeviceSkipped is why it did not, where it could not take the rows
	// (out of memory, say): the build then ran on the CPU.
	Device        bool
	DeviceSkipped error
	// Report, when set before the build, is called as each stage ends,
	// with the stage's name (the field's, in lower case) and time: a long
	// build's report as it goes.
	Report func(stage string, took time.Duration)
}

func (o BuildOptions) withDefaults() BuildOptions {
	if o.Degree == 0 {
		o.Degree = 32
	}
	if o.Alpha == 0 {
		o.Alpha = 1.1
	}
	if o.Candidates == 0 {
		o.Candidates = 2 * o.Degree
	}
	if o.StartsPerList == 0 {
		o.StartsPerList = 8
	}
	if o.Passes == 0 {
		o.Passes = 1
	}
	if o.BuildEf == 0 {
		o.BuildEf = 64
	}
	return o
}

// Build returns the graph over ix's rows, whose original vectors are rows
// (the input ix was built from, row for row; the graph's neighbours are
// chosen by their exact distances; a vecfile.Matrix of float16 values is
// measured in place where the float16 kernels run, with the same bits as
// its float32 values: readRows). The graph depends on the index, the
// vectors and opt alone: there is no randomness, and the same bytes come
// on any number of cores. Only l2 indexes of the rotated code are taken
// (ErrUnsupported).
func Build(ctx context.Context, ix *index.Index, rows index.Rows, opt BuildOptions) (*Graph, error) {
	opt = opt.withDefaults()
	switch {
	case ix == nil || rows == nil:
		return nil, argErr("no index or no vectors")
	case ix.Len() == 0:
		return nil, ErrEmpty
	case rows.Len() != ix.Len() || rows.Dim() != ix.Dim():
		return nil, argErr("vectors are %d x %d, the index %d x %d", rows.Len(), rows.Dim(), ix.Len(), ix.Dim())
	case opt.Degree < 1 || opt.Degree > 1024:
		return nil, argErr("degree %d outside 1..1024", opt.Degree)
	case !(opt.Alpha >= 1) || math.IsInf(float64(opt.Alpha), 0):
		return nil, argErr("alpha %v must be at least 1", opt.Alpha)
	case opt.Candidates < 1 || opt.BuildEf < 1 || opt.NProbe < 0:
		return nil, argErr("candidates %d, build ef %d and nprobe %d must be at least 1, 1 and 0", opt.Candidates, opt.BuildEf, opt.NProbe)
	case opt.Searcher != nil && opt.NProbe < 1:
		return nil, argErr("a searcher finds the candidates with nprobe lists: nprobe %d, want at least 1", opt.NProbe)
	case opt.StartsPerList < 1 || opt.StartsPerList > 1024:
		return nil, argErr("starts per list %d outside 1..1024", opt.StartsPerList)
	case opt.Bits != 0 && (opt.Bits < 5 || opt.Bits > 8):
		return nil, argErr("bits %d: want 0 (the index's codes) or 5 to 8", opt.Bits)
	case opt.Bits != 0 && opt.Decoded:
		return nil, argErr("a split code (bits %d) scores by its estimate, not decoded", opt.Bits)
	}
	var times BuildTimes
	if opt.Times != nil {
		times.Report = opt.Times.Report
		defer func(start time.Time) {
			times.Total = time.Since(start)
			*opt.Times = times
		}(time.Now())
	}
	stage := time.Now()
	lap := func(name string, d *time.Duration) {
		now := time.Now()
		*d += now.Sub(stage)
		if opt.Times != nil && opt.Times.Report != nil {
			opt.Times.Report(name, now.Sub(stage))
		}
		stage = now
	}
	var (
		nodes  nodeCodes
		refine *refineCodes
		err    error
	)
	if opt.Bits == 0 {
		if nodes, err = newNodeCodes(ix, opt.Decoded); err != nil {
			return nil, err
		}
	} else if _, err = newNodeFrame(ix); err != nil {
		return nil, err
	}
	n, d := ix.Len(), ix.Dim()
	x, err := readRows(rows, n, d)
	if err != nil {
		return nil, err
	}
	if opt.Bits != 0 {
		if nodes, refine, err = newSplitCodes(ix, x, opt.Bits); err != nil {
			return nil, err
		}
	}
	b := &builder{buildRows: x, r: opt.Degree, alpha2: opt.Alpha * opt.Alpha}
	var dev device.DeviceRows
	if opt.Device != nil && d%8 == 0 {
		if dev, err = b.loadRows(opt.Device); err != nil {
			times.DeviceSkipped, dev = err, nil // on the CPU, as without it
		} else {
			defer dev.Close()
			times.Device = true
		}
	}
	lap("rows", &times.Rows)
	var cands [][]pair
	if opt.Searcher != nil {
		cands, err = b.batchCandidates(ctx, opt.Searcher, dev, opt, &times)
	} else {
		cands, err = b.candidates(ctx, ix, opt)
	}
	if err != nil {
		return nil, err
	}
	lap("candidates", &times.Candidates)
	b.adj, b.dist = make([]uint32, n*b.r), make([]float32, n*b.r)
	if dev != nil {
		if err := b.pruneAllOn(dev, cands); err != nil {
			return nil, err
		}
	} else {
		par.For(n, 64, func(lo, hi int) {
			var kept []pair
			m := b.meter()
			for i := lo; i < hi; i++ {
				kept = m.prune(uint32(i), cands[i], kept[:0])
				b.set(uint32(i), kept)
			}
		})
	}
	lap("prune", &times.Prune)
	b.entry = b.medoid()
	b.reps = b.nearestRows(&nodes, opt.StartsPerList)
	lap("starts", &times.Starts)
	if err := b.addReverse(dev); err != nil {
		return nil, err
	}
	lap("reverse", &times.Reverse)
	for pass := 0; pass < opt.Passes; pass++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if dev != nil && b.canWalk(opt.BuildEf) {
			if err := b.refineOn(ctx, dev, opt.BuildEf); err != nil {
				return nil, err
			}
		} else {
			b.refine(ctx, opt.BuildEf)
		}
		lap("refine", &times.Refine)
		if err := b.addReverse(dev); err != nil {
			return nil, err
		}
		lap("reverse", &times.Reverse)
	}
	if err := ctx.Err(); err != nil { // a pass cut short
		return nil, err
	}
	times.ConnectRounds, times.ConnectSearches = b.connect(cands, opt.BuildEf)
	lap("connect", &times.Connect)
	stored := opt
	stored.Searcher, stored.Times, stored.Device = nil, nil, nil
	g := &Graph{n: n, d: d, r: b.r, entry: b.entry, reps: b.reps, perList: opt.StartsPerList, nodes: nodes, refine: refine, opt: stored}
	if opt.Compact {
		c, err := compact(slots{b.adj, b.r}, n)
		if err != nil {
			return nil, err
		}
		g.compact = &c
	} else {
		g.adj = pack(slots{b.adj, b.r}, n)
	}
	lap("pack", &times.Pack)
	return g, nil
}

// builder holds the vectors (their n and d are the build's) and the
// adjacency being built.
type builder struct {
	*buildRows
	r      int
	alpha2 float32 // Alpha^2: distances here are squared
	adj    []uint32
	// dist[i*r+k] is the squared distance from row i to its neighbour
	// adj[i*r+k], as l2(row i, that row) measured it: a neighbour's
	// distance is measured once, not again when a list is merged (the
	// measure is symmetric to the bit, the same float ops on -x as on x).
	dist    []float32
	entry   uint32
	reps    []uint32 // each anchor's starting rows (nearestRows), noEdge past a short list's
	perList int      // starting rows an anchor
	assign  []uint32 // each row's nearest anchor
}

// meter measures exact squared distances between rows: with
// vec.L2Lanes's vector kernel where the dimension is a multiple of 8
// (vec.L2LanesHalf's on float16 rows, the same bits), else with vec.L2.
// L2Lanes gives DiffStats's sum of squares, so the graph's bytes, without
// storing the differences: 8.3 ns against 12.4 at 96 dimensions, 50
// against 80 at 768 (BenchmarkL2Lanes, 2 cores); a 200,000 x 96 build
// took 24.8 and 24.3 s against 32.6 and 26.8 (2 cores, load 1.2 to 1.8),
// a 1M x 96 build 298.8 and 222.3 s against 261.3 and 257.9 (alternated,
// load 2.0 to 2.1): within that machine's noise, the same bytes. Float16
// rows are kept only where the lane kernels apply (readRows).
type meter struct {
	b     *builder
	lanes bool // d % 8 == 0: the lane kernels
}

func (b *builder) meter() *meter { return &meter{b: b, lanes: b.d%8 == 0} }

// dist is the squared distance between rows i and j.
func (m *meter) dist(i, j uint32) float32 {
	b := m.b
	switch {
	case b.h != nil:
		return vec.L2LanesHalf(b.half(i), b.half(j))
	case m.lanes:
		return vec.L2Lanes(b.row(i), b.row(j))
	}
	return vec.L2(b.row(i), b.row(j))
}

// dists sets out[k] = dist(q, ids[k]), the same bits: four rows at a time
// with vec.L2Lanes4 (L2LanesHalf4) where the lane kernels apply, four
// chains of additions and four rows' loads in flight (28.5 ns a row
// against 47.9 at 768 dimensions in cache, BenchmarkL2Lanes, 2 cores).
func (m *meter) dists(q uint32, ids []uint32, out []float32) {
	b, k := m.b, 0
	switch {
	case b.h != nil:
		x, row := b.half(q), b.half
		for ; k+4 <= len(ids); k += 4 {
			four := vec.L2LanesHalf4(x, row(ids[k]), row(ids[k+1]), row(ids[k+2]), row(ids[k+3]))
			copy(out[k:k+4], four[:])
		}
	case m.lanes:
		x, row := b.row(q), b.row
		for ; k+4 <= len(ids); k += 4 {
			four := vec.L2Lanes4(x, row(ids[k]), row(ids[k+1]), row(ids[k+2]), row(ids[k+3]))
			copy(out[k:k+4], four[:])
		}
	}
	for ; k < len(ids); k++ {
		out[k] = m.dist(q, ids[k])
	}
}

// exactScorer scores rows by their exact distance to row q.
type exactScorer struct {
	m *meter
	q uint32
}

func (e exactScorer) scores(ids []uint32, out []float32) { e.m.dists(e.q, ids, out) }

// set writes row i's neighbours.
func (b *builder) set(i uint32, kept []pair) {
	nb := b.adj[int(i)*b.r : int(i+1)*b.r]
	nd := b.dist[int(i)*b.r : int(i+1)*b.r]
	for k := range nb {
		nb[k], nd[k] = noEdge, 0
		if k < len(kept) {
			nb[k], nd[k] = kept[k].id, kept[k].dist
		}
	}
}

// candidates returns each row's Candidates nearest other rows, nearest
// first by exact distance (ties by row).
func (b *builder) candidates(ctx context.Context, ix *index.Index, opt BuildOptions) ([][]pair, error) {
	k := min(opt.Candidates, b.n-1)
	cands := make([][]pair, b.n)
	var mu sync.Mutex
	var failed error
	par.For(b.n, 16, func(lo, hi int) {
		if ctx.Err() != nil {
			return
		}
		var h maxHeap
		var buf measureBuf
		m := b.meter()
		xbuf := make([]float32, b.d)
		for i := lo; i < hi; i++ {
			h = h[:0]
			if opt.NProbe > 0 {
				hits, err := ix.Search(b.decode(uint32(i), xbuf), index.SearchOptions{K: k + 1, NProbe: opt.NProbe})
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				cands[i] = m.measure(uint32(i), hits, &buf)
				continue
			}
			for j := range b.n {
				if j == i {
					continue
				}
				p := pair{m.dist(uint32(i), uint32(j)), uint32(j)}
				switch {
				case len(h) < k:
					h.push(p)
				case less(p, h[0]):
					h.replaceTop(p)
				}
			}
			c := slices.Clone(h)
			slices.SortFunc(c, comparePairs)
			cands[i] = c
		}
	})
	if failed != nil {
		return nil, fmt.Errorf("graph: candidates from the index's search: %w", failed)
	}
	return cands, ctx.Err()
}

// measure returns row i's candidates from the hits of its search: every
// hit but i itself, by exact distance, nearest first (ties by row). buf
// is scratch.
func (m *meter) measure(i uint32, hits []index.Hit, buf *measureBuf) []pair {
	buf.ids = buf.ids[:0]
	for _, hit := range hits {
		if uint32(hit.ID) != i {
			buf.ids = append(buf.ids, uint32(hit.ID))
		}
	}
	buf.d = slices.Grow(buf.d[:0], len(buf.ids))[:len(buf.ids)]
	m.dists(i, buf.ids, buf.d)
	c := make([]pair, len(buf.ids))
	for k, id := range buf.ids {
		c[k] = pair{buf.d[k], id}
	}
	slices.SortFunc(c, comparePairs)
	return c
}

// measureBuf is measure's scratch.
type measureBuf struct {
	ids []uint32
	d   []float32
}

// batchCandidates is candidates from s (BuildOptions.Searcher): every
// row searched for as a query, candidateBatch rows a batch, a batch
// searched while the one before is measured on all cores.
//
// With dev, each batch's hits are measured there (measureOn).
func (b *builder) batchCandidates(ctx context.Context, s BatchSearcher, dev device.DeviceRows, opt BuildOptions, times *BuildTimes) ([][]pair, error) {
	k := min(opt.Candidates, b.n-1)
	sopt := index.SearchOptions{K: k + 1, NProbe: opt.NProbe}
	cands := make([][]pair, b.n)
	type found struct {
		hits [][]index.Hit
		err  error
		took time.Duration
	}
	search := func(lo int) chan found {
		ch := make(chan found, 1)
		go func() {
			start := time.Now()
			hi := min(lo+candidateBatch, b.n)
			hits, err := s.SearchBatch(ctx, b.span(lo, hi), sopt)
			if err == nil && len(hits) != hi-lo {
				err = fmt.Errorf("%d queries, %d answers", hi-lo, len(hits))
			}
			if err != nil {
				err = fmt.Errorf("graph: candidates of rows %d to %d from the search: %w", lo, hi-1, err)
			}
			ch <- found{hits, err, time.Since(start)}
		}()
		return ch
	}
	next := search(0)
	for lo := 0; lo < b.n; lo += candidateBatch {
		wait := time.Now()
		f := <-next
		times.Wait += time.Since(wait)
		times.Search += f.took
		if f.err != nil {
			return nil, f.err
		}
		next = nil
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if lo+candidateBatch < b.n {
			next = search(lo + candidateBatch)
		}
		if dev != nil {
			if err := b.measureOn(dev, lo, f.hits, cands); err != nil {
				return nil, err
			}
			continue
		}
		par.For(len(f.hits), 16, func(from, to int) {
			m := b.meter()
			var buf measureBuf
			for t := from; t < to; t++ {
				i := lo + t
				cands[i] = m.measure(uint32(i), f.hits[t], &buf)
			}
		})
	}
	return cands, ctx.Err()
}

func comparePairs(a, b pair) int {
	switch {
	case less(a, b):
		return -1
	case less(b, a):
		return 1
	}
	return 0
}

// prune appends to kept the neighbours robust pruning keeps for row p
// from cands (sorted, nearest first): a candidate stays unless a kept
// one is nearer to it than its distance to p over alpha; at most r.
//
// The kept rows are measured against a candidate four at a time
// (meter.dists) and tested in order, so the result is the one a test
// at a time gives; a candidate dropped early costs at most three
// distances too many. (Counted once on the 100,000 x 768 generated rows
// of graph/README.md's "Build on a GPU": 11.8 million candidates kept
// after testing every kept row, 20,000 dropped.)
func (m *meter) prune(p uint32, cands []pair, kept []pair) []pair {
	b := m.b
	var ids [4]uint32
	var d [4]float32
	for _, c := range cands {
		if len(kept) == b.r {
			break
		}
		if c.id == p {
			continue
		}
		ok := true
		for lo := 0; ok && lo < len(kept); lo += 4 {
			group := kept[lo:min(lo+4, len(kept))]
			for j, k := range group {
				ids[j] = k.id
			}
			m.dists(c.id, ids[:len(group)], d[:])
			for j, k := range group {
				if k.id == c.id || b.alpha2*d[j] <= c.dist {
					ok = false
					break
				}
			}
		}
		if ok {
			kept = append(kept, c)
		}
	}
	return kept
}

// medoid is the row nearest the mean of the rows (the lowest on ties).
// On all cores: the mean by blocks of dimensions, each summed over the
// rows in row order (the sums a loop over the rows makes), the nearest
// row by blocks of rows, the blocks' best taken in order.
func (b *builder) medoid() uint32 {
	m := make([]float32, b.d)
	par.For(b.d, 16, func(lo, hi int) {
		mean := make([]float64, hi-lo)
		buf := make([]float32, hi-lo)
		for i := range b.n {
			for j, v := range b.decodeRange(uint32(i), lo, hi, buf) {
				mean[j] += float64(v)
			}
		}
		for j, s := range mean {
			m[lo+j] = float32(s / float64(b.n))
		}
	})
	const block = 4096
	type best struct {
		i uint32
		d float32
	}
	bests := make([]best, (b.n+block-1)/block)
	par.For(b.n, block, func(lo, hi int) {
		bb := best{uint32(lo), float32(math.Inf(1))}
		buf := make([]float32, b.d)
		for i := lo; i < hi; i++ {
			if dd := vec.L2(m, b.decode(uint32(i), buf)); dd < bb.d {
				bb = best{uint32(i), dd}
			}
		}
		bests[lo/block] = bb
	})
	top := best{0, float32(math.Inf(1))}
	for _, bb := range bests {
		if bb.d < top.d {
			top = bb
		}
	}
	return top.i
}

// nearestAnchors sets b.assign[i] to the anchor nearest row i by vec.L2
// (the lowest on ties): the anchor a loop measuring every anchor finds,
// with fewer anchors measured.
//
//   - The triangle inequality: with a0 = hint(i) (the row's list in the
//     index, most often its nearest anchor), an anchor a with
//     |a - a0| > 2 |x - a0| is farther from x than a0 is. The bound is
//     taken with a margin of 1 % (and 1e-12), far beyond the rounding of
//     float32 sums over any dimension below about 10^5, so that an anchor
//     passed over is farther by the computed distances too. Up to
//     triangleMost anchors left are measured.
//   - Else (anchors close together against the row's distance to them,
//     as in high dimensions) every anchor's distance is screened from the
//     dot products (vec.Panels, a blocked kernel): |x|^2 + |a|^2 -
//     2<x, a>, off from the exact distance by at most about
//     d * 2^-24 * |x| |a| (float32 sums, any order), and vec.L2 by at most
//     d * 2^-24 of it. Anchors whose screened distance, less twice that
//     bound, is above the least one plus twice the bound cannot be the
//     nearest; the others are measured.
//
// Past 8,192 anchors (the table of their distances would pass 256 MB) only
// the screen is used.
func (b *builder) nearestAnchors(anchors []float32, hint func(i int) int) {
	m, d := len(anchors)/b.d, b.d
	b.assign = make([]uint32, b.n)
	var between []float32 // anchor a's distance to c at a*m+c
	var order []int32     // anchor a's others nearest first at a*m..
	if m <= 8192 {
		between, order = make([]float32, m*m), make([]int32, m*m)
		par.For(m, 8, func(lo, hi int) {
			for a := lo; a < hi; a++ {
				for c := range a {
					dd := float32(math.Sqrt(float64(vec.L2(anchors[a*d:(a+1)*d], anchors[c*d:(c+1)*d]))))
					between[a*m+c], between[c*m+a] = dd, dd
				}
			}
		})
		par.For(m, 8, func(lo, hi int) {
			for a := lo; a < hi; a++ {
				o, dist := order[a*m:(a+1)*m], between[a*m:(a+1)*m]
				for c := range o {
					o[c] = int32(c)
				}
				slices.SortFunc(o, func(x, y int32) int {
					if c := cmp.Compare(dist[x], dist[y]); c != 0 {
						return c
					}
					return cmp.Compare(x, y)
				})
			}
		})
	}
	norms := make([]float64, m) // |a|^2
	for a := range m {
		for _, v := range anchors[a*d : (a+1)*d] {
			norms[a] += float64(v) * float64(v)
		}
	}
	panels := vec.NewPanels(anchors, m, d)
	stride := panels.Stride()
	// gamma bounds the relative rounding of a float32 sum of d products
	// (and of the differences squared), twice over.
	gamma := 2 * float64(d+8) / (1 << 24)
	const triangleMost = 16
	const block = 64
	par.For(b.n, block, func(lo, hi int) {
		var screen []int // rows of the block left to the screen
		xbuf := make([]float32, d)
		measure := func(x []float32, a int, best *int, bd *float32) {
			if dd := vec.L2(anchors[a*d:(a+1)*d], x); dd < *bd || dd == *bd && a < *best {
				*best, *bd = a, dd
			}
		}
		for i := lo; i < hi; i++ {
			if order == nil {
				screen = append(screen, i)
				continue
			}
			x := b.decode(uint32(i), xbuf)
			a0 := hint(i)
			if a0 < 0 || a0 >= m {
				a0 = 0
			}
			limit := 2*math.Sqrt(float64(vec.L2(anchors[a0*d:(a0+1)*d], x)))*1.01 + 1e-12
			near := order[a0*m : (a0+1)*m]
			k := 0
			for k < len(near) && k <= triangleMost && float64(between[a0*m+int(near[k])]) <= limit {
				k++
			}
			if k > triangleMost {
				screen = append(screen, i)
				continue
			}
			best, bd := 0, float32(math.Inf(1))
			for _, c := range near[:k] {
				measure(x, int(c), &best, &bd)
			}
			b.assign[i] = uint32(best)
		}
		if len(screen) == 0 {
			return
		}
		rows := (len(screen) + 3) &^ 3
		xs := make([]float32, rows*d)
		for k, i := range screen {
			copy(xs[k*d:(k+1)*d], b.decode(uint32(i), xbuf))
		}
		dots := make([]float32, rows*stride)
		panels.DotsBlock(xs, dots)
		approx := make([]float64, m)
		for k, i := range screen {
			x := xs[k*d : (k+1)*d]
			var xx float64
			for _, v := range x {
				xx += float64(v) * float64(v)
			}
			nx := math.Sqrt(xx)
			upper := math.Inf(1)
			for a := range m {
				approx[a] = xx + norms[a] - 2*float64(dots[k*stride+a])
				upper = min(upper, approx[a]+2*gamma*nx*math.Sqrt(norms[a]))
			}
			upper = upper*(1+gamma) + 1e-30
			best, bd := 0, float32(math.Inf(1))
			if math.IsNaN(upper) || math.IsInf(upper, 0) {
				for a := range m {
					measure(x, a, &best, &bd)
				}
			} else {
				for a := range m {
					if (approx[a]-2*gamma*nx*math.Sqrt(norms[a]))*(1-gamma) <= upper {
						measure(x, a, &best, &bd)
					}
				}
			}
			b.assign[i] = uint32(best)
		}
	})
}

// nearestRows notes each row's nearest anchor, where its refinement
// search starts, and returns per anchor k starting rows: the row nearest
// the anchor (the lowest on ties; of all rows when its list is empty),
// then each time the row of its list farthest from the rows picked
// (the lowest on ties), noEdge past the list's rows.
func (b *builder) nearestRows(nodes *nodeCodes, k int) []uint32 {
	anchors := nodes.anchors
	m := len(anchors) / b.d
	b.nearestAnchors(anchors, func(i int) int {
		_, _, a := nodes.scalars(nodes.data[i*nodes.stride : (i+1)*nodes.stride])
		return int(a)
	})
	lists := make([][]uint32, m)
	for i, a := range b.assign {
		lists[a] = append(lists[a], uint32(i))
	}
	b.perList = k
	nearestToEmpty := b.nearestToAnchors(anchors, lists)
	reps := make([]uint32, m*k)
	par.For(m, 4, func(lo, hi int) {
		mt := b.meter()
		var far []float32
		buf := make([]float32, b.d)
		for a := lo; a < hi; a++ {
			out := reps[a*k : (a+1)*k]
			for j := range out {
				out[j] = noEdge
			}
			members, anchor := lists[a], anchors[a*b.d:(a+1)*b.d]
			if len(members) == 0 {
				out[0] = nearestToEmpty[a]
				continue
			}
			first, bd := members[0], float32(math.Inf(1))
			for _, i := range members {
				if dd := vec.L2(anchor, b.decode(i, buf)); dd < bd {
					first, bd = i, dd
				}
			}
			out[0] = first
			far = far[:0]
			for _, i := range members {
				far = append(far, mt.dist(i, first))
			}
			for j := 1; j < min(k, len(members)); j++ {
				pick, pd := -1, float32(-1)
				for x, dd := range far {
					if dd > pd {
						pick, pd = x, dd
					}
				}
				if pd <= 0 {
					break // the rest coincide with rows picked
				}
				out[j] = members[pick]
				for x, i := range members {
					far[x] = min(far[x], mt.dist(i, members[pick]))
				}
			}
		}
	})
	return reps
}

// nearestToAnchors returns, for each anchor whose list is empty, the row
// nearest it of all rows (the lowest on ties), lists being every row's
// nearest anchor's (nearestAnchors). A row x of anchor c's list is at
// least |a - c| / 2 from anchor a (|x - c| <= |x - a|, so |a - c| <= 2
// |x - a|): each empty anchor measures the rows of the other lists
// nearest anchor first, and stops where that bound, less 1 % (far beyond
// the rounding of float32 sums), passes the best distance found: the
// rows left are farther, by the computed distances too. On all cores, an
// anchor a worker. Where the anchors are far apart against the rows'
// spread (clusters each held by a few anchors) it reads a few lists an
// anchor, not every row.
func (b *builder) nearestToAnchors(anchors []float32, lists [][]uint32) map[int]uint32 {
	var empty []int
	for a, members := range lists {
		if len(members) == 0 {
			empty = append(empty, a)
		}
	}
	if len(empty) == 0 {
		return nil
	}
	m, d := len(lists), b.d
	found := make([]uint32, len(empty))
	par.For(len(empty), 1, func(lo, hi int) {
		gap, order := make([]float64, m), make([]int, m)
		buf := make([]float32, d)
		for e := lo; e < hi; e++ {
			anchor := anchors[empty[e]*d : (empty[e]+1)*d]
			for c := range m {
				gap[c], order[c] = math.Sqrt(float64(vec.L2(anchor, anchors[c*d:(c+1)*d]))), c
			}
			slices.SortFunc(order, func(x, y int) int { return cmp.Compare(gap[x], gap[y]) })
			best, bd := uint32(math.MaxUint32), float32(math.Inf(1))
			for _, c := range order {
				if bound := gap[c] / 2 / 1.01; bound*bound > float64(bd)*1.01 {
					break
				}
				for _, i := range lists[c] {
					if dd := vec.L2(anchor, b.decode(i, buf)); dd < bd || dd == bd && i < best {
						best, bd = i, dd
					}
				}
			}
			found[e] = best
		}
	})
	out := make(map[int]uint32, len(empty))
	for e, a := range empty {
		out[a] = found[e]
	}
	return out
}

// addReverse gives every row q the edges p -> q pointing to it, pruning
// again where that passes r neighbours. Each row is settled on its own,
// its neighbours and incoming edges sorted by distance then row: the
// order incoming edges are gathered in does not matter, and the graph is
// the same on any number of cores.
//
// With dev, the rows past r neighbours are pruned there (reverseOn).
func (b *builder) addReverse(dev device.DeviceRows) error {
	// Incoming edges on all cores: each row's count, then their places
	// (offs) and the rows, in whatever order the workers come.
	need := make([]bool, len(b.adj))
	count := make([]atomic.Int32, b.n)
	par.For(b.n, 256, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			for k, q := range b.adj[p*b.r : (p+1)*b.r] {
				if q == noEdge {
					break
				}
				if !slices.Contains(b.adj[int(q)*b.r:int(q+1)*b.r], uint32(p)) {
					need[p*b.r+k] = true
					count[q].Add(1)
				}
			}
		}
	})
	offs := make([]int, b.n+1)
	for q := range b.n {
		offs[q+1] = offs[q] + int(count[q].Load())
		count[q].Store(0)
	}
	flat := make([]pair, offs[b.n])
	par.For(b.n, 256, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			for k, q := range b.adj[p*b.r : (p+1)*b.r] {
				if need[p*b.r+k] {
					flat[offs[q]+int(count[q].Add(1))-1] = pair{b.dist[p*b.r+k], uint32(p)}
				}
			}
		}
	})
	in := func(q int) []pair { return flat[offs[q]:offs[q+1]] }
	// merge writes row q's neighbours and incoming edges into merged,
	// sorted.
	merge := func(q int, merged []pair) []pair {
		for k, v := range b.adj[q*b.r : (q+1)*b.r] {
			if v == noEdge {
				break
			}
			merged = append(merged, pair{b.dist[q*b.r+k], v})
		}
		merged = append(merged, in(q)...)
		slices.SortFunc(merged, comparePairs)
		return merged
	}
	if dev != nil {
		return b.reverseOn(dev, in, merge)
	}
	par.For(b.n, 64, func(lo, hi int) {
		var merged, kept []pair
		m := b.meter()
		for q := lo; q < hi; q++ {
			if len(in(q)) == 0 {
				continue
			}
			merged = merge(q, merged[:0])
			if len(merged) <= b.r {
				b.set(uint32(q), merged)
				continue
			}
			kept = m.prune(uint32(q), merged, kept[:0])
			b.set(uint32(q), kept)
		}
	})
	return nil
}

// refine chooses every row's neighbours again from the rows a search for
// it on the graph as it stands expands, with its current neighbours.
// Every row searches the same graph and the new lists replace the old
// together, so the order rows are taken in does not matter. Once ctx is
// done the rows left are skipped (Build then returns ctx's error).
func (b *builder) refine(ctx context.Context, ef int) {
	next, nextDist := make([]uint32, len(b.adj)), make([]float32, len(b.adj))
	pool := sync.Pool{New: func() any { return newBeam(b.n) }}
	par.For(b.n, 16, func(lo, hi int) {
		if ctx.Err() != nil {
			return
		}
		bm := pool.Get().(*beam)
		defer pool.Put(bm)
		var merged, kept []pair
		m := b.meter()
		for p := lo; p < hi; p++ {
			bm.search(slots{b.adj, b.r}, b.reps[int(b.assign[p])*b.perList], ef, exactScorer{m, uint32(p)}, true)
			merged = b.withNeighbours(uint32(p), append(merged[:0], bm.expanded...))
			kept = m.prune(uint32(p), merged, kept[:0])
			nb, nd := next[p*b.r:(p+1)*b.r], nextDist[p*b.r:(p+1)*b.r]
			for k := range nb {
				nb[k], nd[k] = noEdge, 0
				if k < len(kept) {
					nb[k], nd[k] = kept[k].id, kept[k].dist
				}
			}
		}
	})
	b.adj, b.dist = next, nextDist
}

// withNeighbours appends row p's neighbours to merged (a search's
// expanded rows), sorts them by distance then row and drops repeats: the
// rows a pass chooses p's neighbours from.
func (b *builder) withNeighbours(p uint32, merged []pair) []pair {
	for k, v := range b.adj[int(p)*b.r : int(p+1)*b.r] {
		if v == noEdge {
			break
		}
		merged = append(merged, pair{b.dist[int(p)*b.r+k], v})
	}
	slices.SortFunc(merged, comparePairs)
	return slices.CompactFunc(merged, func(a, c pair) bool { return a.id == c.id })
}

// connect makes every row reachable from the entry, and returns how many
// rounds linked rows and how many searches it made. A row the walk from
// the entry misses gets an edge from the nearest of its candidates that
// is reached, else from the entry, into a free slot, else in place of
// that row's farthest neighbour, and the walk goes on from it; rounds
// repeat until every row is reached, as a replaced edge may cut another
// row off. Where that first round leaves rows unreached (where clusters
// lie far apart, every cluster's rows had only the entry to link from,
// each in place of the last one's), the later rounds choose better: from
// the row's reached candidates, then the rows a search from the entry for
// it finds (BuildEf wide, exact distances, nearest first), the first that
// has a free slot or a neighbour that another reached row also points to
// (that edge is replaced, the farthest such); the edges added here are
// not replaced.
//
// A later round goes in two steps so that its searches run on all cores.
// First, row by row, a row whose reached candidates give it a place is
// linked at once; one whose candidates do not is put aside for a search,
// with every unreached row its walk reaches (those are left to it, as
// linking it will reach them). Then the rows put aside are searched at
// once on the graph as it stands, and linked in row order from their
// candidates (reached by now, perhaps) and their searches' rows. The walk
// from the entry goes breadth first on all cores (reachedFrom). Every
// step is the same whatever the number of cores, and so is the graph.
func (b *builder) connect(cands [][]pair, ef int) (rounds, searches int) {
	reached := make([]bool, b.n)
	var stack []uint32
	// walk marks every row reached from row from (when not already) in
	// mark, through rows not in skip (nil: none).
	walk := func(from uint32, mark, skip []bool) {
		if mark[from] {
			return
		}
		mark[from] = true
		stack = append(stack[:0], from)
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, w := range b.adj[int(v)*b.r : int(v+1)*b.r] {
				if w == noEdge {
					break
				}
				if !mark[w] && (skip == nil || !skip[w]) {
					mark[w] = true
					stack = append(stack, w)
				}
			}
		}
	}
	var (
		indeg  []atomic.Int32                // edges from reached rows, at the round's start
		added  = bitset.New(uint(b.n * b.r)) // slots (row*r + k) holding an edge added here
		places []uint32
		aside  []uint32 // a round's rows put aside for a search
		asideR []bool   // rows put aside, or reached from one put aside
		found  [][]uint32
	)
	// slotFor is the slot of from an edge may take in a later round: a
	// free one, else the farthest neighbour not added here that another
	// reached row points to; -1 for none.
	slotFor := func(from uint32) int {
		nb := b.adj[int(from)*b.r : int(from+1)*b.r]
		if k := slices.Index(nb, noEdge); k >= 0 {
			return k
		}
		for k := b.r - 1; k >= 0; k-- {
			if !added.Test(uint(int(from)*b.r+k)) && indeg[nb[k]].Load() >= 2 {
				return k
			}
		}
		return -1
	}
	// fromCandidates is u's first reached candidate with a slot, or -1.
	fromCandidates := func(u uint32) (from uint32, slot int) {
		places = places[:0]
		for _, c := range cands[u] {
			if reached[c.id] {
				places = append(places, c.id)
			}
		}
		for _, p := range places {
			if slot = slotFor(p); slot >= 0 {
				return p, slot
			}
		}
		return b.entry, -1
	}
	link := func(u, from uint32, slot int) {
		if old := b.adj[int(from)*b.r+slot]; old != noEdge {
			indeg[old].Add(-1)
		}
		indeg[u].Add(1)
		added.Set(uint(int(from)*b.r + slot))
		b.adj[int(from)*b.r+slot] = u
		walk(u, reached, nil)
	}
	beams := sync.Pool{New: func() any { return newBeam(b.n) }}
	for round := 0; round < 100; round++ {
		b.reachedFrom(b.entry, reached)
		if !slices.Contains(reached, false) {
			return round, searches
		}
		if round == 0 {
			for u := range b.n {
				if reached[u] {
					continue
				}
				from := b.entry
				for _, c := range cands[u] {
					if reached[c.id] {
						from = c.id
						break
					}
				}
				nb := b.adj[int(from)*b.r : int(from+1)*b.r]
				slot := slices.Index(nb, noEdge)
				if slot < 0 {
					slot = b.r - 1
				}
				b.adj[int(from)*b.r+slot] = uint32(u)
				walk(uint32(u), reached, nil)
			}
			continue
		}
		indeg = make([]atomic.Int32, b.n)
		par.For(b.n, 1024, func(lo, hi int) {
			for v := lo; v < hi; v++ {
				if !reached[v] {
					continue
				}
				for _, w := range b.adj[v*b.r : (v+1)*b.r] {
					if w == noEdge {
						break
					}
					indeg[w].Add(1)
				}
			}
		})
		if asideR == nil {
			asideR = make([]bool, b.n)
		} else {
			clear(asideR)
		}
		aside = aside[:0]
		for u := range b.n {
			if reached[u] || asideR[u] {
				continue
			}
			if from, slot := fromCandidates(uint32(u)); slot >= 0 {
				link(uint32(u), from, slot)
				continue
			}
			aside = append(aside, uint32(u))
			walk(uint32(u), asideR, reached)
		}
		if len(aside) == 0 {
			continue
		}
		// The searches, on all cores, on the graph as it stands.
		found = slices.Grow(found[:0], len(aside))[:len(aside)]
		par.For(len(aside), 1, func(lo, hi int) {
			bm := beams.Get().(*beam)
			defer beams.Put(bm)
			m := b.meter()
			for i := lo; i < hi; i++ {
				bm.search(slots{b.adj, b.r}, b.entry, ef, exactScorer{m, aside[i]}, false)
				found[i] = found[i][:0]
				for _, p := range bm.pool {
					if reached[p.id] {
						found[i] = append(found[i], p.id)
					}
				}
			}
		})
		searches += len(aside)
		for i, u := range aside {
			if reached[u] {
				continue
			}
			from, slot := fromCandidates(u)
			if slot < 0 {
				for _, p := range found[i] {
					places = append(places, p)
					if slot < 0 {
						if slot = slotFor(p); slot >= 0 {
							from = p
						}
					}
				}
			}
			if slot < 0 { // no place with room: the first, its last slot not added here
				if len(places) > 0 {
					from = places[0]
				}
				slot = b.r - 1
				for slot > 0 && added.Test(uint(int(from)*b.r+slot)) {
					slot--
				}
			}
			link(u, from, slot)
		}
	}
	return 100, searches
}

// reachedFrom sets reached[v] for every row v reached from row from, and
// clears it for the others: a breadth-first walk, each level's rows
// shared among the cores.
func (b *builder) reachedFrom(from uint32, reached []bool) {
	seen := make([]atomic.Bool, b.n)
	seen[from].Store(true)
	level := []uint32{from}
	var mu sync.Mutex
	for len(level) > 0 {
		var next []uint32
		par.For(len(level), 256, func(lo, hi int) {
			var found []uint32
			for _, v := range level[lo:hi] {
				for _, w := range b.adj[int(v)*b.r : int(v+1)*b.r] {
					if w == noEdge {
						break
					}
					if !seen[w].Load() && seen[w].CompareAndSwap(false, true) {
						found = append(found, w)
					}
				}
			}
			mu.Lock()
			next = append(next, found...)
			mu.Unlock()
		})
		level = next
	}
	par.For(b.n, 4096, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			reached[v] = seen[v].Load()
		}
	})
}
