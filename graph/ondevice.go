package graph

import (
	"fmt"
	"slices"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/par"
)

// The build's measuring and pruning on a device (BuildOptions.Device):
// every row's candidates measured there, and the first pruning and the
// reverse edges' pruning done there, with the CPU's bits
// (device.RowMeter), so the graph's bytes are those of a build on the
// CPU. The searches of the refinement passes and of connect, and their
// pruning, stay on the CPU.

// pruneChunk is the most lists handed to the device at once by the first
// pruning (device.RowLists of Candidates entries each: 16 MB a chunk at
// 128 candidates).
var pruneChunk = 1 << 16

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
	l := device.RowLists{Of: make([]uint32, len(hits)), Offsets: make([]uint32, len(hits)+1)}
	for t, hs := range hits {
		l.Of[t] = uint32(lo + t)
		self := 0
		for _, h := range hs {
			if uint32(h.ID) == uint32(lo+t) {
				self++
			}
		}
		l.Offsets[t+1] = l.Offsets[t] + uint32(len(hs)-self)
	}
	total := l.Offsets[len(hits)]
	l.IDs, l.Dists = make([]uint32, total), make([]float32, total)
	par.For(len(hits), 256, func(from, to int) {
		for t := from; t < to; t++ {
			k := l.Offsets[t]
			for _, h := range hits[t] {
				if uint32(h.ID) != uint32(lo+t) {
					l.IDs[k] = uint32(h.ID)
					k++
				}
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
		l := device.RowLists{Of: make([]uint32, hi-lo), Offsets: make([]uint32, hi-lo+1)}
		for i := lo; i < hi; i++ {
			l.Of[i-lo] = uint32(i)
			l.Offsets[i-lo+1] = l.Offsets[i-lo] + uint32(len(cands[i]))
		}
		l.IDs, l.Dists = make([]uint32, l.Offsets[hi-lo]), make([]float32, l.Offsets[hi-lo])
		par.For(hi-lo, 256, func(from, to int) {
			for t := from; t < to; t++ {
				o := l.Offsets[t]
				for k, p := range cands[lo+t] {
					l.IDs[int(o)+k], l.Dists[int(o)+k] = p.id, p.dist
				}
			}
		})
		if err := b.pruneListsOn(dev, l); err != nil {
			return err
		}
	}
	return nil
}

// pruneListsOn prunes lists l (l.Of increasing) on dev, each list's kept
// rows becoming its row's neighbours.
func (b *builder) pruneListsOn(dev device.DeviceRows, l device.RowLists) error {
	if len(l.Of) == 0 {
		return nil
	}
	r := b.r
	if int(l.Of[len(l.Of)-1]) == int(l.Of[0])+len(l.Of)-1 { // rows in a run: in place
		lo, hi := int(l.Of[0]), int(l.Of[len(l.Of)-1])+1
		if err := dev.Prune(l, r, b.alpha2, b.adj[lo*r:hi*r], b.dist[lo*r:hi*r]); err != nil {
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
			copy(b.adj[q*r:(q+1)*r], kept[t*r:(t+1)*r])
			copy(b.dist[q*r:(q+1)*r], keptDists[t*r:(t+1)*r])
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
	var l device.RowLists
	l.Offsets = []uint32{0}
	for q, z := range size {
		if z > 0 {
			l.Of = append(l.Of, uint32(q))
			l.Offsets = append(l.Offsets, l.Offsets[len(l.Offsets)-1]+z)
		}
	}
	total := l.Offsets[len(l.Of)]
	l.IDs, l.Dists = make([]uint32, total), make([]float32, total)
	par.For(len(l.Of), 64, func(from, to int) {
		var merged []pair
		for t := from; t < to; t++ {
			merged = merge(int(l.Of[t]), merged[:0])
			o := int(l.Offsets[t])
			for k, p := range merged {
				l.IDs[o+k], l.Dists[o+k] = p.id, p.dist
			}
		}
	})
	return b.pruneListsOn(dev, l)
}
