package par

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
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

// A panic in a worker comes back in the caller's goroutine, where it can
// be recovered, and stops the handing out of blocks.
func TestForRaisesPanicInCaller(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var ran atomic.Int32
	got := func() (r any) {
		defer func() { r = recover() }()
		For(1000, 1, func(lo, hi int) {
			ran.Add(1)
			if lo == 3 {
				panic("block 3")
			}
			if lo > 3 {
				// Blocks that take some time, as real ones do: without it
				// the other workers can finish all 1,000 in the moment the
				// panicking one is descheduled on a busy machine.
				time.Sleep(time.Millisecond)
			}
		})
		return nil
	}()
	if got != "block 3" {
		t.Fatalf("recovered %v, want the worker's panic", got)
	}
	if n := ran.Load(); n >= 1000 {
		t.Errorf("%d blocks ran after a panic in block 3", n)
	}
}
