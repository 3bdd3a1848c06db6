package graph

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/par"
)

// The build's measuring, pruning and refinement searches on a device
// (BuildOptions.Device): every row's candidates measured there, the
// first pruning, the reverse edges' pruning and each refinement pass's
// searches and pruning done there, with the CPU's bits (device.RowMeter),
// so the graph's bytes are those of a build on the CPU. The medoid, the
// starting rows, the gathering and merging of lists and connect stay on
// the CPU.

// pruneChunk is the most lists handed to the device at once by the
// pruning (device.RowLists of up to Candidates entries each at first:
// 64 MiB a chunk at 128 candidates, 8 bytes an entry).
var pruneChunk = 1 << 16

// pruneEntries bounds the entries of a chunk of the reverse edges'
// pruning (unless one row's list alone is longer).
const pruneEntries = 1 << 26

// rowLists lays out one list for each row of of, list t of size(t)
// entries, which fill writes (on all cores).
func rowLists(of []uint32, size func(t int) int, fill func(t int, ids []uint32, dists []float32)) device.RowLists {
	l := device.RowLists{Of: of, Offsets: make([]uint32, len(of)+1)}
	for t := range of {
		l.Offsets[t+1] = l.Offsets[t] + uint32(size(t))
	}
	total := l.Offsets[len(of)]
	l.IDs, l.Dists = make([]uint32, total), make([]float32, total)
	par.For(len(of), 64, func(from, to int) {
		for t := from; t < to; t++ {
			o, e := l.Offsets[t], l.Offsets[t+1]
			fill(t, l.IDs[o:e], l.Dists[o:e])
		}
	})
	return l
}

// fillPairs writes ps into ids and dists.
func fillPairs(ps []pair, ids []uint32, dists []float32) {
	for k, p := range ps {
		ids[k], dists[k] = p.id, p.dist
	}
}

// loadRows places the build's rows on the device, as they are held
// (float16 or float32).
func (b *builder) loadRows(m device.RowMeter) (device.DeviceRows, error) {
	dr, err := m.LoadRows(device.HostRows{N: b.n, Dim: b.d, Half: b.h, Float: b.x})
	if err != nil {
		return nil, fmt.Errorf("graph: the rows onto the device: %w", err)
	}
	return dr, nil
}

// measureOn returns the candidates of rows lo to lo+len(hits)-1 from
// their hits as measure does, the distances measured on dev.
func (b *builder) measureOn(dev device.DeviceRows, lo int, hits [][]index.Hit, cands [][]pair) error {
	of := make([]uint32, len(hits))
	for t := range of {
		of[t] = uint32(lo + t)
	}
	l := rowLists(of, func(t int) int {
		self := 0
		for _, h := range hits[t] {
			if uint32(h.ID) == of[t] {
				self++
			}
		}
		return len(hits[t]) - self
	}, func(t int, ids []uint32, _ []float32) {
		k := 0
		for _, h := range hits[t] {
			if uint32(h.ID) != of[t] {
				ids[k] = uint32(h.ID)
				k++
			}
		}
	})
	if err := dev.Measure(l); err != nil {
		return fmt.Errorf("graph: measuring candidates of rows %d to %d on the device: %w", lo, lo+len(hits)-1, err)
	}
	par.For(len(hits), 256, func(from, to int) {
		for t := from; t < to; t++ {
			o, e := l.Offsets[t], l.Offsets[t+1]
			c := make([]pair, e-o)
			for k := range c {
				c[k] = pair{l.Dists[int(o)+k], l.IDs[int(o)+k]}
			}
			slices.SortFunc(c, comparePairs)
			cands[lo+t] = c
		}
	})
	return nil
}

// pruneAllOn sets every row's first neighbours from its candidates, as
// the CPU's prune does, pruned on dev pruneChunk rows at a time.
func (b *builder) pruneAllOn(dev device.DeviceRows, cands [][]pair) error {
	for lo := 0; lo < b.n; lo += pruneChunk {
		hi := min(lo+pruneChunk, b.n)
		of := make([]uint32, hi-lo)
		for t := range of {
			of[t] = uint32(lo + t)
		}
		l := rowLists(of, func(t int) int { return len(cands[lo+t]) },
			func(t int, ids []uint32, dists []float32) { fillPairs(cands[lo+t], ids, dists) })
		if err := b.pruneListsInto(dev, l, b.adj, b.dist); err != nil {
			return err
		}
	}
	return nil
}

// pruneListsInto prunes lists l (l.Of increasing) on dev, each list's
// kept rows becoming its row's neighbours in adj and dist (r slots a
// row).
func (b *builder) pruneListsInto(dev device.DeviceRows, l device.RowLists, adj []uint32, dist []float32) error {
	if len(l.Of) == 0 {
		return nil
	}
	r := b.r
	if int(l.Of[len(l.Of)-1]) == int(l.Of[0])+len(l.Of)-1 { // rows in a run: in place
		lo, hi := int(l.Of[0]), int(l.Of[len(l.Of)-1])+1
		if err := dev.Prune(l, r, b.alpha2, adj[lo*r:hi*r], dist[lo*r:hi*r]); err != nil {
			return fmt.Errorf("graph: pruning rows %d to %d on the device: %w", lo, hi-1, err)
		}
		return nil
	}
	kept, keptDists := make([]uint32, len(l.Of)*r), make([]float32, len(l.Of)*r)
	if err := dev.Prune(l, r, b.alpha2, kept, keptDists); err != nil {
		return fmt.Errorf("graph: pruning %d rows' lists on the device: %w", len(l.Of), err)
	}
	par.For(len(l.Of), 1024, func(from, to int) {
		for t := from; t < to; t++ {
			q := int(l.Of[t])
			copy(adj[q*r:(q+1)*r], kept[t*r:(t+1)*r])
			copy(dist[q*r:(q+1)*r], keptDists[t*r:(t+1)*r])
		}
	})
	return nil
}

// reverseOn is addReverse's last step with dev: a row whose neighbours
// and incoming edges (in) are at most r together takes them all, as on
// the CPU; the others' merged lists are pruned on dev.
func (b *builder) reverseOn(dev device.DeviceRows, in func(q int) []pair, merge func(q int, merged []pair) []pair) error {
	size := make([]uint32, b.n) // a long row's merged length, else 0
	par.For(b.n, 64, func(lo, hi int) {
		var merged []pair
		for q := lo; q < hi; q++ {
			if len(in(q)) == 0 {
				continue
			}
			deg := slices.Index(b.adj[q*b.r:(q+1)*b.r], noEdge)
			if deg < 0 {
				deg = b.r
			}
			if deg+len(in(q)) > b.r {
				size[q] = uint32(deg + len(in(q)))
				continue
			}
			merged = merge(q, merged[:0])
			b.set(uint32(q), merged)
		}
	})
	var long []uint32
	for q, z := range size {
		if z > 0 {
			long = append(long, uint32(q))
		}
	}
	for lo := 0; lo < len(long); {
		hi, entries := lo, 0
		for hi < len(long) && hi-lo < pruneChunk && (hi == lo || entries+int(size[long[hi]]) <= pruneEntries) {
			entries += int(size[long[hi]])
			hi++
		}
		of := long[lo:hi]
		lo = hi
		l := rowLists(of, func(t int) int { return int(size[of[t]]) }, func(t int, ids []uint32, dists []float32) {
			fillPairs(merge(int(of[t]), nil), ids, dists)
		})
		if err := b.pruneListsInto(dev, l, b.adj, b.dist); err != nil {
			return err
		}
	}
	return nil
}

// walkChunk is the most rows whose refinement searches are handed to the
// device at once; a search may expand up to walkCap times its beam width
// there (more: it runs again on the CPU). Variables for the tests.
var walkChunk, walkCap = 1 << 16, 8

// canWalk says whether dev can run refine's searches at beam width ef.
func (b *builder) canWalk(ef int) bool {
	return ef <= device.MaxWalkEf && b.r <= device.MaxWalkSlots
}

// refineOn is refine with the searches on dev (device.DeviceRows.Walk,
// the same walk as beam.search's) and the pruning there: each row's
// expanded rows come back (a search that expands more than walkCap times
// ef rows is run again on the CPU), are merged with its neighbours on the CPU, and
// the merged lists are pruned on dev.
func (b *builder) refineOn(ctx context.Context, dev device.DeviceRows, ef int) error {
	if err := dev.LoadAdjacency(b.adj, b.r); err != nil {
		return fmt.Errorf("graph: the adjacency onto the device: %w", err)
	}
	next, nextDist := make([]uint32, len(b.adj)), make([]float32, len(b.adj))
	most := walkCap * ef // expanded rows a walk may return
	chunk := min(walkChunk, b.n)
	all := device.RowWalks{Of: make([]uint32, chunk), Starts: make([]uint32, chunk), Ef: ef, Cap: most,
		IDs: make([]uint32, chunk*most), Dists: make([]float32, chunk*most), Counts: make([]int32, chunk)}
	beams := sync.Pool{New: func() any { return newBeam(b.n) }}
	for lo := 0; lo < b.n; lo += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+chunk, b.n)
		rows := hi - lo
		w := all
		w.Of, w.Starts, w.Counts = all.Of[:rows], all.Starts[:rows], all.Counts[:rows]
		w.IDs, w.Dists = all.IDs[:rows*most], all.Dists[:rows*most]
		for t := range rows {
			p := lo + t
			w.Of[t], w.Starts[t] = uint32(p), b.reps[int(b.assign[p])*b.perList]
		}
		if err := dev.Walk(w); err != nil {
			return fmt.Errorf("graph: refining rows %d to %d on the device: %w", lo, hi-1, err)
		}
		merged := make([][]pair, rows)
		par.For(rows, 16, func(from, to int) {
			var bm *beam
			m := b.meter()
			for t := from; t < to; t++ {
				p := lo + t
				var mp []pair
				if c := int(w.Counts[t]); c >= 0 {
					mp = make([]pair, c, c+b.r)
					for k := range c {
						mp[k] = pair{w.Dists[t*most+k], w.IDs[t*most+k]}
					}
				} else { // past the cap: on the CPU
					if bm == nil {
						bm = beams.Get().(*beam)
						defer beams.Put(bm)
					}
					bm.search(slots{b.adj, b.r}, w.Starts[t], ef, exactScorer{m, uint32(p)}, true)
					mp = append(make([]pair, 0, len(bm.expanded)+b.r), bm.expanded...)
				}
				merged[t] = b.withNeighbours(uint32(p), mp)
			}
		})
		l := rowLists(w.Of, func(t int) int { return len(merged[t]) },
			func(t int, ids []uint32, dists []float32) { fillPairs(merged[t], ids, dists) })
		if err := b.pruneListsInto(dev, l, next, nextDist); err != nil {
			return err
		}
	}
	b.adj, b.dist = next, nextDist
	return nil
}
