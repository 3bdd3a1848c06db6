//go:build cuda

package cuda

import (
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/errs"
)

// graphRowsPTX is graph_rows.cu compiled to PTX for compute_80 (see
// generate.go), loaded as its own module the first time rows are loaded.
//
//go:embed graph_rows.ptx
var graphRowsPTX []byte

// graphBlock is the threads of a block of the graph build's kernels:
// eight warps, a list each.
const graphBlock = 256

// graphChunk is the most entries of lists a launch takes (8 bytes an
// entry on the device, 64 MiB, and the lists' kept rows; a list longer
// than this goes alone, whole).
var graphChunk = 8 << 20

var _ device.RowMeter = (*Device)(nil)

// loadGraphRows loads the graph build's module once (on the worker), from
// VLC_CUDA_GRAPH_PTX when set.
func (d *Device) loadGraphRows() error {
	if d.gmod != 0 {
		return nil
	}
	mod, err := d.loadModule("graph build kernels", "graph_rows.ptx", graphRowsPTX, "VLC_CUDA_GRAPH_PTX", graphKernelNames, nil)
	if err != nil {
		return err
	}
	d.gmod = mod
	return nil
}

// LoadRows copies rows to the GPU (device.RowMeter): float16 rows as
// they are, float32 rows as float32.
func (d *Device) LoadRows(rows device.HostRows) (device.DeviceRows, error) {
	if err := rows.Check(); err != nil {
		return nil, err
	}
	if rows.N > 1<<31-1 || rows.Dim > 1<<20 {
		return nil, fmt.Errorf("%w: cuda: rows %d x %d: the kernels take up to 2^31-1 rows of 2^20 values", errs.ErrArgument, rows.N, rows.Dim)
	}
	g := &graphRows{d: d, n: rows.N, dim: rows.Dim, half: rows.Half != nil}
	err := d.run(func() error {
		if err := d.loadGraphRows(); err != nil {
			return err
		}
		var src unsafe.Pointer
		bytes := int64(rows.N) * int64(rows.Dim)
		if g.half {
			src, bytes = unsafe.Pointer(&rows.Half[0]), 2*bytes
		} else {
			src, bytes = unsafe.Pointer(&rows.Float[0]), 4*bytes
		}
		var err error
		if g.rows, err = d.alloc(bytes); err != nil {
			return err
		}
		if err := d.htod(g.rows, src, bytes); err != nil {
			d.free(g.rows)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// graphRows are a build's rows on the GPU (device.DeviceRows), with the
// buffers of a chunk of lists, grown as chunks need.
type graphRows struct {
	d      *Device
	n, dim int
	half   bool
	rows   uint64
	// A chunk's buffers, and the lists and entries they hold room for.
	of, offs, ids, dists, kept, keptD uint64
	capLists, capEntries, capKept     int
	// The adjacency Walk reads (LoadAdjacency), r slots a row; each
	// walking warp's seen bits (seenWarps of n bits); a chunk of walks'
	// starts, expanded rows and counts (room for capWalks walks of
	// capOut rows in all).
	adj, seen, starts, outIDs, outD, counts uint64
	r, seenWarps, capWalks, capOut          int

	mu     sync.Mutex
	closed bool
}

// Measure sets l.Dists (device.DeviceRows).
func (g *graphRows) Measure(l device.RowLists) error {
	return g.each(l, 0, 0, nil, nil)
}

// Prune robust-prunes every list (device.DeviceRows).
func (g *graphRows) Prune(l device.RowLists, r int, alpha2 float32, kept []uint32, keptDists []float32) error {
	switch {
	case r < 1:
		return fmt.Errorf("%w: prune: keep %d rows a list: want at least 1", errs.ErrArgument, r)
	case len(kept) != len(l.Of)*r || len(keptDists) != len(l.Of)*r:
		return fmt.Errorf("%w: prune: room for %d and %d kept rows, want %d (%d lists of %d)", errs.ErrArgument, len(kept), len(keptDists), len(l.Of)*r, len(l.Of), r)
	case !(alpha2 >= 1):
		return fmt.Errorf("%w: prune: alpha^2 %v: want at least 1", errs.ErrArgument, alpha2)
	}
	return g.each(l, r, alpha2, kept, keptDists)
}

// do runs f on the device's worker, one call of the rows' at a time,
// unless the rows are closed.
func (g *graphRows) do(f func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errors.New("cuda: rows closed")
	}
	return g.d.run(f)
}

// each runs Measure (r 0) or Prune over l, chunk by chunk.
func (g *graphRows) each(l device.RowLists, r int, alpha2 float32, kept []uint32, keptDists []float32) error {
	if err := l.Check(g.n); err != nil {
		return err
	}
	return g.do(func() error {
		for lo := 0; lo < len(l.Of); {
			hi := lo + 1
			for hi < len(l.Of) && int(l.Offsets[hi+1]-l.Offsets[lo]) <= graphChunk {
				hi++
			}
			if err := g.chunk(l, lo, hi, r, alpha2, kept, keptDists); err != nil {
				return err
			}
			lo = hi
		}
		return nil
	})
}

// chunk measures or prunes lists lo to hi-1 (on the worker).
func (g *graphRows) chunk(l device.RowLists, lo, hi, r int, alpha2 float32, kept []uint32, keptDists []float32) error {
	d := g.d
	lists := hi - lo
	base, end := l.Offsets[lo], l.Offsets[hi]
	entries := int(end - base)
	if err := g.grow(lists, entries, lists*r); err != nil {
		return err
	}
	offs := make([]uint32, lists+1)
	for i := range offs {
		offs[i] = l.Offsets[lo+i] - base
	}
	up := func(dst uint64, p unsafe.Pointer, bytes int) error {
		if bytes == 0 {
			return nil
		}
		return d.htod(dst, p, int64(bytes))
	}
	if err := up(g.of, unsafe.Pointer(&l.Of[lo]), 4*lists); err != nil {
		return err
	}
	if err := up(g.offs, unsafe.Pointer(&offs[0]), 4*(lists+1)); err != nil {
		return err
	}
	if entries > 0 {
		if err := up(g.ids, unsafe.Pointer(&l.IDs[base]), 4*entries); err != nil {
			return err
		}
	}
	kind := "f"
	if g.half {
		kind = "h"
	}
	grid := (lists*32 + graphBlock - 1) / graphBlock
	if r == 0 {
		if entries == 0 {
			return nil
		}
		if err := d.launch("vlc_g_measure_"+kind, grid, 1, graphBlock, 0, g.rows, i32(g.dim), g.of, g.offs, g.ids, g.dists, i32(lists)); err != nil {
			return err
		}
		return d.dtoh(unsafe.Pointer(&l.Dists[base]), g.dists, int64(4*entries))
	}
	if entries > 0 {
		if err := up(g.dists, unsafe.Pointer(&l.Dists[base]), 4*entries); err != nil {
			return err
		}
	}
	if err := d.launch("vlc_g_prune_"+kind, grid, 1, graphBlock, 0, g.rows, i32(g.dim), g.of, g.offs, g.ids, g.dists, i32(lists), i32(r), f32(alpha2), g.kept, g.keptD); err != nil {
		return err
	}
	if err := d.dtoh(unsafe.Pointer(&kept[lo*r]), g.kept, int64(4*lists*r)); err != nil {
		return err
	}
	return d.dtoh(unsafe.Pointer(&keptDists[lo*r]), g.keptD, int64(4*lists*r))
}

// grow makes the chunk's buffers hold lists lists, entries entries and
// kept kept rows (on the worker): all allocated again, larger, when one
// is short.
func (g *graphRows) grow(lists, entries, kept int) error {
	if g.of != 0 && lists <= g.capLists && entries <= g.capEntries && kept <= g.capKept {
		return nil
	}
	caps := [3]int{max(lists, g.capLists, 1), max(entries, g.capEntries, 1), max(kept, g.capKept, 1)}
	g.freeChunk()
	for _, b := range []struct {
		p *uint64
		n int
	}{{&g.of, caps[0]}, {&g.offs, caps[0] + 1}, {&g.ids, caps[1]}, {&g.dists, caps[1]}, {&g.kept, caps[2]}, {&g.keptD, caps[2]}} {
		var err error
		if *b.p, err = g.d.alloc(int64(4 * b.n)); err != nil {
			g.freeChunk()
			return err
		}
	}
	g.capLists, g.capEntries, g.capKept = caps[0], caps[1], caps[2]
	return nil
}

// freeChunk frees the chunk's buffers (on the worker).
func (g *graphRows) freeChunk() {
	for _, p := range []*uint64{&g.of, &g.offs, &g.ids, &g.dists, &g.kept, &g.keptD} {
		g.d.free(*p)
		*p = 0
	}
	g.capLists, g.capEntries, g.capKept = 0, 0, 0
}

// LoadAdjacency copies adj to the GPU (device.DeviceRows).
func (g *graphRows) LoadAdjacency(adj []uint32, r int) error {
	if err := device.CheckAdjacency(adj, r, g.n); err != nil {
		return err
	}
	return g.do(func() error {
		if g.adj == 0 || g.r != r {
			g.d.free(g.adj)
			g.adj, g.r = 0, 0
			var err error
			if g.adj, err = g.d.alloc(4 * int64(len(adj))); err != nil {
				return err
			}
			g.r = r
		}
		return g.d.htod(g.adj, unsafe.Pointer(&adj[0]), 4*int64(len(adj)))
	})
}

// walkWarps is a block of vlc_g_walk's warps (WALK_WARPS); walkSeenBytes
// bounds the warps' seen bits together.
const (
	walkWarps     = 4
	walkSeenBytes = 1 << 30
)

// walkOut is the most expanded rows a chunk of walks holds (8 bytes each).
var walkOut = 16 << 20

// Walk runs the searches (device.DeviceRows), a chunk of walks at a time.
func (g *graphRows) Walk(w device.RowWalks) error {
	if err := w.Check(g.n); err != nil {
		return err
	}
	chunk := max(1, walkOut/w.Cap)
	return g.do(func() error {
		if g.adj == 0 {
			return fmt.Errorf("%w: walk: no adjacency loaded", errs.ErrArgument)
		}
		for lo := 0; lo < len(w.Of); lo += chunk {
			if err := g.walkChunk(w, lo, min(lo+chunk, len(w.Of))); err != nil {
				return err
			}
		}
		return nil
	})
}

// walkChunk runs walks lo to hi-1 (on the worker).
func (g *graphRows) walkChunk(w device.RowWalks, lo, hi int) error {
	d := g.d
	walks := hi - lo
	words := (g.n + 31) / 32
	if g.seen == 0 {
		g.seenWarps = max(walkWarps, min(d.info.SMs*32, walkSeenBytes/(4*words))/walkWarps*walkWarps)
		var err error
		if g.seen, err = d.alloc(4 * int64(words) * int64(g.seenWarps)); err != nil {
			return err
		}
		if err := d.memset8(g.seen, 0, 4*int64(words)*int64(g.seenWarps)); err != nil {
			return err
		}
	}
	if walks > g.capWalks || walks*w.Cap > g.capOut {
		for _, p := range []*uint64{&g.starts, &g.outIDs, &g.outD, &g.counts} {
			d.free(*p)
			*p = 0
		}
		g.capWalks, g.capOut = 0, 0
		for _, b := range []struct {
			p *uint64
			n int
		}{{&g.starts, walks}, {&g.counts, walks}, {&g.outIDs, walks * w.Cap}, {&g.outD, walks * w.Cap}} {
			var err error
			if *b.p, err = d.alloc(int64(4 * b.n)); err != nil {
				return err
			}
		}
		g.capWalks, g.capOut = walks, walks*w.Cap
	}
	if err := g.grow(walks, 0, 0); err != nil { // of
		return err
	}
	if err := d.htod(g.of, unsafe.Pointer(&w.Of[lo]), 4*int64(walks)); err != nil {
		return err
	}
	if err := d.htod(g.starts, unsafe.Pointer(&w.Starts[lo]), 4*int64(walks)); err != nil {
		return err
	}
	kind := "f"
	if g.half {
		kind = "h"
	}
	blocks := min((walks+walkWarps-1)/walkWarps, g.seenWarps/walkWarps)
	if err := d.launch("vlc_g_walk_"+kind, blocks, 1, 32*walkWarps, 0, g.rows, i32(g.dim), g.adj, i32(g.r), g.of, g.starts,
		i32(walks), i32(w.Ef), i32(w.Cap), g.seen, i64(int64(words)), g.outIDs, g.outD, g.counts); err != nil {
		return err
	}
	out := int64(walks) * int64(w.Cap)
	if err := d.dtoh(unsafe.Pointer(&w.IDs[lo*w.Cap]), g.outIDs, 4*out); err != nil {
		return err
	}
	if err := d.dtoh(unsafe.Pointer(&w.Dists[lo*w.Cap]), g.outD, 4*out); err != nil {
		return err
	}
	return d.dtoh(unsafe.Pointer(&w.Counts[lo]), g.counts, 4*int64(walks))
}

// Close frees the rows and the chunk's buffers.
func (g *graphRows) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.d.run(func() error {
		g.freeChunk()
		for _, p := range []*uint64{&g.rows, &g.adj, &g.seen, &g.starts, &g.outIDs, &g.outD, &g.counts} {
			g.d.free(*p)
			*p = 0
		}
		return nil
	})
}
