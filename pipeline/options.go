package pipeline

import (
	"slices"
	"strconv"

	"cmp"
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"
	"log/slog"
	"math"
	"strings"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// Options for Compress. Zero values mean the defaults.
type Options struct {
	Dim   int     // dimension of a raw .f16 input (required there; checked against .npy/.fvecs)
	Bits  int     // bits per dimension of the residual codes: 1, 2, 4 or 8 (default 8)
	Ratio float64 // instead of Bits: the largest code whose index fits in Ratio x the float16 size
	// Code is the residual code: "rotated", "pq" or "sq8"
	// (docs/QUANTIZATION.md); "" or "auto" picks one by pickKind's rule.
	Code string
	// Subspaces, for the pq code and instead of Bits: bytes of code per
	// vector, 1 to the dimension (Bits b means ceil(dim*b/8)).
	Subspaces int
	Anchors   int    // anchors (inverted lists); default about sqrt(n)
	Metric    string // "l2" (default), "ip" or "cosine"
	Backend   string // "auto" (default), "cpu", or a GPU backend built in
	Seed      uint64 // same input, options and seed: byte-identical index
	MaxIter   int    // annealing iterations at most (default anneal.DefaultMaxIter)

	// AnchorsFrom, for Compress, is a model file (index.WriteModel, vlc
	// model), an index or a store whose model the rows are encoded
	// under, without training: its anchors, metric, code (rotation seed,
	// pq codebooks) and list parameters. Rows encoded
	// under one model, apart or together, get the same codes, so their
	// indexes merge (Merge) into what one encode of all of them gives.
	// Bits, Ratio, Subspaces, Code, Metric and Anchors must be left zero
	// or agree with the model.
	AnchorsFrom string
	// Start and End, for Compress, take the input's rows Start to End-1
	// only (End 0: to the last row); the index numbers them from 0. IDs
	// and Payloads, when given, are the range's, or the whole file's (of
	// which the range's are taken).
	Start, End int
	// TrainSample is how many of the rows training learns the anchors
	// from, evenly spaced through the input. 0: on a GPU, every row that
	// fits in its memory (or DeviceMemory), so all of them where they fit;
	// on the CPU, DefaultSamplePerAnchor per anchor, no more than a
	// quarter of the available memory holds. When fewer than all rows
	// train, every row is then assigned to the trained anchors window by
	// window and encoded, so memory is bounded by the sample, not by the
	// input.
	TrainSample int
	// DeviceMemory is, in bytes, the memory a GPU backend sizes its work
	// to (0: what is free): the anchors' state first, then the training
	// sample and the windows of the assignment; point sets larger than
	// what is left stream through in batches. The CPU backend ignores it.
	DeviceMemory int64

	// Devices trains on several devices of the backend at once, the
	// points split between them (device.Multi; the result is one
	// device's bits): "all", or device numbers separated by commas
	// ("0,1"). "" is one device. A number given twice puts two shares on
	// one device (for tests; the CPU is device 0, "0,0,0" three shares).
	Devices string

	// IDs and Payloads, for Compress: the ids and payloads of the input's
	// rows, in row order (nil: rows named by their number, no payloads).
	// Build takes them from its documents.
	IDs      []string
	Payloads [][]byte

	// Replace lets Compress and Build write over a store at the output:
	// an index that took writes (Add, Delete, Compact, Retrain) holds
	// vectors no input file has, so without Replace they refuse it
	// (fs.ErrExist). An index file as Compress or Build wrote it is
	// replaced either way.
	Replace bool

	Logger *slog.Logger // nil: slog.Default()
	// Progress, when set, is called after each training iteration.
	Progress func(anneal.Iteration)
	// EncodeProgress, when set, is called with the vectors encoded so far
	// and their total: once with 0 when encoding starts (training is
	// done), then as lists are encoded (once, at the end, where a GPU
	// encodes them all at once). Calls do not overlap.
	EncodeProgress func(done, total int)
	// AssignProgress, when set, is called with the rows assigned so far
	// and their total after each window of the assignment that follows
	// training on a sample (TrainSample), or encoding under AnchorsFrom.
	AssignProgress func(done, total int)
}

// DefaultSamplePerAnchor is the training rows per anchor when
// Options.TrainSample is 0: k-means on 256 points per centroid places
// them within a few percent of the full set's energy (FAISS samples as
// many by default), and training costs a fixed amount whatever the input.
const DefaultSamplePerAnchor = 256

// OptionError reports Options that Compress refuses before any work. Its
// fields are named as the Options struct names them; Message names them
// another way (the CLI gives its flags' names).
type OptionError struct {
	Fields []string // one field, or the fields that conflict
	Value  any      // the refused value of a single field; nil for a conflict
	Reason string
	Err    error // the cause, where another package refused the value; or nil
}

func (e *OptionError) Error() string { return e.Message(func(f string) string { return f }) }

// Unwrap gives the category every OptionError is in, errs.ErrArgument, and
// the cause where there is one.
func (e *OptionError) Unwrap() []error { return []error{errs.ErrArgument, e.Err} }

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
	case o.TrainSample < 0:
		return &OptionError{Fields: []string{"TrainSample"}, Value: o.TrainSample, Reason: "must be 0 (the default) or more rows"}
	case o.DeviceMemory < 0:
		return &OptionError{Fields: []string{"DeviceMemory"}, Value: o.DeviceMemory, Reason: "must be 0 (what is free) or more bytes"}
	case o.Start < 0 || o.End < 0 || o.End != 0 && o.End <= o.Start:
		return &OptionError{Fields: []string{"Start", "End"}, Reason: fmt.Sprintf("rows %d to %d: want 0 <= Start < End (End 0: to the last row)", o.Start, o.End)}
	}
	if o.Devices != "" {
		if _, err := device.ParseDevices(o.Devices); err != nil {
			return &OptionError{Fields: []string{"Devices"}, Value: o.Devices, Reason: "want all, or device numbers separated by commas (0,1)"}
		}
	}
	if o.AnchorsFrom != "" {
		return nil // the model's code, checked against it in compress
	}
	if o.autoCode() {
		if o.Bits != 0 && !slices.Contains(quant.Bits(quant.KindRotated), o.Bits) {
			return &OptionError{Fields: []string{"Bits"}, Value: o.Bits, Reason: "must be " + oneOf(quant.Bits(quant.KindRotated)), Err: quant.ErrBits}
		}
		return nil
	}
	kind, err := quant.ParseKind(o.Code)
	if err != nil {
		return &OptionError{Fields: []string{"Code"}, Value: o.Code, Reason: "want rotated, pq, sq8 or auto", Err: err}
	}
	if o.Bits != 0 && !slices.Contains(quant.Bits(kind), o.Bits) {
		return &OptionError{Fields: []string{"Bits"}, Value: o.Bits, Reason: fmt.Sprintf("the %s code takes %s", kind, oneOf(quant.Bits(kind))), Err: quant.ErrBits}
	}
	if o.Subspaces != 0 && kind != quant.KindPQ {
		return &OptionError{Fields: []string{"Subspaces"}, Value: o.Subspaces, Reason: fmt.Sprintf("a setting of the pq code, not of %s", kind)}
	}
	return nil
}

// oneOf lists bits settings in increasing order: "1, 2, 4 or 8".
func oneOf(bits []int) string {
	b := slices.Sorted(slices.Values(bits))
	s := make([]string, len(b))
	for i, v := range b {
		s[i] = strconv.Itoa(v)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// autoCode reports whether o leaves the code to pickKind.
func (o Options) autoCode() bool { return o.Code == "" || o.Code == "auto" }

// pickKind is the code for o.Code "" or "auto", for n vectors of dimension
// d in m lists: the one measured to give the better recall at the size
// asked (docs/QUANTIZATION.md, "Which code where"). Recall@10 at the
// plateau nprobe, from that page:
//
//	               deep10k (96 dims)  sift5k-ngt (128)  fashion-mnist (784)
//	4 bits rotated 0.940              0.943             0.975
//	4 bits pq      0.950              0.953             0.973 (4.97 bits)
//	1 bit  rotated 0.622              0.667             0.860
//	ratio 0.2 pq   0.866 (2.42 bits)  0.870 (2.19)      0.958 (3.05; rotated 2 bits 0.926)
//
// On 96-128 dimensions pq leads by 0.01-0.07 wherever its codebooks (256
// x d bytes) leave it about the bits of the rotated code, but not on
// deep2k (2,000 vectors), where they are a quarter of a 4-bit index; on
// 784 it leads only where a -ratio budget buys it half as many bits a
// dimension again as the rotated code's 1, 2, 4 or 8 (3.05 against 2 and
// 1.78 against 1, not 4.97 against 4). So: Subspaces means pq; at -bits b
// <= 4, pq up to 128 dimensions when its index is within 1.1x of the
// rotated one's size; at -ratio, pq when its bits a dimension reach 0.9x
// (up to 128 dimensions) or 1.5x (above) the rotated choice's (4 or
// fewer), or when only pq fits. The rotated code builds about
// 10x faster and searches 1.5-1.8x faster at the plateau; -code picks it.
func pickKind(o Options, n, d, m int) quant.Kind {
	const lowDim, maxPQBits, pqSizeSlack = 128, 4, 1.1
	if o.Subspaces != 0 {
		return quant.KindPQ
	}
	if o.Ratio > 0 {
		rot, _, rerr := index.SpecForRatio(n, d, m, quant.KindRotated, o.Ratio, o.Seed)
		pq, _, perr := index.SpecForRatio(n, d, m, quant.KindPQ, o.Ratio, o.Seed)
		switch {
		case perr != nil:
			return quant.KindRotated // its error names the budget
		case rerr != nil:
			return quant.KindPQ // the only code that fits
		case rot.Bits > maxPQBits:
			return quant.KindRotated
		}
		factor := 1.5
		if d <= lowDim {
			factor = 0.9
		}
		if pq.BitsPerDim() >= factor*float64(rot.Bits) {
			return quant.KindPQ
		}
		return quant.KindRotated
	}
	bits := cmp.Or(o.Bits, 8)
	if bits > maxPQBits || d > lowDim {
		return quant.KindRotated
	}
	rot, err := index.PredictSize(n, m, quant.Spec{Kind: quant.KindRotated, Dim: d, Bits: bits})
	if err != nil {
		return quant.KindRotated // Compress reports the bits refused
	}
	pq, err := index.PredictSize(n, m, quant.Spec{Kind: quant.KindPQ, Dim: d, Bits: bits})
	if err == nil && float64(pq) <= pqSizeSlack*float64(rot) {
		return quant.KindPQ
	}
	return quant.KindRotated
}
