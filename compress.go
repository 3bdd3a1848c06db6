package vlc

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/fault"
	"github.com/vlc-embed/vlc/quant"
	"github.com/vlc-embed/vlc/vecfile"
)

// Summary describes a finished compression.
type Summary struct {
	N, Dim, Anchors int
	Bits            int     // as asked for, or as Ratio chose; 0 for a pq code given by subspaces
	Subspaces       int     // of a pq code; 0 for the others
	BitsPerDim      float64 // code bytes per vector (corrections not counted) * 8 / dim
	Code            string  // the residual code's name
	Metric          string
	Backend         string
	Iterations      int
	Converged       bool
	Energy          float64 // mean squared distance to the final anchors
	IndexBytes      int64
	BytesPerVector  float64       // index bytes / n, everything included
	SizeRatio       float64       // index bytes / (n * dim * 2), i.e. against float16
	ReadTime        time.Duration // opening and checking the input, opening the backend
	TrainTime       time.Duration
	EncodeTime      time.Duration // encoding and writing the index
	Encoder         string        // "host", or the backend that encoded (the rotated code of float16 input on a GPU)
	Total           time.Duration
}

// Compress reads the vectors in input (.f16 with Options.Dim, .npy or
// .fvecs), learns anchors, encodes every vector and writes the index to
// output atomically: an existing file there is replaced only by a complete
// index.
//
// Should another program truncate input while it is read, Compress returns
// an error naming it (vecfile.ErrChanged) rather than ending the process,
// except while a GPU backend copies it (the fault is then in C code).
func Compress(ctx context.Context, input, output string, opt Options) (sum *Summary, err error) {
	defer fault.Catch(&err, debug.SetPanicOnFault(true), input, vecfile.ErrChanged)
	start := time.Now()
	opt, log, err := opt.prepare(output)
	if err != nil {
		return nil, err
	}
	if in, err := os.Stat(input); err == nil {
		if out, err := os.Stat(output); err == nil && os.SameFile(in, out) {
			return nil, fmt.Errorf("output %s is the input file: writing the index would destroy the vectors", output)
		}
	}
	mat, err := vecfile.Open(input, vecfile.Options{Dim: opt.Dim})
	if err != nil {
		return nil, err
	}
	defer mat.Close()
	src := source{name: input, rows: mat, checkFinite: mat.CheckFinite, keys: opt.IDs, payloads: opt.Payloads}
	src.f16, _ = mat.Float16()
	return compress(ctx, src, output, opt, log, start)
}

// prepare checks opt, sets its defaults and readies output, removing the
// temporary files of interrupted writes there.
func (opt Options) prepare(output string) (Options, *slog.Logger, error) {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := opt.check(); err != nil {
		return opt, log, err
	}
	if opt.Bits == 0 && opt.Ratio == 0 && opt.Subspaces == 0 {
		opt.Bits = 8
	}
	if opt.Metric == "" {
		opt.Metric = "l2"
	}
	if _, err := index.ParseMetric(opt.Metric); err != nil {
		return opt, log, err
	}
	removed, err := index.PrepareWrite(output)
	for _, name := range removed {
		log.Info("removed a temporary file left by an interrupted compress", "file", name)
	}
	return opt, log, err
}

// source is what compress trains on and indexes: an input file's rows or
// documents in memory, their ids and payloads.
type source struct {
	name        string     // the input file, for errors
	rows        index.Rows // as given (not normalised)
	f16         []uint16   // the rows when the input holds exactly them as float16, else nil
	checkFinite func() error
	keys        []string // nil: rows named by number
	payloads    [][]byte // nil: none
}

// compress trains on src and writes the index to output (opt checked,
// its defaults set, output prepared).
func compress(ctx context.Context, src source, output string, opt Options, log *slog.Logger, start time.Time) (*Summary, error) {
	metric, _ := index.ParseMetric(opt.Metric)
	n, d := src.rows.Len(), src.rows.Dim()
	input := src.name
	if src.keys != nil && len(src.keys) != n {
		return nil, fmt.Errorf("%s: %w: %d ids for %d vectors", input, index.ErrArgument, len(src.keys), n)
	}
	if src.payloads != nil && len(src.payloads) != n {
		return nil, fmt.Errorf("%s: %w: %d payloads for %d vectors", input, index.ErrArgument, len(src.payloads), n)
	}
	if src.keys != nil {
		if err := index.CheckKeys(src.keys); err != nil {
			return nil, fmt.Errorf("%s: %w", input, err)
		}
	}
	if err := index.CheckPayloads(src.payloads); err != nil {
		return nil, fmt.Errorf("%s: %w", input, err)
	}
	m := opt.Anchors
	if m == 0 {
		m = anneal.DefaultAnchors(n)
	}
	if n < m {
		return nil, fmt.Errorf("%s: %w: %d vectors, %d anchors", input, anneal.ErrTooFewPoints, n, m)
	}
	kind, _ := quant.ParseKind(opt.Code) // checked by opt.check
	if opt.autoCode() {
		kind = pickKind(opt, n, d, m)
	}
	var code quant.Code
	var err error
	switch {
	case opt.Ratio > 0:
		var spec quant.Spec
		if spec, _, err = index.SpecForRatio(n, d, m, kind, opt.Ratio, opt.Seed); err == nil {
			code, err = quant.New(spec)
		}
	case opt.Subspaces > 0:
		if opt.Subspaces > d {
			return nil, fmt.Errorf("%w: %d subspaces for dimension %d (at most one a dimension)", quant.ErrBits, opt.Subspaces, d)
		}
		code, err = quant.New(quant.Spec{Kind: kind, Dim: d, Subspaces: opt.Subspaces, Seed: opt.Seed})
	default:
		code, err = quant.ForBits(kind, opt.Bits, d, opt.Seed)
	}
	if err != nil {
		return nil, err
	}
	spec := code.Spec()
	if err := src.checkFinite(); err != nil {
		return nil, err
	}

	rows := src.rows
	if metric == index.Cosine {
		rows = normalized{src.rows}
	}
	pts, err := points(src, rows, metric == index.Cosine)
	if err != nil {
		return nil, err
	}

	dev, skipped, err := anneal.OpenDevices(opt.Backend, opt.Devices)
	for _, s := range skipped {
		log.Info("backend skipped", "reason", s)
	}
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	log.Debug("training", "backend", dev.Name(), "n", n, "dim", d, "anchors", m)

	readTime := time.Since(start)
	trainStart := time.Now()
	// The device may encode when it holds exactly the rows the index
	// encodes: float16 input, not normalised.
	exact := src.f16 != nil && metric != index.Cosine
	var trainTime, encodeTime time.Duration
	var model *anneal.Model
	encoder := "host"
	_, err = anneal.Train(ctx, dev, pts, anneal.Config{
		M: m, Seed: opt.Seed, MaxIter: opt.MaxIter,
		Progress: opt.Progress,
		// Write the index while the points are still on the device.
		Finish: func(mdl *anneal.Model, ds anneal.Dataset) error {
			trainTime, model = time.Since(trainStart), mdl
			if err := ctx.Err(); err != nil {
				return err
			}
			plan := index.Plan{
				Rows: rows, Anchors: model.Anchors, Assign: model.Assign, Progress: opt.EncodeProgress,
				Keys: src.keys, Payloads: src.payloads,
				Meta: index.Meta{
					Code: uint32(spec.Kind), Bits: uint32(spec.Bits), Subspaces: uint32(spec.Subspaces), Metric: metric, Seed: opt.Seed,
					Flags:      ipFlag(metric, spec.Kind),
					Iterations: uint32(model.Iterations), Converged: b2u(model.Converged),
					Merged: uint32(model.Merged), Split: uint32(model.Split),
					Energy: model.Energy, InitEnergy: model.InitEnergy,
				},
			}
			var onDevice bool
			if enc, ok := ds.(quant.DeviceEncoder); ok && exact && spec.Kind == quant.KindRotated {
				plan.Device = recordingEncoder{enc, &onDevice}
			}
			encodeStart := time.Now()
			err := index.WriteContext(ctx, output, plan)
			encodeTime = time.Since(encodeStart)
			if onDevice {
				encoder = dev.Name()
			}
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(output)
	if err != nil {
		return nil, err
	}
	removeUnused(output, nil) // the segments of a store the new index replaced
	return &Summary{
		N: n, Dim: d, Anchors: m, Bits: spec.Bits, Subspaces: spec.Subspaces, BitsPerDim: spec.BitsPerDim(), Code: kind.String(), Metric: metric.String(), Backend: dev.Name(),
		Iterations: model.Iterations, Converged: model.Converged, Energy: model.Energy,
		IndexBytes: st.Size(), BytesPerVector: float64(st.Size()) / float64(n),
		SizeRatio: index.SizeRatio(st.Size(), n, d),
		ReadTime:  readTime, TrainTime: trainTime, EncodeTime: encodeTime, Encoder: encoder, Total: time.Since(start),
	}, nil
}

// recordingEncoder notes whether the device did encode (it declines when
// the points stream from the host).
type recordingEncoder struct {
	quant.DeviceEncoder
	used *bool
}

func (e recordingEncoder) EncodeRotated(c *quant.Rotated, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte) error {
	err := e.DeviceEncoder.EncodeRotated(c, anchors, ids, offsets, codes, params)
	*e.used = err == nil
	return err
}

// ipFlag writes ip indexes' rotated and pq codes in the inner-product form
// (index.FlagIPCodes), whose estimate errs by |q - a| rather than |q|.
func ipFlag(metric index.Metric, kind quant.Kind) uint32 {
	if metric == index.IP && kind != quant.KindSQ8 {
		return index.FlagIPCodes
	}
	return 0
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
