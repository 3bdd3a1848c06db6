package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

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
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	pos, err := parse(fs, args, []string{"INDEX"}, stderr)
	if err != nil {
		return err
	}
	if *gtPath == "" && *basePath == "" {
		return fmt.Errorf("one of -gt or -base is required")
	}
	ix, q, rr, err := sf.open(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	defer q.Close()
	if rr != nil {
		defer rr.Close()
	}

	// Recall@1 and recall@10 are measured on the first 1 and 10 hits, so
	// search for at least 10.
	k := max(sf.k, 10)
	var gt [][]int
	if *gtPath != "" {
		rows, err := vecfile.ReadIvecs(*gtPath)
		if err != nil {
			return err
		}
		if len(rows) < q.Len() {
			return fmt.Errorf("%s has %d rows for %d queries", *gtPath, len(rows), q.Len())
		}
		for i, r := range rows[:q.Len()] {
			if len(r) < 10 {
				return fmt.Errorf("%s: row %d has %d ids, recall@10 needs 10", *gtPath, i, len(r))
			}
			gt = append(gt, toInts(r))
		}
	} else {
		base, err := vecfile.Open(*basePath, vecfile.Options{Dim: ix.Dim()})
		if err != nil {
			return err
		}
		defer base.Close()
		gt = index.Exact(base, q, 10, index.Metric(ix.Meta().Metric))
	}

	hits, elapsed, err := searchAll(ctx, ix, q, sf.options(rr, k))
	if err != nil {
		return err
	}
	n := float64(ix.Len())
	res := evalResult{
		Recall1:        recallAt(hits, gt, 1),
		Recall10:       recallAt(hits, gt, 10),
		QPS:            float64(q.Len()) / elapsed.Seconds(),
		BytesPerVector: float64(ix.Size()) / n,
		SizeRatio:      float64(ix.Size()) / (n * float64(2*ix.Dim())),
		NProbe:         ix.EffectiveNProbe(sf.nprobe),
		K:              sf.k,
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
