package vlcbeam

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vlc-embed/vlc/anneal"
)

// Config is one build: what to read, what to write, how to train. The
// pipeline's DoFns carry it (Beam serialises their exported fields as
// JSON), so every field is a plain value.
type Config struct {
	Input  string // vector file: .f16 (needs Dim), .npy or .fvecs
	Dim    int    // dimension of a raw .f16 input (checked against .npy/.fvecs)
	Output string // the index to write; replaced only by a complete index

	// Shards is the number of row ranges encoded in parallel (default 8;
	// at most the number of rows). Each is one element after a Reshuffle,
	// so a runner may encode each on another worker.
	Shards int

	// Model, when set, is a model file (vlc model, index.WriteModel) or
	// an index whose anchors, rotation, codebooks and list parameters
	// every shard is encoded with: no training, and the options below
	// except Backend are the model's (Seed is then ignored).
	Model string
	// ModelOut is where the model trained by the pipeline is written, as
	// a model file, and kept (default Output + ".model"); pass it as
	// Model to encode more data the same way.
	ModelOut string
	// WorkDir holds the segments until the commit merges them (default
	// Output + ".parts"). Every worker must see it at the same path.
	WorkDir string

	// SampleRows is the number of evenly spaced rows training reads:
	// row floor(j*n/SampleRows) for j in [0, SampleRows). 0 means
	// min(n, 256 x anchors); at least the number of anchors.
	SampleRows int

	// Training options, as vlc.Options names them (zero: its defaults).
	// Anchors defaults to about sqrt(n) of the whole input, not of the
	// sample. Code "" or "auto" is picked by vlc.Compress for the
	// sample's size, which can differ from the pick for the whole input:
	// name the code for large builds.
	Bits    int
	Anchors int
	Code    string
	Metric  string
	Seed    uint64
	MaxIter int
	// Backend trains (and, where vlc supports it, encodes) on "auto"
	// (default: a GPU when the worker has one and the binary was built
	// with its tag), "cpu", "cuda" or "webgpu".
	Backend string
}

const defaultShards = 8

// sampleFactor is the rows sampled per anchor by default: FAISS warns
// below 39 points per centroid and samples at most 256 per centroid.
const sampleFactor = 256

// check refuses a config no build can run, before the pipeline is made.
func (c Config) check() error {
	switch {
	case c.Input == "":
		return errors.New("vlcbeam: no input")
	case c.Output == "":
		return errors.New("vlcbeam: no output")
	case c.Shards < 0:
		return fmt.Errorf("vlcbeam: %d shards: must be 1 or more (0: %d)", c.Shards, defaultShards)
	case c.SampleRows < 0:
		return fmt.Errorf("vlcbeam: %d sample rows: must be 1 or more (0: min(n, %d x anchors))", c.SampleRows, sampleFactor)
	case c.Dim < 0, c.Anchors < 0, c.Bits < 0, c.MaxIter < 0:
		return fmt.Errorf("vlcbeam: negative Dim, Anchors, Bits or MaxIter")
	}
	for _, p := range []string{c.Input, c.Output, c.Model, c.ModelOut, c.WorkDir} {
		if strings.Contains(p, "://") {
			return fmt.Errorf("vlcbeam: %s: only paths of a filesystem every worker mounts are supported (docs/DISTRIBUTED.md, \"Remote storage\")", p)
		}
	}
	if c.Model != "" && (c.Bits != 0 || c.Anchors != 0 || c.Code != "" || c.Metric != "" || c.SampleRows != 0 || c.MaxIter != 0) {
		return errors.New("vlcbeam: a Model gives the code, anchors and metric: leave Bits, Anchors, Code, Metric, SampleRows and MaxIter unset")
	}
	return nil
}

// withDefaults fills the defaults that do not depend on the input.
// Paths are made absolute: workers may run in another directory.
func (c Config) withDefaults() (Config, error) {
	if c.Shards == 0 {
		c.Shards = defaultShards
	}
	if c.ModelOut == "" {
		c.ModelOut = c.Output + ".model"
	}
	if c.WorkDir == "" {
		c.WorkDir = c.Output + ".parts"
	}
	for _, p := range []*string{&c.Input, &c.Output, &c.Model, &c.ModelOut, &c.WorkDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return c, fmt.Errorf("vlcbeam: %w", err)
		}
		*p = abs
	}
	return c, nil
}

// anchors is the number of anchors of a build over n rows.
func (c Config) anchors(n int) int {
	if c.Anchors > 0 {
		return c.Anchors
	}
	return anneal.DefaultAnchors(n)
}

// sampleRows is the number of rows training reads from n.
func (c Config) sampleRows(n int) int {
	s := c.SampleRows
	if s == 0 {
		s = sampleFactor * c.anchors(n)
	}
	return min(n, max(s, c.anchors(n)))
}

// segmentPath is where shard k of shards is encoded: one name per shard,
// so that a retried or re-run encode replaces the file another attempt
// wrote (vlc writes atomically: never a torn file).
func (c Config) segmentPath(k, shards int) string {
	return filepath.Join(c.WorkDir, fmt.Sprintf("seg-%05d-of-%05d.vlc", k, shards))
}
