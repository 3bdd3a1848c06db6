package cuda

import "sync"

// barrier holds n goroutines until all have come, as often as they come.
type barrier struct {
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	failed  bool
	gen     int
	result  bool
}

// wait blocks until all n have called it in this round and reports
// whether every one came with ok.
func (b *barrier) wait(ok bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cond == nil {
		b.cond = sync.NewCond(&b.mu)
	}
	b.failed = b.failed || !ok
	b.arrived++
	if b.arrived == b.n {
		b.result = !b.failed
		b.arrived, b.failed = 0, false
		b.gen++
		b.cond.Broadcast()
		return b.result
	}
	gen := b.gen
	for gen == b.gen {
		b.cond.Wait()
	}
	return b.result
}
