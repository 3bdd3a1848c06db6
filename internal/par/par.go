// Package par runs loops over index ranges on all cores. Work is cut into
// fixed blocks whatever the core count, so results that are combined per block
// in block order do not depend on the machine.
package par

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/vlc-embed/vlc/internal/fault"
)

// Workers is the number of goroutines For uses: GOMAXPROCS.
func Workers() int { return runtime.GOMAXPROCS(0) }

// For calls body(lo, hi) for consecutive blocks [lo, hi) of [0, n), each at
// most block long, from up to Workers() goroutines, and returns when all are
// done. Blocks are handed out in order; body must be safe to run concurrently
// on disjoint blocks. A panic in body ends that worker and, once the others
// are done, is raised again in the caller's goroutine, where the caller
// may recover it; workers turn memory faults into panics (reading a mapped
// file cut short) when the caller does (debug.SetPanicOnFault).
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
	Go(w, func() {
		for {
			b := int(next.Add(1) - 1)
			if b >= blocks {
				return
			}
			lo := b * block
			body(lo, min(lo+block, n))
		}
	}, func() { next.Store(int64(blocks)) }) // hand out no more blocks
}

// Go runs worker on w goroutines, the caller's one of them, and returns
// when all are done. Each turns memory faults into panics when the
// caller does (debug.SetPanicOnFault: reading a mapped file cut short). A
// panic in a worker ends that worker and calls stop (when not nil), so
// that the others can end early; once all are done it is raised again in
// the caller's goroutine, where the caller may recover it.
//
// The caller works rather than waits: its worker starts at once, while
// the others' goroutines are still being woken, and a short loop costs
// one goroutine fewer.
func Go(w int, worker func(), stop func()) {
	if w < 1 {
		return
	}
	var wg sync.WaitGroup
	var once sync.Once
	var raised any
	run := func() {
		defer func() {
			if r := recover(); r != nil {
				once.Do(func() { raised = r })
				if stop != nil {
					stop()
				}
			}
		}()
		worker()
	}
	faults := fault.Enabled()
	for range w - 1 {
		wg.Go(func() {
			debug.SetPanicOnFault(faults)
			run()
		})
	}
	run()
	wg.Wait()
	if raised != nil {
		panic(raised)
	}
}
