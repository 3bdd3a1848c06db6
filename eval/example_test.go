package eval_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/eval"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// Measure an index's recall against exact ground truth at two nprobe
// values (the speed, QPS, is measured too, but differs by machine).
func ExampleMeasure() {
	dir, err := os.MkdirTemp("", "eval-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "deep2k.vlc")
	if _, err := vlc.Compress(context.Background(), "../testdata/deep2k/base.f16", out, vlc.Options{Dim: 96, Bits: 4, Seed: 1}); err != nil {
		fmt.Println(err)
		return
	}
	ix, err := index.Open(out, index.Options{Verify: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	queries, err := vecfile.Open("../testdata/deep2k/query.fvecs", vecfile.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer queries.Close()
	gt, err := eval.ReadGroundTruth("../testdata/deep2k/groundtruth.ivecs", queries.Len(), 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, nprobe := range eval.NProbes(ix.Lists(), []int{4, 16}) {
		res, err := eval.Measure(context.Background(), ix, queries, gt, eval.Options{Search: index.SearchOptions{K: 10, NProbe: nprobe}})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("nprobe %2d: recall@10 %.3f at %.1f bytes per vector\n", res.NProbe, res.Recall10, res.BytesPerVector)
	}
	// Output:
	// nprobe  4: recall@10 0.794 at 60.4 bytes per vector
	// nprobe 16: recall@10 0.934 at 60.4 bytes per vector
}
