// Package par runs loops over index ranges on all cores. Work is cut into
// fixed blocks whatever the core count, so results that are combined per block
// in block order do not depend on the machine.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Workers is the number of goroutines For uses: GOMAXPROCS.
func Workers() int { return runtime.GOMAXPROCS(0) }

// For calls body(lo, hi) for consecutive blocks [lo, hi) of [0, n), each at
// most block long, from up to Workers() goroutines, and returns when all are
// done. Blocks are handed out in order; body must be safe to run concurrently
// on disjoint blocks.
func For(n, block int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if block < 1 {
		block = 1
	}
	blocks := (n + block - 1) / block
	w := min(Workers(), blocks)
	if w <= 1 {
		for lo := 0; lo < n; lo += block {
			body(lo, min(lo+block, n))
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b := int(next.Add(1) - 1)
				if b >= blocks {
					return
				}
				lo := b * block
				body(lo, min(lo+block, n))
			}
		}()
	}
	wg.Wait()
}
