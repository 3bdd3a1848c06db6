package main

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
)

// benchCase is one way of searching, timed in turns with the others.
type benchCase struct {
	share   float64 // 0: no filter
	plan    string
	allowed *rowSet
	gt      [][]int32
	sopt    graph.SearchOptions
	search  func([]float32, graph.SearchOptions) ([]index.Hit, error)
	found   [][]index.Hit
	best    time.Duration
	reads   graph.Reads
}

// filterCases is the unfiltered search where shares holds 0, and each
// plan at every other share, with exact ground truth over the allowed
// rows.
func filterCases(shares, planNames string, base index.Rows, qs [][]float32, seed uint64) ([]*benchCase, error) {
	var cases []*benchCase
	for _, f := range strings.Split(shares, ",") {
		share, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || share < 0 || share > 1 {
			return nil, fmt.Errorf("-filter %q: want shares of the rows from 0 (no filter) to 1", f)
		}
		if share == 0 {
			cases = append(cases, &benchCase{plan: "none"})
			continue
		}
		allowed := drawRows(base.Len(), share, seed)
		t := time.Now()
		gt := exactAllowed(base, qs, allowed.rows, 10)
		fmt.Fprintf(os.Stderr, "graphbench: share %g: %d of %d rows allowed (seed %d); exact search over them in %.2f s\n",
			share, allowed.Count(), base.Len(), seed, time.Since(t).Seconds())
		for _, p := range strings.Split(planNames, ",") {
			p = strings.TrimSpace(p)
			if _, ok := plans[p]; !ok {
				return nil, fmt.Errorf("-plan %q: want auto, walk, scan or ivf", p)
			}
			cases = append(cases, &benchCase{share: share, plan: p, allowed: allowed, gt: gt})
		}
	}
	return cases, nil
}

// pass searches every query once, the queries shared by GOMAXPROCS
// goroutines; first samples the reads and is not timed.
func (c *benchCase) pass(ix *index.Index, qs [][]float32, first bool, seedProbe, seedK int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	t := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(qs) {
					return
				}
				o := c.sopt
				if first && i%16 == 0 {
					o.Reads = new(graph.Reads)
				}
				if seedProbe > 0 {
					seeds, err := ix.Search(qs[i], index.SearchOptions{K: cmp.Or(seedK, o.Ef), NProbe: seedProbe})
					if err != nil {
						failed.Store(err)
						return
					}
					o.Seeds = make([]uint32, len(seeds))
					for k, h := range seeds {
						o.Seeds[k] = uint32(h.ID)
					}
				}
				hits, err := c.search(qs[i], o)
				if err != nil {
					failed.Store(err)
					return
				}
				c.found[i] = hits
				if o.Reads != nil {
					mergeReads(&c.reads, o.Reads)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	if !first {
		c.best = min(c.best, time.Since(t))
	}
	return nil
}

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
