package index

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/par"
)

// partsOnDevice searches parts that share anchors, code and metric (a
// Group's, or one Index) as one, part i's rows numbered from bases[i],
// each part on its device copy devs[i] or, where that is nil, on the CPU.
// It is searchParts in batches: the same lists, the same filter rules,
// the same hits up to float rounding and ties.
//
// A filter becomes, per part on a device, a mask over its entries; a
// RowSet widens the probe as on the CPU, and a RowSet small enough to be
// scored row by row there is searched over every list (every allowed
// entry scored, as the CPU's scoreRows does). Where the lists read hold
// fewer than keep allowed rows, the CPU reads on, list by list nearest
// first, until they hold keep: such a query is searched again over as
// many lists as the CPU reads, counted from the masks.
type partsOnDevice struct {
	parts []*Index
	bases []int
	devs  []*DeviceIndex
}

// deviceChunk is the most queries prepared on the host at a time (about
// 50 MB of float32 at dimension 768); the device splits further as its
// memory requires.
const deviceChunk = 1 << 14

// deviceSearch is one batch's state, shared by its chunks.
type deviceSearch struct {
	queries Rows
	opt     SearchOptions
	k, keep int
	total   int
	masks   [][]uint64 // per part on a device, when filtered
	hits    [][]Hit
	// allowed[a] is the rows list a holds that the filter allows, over
	// every part: counted once, for the first query that reads on.
	allowedOnce sync.Once
	allowed     []int
}

func (p partsOnDevice) searchBatch(ctx context.Context, queries Rows, opt SearchOptions) (hits [][]Hit, err error) {
	ix := p.parts[0]
	if queries.Dim() != ix.d {
		return nil, fmt.Errorf("%w: queries have dimension %d, the index %d", ErrDim, queries.Dim(), ix.d)
	}
	for _, part := range p.parts {
		part.mu.RLock()
	}
	defer func() {
		for _, part := range p.parts {
			part.mu.RUnlock()
		}
	}()
	for _, part := range p.parts {
		if part.file == nil {
			return nil, ErrClosed
		}
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	st := &deviceSearch{queries: queries, opt: opt, total: p.bases[len(p.parts)], hits: make([][]Hit, queries.Len())}
	if st.total == 0 {
		return st.hits, nil
	}
	if _, _, err := ix.want(opt); err != nil {
		return nil, err
	}
	st.k = min(opt.K, st.total)
	st.keep = keepFor(opt, st.total, st.k)
	if st.keep > device.MaxKeep {
		return nil, fmt.Errorf("%w: a device search keeps at most %d candidates a query, this one %d (k %d, times the re-rank factor): search on the CPU", ErrArgument, device.MaxKeep, st.keep, opt.K)
	}
	nprobe, scoreAll, none := filterProbe(opt.Filter, ix.m, st.total, ix.EffectiveNProbe(opt.NProbe))
	if scoreAll {
		nprobe = ix.m
	}
	if opt.Filter != nil && !none {
		st.masks = make([][]uint64, len(p.parts))
		for i, d := range p.devs {
			if d != nil {
				st.masks[i] = d.maskFor(p.bases[i], opt.Filter)
			}
		}
	}
	n := queries.Len()
	if n == 0 {
		return st.hits, nil
	}
	size := deviceChunk
	if shape := pipelineShape(); n >= 2*shape[0] && !none {
		minChunk, parts, perLane := shape[0], shape[1], shape[2]
		if lanes := p.lanes(st); lanes > 1 {
			parts = max(parts, perLane*lanes)
		}
		size = min(deviceChunk, max(minChunk, (n+parts-1)/parts))
	}
	if n <= size { // one chunk
		which := make([]int, n)
		for i := range which {
			which[i] = i
		}
		if err := p.searchChunk(ctx, st, which, nprobe, !none, opt.Filter != nil); err != nil {
			return nil, err
		}
		return st.hits, nil
	}
	var chunks [][]int
	for lo := 0; lo < n; lo += size {
		which := make([]int, min(lo+size, n)-lo)
		for i := range which {
			which[i] = lo + i
		}
		chunks = append(chunks, which)
	}
	if none {
		for _, which := range chunks {
			if err := p.searchChunk(ctx, st, which, nprobe, !none, opt.Filter != nil); err != nil {
				return nil, err
			}
		}
		return st.hits, nil
	}
	if err := p.pipeline(ctx, st, chunks, nprobe, opt.Filter != nil); err != nil {
		return nil, err
	}
	return st.hits, nil
}

// A batch of at least 2*pipelineChunk queries goes in pipelineParts
// chunks (of at least pipelineChunk), so that while the device searches
// one the host prepares the next and finishes the last: the device then
// waits on the host only at the ends. Fewer parts leave the host's ends
// longer; more make the device's passes smaller, and its scan shares
// each list among fewer queries. Where the devices take several chunks
// at once (lanes: replicas, each GPU a copy of the index), a batch goes
// in at least pipelinePerLane chunks a lane.
//
// Measured (vlc eval -nprobe 64 -batch 10000 -min-time 2s, 4 bits, two
// NVIDIA H200s, one call of 2026-11-27, three runs at 10M and two at 1M):
//
//	index                    one GPU, 3 parts / 2   two GPUs, 2 a lane / 1
//	10M x 768, 16,384 lists  461-463K / 505-512K    791-796K / 893-905K
//	1M x 768, 4,096 lists    1.32-1.33M / 1.39M     2.21-2.22M / 2.20-2.24M
//
// Batches of 1,000 (an earlier call, one H200): 632K-680K in one pass,
// 579K in 2 chunks of 500, 505K in 3.
const (
	pipelineChunk   = 2048
	pipelineParts   = 2
	pipelinePerLane = 1
)

// pipelineShape is pipelineChunk, pipelineParts and pipelinePerLane, or
// what VLC_DEVICE_PIPELINE ("CHUNK,PARTS" or "CHUNK,PARTS,PERLANE", for
// measurements) sets instead, read once.
var pipelineShape = sync.OnceValue(func() (shape [3]int) {
	shape = [3]int{pipelineChunk, pipelineParts, pipelinePerLane}
	if v := os.Getenv("VLC_DEVICE_PIPELINE"); v != "" {
		var c, p, l int
		k, _ := fmt.Sscanf(v, "%d,%d,%d", &c, &p, &l)
		if k >= 2 && c > 0 && p > 0 {
			shape[0], shape[1] = c, p
		}
		if k == 3 && l > 0 {
			shape[2] = l
		}
	}
	return shape
})

// lanes is how many chunks the devices take at once: the lanes every
// part's device copy has (device.LanedResident: a ReplicaSearch's copy on
// each device), 1 where a part has no lanes, or masks its lanes cannot
// apply, or a part is searched on the CPU.
func (p partsOnDevice) lanes(st *deviceSearch) int {
	n := 0
	for i, d := range p.devs {
		if p.parts[i].n == 0 {
			continue
		}
		if d == nil {
			return 1
		}
		l := d.lanes(st.masks != nil)
		if n == 0 || l < n {
			n = l
		}
	}
	return max(n, 1)
}

// pipeline searches the chunks in three stages that overlap: prepare,
// search on the devices, finish (a query that reads on is searched again
// on the devices from there, DeviceIndex's lock keeping that call apart
// from the lanes'). Where the devices take several chunks at once
// (lanes), each lane runs its own three stages over every lanes-th
// chunk: the lanes' first chunks are prepared, and their last finished,
// at the same time. Measured (10M x 768, 16,384 lists, nprobe 64,
// batches of 10,000, two H200s, one call): with one preparer and one
// finisher for both lanes, the second lane started 0.35 ms after the
// first and the last chunk's finish waited 0.55 ms for the one before.
func (p partsOnDevice) pipeline(ctx context.Context, st *deviceSearch, chunks [][]int, nprobe int, readOn bool) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tr := newPipeTrace(len(chunks))
	defer tr.print()
	lanes := p.lanes(st)
	var wg sync.WaitGroup
	for lane := range min(lanes, len(chunks)) {
		var mine []int // the chunks this lane takes
		for i := lane; i < len(chunks); i += lanes {
			mine = append(mine, i)
		}
		if lanes == 1 {
			lane = -1 // the whole copy
		}
		wg.Go(func() { p.lanePipeline(ctx, cancel, st, chunks, mine, nprobe, lane, readOn, tr) })
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// lanePipeline prepares, searches on lane and finishes the chunks mine
// names, the three stages overlapping; the first error cancels ctx.
func (p partsOnDevice) lanePipeline(ctx context.Context, cancel context.CancelCauseFunc, st *deviceSearch, chunks [][]int, mine []int, nprobe, lane int, readOn bool, tr *pipeTrace) {
	prepared := make(chan *chunk, 1)
	searched := make(chan *chunk, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(prepared)
		for _, i := range mine {
			tr.mark(i, tracePrepare)
			c, err := p.prepare(ctx, st, chunks[i])
			tr.mark(i, tracePrepared)
			if err != nil {
				cancel(err)
				return
			}
			c.seq = i
			select {
			case prepared <- c:
			case <-ctx.Done():
				c.release()
				return
			}
			// The lane that took c waits on this core, behind the next
			// chunk's preparation on every core, unless this goroutine
			// yields (measured as above: without the yield a chunk
			// waited 0.35-0.5 ms between prepared and searched).
			runtime.Gosched()
		}
	})
	wg.Go(func() {
		for c := range searched {
			if ctx.Err() == nil {
				tr.mark(c.seq, traceFinish)
				if err := p.finishChunk(ctx, st, c, nprobe, readOn); err != nil {
					cancel(err)
				}
				tr.mark(c.seq, traceFinished)
			}
			c.release()
		}
	})
	for c := range prepared {
		if ctx.Err() != nil {
			c.release()
			continue
		}
		tr.lane(c.seq, lane)
		tr.mark(c.seq, traceSearch)
		if err := p.onLane(ctx, st, c, nprobe, lane); err != nil {
			cancel(err)
			c.release()
			continue
		}
		tr.mark(c.seq, traceSearched)
		searched <- c
	}
	close(searched)
	wg.Wait()
}

// KeyedFilter is a Filter that says when it allows the same rows as
// before: two searches whose filters have equal MaskKeys (comparable
// values) share the masks built over each device copy's entries, so that
// a store's deletions, the same for every search of a version, are
// turned into a mask once, not once a batch.
type KeyedFilter interface {
	Filter
	MaskKey() any
}

// maskFor is ix's mask for f, its rows numbered from base: built, or the
// one built last for an equal key (KeyedFilter).
func (di *DeviceIndex) maskFor(base int, f Filter) []uint64 {
	kf, ok := f.(KeyedFilter)
	if !ok {
		return di.ix.mask(base, f)
	}
	key := maskKey{kf.MaskKey(), base}
	di.maskMu.Lock()
	for _, m := range di.masks {
		if m.key == key {
			di.maskMu.Unlock()
			return m.bits
		}
	}
	di.maskMu.Unlock()
	bits := di.ix.mask(base, f)
	di.maskMu.Lock()
	di.masks = append(di.masks[max(0, len(di.masks)-maskCache+1):], keyedMask{key, bits})
	di.maskMu.Unlock()
	return bits
}

// maskCache is the masks a device copy keeps (a store's current version
// and the one before it).
const maskCache = 2

type maskKey struct {
	key  any
	base int
}

type keyedMask struct {
	key  maskKey
	bits []uint64
}

// mask is the entries of ix whose row (numbered from base) f allows: entry
// e is bit e%64 of word e/64.
func (ix *Index) mask(base int, f Filter) []uint64 {
	m := make([]uint64, (ix.n+63)/64)
	par.For(len(m), 256, func(lo, hi int) {
		for w := lo; w < hi; w++ {
			var word uint64
			for e := w * 64; e < min(ix.n, (w+1)*64); e++ {
				if f.Allows(base + ix.ids.at(e)) {
					word |= 1 << (e % 64)
				}
			}
			m[w] = word
		}
	})
	return m
}

// listAllowed counts, for every list, the rows its entries hold that the
// filter allows, over every part: from the masks of parts on a device,
// from the filter for the others.
func (p partsOnDevice) listAllowed(st *deviceSearch) []int {
	st.allowedOnce.Do(func() {
		ix := p.parts[0]
		st.allowed = make([]int, ix.m)
		for i, part := range p.parts {
			mask := st.masks[i]
			for a := range ix.m {
				lo, hi := int(part.lists[a]), int(part.lists[a+1])
				if mask != nil {
					st.allowed[a] += countBits(mask, lo, hi)
					continue
				}
				for e := lo; e < hi; e++ {
					if st.opt.Filter.Allows(p.bases[i] + part.ids.at(e)) {
						st.allowed[a]++
					}
				}
			}
		}
	})
	return st.allowed
}

// countBits counts the bits lo to hi-1 set in m.
func countBits(m []uint64, lo, hi int) int {
	c := 0
	for lo < hi {
		w, b := lo/64, lo%64
		take := min(64-b, hi-lo)
		word := m[w] >> b
		if take < 64 {
			word &= 1<<take - 1
		}
		c += bits.OnesCount64(word)
		lo += take
	}
	return c
}

// searchChunk searches the queries which names (at most deviceChunk)
// over nprobe lists: prepared on all cores, searched on each part's
// device, the parts on the CPU scanned and everything merged and finished
// on all cores. With readOn, a filtered query whose lists hold too few
// allowed rows is searched again over more (see partsOnDevice); with
// search false (a RowSet that allows nothing) the queries are only
// checked.
func (p partsOnDevice) searchChunk(ctx context.Context, st *deviceSearch, which []int, nprobe int, search, readOn bool) error {
	c, err := p.prepare(ctx, st, which)
	if err != nil {
		return err
	}
	defer c.release()
	if !search {
		return nil
	}
	if err := p.onDevices(ctx, st, c, nprobe); err != nil {
		return err
	}
	return p.finishChunk(ctx, st, c, nprobe, readOn)
}

// chunk is a searchChunk's queries as they go through its three steps:
// prepared on the host, searched on the devices, finished on the host.
type chunk struct {
	which   []int
	qs      []float32
	scales  []float64
	entries [][]int32   // per part on a device
	dists   [][]float32 // per part on a device
	onCPU   []bool      // the queries a device could not complete (nil: none)
	seq     int         // its place in a pipelined batch (-1 outside one)
	release func()      // gives qs back to the device that lent it
}

// prepare checks and prepares the queries which names, on all cores.
func (p partsOnDevice) prepare(ctx context.Context, st *deviceSearch, which []int) (*chunk, error) {
	ix, opt := p.parts[0], st.opt
	nq, d := len(which), ix.d
	qs, release := p.queryBuffer(nq * d)
	scales := make([]float64, nq)
	var errs firstError
	par.For(nq, 64, func(a, b int) {
		errs.runQueries(ctx, which[a], which[b-1], "", func() (err error) {
			defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
			for i := a; i < b; i++ {
				// Read, checked and prepared in its place in qs.
				dst := qs[i*d : (i+1)*d : (i+1)*d] // no room past the row: the next is another block's
				q := st.queries.Row(which[i], dst)
				if _, _, err := ix.check(q, opt); err != nil {
					return fmt.Errorf("query %d: %w", which[i], err)
				}
				if &q[0] != &dst[0] { // a row the Rows holds itself
					copy(dst, q)
				}
				scales[i] = ix.loadInPlace(dst)
			}
			return nil
		})
	})
	if err := errs.get(); err != nil {
		release()
		return nil, err
	}
	return &chunk{which: which, qs: qs, scales: scales, release: release, seq: -1}, nil
}

// queryBuffer is where a chunk's prepared queries go: memory the first
// part's device lends (device.HostBuffers: page-locked on a GPU, copied up
// without a staging pass), else the heap.
func (p partsOnDevice) queryBuffer(n int) ([]float32, func()) {
	for _, d := range p.devs {
		if d == nil {
			continue
		}
		if hb, ok := d.res.(device.HostBuffers); ok {
			if buf, release, err := hb.HostBuffer(n); err == nil {
				return buf, release
			}
		}
		return heapBuffer(n)
	}
	return heapBuffer(n)
}

// heapQueries holds query buffers (*[]float32) that searches gave back,
// for a device that lends none: a batch's are megabytes, which the next
// batch would otherwise allocate and clear again.
var heapQueries sync.Pool

// heapBuffer is n float32 of the heap, from heapQueries where one there
// is large enough, and the function that gives it back.
func heapBuffer(n int) ([]float32, func()) {
	b, ok := heapQueries.Get().(*[]float32)
	if !ok || cap(*b) < n {
		buf := make([]float32, n)
		b = &buf
	}
	return (*b)[:n], func() { heapQueries.Put(b) }
}

// onDevices searches a prepared chunk on each part's device; onCPU
// marks the queries a device could not complete (searchOn's short ones).
func (p partsOnDevice) onDevices(ctx context.Context, st *deviceSearch, c *chunk, nprobe int) error {
	return p.onLane(ctx, st, c, nprobe, -1)
}

// onLane is onDevices on lane lane of every part's device copy (see
// lanes), or on the whole copies for lane -1.
func (p partsOnDevice) onLane(ctx context.Context, st *deviceSearch, c *chunk, nprobe, lane int) error {
	nq, keep, qs := len(c.which), st.keep, c.qs
	c.entries = make([][]int32, len(p.parts))
	c.dists = make([][]float32, len(p.parts))
	entries, dists := c.entries, c.dists
	for i, dev := range p.devs {
		if dev == nil || p.parts[i].n == 0 {
			continue
		}
		var mask []uint64
		if st.masks != nil {
			mask = st.masks[i]
		}
		var short []int
		var err error
		if lane >= 0 {
			entries[i], dists[i], err = dev.searchLane(ctx, lane, qs, nq, nprobe, keep, mask)
		} else {
			entries[i], dists[i], short, err = dev.searchOn(ctx, qs, nq, nprobe, keep, mask)
		}
		if err != nil {
			return err
		}
		if len(short) > 0 && c.onCPU == nil {
			c.onCPU = make([]bool, nq)
		}
		for _, q := range short {
			c.onCPU[q] = true
		}
	}
	return nil
}

// finishChunk merges a searched chunk's parts (scanning the parts on the
// CPU), finishes its hits on all cores, and searches again the queries
// that read on.
func (p partsOnDevice) finishChunk(ctx context.Context, st *deviceSearch, c *chunk, nprobe int, readOn bool) error {
	ix, opt, keep := p.parts[0], st.opt, st.keep
	nq, d, which, qs, scales := len(c.which), ix.d, c.which, c.qs, c.scales
	onCPU := c.onCPU
	cpuParts := false
	for i, dev := range p.devs {
		cpuParts = cpuParts || (dev == nil && p.parts[i].n > 0)
	}
	var errs firstError
	var again []int // lists to read for a query that reads on
	if readOn {
		again = make([]int, nq)
	}
	par.For(nq, 64, func(a, b int) {
		errs.runQueries(ctx, which[a], which[b-1], "", func() (err error) {
			defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
			s := ix.getScratch()
			defer ix.pool.Put(s)
			out := make([]Hit, 0, (b-a)*st.k) // the block's hits, query after query
			for i := a; i < b; i++ {
				if !cpuParts && (onCPU == nil || !onCPU[i]) {
					h, ok, err := p.fromDevices(st, c, i, s, nprobe, readOn)
					if err != nil {
						return err
					}
					if ok {
						var kept []Hit // nil for none, as finish gives
						if len(h) > 0 {
							n0 := len(out)
							out = append(out, h...)
							kept = out[n0:len(out):len(out)]
						}
						st.hits[which[i]] = kept
						continue
					}
				}
				if onCPU != nil && onCPU[i] {
					// The CPU's own search of this query: what the device
					// without masks could not give.
					h, err := searchParts(ctx, p.parts, p.bases, s, nil, st.queries.Row(which[i], s.row), opt, st.k, keep)
					if err != nil {
						return fmt.Errorf("query %d: %w", which[i], err)
					}
					st.hits[which[i]] = h
					continue
				}
				copy(s.q, qs[i*d:(i+1)*d])
				dots := false
				if cpuParts {
					ix.panels.Dots1(s.q, s.dots)
					ix.begin(s, nprobe, keep)
					dots = true
					s.filter = opt.Filter
					for _, l := range s.probe {
						for j, part := range p.parts {
							if p.devs[j] == nil {
								s.base = p.bases[j]
								part.scan(s, l.ID)
							}
						}
					}
				}
				s.scale, s.total = scales[i], st.total
				if !cpuParts {
					s.top.reset(keep)
				}
				if err := p.pushDevices(c, i, keep, s); err != nil {
					return err
				}
				if readOn && len(s.top.h) < keep && nprobe < ix.m {
					if !dots {
						ix.panels.Dots1(s.q, s.dots)
					}
					again[i] = readOnLists(ix.allLists(s), p.listAllowed(st), nprobe, keep)
					if again[i] > nprobe {
						continue
					}
					again[i] = 0
				}
				h, err := ix.finish(nil, s, opt, st.k)
				if err != nil {
					return fmt.Errorf("query %d: %w", which[i], err)
				}
				st.hits[which[i]] = h
			}
			return nil
		})
	})
	if err := errs.get(); err != nil {
		return err
	}
	// The queries that read on, in batches of those that read as many
	// lists.
	var byLists map[int][]int
	for i, l := range again {
		if l > 0 {
			if byLists == nil {
				byLists = map[int][]int{}
			}
			byLists[l] = append(byLists[l], which[i])
		}
	}
	if byLists == nil {
		return nil
	}
	for _, l := range slices.Sorted(maps.Keys(byLists)) {
		if err := p.searchChunk(ctx, st, byLists[l], l, true, false); err != nil {
			return err
		}
	}
	return nil
}

// pushDevices offers query i's entries from every part on a device to
// s.top, as hits.
func (p partsOnDevice) pushDevices(c *chunk, i, keep int, s *scratch) error {
	for j, part := range p.parts {
		if c.entries[j] == nil {
			continue
		}
		for _, e := range c.entries[j][i*keep : (i+1)*keep] {
			if e < 0 {
				break
			}
			if int(e) >= part.n {
				return fmt.Errorf("%s: device search returned entry %d of %d", part.path, e, part.n)
			}
		}
		for t, e := range c.entries[j][i*keep : (i+1)*keep] {
			if e < 0 {
				break
			}
			if dist := c.dists[j][i*keep+t]; s.top.accepts(dist) {
				s.top.push(Hit{ID: p.bases[j] + part.ids.at(int(e)), Distance: dist})
			}
		}
	}
	return nil
}

// fromDevices finishes query i of c, every part with rows on a device,
// without the heap the general path pushes the parts' entries into:
// each part returns its entries nearest first, so the hits they map to
// are mostly in order already, and otherwise need one sort. It gives the
// general path's hits and errors exactly; where that is not plain (the
// query reads on, two hits tie in both distance and row, or the parts
// return more than keep between them with a NaN distance, which the
// heap's accepts turns away) it returns ok false, and the general path
// runs. The hits returned are in s's memory.
func (p partsOnDevice) fromDevices(st *deviceSearch, c *chunk, i int, s *scratch, nprobe int, readOn bool) (hits []Hit, ok bool, err error) {
	ix, opt, keep := p.parts[0], st.opt, st.keep
	mapped, runs := s.mapped[:0], s.runs[:0]
	nan := false
	for j, part := range p.parts {
		if c.entries[j] == nil {
			continue
		}
		es, ds := c.entries[j][i*keep:(i+1)*keep], c.dists[j][i*keep:(i+1)*keep]
		for _, e := range es {
			if e < 0 {
				break
			}
			if int(e) >= part.n {
				return nil, false, fmt.Errorf("%s: device search returned entry %d of %d", part.path, e, part.n)
			}
		}
		base, ids := p.bases[j], part.ids
		runs = append(runs, len(mapped))
		mapped = slices.Grow(mapped, keep)
		for t, e := range es {
			if e < 0 {
				break
			}
			dist := ds[t]
			nan = nan || dist != dist
			mapped = append(mapped, Hit{ID: base + ids.at(int(e)), Distance: dist})
		}
	}
	s.mapped, s.runs = mapped, runs
	if readOn && len(mapped) < keep && nprobe < ix.m {
		return nil, false, nil
	}
	if len(mapped) > keep && nan {
		return nil, false, nil
	}
	if len(runs) > 1 && len(mapped) > keep {
		// Several parts: the first keep of their runs, each nearest
		// first, merged (a sort of all of them cost the most of a
		// store's batch of ten segments).
		s.merged = mergeRuns(s.merged[:0], mapped, runs, keep)
		mapped = s.merged
		if !increasing(mapped) {
			return nil, false, nil
		}
	} else if !increasing(mapped) {
		slices.SortFunc(mapped, compareHits)
		if !increasing(mapped) {
			return nil, false, nil
		}
	}
	mapped = mapped[:min(len(mapped), keep)]
	s.scale, s.total = c.scales[i], st.total
	if opt.Rerank != nil {
		d := ix.d
		copy(s.q, c.qs[i*d:(i+1)*d])
	}
	hits, err = ix.finishSorted(mapped, 0, s, opt, st.k)
	if err != nil {
		return nil, false, fmt.Errorf("query %d: %w", c.which[i], err)
	}
	return hits, true, nil
}

// mergeRuns appends to dst the first keep hits, in compareHits order, of
// hits, whose runs start at runs[0], runs[1], ... (each sorted first
// where it is not in order already): what a sort of all of hits would
// put first. No distance may be NaN (the plain comparison below is
// compareHits' order then).
func mergeRuns(dst, hits []Hit, runs []int, keep int) []Hit {
	var head [16]int
	heads := head[:0]
	for r, lo := range runs {
		hi := len(hits)
		if r+1 < len(runs) {
			hi = runs[r+1]
		}
		if !increasing(hits[lo:hi]) {
			slices.SortFunc(hits[lo:hi], compareHits)
		}
		heads = append(heads, lo)
	}
	for len(dst) < keep {
		best := -1
		for r, at := range heads {
			end := len(hits)
			if r+1 < len(runs) {
				end = runs[r+1]
			}
			if at < end && (best < 0 || hitLess(hits[at], hits[heads[best]])) {
				best = r
			}
		}
		if best < 0 {
			break
		}
		dst = append(dst, hits[heads[best]])
		heads[best]++
	}
	return dst
}

// hitLess is compareHits(a, b) < 0 for distances that are not NaN.
func hitLess(a, b Hit) bool {
	return a.Distance < b.Distance || a.Distance == b.Distance && a.ID < b.ID
}

// increasing reports whether hits are in strictly increasing compareHits
// order: the one order that a sort of them, stable or not, gives.
func increasing(hits []Hit) bool {
	for t := 1; t < len(hits); t++ {
		a, b := hits[t-1], hits[t]
		// The plain comparison settles the usual pair (no NaN) quickly.
		if a.Distance < b.Distance || a.Distance == b.Distance && a.ID < b.ID {
			continue
		}
		if compareHits(a, b) >= 0 {
			return false
		}
	}
	return true
}

// readOnLists is the lists the CPU reads for a filtered query that found
// fewer than keep allowed rows in its first nprobe: order is every list,
// nearest first, and allowed[a] the allowed rows of list a; it reads on
// until the lists read hold keep, or every list.
func readOnLists(order []Hit, allowed []int, nprobe, keep int) int {
	sum := 0
	for j, l := range order {
		sum += allowed[l.ID]
		if j+1 >= nprobe && sum >= keep {
			return j + 1
		}
	}
	return len(order)
}
