// Package spill gives out large byte buffers backed by files rather than
// by the heap: an index's code arrays, which outgrow memory on inputs of
// tens of millions of rows. The kernel keeps their pages in its cache
// while memory allows and writes them back when it does not, so a process
// that spills holds little anonymous memory (RssAnon) whatever its
// input's size.
package spill

import (
	"cmp"
	"fmt"
	"os"

	"github.com/edsrzf/mmap-go"
)

// Arena hands out file-backed buffers in one folder and releases them
// all on Close. The files are unlinked as soon as they are mapped, so
// nothing is left behind however the process ends. An Arena with an empty
// Dir keeps its buffers in memory: those of Huge bytes and more in private
// anonymous mappings advised for huge pages (anonymous), smaller ones on
// the heap; a nil Arena uses the heap alone. Not safe for concurrent use.
type Arena struct {
	Dir string // where the backing files go; "" for memory
	// Min is the smallest buffer spilled to a file; smaller ones come
	// from the heap.
	Min int
	// Huge, without Dir, is the smallest buffer mapped rather than taken
	// from the heap; 0: hugeMin.
	Huge int
	maps []mmap.MMap // file-backed
	anon []mmap.MMap // anonymous, Dir ""
}

// hugeMin is the smallest buffer an Arena without Dir maps itself rather
// than taking from the heap (the threshold itself not measured: below it
// a buffer's pages cost little). The heap's pages are 4 KiB; a mapping in
// huge pages is faulted in and torn down 2 MiB at a time. Measured on a
// GPU host (`go run ./bench/hostmem anon 8` and `exit 8 FILE`: 32 cores,
// Linux 6.18, 8 GB written by 16 threads): faulting in 1.38 s and
// unmapping 0.45 s in 4 KiB pages, 0.58 s and 0.05 s in huge pages; a
// process exiting with 8 GB of each kind mapped took 0.36 s and 0.04 s to
// end.
const hugeMin = 64 << 20

// Bytes returns n zeroed bytes, valid until Close.
func (a *Arena) Bytes(n int) ([]byte, error) {
	if a != nil && a.Dir == "" && n >= cmp.Or(a.Huge, hugeMin) {
		m, err := anonymous(n)
		if err != nil {
			return nil, fmt.Errorf("spill: %d MiB of memory: %w", n>>20, err)
		}
		a.anon = append(a.anon, m)
		return m, nil
	}
	if a == nil || a.Dir == "" || n < a.Min || n == 0 {
		return make([]byte, n), nil
	}
	f, err := os.CreateTemp(a.Dir, ".vlc-spill-")
	if err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	defer f.Close()
	os.Remove(f.Name())
	// Reserve the blocks now: a page of a sparse file that the disk
	// cannot hold would fault when touched, not fail here.
	if err := reserve(f, int64(n)); err != nil {
		return nil, fmt.Errorf("spill: %d MiB in %s: %w", n>>20, a.Dir, err)
	}
	m, err := mmap.MapRegion(f, n, mmap.RDWR, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("spill: mapping %d MiB in %s: %w", n>>20, a.Dir, err)
	}
	a.maps = append(a.maps, m)
	return m, nil
}

// Free releases one buffer Bytes returned before Close does, with its
// space on disk or in memory; a buffer from the heap is left to the
// collector.
func (a *Arena) Free(b []byte) error {
	if a == nil || len(b) == 0 {
		return nil
	}
	for _, maps := range []*[]mmap.MMap{&a.maps, &a.anon} {
		for i, m := range *maps {
			if len(m) > 0 && &m[0] == &b[0] {
				*maps = append((*maps)[:i], (*maps)[i+1:]...)
				return m.Unmap()
			}
		}
	}
	return nil
}

// Spilled is the number of buffers held in files now.
func (a *Arena) Spilled() int {
	if a == nil {
		return 0
	}
	return len(a.maps)
}

// Close unmaps every buffer; the space on disk is freed with it. A buffer
// read or written after Close faults: the caller must be done with them.
func (a *Arena) Close() error {
	if a == nil {
		return nil
	}
	var first error
	for _, m := range append(a.maps, a.anon...) {
		if err := m.Unmap(); err != nil && first == nil {
			first = err
		}
	}
	a.maps, a.anon = nil, nil
	return first
}
