package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// evalResult is what `vlc eval -json` prints; the keys are a contract.
type evalResult struct {
	Recall1        float64 `json:"recall@1"`
	Recall10       float64 `json:"recall@10"`
	QPS            float64 `json:"qps"`
	BytesPerVector float64 `json:"bytes_per_vector"`
	SizeRatio      float64 `json:"size_ratio"`
	NProbe         int     `json:"nprobe"`
	K              int     `json:"k"`
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	var sf searchFlags
	sf.register(fs, 10)
	gtPath := fs.String("gt", "", "ground truth `file` (.ivecs: the nearest base rows of each query, nearest first)")
	basePath := fs.String("base", "", "base vectors `file` to compute exact ground truth from when -gt is not given")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout (with -sweep: an array, one object per row, each with an index key too when several indexes are given)")
	var sw sweepFlags
	sw.register(fs)
	pos, err := parse(fs, args, []string{"INDEX..."}, stderr)
	if err != nil {
		return err
	}
	if err := sw.check(fs); err != nil {
		return err
	}
	if !sw.on() && len(pos) > 1 {
		return fmt.Errorf("want 1 argument(s) (INDEX), got %d: %s (several indexes need -sweep)", len(pos), strings.Join(pos, " "))
	}
	if *gtPath == "" && *basePath == "" {
		return fmt.Errorf("one of -gt or -base is required")
	}
	if sw.on() {
		return runSweep(ctx, pos, &sf, &sw, *gtPath, *basePath, *asJSON, stdout, stderr)
	}
	o, err := sf.open(pos[0])
	if err != nil {
		return err
	}
	defer o.Close()
	ix, q, rr := o.ix, o.q, o.rr

	gt, err := loadGroundTruth(*gtPath, *basePath, q, ix)
	if err != nil {
		return err
	}
	res, elapsed, err := evalAt(ctx, ix, q, gt, &sf, rr, sf.nprobe, 0)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	rerank := "no re-rank"
	if rr != nil {
		rerank = fmt.Sprintf("re-rank %dx", sf.rerankFactor)
	}
	fmt.Fprintf(stdout, "queries          %d (nprobe %d, %s)\n", q.Len(), res.NProbe, rerank)
	fmt.Fprintf(stdout, "recall@1         %.4f\n", res.Recall1)
	fmt.Fprintf(stdout, "recall@10        %.4f\n", res.Recall10)
	fmt.Fprintf(stdout, "qps              %.0f (%s on all cores)\n", res.QPS, elapsed.Round(1e6))
	fmt.Fprintf(stdout, "bytes/vector     %.1f\n", res.BytesPerVector)
	fmt.Fprintf(stdout, "size ratio       %.3f of float16\n", res.SizeRatio)
	return nil
}

// loadGroundTruth reads the first 10 true neighbours of each query from
// gtPath, or computes them exactly from basePath with the index's metric.
func loadGroundTruth(gtPath, basePath string, q *vecfile.Matrix, ix *index.Index) ([][]int, error) {
	var gt [][]int
	if gtPath != "" {
		rows, err := vecfile.ReadIvecs(gtPath)
		if err != nil {
			return nil, err
		}
		if len(rows) < q.Len() {
			return nil, fmt.Errorf("%s has %d rows for %d queries", gtPath, len(rows), q.Len())
		}
		for i, r := range rows[:q.Len()] {
			if len(r) < 10 {
				return nil, fmt.Errorf("%s: row %d has %d ids, recall@10 needs 10", gtPath, i, len(r))
			}
			gt = append(gt, toInts(r))
		}
		return gt, nil
	}
	base, err := vecfile.Open(basePath, vecfile.Options{Dim: ix.Dim()})
	if err != nil {
		return nil, err
	}
	defer base.Close()
	return index.Exact(base, q, 10, index.Metric(ix.Meta().Metric)), nil
}

// evalAt searches every query at nprobe on all cores and measures recall
// against gt, speed and size. It also returns the wall time of the search.
// When one pass over the queries takes less than minTime, it repeats the
// passes until minTime has passed and measures the speed over all of them.
func evalAt(ctx context.Context, ix *index.Index, q *vecfile.Matrix, gt [][]int, sf *searchFlags, rr *vecfile.Matrix, nprobe int, minTime time.Duration) (evalResult, time.Duration, error) {
	// Recall@1 and recall@10 are measured on the first 1 and 10 hits, so
	// search for at least 10.
	opt := sf.options(rr, max(sf.k, 10))
	opt.NProbe = nprobe
	hits, elapsed, err := searchAll(ctx, ix, q, opt)
	if err != nil {
		return evalResult{}, 0, err
	}
	searched := q.Len()
	for elapsed < minTime {
		_, e, err := searchAll(ctx, ix, q, opt)
		if err != nil {
			return evalResult{}, 0, err
		}
		elapsed += e
		searched += q.Len()
	}
	n := float64(ix.Len())
	return evalResult{
		Recall1:        recallAt(hits, gt, 1),
		Recall10:       recallAt(hits, gt, 10),
		QPS:            float64(searched) / max(elapsed, time.Nanosecond).Seconds(),
		BytesPerVector: float64(ix.Size()) / n,
		SizeRatio:      float64(ix.Size()) / (n * float64(2*ix.Dim())),
		NProbe:         ix.EffectiveNProbe(nprobe),
		K:              sf.k,
	}, elapsed, nil
}

// recallAt is the mean over queries of |first k hits ∩ first k true ids| / k.
func recallAt(hits [][]index.Hit, gt [][]int, k int) float64 {
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

func toInts(r []int32) []int {
	out := make([]int, len(r))
	for i, v := range r {
		out[i] = int(v)
	}
	return out
}
