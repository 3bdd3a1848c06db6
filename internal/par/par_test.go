package par

import (
	"sync/atomic"
	"testing"
)

// Every index is visited exactly once, for sizes around the block size.
func TestFor(t *testing.T) {
	for _, n := range []int{0, 1, 9, 10, 11, 1000} {
		seen := make([]atomic.Int32, n)
		For(n, 10, func(lo, hi int) {
			if hi-lo > 10 || lo >= hi {
				t.Errorf("block [%d, %d)", lo, hi)
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("n=%d: index %d visited %d times", n, i, seen[i].Load())
			}
		}
	}
}
