package graph

// pair is a row and its distance to what is searched for.
type pair struct {
	dist float32
	id   uint32
}

// less orders pairs by distance, then row.
func less(a, b pair) bool { return a.dist < b.dist || a.dist == b.dist && a.id < b.id }

// minHeap and maxHeap are binary heaps of pairs by less: the beam's
// frontier (nearest first) and its best so far (farthest first).
type minHeap []pair

func (h *minHeap) push(p pair) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if !less(s[i], s[up]) {
			break
		}
		s[i], s[up] = s[up], s[i]
		i = up
	}
}

func (h *minHeap) pop() pair {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && less(s[l], s[m]) {
			m = l
		}
		if r < len(s) && less(s[r], s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

type maxHeap []pair

func (h *maxHeap) push(p pair) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if !less(s[up], s[i]) {
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
		if l < len(h) && less(h[m], h[l]) {
			m = l
		}
		if r < len(h) && less(h[m], h[r]) {
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
	seen          []uint32 // seen[i] == epoch: row i was scored this search
	epoch         uint32
	frontier      minHeap
	best          maxHeap
	expanded      []pair // rows whose neighbours were scored, in order (the build's candidates)
	batch         []uint32
	scored        int // rows scored by the last search
	expandedCount int // rows expanded by the last search
}

func newBeam(n int) *beam { return &beam{seen: make([]uint32, n)} }

// search walks g's adjacency from entry, keeping the ef rows nearest by
// dist, and leaves them in b.best (a heap). Each step expands the nearest
// row of the frontier not yet expanded: its unseen neighbours are scored
// together (prefetch first, then dist), and enter when nearer than the
// farthest of the best; the walk ends when the frontier's nearest is
// farther than that.
func (b *beam) search(adj []uint32, r int, entry uint32, ef int, dist func(uint32) float32, prefetch func(uint32), keepExpanded bool) {
	b.start(entry, dist)
	b.walk(adj, r, ef, dist, prefetch, keepExpanded)
}

// start begins a search at entry.
func (b *beam) start(entry uint32, dist func(uint32) float32) {
	b.epoch++
	if b.epoch == 0 { // wrapped: forget every stamp
		clear(b.seen)
		b.epoch = 1
	}
	b.frontier, b.best, b.expanded = b.frontier[:0], b.best[:0], b.expanded[:0]
	b.seen[entry] = b.epoch
	e := pair{dist(entry), entry}
	b.scored, b.expandedCount = 1, 0
	b.frontier.push(e)
	b.best.push(e)
}

// walk runs the search begun by start.
func (b *beam) walk(adj []uint32, r int, ef int, dist func(uint32) float32, prefetch func(uint32), keepExpanded bool) {
	for len(b.frontier) > 0 {
		c := b.frontier.pop()
		if len(b.best) >= ef && less(b.best[0], c) {
			break
		}
		b.expandedCount++
		if keepExpanded {
			b.expanded = append(b.expanded, c)
		}
		batch := b.batch[:0]
		for _, nb := range adj[int(c.id)*r : int(c.id+1)*r] {
			if nb == noEdge {
				break
			}
			if b.seen[nb] != b.epoch {
				b.seen[nb] = b.epoch
				batch = append(batch, nb)
				if prefetch != nil {
					prefetch(nb)
				}
			}
		}
		b.batch = batch
		b.scored += len(batch)
		for _, nb := range batch {
			p := pair{dist(nb), nb}
			switch {
			case len(b.best) < ef:
				b.best.push(p)
			case less(p, b.best[0]):
				b.best.replaceTop(p)
			default:
				continue
			}
			b.frontier.push(p)
		}
	}
}
