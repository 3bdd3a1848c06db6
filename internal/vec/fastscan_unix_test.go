//go:build unix

package vec

import (
	"syscall"
	"testing"
)

// TestKernelsStayInBounds runs the fast-scan kernels on arguments that end
// exactly where an unreadable page begins, as the last block of a mapped
// index file may: a kernel that reads past what its wrapper checked
// faults.
func TestKernelsStayInBounds(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Skipf("mprotect: %v", err)
	}
	tail := func(n int) []byte { return mem[page-n : page : page] }

	var sums [32]uint32
	var c [8]float32
	var est, bound [32]float32
	BlockEstimate(&sums, tail(6*ScanBlock), &c, &est, &bound)

	for _, chunks := range []int{1, 5, 96} {
		var out [32]uint32
		FastScan(make([]byte, 32*chunks), tail(32*chunks), &out)
		FastScan(tail(32*chunks), make([]byte, 32*chunks), &out)
		q := make([]float32, 8*chunks)
		for _, w := range []int{0, 1, 3, 7} {
			DotLevels(q, tail(32*(chunks-1)+1), make([]byte, w*chunks+LevelsPad), w)
			if w > 0 {
				DotLevels(q, make([]byte, 32*chunks), tail(w*chunks+LevelsPad), w)
			}
		}
		k := make([]int32, 8*chunks)
		Tables(k, tail(32*chunks))
	}
}
