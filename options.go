package vlc

import (
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/quant"
)

// Options for Compress. Zero values mean the defaults.
type Options struct {
	Dim   int     // dimension of a raw .f16 input (required there; checked against .npy/.fvecs)
	Bits  int     // bits per dimension of the residual codes: 1, 2, 4 or 8 (default 8)
	Ratio float64 // instead of Bits: the largest code whose index fits in Ratio x the float16 size
	Code  string  // residual code: "rotated" (default) or "pq" (docs/QUANTIZATION.md)
	// Subspaces, for the pq code and instead of Bits: bytes of code per
	// vector, 1 to the dimension (Bits b means ceil(dim*b/8)).
	Subspaces int
	Anchors   int    // anchors (inverted lists); default about sqrt(n)
	Metric    string // "l2" (default), "ip" or "cosine"
	Backend   string // "auto" (default), "cpu", or a GPU backend built in
	Seed      uint64 // same input, options and seed: byte-identical index
	MaxIter   int    // annealing iterations at most (default anneal.DefaultMaxIter)

	Logger *slog.Logger // nil: slog.Default()
	// Progress, when set, is called after each training iteration.
	Progress func(anneal.Iteration)
	// EncodeProgress, when set, is called with the vectors encoded so far
	// and their total: once with 0 when encoding starts (training is
	// done), then as lists are encoded (once, at the end, where a GPU
	// encodes them all at once). Calls do not overlap.
	EncodeProgress func(done, total int)
}

// OptionError reports Options that Compress refuses before any work. Its
// fields are named as the Options struct names them; Message names them
// another way (the CLI gives its flags' names).
type OptionError struct {
	Fields []string // one field, or the fields that conflict
	Value  any      // the refused value of a single field; nil for a conflict
	Reason string
}

func (e *OptionError) Error() string { return e.Message(func(f string) string { return f }) }

// Message is the error's text with each field named by name(field).
func (e *OptionError) Message(name func(field string) string) string {
	names := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		names[i] = name(f)
	}
	if len(names) == 1 {
		return fmt.Sprintf("%s %v: %s", names[0], e.Value, e.Reason)
	}
	return fmt.Sprintf("%s: %s", e.Reason, strings.Join(names, ", "))
}

// check refuses, before any work, values no code or schedule can take,
// settings that contradict each other, and an unknown code.
func (o Options) check() error {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{{"Bits", o.Bits != 0}, {"Ratio", o.Ratio != 0}, {"Subspaces", o.Subspaces != 0}} {
		if f.on {
			set = append(set, f.name)
		}
	}
	switch {
	case len(set) > 1:
		return &OptionError{Fields: set, Reason: "give only one of these, which each set the code's size"}
	case o.Bits < 0:
		return &OptionError{Fields: []string{"Bits"}, Value: o.Bits, Reason: "must be 1, 2, 4 or 8 (0: the default, 8)"}
	case o.Ratio < 0 || math.IsNaN(o.Ratio) || math.IsInf(o.Ratio, 0):
		return &OptionError{Fields: []string{"Ratio"}, Value: o.Ratio, Reason: "must be a positive fraction of the float16 size"}
	case o.Subspaces < 0:
		return &OptionError{Fields: []string{"Subspaces"}, Value: o.Subspaces, Reason: "must be 1 or more (0: from the bits)"}
	case o.Anchors < 0:
		return &OptionError{Fields: []string{"Anchors"}, Value: o.Anchors, Reason: "must be 0 (about sqrt(n)) or more"}
	case o.MaxIter < 0:
		return &OptionError{Fields: []string{"MaxIter"}, Value: o.MaxIter, Reason: fmt.Sprintf("must be 0 (the default, %d) or more", anneal.DefaultMaxIter)}
	}
	kind, err := quant.ParseKind(o.Code)
	if err != nil {
		return err
	}
	if o.Subspaces != 0 && kind != quant.KindPQ {
		return &OptionError{Fields: []string{"Subspaces"}, Value: o.Subspaces, Reason: fmt.Sprintf("a setting of the pq code, not of %s", kind)}
	}
	return nil
}
