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
	"slices"
	"time"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
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

	Queries int           `json:"-"` // searches timed: the queries, times the passes
	Elapsed time.Duration `json:"-"` // the time they took
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
}

// Measure searches for every query on all cores (Index.SearchBatch) and
// measures recall against gt (the true neighbours of each query, nearest
// first, as ReadGroundTruth or index.Exact give them), speed and size.
func Measure(ctx context.Context, ix *index.Index, queries index.Rows, gt [][]int, opt Options) (Result, error) {
	if len(gt) < queries.Len() {
		return Result{}, fmt.Errorf("eval: ground truth for %d queries, %d queries given", len(gt), queries.Len())
	}
	so := opt.Search
	so.K = max(so.K, 10)
	start := time.Now()
	hits, err := ix.SearchBatch(ctx, queries, so)
	if err != nil {
		return Result{}, err
	}
	searched := queries.Len()
	for time.Since(start) < opt.MinTime {
		if _, err := ix.SearchBatch(ctx, queries, so); err != nil {
			return Result{}, err
		}
		searched += queries.Len()
	}
	elapsed := time.Since(start)
	return Result{
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

// Recall is the mean over queries of |first k hits ∩ first k true ids| / k;
// gt holds a row for each row of hits. It is 0 for no queries or k < 1.
func Recall(hits [][]index.Hit, gt [][]int, k int) float64 {
	if len(hits) == 0 || k < 1 {
		return 0
	}
	var sum float64
	for i, hs := range hits {
		truth := map[int]bool{}
		for _, id := range gt[i][:min(k, len(gt[i]))] {
			truth[id] = true
		}
		found := 0
		for _, h := range hs[:min(k, len(hs))] {
			if truth[h.ID] {
				found++
			}
		}
		sum += float64(found) / float64(k)
	}
	return sum / float64(len(hits))
}

// ReadGroundTruth reads the true neighbours of the first queries queries
// from an .ivecs file (one row per query: the ids of its nearest base
// vectors, nearest first), and checks that each row holds at least k.
func ReadGroundTruth(path string, queries, k int) ([][]int, error) {
	rows, err := vecfile.ReadIvecs(path)
	if err != nil {
		return nil, err
	}
	if len(rows) < queries {
		return nil, fmt.Errorf("%s has %d rows for %d queries", path, len(rows), queries)
	}
	gt := make([][]int, queries)
	for i, r := range rows[:queries] {
		if len(r) < k {
			return nil, fmt.Errorf("%s: row %d has %d ids, recall@%d needs %d", path, i, len(r), k, k)
		}
		gt[i] = make([]int, len(r))
		for j, v := range r {
			gt[i][j] = int(v)
		}
	}
	return gt, nil
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
