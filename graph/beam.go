package graph

import "slices"

// pair is a row and its distance to what is searched for.
type pair struct {
	dist float32
	id   uint32
}

// less orders pairs by distance, then row.
func less(a, b pair) bool { return a.dist < b.dist || a.dist == b.dist && a.id < b.id }

// maxHeap is a binary heap of pairs by distance, farthest first: the
// nearest rows found so far.
type maxHeap []pair

func (h *maxHeap) push(p pair) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if !(s[up].dist < s[i].dist) {
			break
		}
		s[i], s[up] = s[up], s[i]
		i = up
	}
}

// replaceTop puts p in place of the farthest pair.
func (h maxHeap) replaceTop(p pair) {
	h[0] = p
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[m].dist < h[l].dist {
			m = l
		}
		if r < len(h) && h[m].dist < h[r].dist {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// beam is one greedy search's state, reused between searches.
type beam struct {
	seen  []uint32 // seen[i] == epoch: row i was scored this search
	epoch uint32
	// pool holds the best rows found, nearest first (by distance, then
	// as met), at most ef; done marks those expanded.
	pool          []pooled
	expanded      []pair // rows whose neighbours were scored, in order (the build's candidates)
	batch         []uint32
	nbs           []uint32
	dists         []float32
	scored        int // rows scored by the last search
	expandedCount int // rows expanded by the last search
}

type pooled struct {
	pair
	done bool
}

func newBeam(n int) *beam { return &beam{seen: make([]uint32, n)} }

// batchScorer scores rows for a search: a step's unseen neighbours
// together, so that their reads overlap.
type batchScorer interface {
	// scores sets out[k] to the distance of row ids[k].
	scores(ids []uint32, out []float32)
}

// search walks the adjacency adj from entry, keeping the ef rows nearest
// by sc in b.pool. Each step expands the nearest row of the pool not yet
// expanded: its unseen neighbours are scored together and enter the pool
// where nearer than its farthest (a full pool drops that one); the walk
// ends when every row of the pool is expanded. A row enters after the
// rows of equal distance already there, so ties keep the order the walk
// met them in, the same on every run.
func (b *beam) search(adj adjacency, entry uint32, ef int, sc batchScorer, keepExpanded bool) {
	b.searchFrom(adj, []uint32{entry}, ef, sc, keepExpanded)
}

// unseen returns the rows of nbs not seen this search, in order, in
// b.batch, and marks them seen. Whether a row was seen is a coin toss to
// the branch predictor, so each row is written and the count moves by
// the comparison's outcome instead.
func (b *beam) unseen(nbs []uint32) []uint32 {
	batch := slices.Grow(b.batch[:0], len(nbs))[:len(nbs)]
	n, epoch, seen := 0, b.epoch, b.seen
	for _, nb := range nbs {
		diff := seen[nb] ^ epoch // 0 where seen
		seen[nb] = epoch
		batch[n] = nb
		n += int((uint64(diff) + 0xffffffff) >> 32)
	}
	return batch[:n]
}

// keep puts p in the pool, sorted by distance then row, where it is among
// the ef nearest: for distinct rows of finite distances, the pool that
// sorting them all and keeping the first ef gives.
func (b *beam) keep(p pair, ef int) {
	if n := len(b.pool); n == ef && !less(p, b.pool[n-1].pair) {
		return
	}
	b.put(b.position(p, true), p, ef)
}

// position is where p enters the pool: after the rows nearer, and after
// those of equal distance too or, byRow, only those of a lower row.
func (b *beam) position(p pair, byRow bool) int {
	lo, hi := 0, len(b.pool)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		q := b.pool[mid].pair
		if q.dist < p.dist || q.dist == p.dist && (!byRow || q.id < p.id) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// put places p at position lo of the pool, the farthest row dropped from
// a full one.
func (b *beam) put(lo int, p pair, ef int) {
	if len(b.pool) < ef {
		b.pool = append(b.pool, pooled{})
	}
	copy(b.pool[lo+1:], b.pool[lo:])
	b.pool[lo] = pooled{pair: p}
}

// searchFrom is search with the walk starting from every row of entries
// (the nearest ef of them kept, ties by row).
func (b *beam) searchFrom(adj adjacency, entries []uint32, ef int, sc batchScorer, keepExpanded bool) {
	b.epoch++
	if b.epoch == 0 { // wrapped: forget every stamp
		clear(b.seen)
		b.epoch = 1
	}
	b.expanded = b.expanded[:0]
	batch := b.batch[:0]
	for _, e := range entries {
		if b.seen[e] != b.epoch {
			b.seen[e] = b.epoch
			batch = append(batch, e)
		}
	}
	b.batch = batch
	if cap(b.dists) < len(batch) {
		b.dists = make([]float32, len(batch), 2*len(batch))
	}
	b.dists = b.dists[:len(batch)]
	sc.scores(batch, b.dists)
	b.pool = b.pool[:0]
	if len(batch) <= 2*ef {
		for k, e := range batch {
			b.pool = append(b.pool, pooled{pair: pair{b.dists[k], e}})
		}
		slices.SortFunc(b.pool, func(x, y pooled) int { return comparePairs(x.pair, y.pair) })
		b.pool = b.pool[:min(len(b.pool), ef)]
	} else { // many entries (a list scan): the nearest ef kept as they come
		for k, e := range batch {
			b.keep(pair{b.dists[k], e}, ef)
		}
	}
	b.scored, b.expandedCount = len(batch), 0
	for next := 0; next < len(b.pool); {
		c := b.pool[next].pair
		b.pool[next].done = true
		b.expandedCount++
		if keepExpanded {
			b.expanded = append(b.expanded, c)
		}
		b.nbs = adj.neighbours(b.nbs[:0], c.id)
		b.batch = b.unseen(b.nbs)
		batch := b.batch
		b.scored += len(batch)
		if cap(b.dists) < len(batch) {
			b.dists = make([]float32, len(batch), 2*len(batch))
		}
		dists := b.dists[:len(batch)]
		sc.scores(batch, dists)
		next++
		for k, nb := range batch {
			d := dists[k]
			n := len(b.pool)
			if n == ef && !(d < b.pool[n-1].dist) {
				continue
			}
			p := pair{d, nb}
			lo := b.position(p, false) // after the rows of equal distance: ties as met
			b.put(lo, p, ef)
			next = min(next, lo)
		}
		for next < len(b.pool) && b.pool[next].done {
			next++
		}
		if next < len(b.pool) { // the next row to expand
			adj.prefetch(b.pool[next].id)
		}
	}
}
