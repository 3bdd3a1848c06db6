package graph

// pair is a row and its distance to what is searched for.
type pair struct {
	dist float32
	id   uint32
}

// less orders pairs by distance, then row.
func less(a, b pair) bool { return a.dist < b.dist || a.dist == b.dist && a.id < b.id }

// minHeap and maxHeap are binary heaps of pairs by distance: the beam's
// frontier (nearest first) and its best so far (farthest first).
type minHeap []pair

func (h *minHeap) push(p pair) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if !(s[i].dist < s[up].dist) {
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
		if l < len(s) && s[l].dist < s[m].dist {
			m = l
		}
		if r < len(s) && s[r].dist < s[m].dist {
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
	seen          []uint32 // seen[i] == epoch: row i was scored this search
	epoch         uint32
	frontier      minHeap
	best          maxHeap
	expanded      []pair // rows whose neighbours were scored, in order (the build's candidates)
	batch         []uint32
	nbs           []uint32
	dists         []float32
	scored        int // rows scored by the last search
	expandedCount int // rows expanded by the last search
}

func newBeam(n int) *beam { return &beam{seen: make([]uint32, n)} }

// batchScorer scores rows for a search: a step's unseen neighbours
// together, so that their reads overlap.
type batchScorer interface {
	// scores sets out[k] to the distance of row ids[k].
	scores(ids []uint32, out []float32)
}

// search walks the adjacency adj from entry, keeping the
// ef rows nearest by sc, and leaves them in b.best (a heap). Each step
// expands the nearest row of the frontier not yet expanded: its unseen
// neighbours are scored together and enter when nearer than the farthest
// of the best; the walk ends when the frontier's nearest is farther than
// that. Heaps order by distance alone: ties keep the order the walk met
// them in, the same on every run.
func (b *beam) search(adj adjacency, entry uint32, ef int, sc batchScorer, keepExpanded bool) {
	b.epoch++
	if b.epoch == 0 { // wrapped: forget every stamp
		clear(b.seen)
		b.epoch = 1
	}
	b.frontier, b.best, b.expanded = b.frontier[:0], b.best[:0], b.expanded[:0]
	b.seen[entry] = b.epoch
	b.batch = append(b.batch[:0], entry)
	b.dists = append(b.dists[:0], 0)
	sc.scores(b.batch, b.dists)
	e := pair{b.dists[0], entry}
	b.scored, b.expandedCount = 1, 0
	b.frontier.push(e)
	b.best.push(e)
	for len(b.frontier) > 0 {
		c := b.frontier.pop()
		if len(b.best) >= ef && b.best[0].dist < c.dist {
			break
		}
		b.expandedCount++
		if keepExpanded {
			b.expanded = append(b.expanded, c)
		}
		b.nbs = adj.neighbours(b.nbs[:0], c.id)
		batch := b.batch[:0]
		for _, nb := range b.nbs {
			if b.seen[nb] != b.epoch {
				b.seen[nb] = b.epoch
				batch = append(batch, nb)
			}
		}
		b.batch = batch
		if len(batch) == 0 {
			continue
		}
		b.scored += len(batch)
		if cap(b.dists) < len(batch) {
			b.dists = make([]float32, len(batch), 2*len(batch))
		}
		dists := b.dists[:len(batch)]
		sc.scores(batch, dists)
		for k, nb := range batch {
			p := pair{dists[k], nb}
			switch {
			case len(b.best) < ef:
				b.best.push(p)
			case p.dist < b.best[0].dist:
				b.best.replaceTop(p)
			default:
				continue
			}
			b.frontier.push(p)
		}
		if len(b.frontier) > 0 { // the next row to expand, most likely
			adj.prefetch(b.frontier[0].id)
		}
	}
}
