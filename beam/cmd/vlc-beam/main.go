// Command vlc-beam builds one vlc index from one vector file on Apache
// Beam (package vlcbeam): shards encoded in parallel against one model,
// merged in order. Beam's own flags pick the runner and its settings:
//
//	vlc-beam -input base.f16 -dim 96 -output deep.vlc -shards 8                 # Prism, in this process
//	vlc-beam -input /shared/base.f16 -dim 96 -output /shared/deep.vlc \
//	    --runner=flink --endpoint=localhost:8099 --environment_type=LOOPBACK
//
// docs/DISTRIBUTED.md has the commands for Flink, Spark and Dataflow.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/vlc-embed/vlc"
	vlcbeam "github.com/vlc-embed/vlc/beam"
)

// The flags named as vlc compress names them, where it has them.
var (
	input    = flag.String("input", "", "vector file: .f16 (with -dim), .npy or .fvecs (required)")
	output   = flag.String("output", "", "index to write (required)")
	dim      = flag.Int("dim", 0, "dimension of a raw .f16 input")
	shards   = flag.Int("shards", 8, "row ranges encoded in parallel")
	model    = flag.String("model", "", "encode with this model file (vlc model) or index's model (anchors, code, metric) instead of training")
	modelOut = flag.String("model-out", "", "where the trained model is kept (a model file; default OUTPUT.model)")
	workDir  = flag.String("work-dir", "", "folder for the segments until they are merged (default OUTPUT.parts); every worker must see it")
	sample   = flag.Int("sample", 0, "rows training reads, evenly spaced (default min(n, 256 x anchors))")
	bits     = flag.Int("bits", 0, "bits per dimension of the residual codes: 1, 2, 4 or 8 (default 8)")
	anchors  = flag.Int("anchors", 0, "anchors (default about sqrt(n) of the whole input)")
	code     = flag.String("code", "", "residual code: rotated, pq or sq8 (default: vlc's pick for the sample)")
	metric   = flag.String("metric", "", "l2 (default), ip or cosine")
	seed     = flag.Uint64("seed", 0, "training seed")
	maxIter  = flag.Int("max-iter", 0, "training iterations at most (default vlc's)")
	backend  = flag.String("backend", "", "auto (default: a GPU where the worker has one and the binary its build tag), cpu, cuda or webgpu")
)

func main() {
	flag.Parse()
	beam.Init() // on a worker, runs the worker and does not return
	if err := build(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "vlc-beam:", err)
		os.Exit(1)
	}
}

func build(ctx context.Context) error {
	if *input == "" || *output == "" {
		return fmt.Errorf("-input and -output are required (vlc-beam -h lists the flags)")
	}
	cfg := vlcbeam.Config{
		Input: *input, Dim: *dim, Output: *output, Shards: *shards,
		Model: *model, ModelOut: *modelOut, WorkDir: *workDir, SampleRows: *sample,
		Bits: *bits, Anchors: *anchors, Code: *code, Metric: *metric, Seed: *seed, MaxIter: *maxIter,
		Backend: *backend,
	}
	p, s := beam.NewPipelineWithRoot()
	if _, err := vlcbeam.Build(s, cfg); err != nil {
		return err
	}
	start := time.Now()
	if err := beamx.Run(ctx, p); err != nil {
		return err
	}
	// The launcher sees the output where it shares the workers' filesystem.
	ix, err := vlc.Open(*output)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vlc-beam: pipeline done in %v\n", time.Since(start).Round(time.Millisecond))
		return nil
	}
	defer ix.Close()
	info, err := ix.Info()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "vlc-beam: wrote %s: %d vectors x %d, %d bytes, in %v\n",
		*output, ix.Len(), ix.Dim(), info.Bytes, time.Since(start).Round(time.Millisecond))
	return nil
}
