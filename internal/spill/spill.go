// Package spill gives out large byte buffers backed by files rather than
// by the heap: an index's code arrays, which outgrow memory on inputs of
// tens of millions of rows. The kernel keeps their pages in its cache
// while memory allows and writes them back when it does not, so a process
// that spills holds little anonymous memory (RssAnon) whatever its
// input's size.
package spill

import (
	"fmt"
	"os"

	"github.com/edsrzf/mmap-go"
)

// Arena hands out file-backed buffers in one folder and releases them
// all on Close. The files are unlinked as soon as they are mapped, so
// nothing is left behind however the process ends. The zero Arena, or one
// with an empty Dir, allocates on the heap. Not safe for concurrent use.
type Arena struct {
	Dir string // where the backing files go; "" for the heap
	// Min is the smallest buffer spilled to a file; smaller ones come
	// from the heap.
	Min  int
	maps []mmap.MMap
}

// Bytes returns n zeroed bytes, valid until Close.
func (a *Arena) Bytes(n int) ([]byte, error) {
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
// space on disk; a buffer from the heap is left to the collector.
func (a *Arena) Free(b []byte) error {
	if a == nil || len(b) == 0 {
		return nil
	}
	for i, m := range a.maps {
		if len(m) > 0 && &m[0] == &b[0] {
			a.maps = append(a.maps[:i], a.maps[i+1:]...)
			return m.Unmap()
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

// Close unmaps every buffer; the space on disk is freed with it.
func (a *Arena) Close() error {
	if a == nil {
		return nil
	}
	var first error
	for _, m := range a.maps {
		if err := m.Unmap(); err != nil && first == nil {
			first = err
		}
	}
	a.maps = nil
	return first
}
