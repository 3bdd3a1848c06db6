package cuda

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Round after round, no goroutine leaves the barrier before all of that
// round have come, and each learns whether every one came with ok: one
// failure fails that round for all, and the next round starts clean.
func TestBarrier(t *testing.T) {
	const n, rounds, failRound = 3, 200, 17
	b := &barrier{n: n}
	var arrived [rounds]atomic.Int32
	results := make([][rounds]bool, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for r := range rounds {
				arrived[r].Add(1)
				results[g][r] = b.wait(!(r == failRound && g == 1))
				if got := arrived[r].Load(); got != n {
					t.Errorf("goroutine %d left round %d with %d of %d arrived", g, r, got, n)
				}
			}
		})
	}
	wg.Wait()
	for g := range n {
		for r := range rounds {
			if want := r != failRound; results[g][r] != want {
				t.Errorf("goroutine %d, round %d: wait reported %v, want %v", g, r, results[g][r], want)
			}
		}
	}
	one := &barrier{n: 1}
	if !one.wait(true) || one.wait(false) || !one.wait(true) {
		t.Error("a barrier of one: want true, false, true")
	}
}
