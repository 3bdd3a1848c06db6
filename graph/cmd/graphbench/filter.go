package main

import (
	"math/rand/v2"

	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
)

var plans = map[string]graph.FilterPlan{"auto": graph.PlanAuto, "walk": graph.PlanWalk, "scan": graph.PlanScan, "ivf": graph.PlanAuto}

// rowSet is an index.RowSet: the allowed rows ascending and as a bitset,
// as the store hands a resolved filter over.
type rowSet struct {
	rows []int
	bits []uint64
}

func (s *rowSet) Allows(row int) bool {
	return row >= 0 && row>>6 < len(s.bits) && s.bits[row>>6]&(1<<(row&63)) != 0
}

func (s *rowSet) Count() int { return len(s.rows) }

func (s *rowSet) Each(yield func(int) bool) {
	for _, r := range s.rows {
		if !yield(r) {
			return
		}
	}
}

// drawRows allows each of n rows with probability share, by a draw
// seeded with seed.
func drawRows(n int, share float64, seed uint64) *rowSet {
	r := rand.New(rand.NewPCG(seed, 0))
	s := &rowSet{bits: make([]uint64, (n+63)/64)}
	for i := range n {
		if r.Float64() < share {
			s.rows = append(s.rows, i)
			s.bits[i>>6] |= 1 << (i & 63)
		}
	}
	return s
}

// subset is some rows of base, in order.
type subset struct {
	base index.Rows
	rows []int
}

func (s subset) Len() int                           { return len(s.rows) }
func (s subset) Dim() int                           { return s.base.Dim() }
func (s subset) Row(i int, dst []float32) []float32 { return s.base.Row(s.rows[i], dst) }

// queryRows are the queries as index.Rows.
type queryRows [][]float32

func (q queryRows) Len() int { return len(q) }
func (q queryRows) Dim() int { return len(q[0]) }
func (q queryRows) Row(i int, dst []float32) []float32 {
	return append(dst[:0], q[i]...)
}

// exactAllowed is each query's k nearest allowed rows (fewer where fewer
// are allowed), by exact l2 distance, as ground truth.
func exactAllowed(base index.Rows, qs [][]float32, rows []int, k int) [][]int32 {
	if len(rows) == 0 {
		return make([][]int32, len(qs))
	}
	near := index.Exact(subset{base, rows}, queryRows(qs), min(k, len(rows)), index.L2)
	gt := make([][]int32, len(qs))
	for i, ids := range near {
		for _, j := range ids {
			gt[i] = append(gt[i], int32(rows[j]))
		}
	}
	return gt
}
