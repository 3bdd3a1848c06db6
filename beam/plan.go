package vlcbeam

import (
	"context"
	"fmt"
	"math"

	"github.com/vlc-embed/vlc/vecfile"
)

// Shard is one row range [Lo, Hi) of the input, Index of Count, in a file
// of N rows of dimension Dim.
type Shard struct {
	Index, Count int
	Lo, Hi       int
	N, Dim       int
}

// shardRanges splits n rows into k contiguous ranges as even as integer
// division makes them (k clamped to [1, n]): range i is
// [i*n/k, (i+1)*n/k).
func shardRanges(n, k int) [][2]int {
	k = max(1, min(k, n))
	r := make([][2]int, k)
	for i := range r {
		r[i] = [2]int{i * n / k, (i + 1) * n / k}
	}
	return r
}

// sampleRange is the sample indices j whose rows lie in [lo, hi), for s
// evenly spaced rows of n: row(j) = floor(j*n/s) >= lo exactly when
// j >= ceil(lo*s/n).
func sampleRange(lo, hi, n, s int) (jlo, jhi int) {
	ceilDiv := func(a, b int) int { return (a + b - 1) / b }
	return ceilDiv(lo*s, n), ceilDiv(hi*s, n)
}

// sampleRow is the row of sample index j of s evenly spaced rows of n.
func sampleRow(j, n, s int) int { return j * n / s }

// planFn opens the input (on a worker: the launcher need not see it) and
// emits its shards.
type planFn struct {
	Cfg Config
}

func (f *planFn) ProcessElement(ctx context.Context, _ []byte, emit func(Shard)) error {
	m, err := vecfile.Open(f.Cfg.Input, vecfile.Options{Dim: f.Cfg.Dim})
	if err != nil {
		return err
	}
	n, d := m.Len(), m.Dim()
	m.Close()
	if n > math.MaxInt/n { // sampleRange multiplies row numbers
		return fmt.Errorf("vlcbeam: %s: %d rows: too many for this platform", f.Cfg.Input, n)
	}
	r := shardRanges(n, f.Cfg.Shards)
	for i, lh := range r {
		emit(Shard{Index: i, Count: len(r), Lo: lh[0], Hi: lh[1], N: n, Dim: d})
	}
	return nil
}
