package vlc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

// Compress a file of float16 embeddings (2,000 Deep1B vectors), open the
// index and search it. The three hits are the exact three nearest
// neighbours of the query (the first row of groundtruth.ivecs).
func Example() {
	dir, err := os.MkdirTemp("", "vlc-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "deep2k.vlc")
	sum, err := vlc.Compress(context.Background(), "testdata/deep2k/base.f16", out, vlc.Options{Dim: 96, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d vectors, %d anchors, %.0f%% of float16\n", sum.N, sum.Anchors, 100*sum.SizeRatio)

	ix, err := vlc.Open(out)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	queries, err := vecfile.Open("testdata/deep2k/query.fvecs", vecfile.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer queries.Close()
	hits, err := ix.Search(context.Background(), queries.Row(0, nil), vlc.SearchOptions{K: 3, NProbe: 16})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range hits {
		fmt.Println(h.ID)
	}
	// Output:
	// 2000 vectors, 45 anchors, 56% of float16
	// 1636
	// 62
	// 80
}

// Compress to a size budget: Ratio picks the most bits per dimension whose
// index fits in that fraction of the float16 size.
func ExampleCompress_ratio() {
	dir, err := os.MkdirTemp("", "vlc-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	sum, err := vlc.Compress(context.Background(), "testdata/deep2k/base.f16", filepath.Join(dir, "small.vlc"),
		vlc.Options{Dim: 96, Ratio: 0.32, Metric: "cosine", Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s code, %d bits per dimension, %.1f bytes per vector, %.2f of float16\n", sum.Code, sum.Bits, sum.BytesPerVector, sum.SizeRatio)
	// Output:
	// rotated code, 4 bits per dimension, 60.4 bytes per vector, 0.31 of float16
}
