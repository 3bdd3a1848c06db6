// Package eval measures an index as a user of its searches sees it: recall
// against ground truth, queries per second on all cores, and size. The
// CLI's eval command prints what it measures; a Go program can measure an
// index the same way without the CLI.
//
//	gt, err := eval.ReadGroundTruth("groundtruth.ivecs", queries.Len(), 10)
//	res, err := eval.Measure(ctx, ix, queries, gt, eval.Options{Search: index.SearchOptions{K: 10, NProbe: 16}})
//	fmt.Println(res.Recall10, res.QPS)
package eval

import (
	"context"
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/fault"
	"github.com/vlc-embed/vlc/vecfile"
)

// Errors of inputs that cannot measure an index; each error names the
// file, row and value where it can.
var (
	// ErrGroundTruth: ground truth with too few rows or ids, an id that
	// is not a row of the index (negative, >= n, or a float file read
	// as ids), or an id repeated in a row.
	ErrGroundTruth = errs.New(errs.ErrArgument, "bad ground truth")
	// ErrBase: base vectors that are not the index's: another number of
	// rows (the dimension is checked when the file is opened).
	ErrBase = errs.New(errs.ErrArgument, "base vectors do not match the index")
)

// Result is what Measure measured. The JSON keys are the CLI's contract
// (vlc eval -json).
type Result struct {
	Recall1        float64 `json:"recall@1"`  // recall of the first hit against the first true id
	Recall10       float64 `json:"recall@10"` // recall of the first 10 hits against the first 10 true ids
	QPS            float64 `json:"qps"`       // queries per second, all cores, search time only
	BytesPerVector float64 `json:"bytes_per_vector"`
	SizeRatio      float64 `json:"size_ratio"`
	NProbe         int     `json:"nprobe"` // lists scanned, after clamping to the index's
	K              int     `json:"k"`      // hits asked for

	// Latency of single queries, one at a time on one goroutine (set
	// only when Options.Latency asks): median and 99th percentile, ms.
	LatencyP50 float64 `json:"latency_p50_ms,omitempty"`
	LatencyP99 float64 `json:"latency_p99_ms,omitempty"`

	Queries int           `json:"-"` // searches timed: the queries, times the passes
	Elapsed time.Duration `json:"-"` // the time they took
}

// Searcher is what Measure measures: an *index.Index searched on the
// CPU, or an *index.DeviceIndex searched on a GPU.
type Searcher interface {
	SearchBatch(ctx context.Context, queries index.Rows, opt index.SearchOptions) ([][]index.Hit, error)
	Search(q []float32, opt index.SearchOptions) ([]index.Hit, error)
	Len() int
	EffectiveNProbe(nprobe int) int
	BytesPerVector() float64
	SizeRatio() float64
}

// Options set what Measure searches with.
type Options struct {
	// Search is the search to measure. Recall@10 needs 10 hits, so
	// searches ask for at least 10 whatever Search.K says.
	Search index.SearchOptions
	// MinTime: passes over the queries are repeated until they have
	// taken at least this long, so that the speed of a few fast queries
	// is not the noise of starting a pass on all cores.
	MinTime time.Duration
	// Warmup passes over the queries run before the timed ones, untimed:
	// the first pass pays once for what a service pays once (faulting in
	// the query file, a device's batch buffers, caches), as the peers'
	// scripts warm up before they time.
	Warmup int
	// Latency adds a pass that searches the queries one at a time on one
	// goroutine and times each (Result.LatencyP50, LatencyP99): what one
	// request sees, where QPS is what all cores serve.
	Latency bool
	// Batch, when positive, is the most queries one SearchBatch call
	// takes: the queries go in batches of that many, one after another,
	// as a service answering requests of Batch queries would send them.
	// Zero: all the queries in one call.
	Batch int
}

// Measure searches for every query on all cores (SearchBatch, in batches
// of opt.Batch) and
// measures recall against gt (the true neighbours of each query, nearest
// first, as ReadGroundTruth or Exact give them), speed and size. gt must
// pass CheckGroundTruth for the index and recall@10, else the error wraps
// ErrGroundTruth.
func Measure(ctx context.Context, ix Searcher, queries index.Rows, gt [][]int, opt Options) (Result, error) {
	if err := CheckGroundTruth(gt, queries.Len(), ix.Len(), 10); err != nil {
		return Result{}, err
	}
	so := opt.Search
	so.K = max(so.K, 10)
	for range opt.Warmup {
		if _, err := batches(ctx, ix, queries, so, opt.Batch); err != nil {
			return Result{}, err
		}
	}
	start := time.Now()
	hits, err := batches(ctx, ix, queries, so, opt.Batch)
	if err != nil {
		return Result{}, err
	}
	searched := queries.Len()
	for time.Since(start) < opt.MinTime {
		if _, err := batches(ctx, ix, queries, so, opt.Batch); err != nil {
			return Result{}, err
		}
		searched += queries.Len()
	}
	elapsed := time.Since(start)
	var p50, p99 float64
	if opt.Latency {
		if p50, p99, err = latency(ctx, ix, queries, so); err != nil {
			return Result{}, err
		}
	}
	return Result{
		LatencyP50:     p50,
		LatencyP99:     p99,
		Recall1:        Recall(hits, gt, 1),
		Recall10:       Recall(hits, gt, 10),
		QPS:            float64(searched) / max(elapsed, time.Nanosecond).Seconds(),
		BytesPerVector: ix.BytesPerVector(),
		SizeRatio:      ix.SizeRatio(),
		NProbe:         ix.EffectiveNProbe(so.NProbe),
		K:              opt.Search.K,
		Queries:        searched,
		Elapsed:        elapsed,
	}, nil
}

// batches searches the queries in batches of batch (all at once for 0).
func batches(ctx context.Context, ix Searcher, queries index.Rows, so index.SearchOptions, batch int) ([][]index.Hit, error) {
	n := queries.Len()
	if batch <= 0 || batch >= n {
		return ix.SearchBatch(ctx, queries, so)
	}
	hits := make([][]index.Hit, 0, n)
	for lo := 0; lo < n; lo += batch {
		h, err := ix.SearchBatch(ctx, rowRange{queries, lo, min(lo+batch, n)}, so)
		if err != nil {
			return nil, fmt.Errorf("the batch of queries from %d (numbered from 0 within it): %w", lo, err)
		}
		hits = append(hits, h...)
	}
	return hits, nil
}

// rowRange is rows lo to hi-1 of r.
type rowRange struct {
	r      index.Rows
	lo, hi int
}

func (r rowRange) Len() int                           { return r.hi - r.lo }
func (r rowRange) Dim() int                           { return r.r.Dim() }
func (r rowRange) Row(i int, dst []float32) []float32 { return r.r.Row(r.lo+i, dst) }

// latency searches each query once, in order, and returns the median and
// the 99th percentile (nearest rank) of the times, in milliseconds.
func latency(ctx context.Context, ix Searcher, queries index.Rows, so index.SearchOptions) (p50, p99 float64, err error) {
	n := queries.Len()
	if n == 0 {
		return 0, 0, nil
	}
	times := make([]time.Duration, n)
	x := make([]float32, queries.Dim())
	for i := range n {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		q := queries.Row(i, x)
		t := time.Now()
		if _, err := ix.Search(q, so); err != nil {
			return 0, 0, fmt.Errorf("query %d: %w", i, err)
		}
		times[i] = time.Since(t)
	}
	slices.Sort(times)
	rank := func(p float64) float64 {
		i := min(n-1, int(math.Ceil(p*float64(n)))-1)
		return float64(times[max(i, 0)]) / 1e6
	}
	return rank(0.50), rank(0.99), nil
}

// Recall is the mean over queries of |first k hits ∩ first k true ids|
// divided by the number of true ids counted, min(k, len(gt[i])): on an
// index of n < k vectors the ground truth holds n ids and a search that
// returns all n scores 1. gt holds a row for each row of hits. It is 0 for
// no queries or k < 1; a query with no true ids counts 0.
func Recall(hits [][]index.Hit, gt [][]int, k int) float64 {
	if len(hits) == 0 || k < 1 {
		return 0
	}
	var sum float64
	for i, hs := range hits {
		want := gt[i][:min(k, len(gt[i]))]
		if len(want) == 0 {
			continue
		}
		truth := map[int]bool{}
		for _, id := range want {
			truth[id] = true
		}
		found := 0
		for _, h := range hs[:min(k, len(hs))] {
			if truth[h.ID] {
				found++
			}
		}
		sum += float64(found) / float64(len(want))
	}
	return sum / float64(len(hits))
}

// CheckGroundTruth checks that gt can measure recall@k of queries on an
// index of n vectors: a row for each query, each with at least min(k, n)
// ids, every id a row of the index (0 <= id < n), none repeated among the
// first min(k, n). Errors wrap ErrGroundTruth and name the row.
func CheckGroundTruth(gt [][]int, queries, n, k int) error {
	if len(gt) < queries {
		return fmt.Errorf("%w: %d rows for %d queries", ErrGroundTruth, len(gt), queries)
	}
	need := min(k, n)
	for i, r := range gt[:queries] {
		if len(r) < need {
			return fmt.Errorf("%w: row %d has %d ids, recall@%d on %d vectors needs %d", ErrGroundTruth, i, len(r), k, n, need)
		}
		seen := make(map[int]bool, need)
		for j, id := range r {
			if id < 0 || id >= n {
				return fmt.Errorf("%w: row %d, id %d is %d, not a row of the index (0..%d); ground truth is .ivecs of int32 row numbers", ErrGroundTruth, i, j, id, n-1)
			}
			if j < need && seen[id] {
				return fmt.Errorf("%w: row %d: id %d repeated", ErrGroundTruth, i, id)
			}
			seen[id] = true
		}
	}
	return nil
}

// ReadGroundTruth reads the true neighbours of the first queries queries
// from an .ivecs file (one row per query: the ids of its nearest base
// vectors, nearest first), and checks that each row holds at least k.
// Errors of content wrap ErrGroundTruth; Measure checks the ids against
// the index.
func ReadGroundTruth(path string, queries, k int) ([][]int, error) {
	rows, err := vecfile.ReadIvecs(path)
	if err != nil {
		return nil, err
	}
	if len(rows) < queries {
		return nil, fmt.Errorf("%s: %w: %d rows for %d queries", path, ErrGroundTruth, len(rows), queries)
	}
	gt := make([][]int, queries)
	for i, r := range rows[:queries] {
		if len(r) < k {
			return nil, fmt.Errorf("%s: %w: row %d has %d ids, recall@%d needs %d", path, ErrGroundTruth, i, len(r), k, k)
		}
		gt[i] = make([]int, len(r))
		for j, v := range r {
			gt[i][j] = int(v)
		}
	}
	return gt, nil
}

// Exact returns the k true neighbours of each query (index.Exact under
// ix's metric) from base, which must be the vectors ix holds: base of
// another number of rows is refused (ErrBase) rather than measured
// against neighbours the index cannot return. A mapped base or query file
// truncated by another program meanwhile gives an error naming it
// (vecfile.ErrChanged), not a crash.
func Exact(ix *index.Index, base, queries index.Rows, k int) (gt [][]int, err error) {
	defer fault.Catch(&err, debug.SetPanicOnFault(true), "the base vectors", vecfile.ErrChanged)
	if base.Len() != ix.Len() {
		return nil, fmt.Errorf("%w: %d base vectors, the index holds %d", ErrBase, base.Len(), ix.Len())
	}
	return index.Exact(base, queries, k, index.Metric(ix.Meta().Metric)), nil
}

// NProbes returns the nprobe values a sweep over an index of lists lists
// measures: values clamped to [1, lists], sorted, without repeats; or,
// when values is empty, 1, 2, 4, ... below lists, then lists itself
// (every list scanned).
func NProbes(lists int, values []int) []int {
	var out []int
	if len(values) == 0 {
		for p := 1; p < lists; p *= 2 {
			out = append(out, p)
		}
		return append(out, lists)
	}
	for _, p := range values {
		out = append(out, min(max(p, 1), lists))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
