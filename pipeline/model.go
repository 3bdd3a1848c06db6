package pipeline

import (
	"bytes"
	"fmt"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// Model is what Options.AnchorsFrom encodes under, without training: an
// index's anchors (as stored: float16), code, metric and list parameters.
type Model struct {
	Path           string // the index it was read from, for errors
	Dim, M         int    // the vectors' dimension; the anchors
	Meta           index.Meta
	Anchors        []float32
	Params, Global []byte
}

// CheckModel is im, read from path (a model file, an index, or a store's
// first segment: a store's segments share its model), as the pipeline
// encodes under it, refusing options that contradict it.
func CheckModel(im *index.Model, path string, opt Options) (*Model, error) {
	meta := im.Meta
	d := im.Dim()
	spec := meta.CodeSpec()
	spec.Dim = d
	code, err := quant.New(spec)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	spec = code.Spec()
	kind, _ := quant.ParseKind(opt.Code)
	for _, c := range []struct {
		field string
		value any
		bad   bool
		has   any
	}{
		{"Bits", opt.Bits, opt.Bits != 0 && opt.Bits != spec.Bits, spec.Bits},
		{"Subspaces", opt.Subspaces, opt.Subspaces != 0 && opt.Subspaces != spec.Subspaces, spec.Subspaces},
		{"Ratio", opt.Ratio, opt.Ratio != 0, "its own size"},
		{"Code", opt.Code, !opt.autoCode() && kind != spec.Kind, spec.Kind},
		{"Metric", opt.Metric, opt.Metric != "" && opt.Metric != meta.Metric.String(), meta.Metric},
		{"Anchors", opt.Anchors, opt.Anchors != 0 && opt.Anchors != im.Lists(), im.Lists()},
	} {
		if c.bad {
			return nil, &OptionError{Fields: []string{c.field}, Value: c.value, Reason: fmt.Sprintf("the model %s has %v (AnchorsFrom sets it)", path, c.has)}
		}
	}
	// The anchors as the index stores them (float16 values): building
	// rounds them to the same values, so residuals are the model's.
	return &Model{Path: path, Dim: d, M: im.Lists(), Meta: meta, Anchors: im.Anchors, Params: im.Params, Global: bytes.Clone(im.Global)}, nil
}
