// Package vlcbeam builds one vlc index from one vector file on Apache
// Beam: the rows are split into shards, a sample gathered from the shards
// trains the model once (or an existing model is given), every shard is
// encoded against that frozen model in parallel, and the segments are
// merged, in shard order, into the output. The result is the index
// vlc.Compress writes with Options.AnchorsFrom set to the same model.
//
// Every path must name the same file on every worker (a shared
// filesystem); docs/DISTRIBUTED.md says what object storage would need.
package vlcbeam

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(Shard), error](&planFn{})
	register.DoFn3x1[context.Context, Shard, func(SampleChunk), error](&sampleFn{})
	register.DoFn3x2[context.Context, int, func(*SampleChunk) bool, string, error](&trainFn{})
	register.DoFn3x2[context.Context, Shard, string, Segment, error](&encodeFn{})
	register.DoFn3x2[context.Context, int, func(*Segment) bool, Result, error](&commitFn{})
	register.DoFn2x2[context.Context, Result, Result, error](&cleanupFn{})
	register.Emitter1[Shard]()
	register.Emitter1[SampleChunk]()
	register.Iter1[SampleChunk]()
	register.Iter1[Segment]()
}

// Build adds the build described by cfg to the pipeline of s and returns
// its result: a PCollection of one Result, after the segments are
// removed. The stages:
//
//	Impulse -> plan (open the input: n rows, K shards) -> Reshuffle
//	   -> sample (each shard's evenly spaced rows) -> GroupByKey -> train (once; vlc.Compress, its model to a model file)
//	   -> encode (per shard; vlc.Compress with AnchorsFrom, Start, End; the model a side input)
//	   -> GroupByKey -> commit (vlc.Merge in shard order) -> Reshuffle -> cleanup
//
// With cfg.Model set, the sample and train stages are left out.
func Build(s beam.Scope, cfg Config) (beam.PCollection, error) {
	if err := cfg.check(); err != nil {
		return beam.PCollection{}, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("vlcbeam.Build")
	// The plan emits every shard in one bundle; the Reshuffle lets a
	// runner spread them over workers.
	shards := beam.Reshuffle(s, beam.ParDo(s.Scope("plan"), &planFn{Cfg: cfg}, beam.Impulse(s)))

	var model beam.PCollection
	if cfg.Model != "" {
		model = beam.Create(s, cfg.Model)
	} else {
		chunks := beam.ParDo(s.Scope("sample"), &sampleFn{Cfg: cfg}, shards)
		model = beam.ParDo(s.Scope("train"), &trainFn{Cfg: cfg}, beam.GroupByKey(s, beam.AddFixedKey(s, chunks)))
	}
	segs := beam.ParDo(s.Scope("encode"), &encodeFn{Cfg: cfg}, shards, beam.SideInput{Input: model})
	res := beam.ParDo(s.Scope("commit"), &commitFn{Cfg: cfg}, beam.GroupByKey(s, beam.AddFixedKey(s, segs)))
	// A stage boundary: a cleanup that fails and is retried never makes
	// the commit run again without its segments.
	return beam.ParDo(s.Scope("cleanup"), &cleanupFn{Cfg: cfg}, beam.Reshuffle(s, res)), nil
}
