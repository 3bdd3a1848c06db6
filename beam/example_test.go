package vlcbeam_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/vlc-embed/vlc"
	vlcbeam "github.com/vlc-embed/vlc/beam"
	"github.com/vlc-embed/vlc/vecfile"
)

// Build an index of 10,000 Deep1B vectors on Prism, Beam's local runner
// (beam.Init has been called, as a program's main must): trained once on
// an evenly spaced sample of 2,000 rows, encoded as 4 shards, merged. The
// three hits are the exact three nearest neighbours of the first query
// (the first row of groundtruth.ivecs).
func ExampleBuild() {
	dir, err := os.MkdirTemp("", "vlcbeam-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "deep10k.vlc")

	p, s := beam.NewPipelineWithRoot()
	_, err = vlcbeam.Build(s, vlcbeam.Config{
		Input: "../testdata/deep10k/base.f16", Dim: 96, Output: out,
		Shards: 4, SampleRows: 2000, Seed: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := prism.Execute(context.Background(), p); err != nil {
		fmt.Println(err)
		return
	}

	ix, err := vlc.Open(out)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	q, err := vecfile.Open("../testdata/deep10k/query.fvecs", vecfile.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	hits, err := ix.Search(context.Background(), q.Row(0, nil), vlc.SearchOptions{K: 3, NProbe: 16})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ix.Len(), "vectors")
	for _, h := range hits {
		fmt.Println(h.ID)
	}
	// Output:
	// 10000 vectors
	// 9865
	// 7930
	// 1636
}
