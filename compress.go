package vlc

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	TrainRows       int           // rows training learned from (Options.TrainSample); 0 under Options.AnchorsFrom
	DevicePeak      int64         // the most device memory a GPU backend used (beyond its context), in bytes; 0 on the CPU
	BytesPerVector  float64       // index bytes / n, everything included
	SizeRatio       float64       // index bytes / (n * dim * 2), i.e. against float16
	ReadTime        time.Duration // opening and checking the input, opening the backend
	TrainTime       time.Duration
	AssignTime      time.Duration // assigning every row after training on a sample, or under AnchorsFrom
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
	release, err := claimOutput(ctx, output, opt.Replace)
	if err != nil {
		return nil, err
	}
	defer func() { release(err == nil) }()
	mat, err := vecfile.Open(input, vecfile.Options{Dim: opt.Dim})
	if err != nil {
		return nil, err
	}
	defer mat.Close()
	lo, hi := opt.Start, opt.End
	if hi == 0 {
		hi = mat.Len()
	}
	if lo >= hi || hi > mat.Len() {
		return nil, fmt.Errorf("%s: %w: rows %d to %d asked, the file has %d", input, index.ErrArgument, lo, hi, mat.Len())
	}
	if len(opt.IDs) == mat.Len() && hi-lo < mat.Len() {
		opt.IDs = opt.IDs[lo:hi] // the whole file's ids: the range's
	}
	if len(opt.Payloads) == mat.Len() && hi-lo < mat.Len() {
		opt.Payloads = opt.Payloads[lo:hi]
	}
	src := source{name: input, rows: rowRange{mat, lo, hi - lo}, first: lo, keys: opt.IDs, payloads: opt.Payloads,
		checkRows: func(nonZero bool) error { return zeroRows(mat.CheckRows(lo, hi, nonZero)) }}
	if f16, ok := mat.Float16(); ok {
		src.f16 = f16[lo*mat.Dim() : hi*mat.Dim()]
	}
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
	if opt.AnchorsFrom == "" { // else the model sets them
		if opt.Bits == 0 && opt.Ratio == 0 && opt.Subspaces == 0 {
			opt.Bits = 8
		}
		if opt.Metric == "" {
			opt.Metric = "l2"
		}
	}
	if opt.Metric != "" {
		if _, err := index.ParseMetric(opt.Metric); err != nil {
			return opt, log, err
		}
	}
	if output == "" { // a store's segment (Retrain): the store checks it
		return opt, log, nil
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
	first       int        // the file's number of rows[0], for errors
	f16         []uint16   // the rows when the input holds exactly them as float16, else nil
	checkFinite func() error
	// checkRows, where set, is checkFinite that, with nonZero, also
	// refuses zero rows (ErrZeroVector), in the same pass: an input file's.
	checkRows func(nonZero bool) error
	keys      []string // nil: rows named by number
	payloads  [][]byte // nil: none
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
	var model *index.Model
	m := opt.Anchors
	if opt.AnchorsFrom != "" {
		var err error
		if model, err = loadModel(opt.AnchorsFrom, d, opt); err != nil {
			return nil, err
		}
		m, metric = model.Lists(), model.Meta.Metric
	}
	if m == 0 {
		m = anneal.DefaultAnchors(n)
	}
	if n < m && model == nil {
		return nil, fmt.Errorf("%s: %w: %d vectors, %d anchors", input, anneal.ErrTooFewPoints, n, m)
	}
	code, err := newCode(opt, model, n, d, m)
	if err != nil {
		return nil, err
	}
	spec := code.Spec()
	if err := src.check(metric); err != nil {
		return nil, err
	}

	rows := src.rows
	normalise := metric == index.Cosine
	if normalise {
		rows = normalized{src.rows}
	}
	dev, skipped, err := anneal.OpenDevices(opt.Backend, opt.Devices)
	for _, s := range skipped {
		log.Info("backend skipped", "reason", s)
	}
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	free := int64(-1) // what the points may take on the device, where it says
	if lim, ok := dev.(anneal.MemoryLimiter); ok {
		if opt.DeviceMemory > 0 {
			// The device sizes its datasets to the cap less the
			// anchors' state, which comes first.
			points := pointMemory(opt.DeviceMemory, m, d)
			if points < opt.DeviceMemory/4 {
				return nil, &OptionError{Fields: []string{"DeviceMemory"}, Value: opt.DeviceMemory,
					Reason: fmt.Sprintf("too small: %d anchors of dimension %d take %d MiB of it on the device", m, d, (opt.DeviceMemory-points)>>20)}
			}
			if err := lim.SetMemoryLimit(points); err != nil {
				return nil, err
			}
		}
		if f, ok := lim.FreeMemory(); ok {
			free = f // within the cap, which left the anchors' state out
			if opt.DeviceMemory == 0 {
				free = pointMemory(f, m, d)
			}
		}
	}
	sample := trainRows(opt, n, d, m, free)
	if sample < m && model == nil {
		field, value := "TrainSample", any(opt.TrainSample)
		if opt.TrainSample == 0 && opt.DeviceMemory > 0 {
			field, value = "DeviceMemory", opt.DeviceMemory
		}
		return nil, &OptionError{Fields: []string{field}, Value: value, Reason: fmt.Sprintf("leaves %d training rows, fewer than the %d anchors", sample, m)}
	}
	log.Debug("training", "backend", dev.Name(), "n", n, "dim", d, "anchors", m, "sample", sample)

	sum := &Summary{N: n, Dim: d, Anchors: m, Bits: spec.Bits, Subspaces: spec.Subspaces, BitsPerDim: spec.BitsPerDim(),
		Code: spec.Kind.String(), Metric: metric.String(), Backend: dev.Name(), Encoder: "host", TrainRows: sample}
	sum.ReadTime = time.Since(start)
	plan := index.Plan{
		Rows: rows, Progress: opt.EncodeProgress, Keys: src.keys, Payloads: src.payloads, SpillDir: filepath.Dir(output),
		Meta: index.Meta{Code: uint32(spec.Kind), Bits: uint32(spec.Bits), Subspaces: uint32(spec.Subspaces), Metric: metric, Seed: opt.Seed,
			Flags: ipFlag(metric, spec.Kind)},
	}
	trainStart := time.Now()
	written := false
	switch {
	case model != nil:
		// Frozen: the model's anchors, code and list parameters.
		sum.TrainRows = 0
		plan.Meta = model.Meta
		plan.Meta.Flags &^= index.FlagSegment
		if m > n {
			plan.Meta.Flags |= index.FlagSegment // a shard may hold fewer rows than lists
		}
		plan.Anchors, plan.Params, plan.Global = model.Anchors, model.Params, model.Global
		if plan.Assign, sum.Energy, err = assignRows(ctx, dev, src, rows, normalise, model.Anchors, m, window(n, d, sample, src.f16 == nil || normalise), opt.AssignProgress); err != nil {
			return nil, err
		}
		plan.Meta.Energy, plan.Meta.InitEnergy = sum.Energy, 0
		plan.Meta.Iterations, plan.Meta.Converged, plan.Meta.Merged, plan.Meta.Split = 0, 0, 0, 0
		sum.AssignTime = time.Since(trainStart)
	case sample < n:
		// Out of core: train on an evenly spaced sample, then assign
		// every row to the anchors, a window at a time.
		pts, err := points(src, pickRows{rows, sample}, normalise, func(k int) int { return pickRow(k, n, sample) })
		if err != nil {
			return nil, err
		}
		trained, err := anneal.Train(ctx, dev, pts, anneal.Config{M: m, Seed: opt.Seed, MaxIter: opt.MaxIter, Progress: opt.Progress})
		if err != nil {
			return nil, err
		}
		pts = anneal.Points{}
		debug.FreeOSMemory() // the sample's memory, before the windows take theirs
		setTrained(&plan.Meta, trained)
		sum.Iterations, sum.Converged = trained.Iterations, trained.Converged
		plan.Anchors = trained.Anchors
		sum.TrainTime = time.Since(trainStart)
		assignStart := time.Now()
		if plan.Assign, sum.Energy, err = assignRows(ctx, dev, src, rows, normalise, trained.Anchors, m, window(n, d, sample, src.f16 == nil || normalise), opt.AssignProgress); err != nil {
			return nil, err
		}
		plan.Meta.Energy = sum.Energy
		sum.AssignTime = time.Since(assignStart)
	default:
		// Every row trains: the index is written from the Finish
		// callback, while the points are still on the device.
		pts, err := points(src, rows, normalise, nil)
		if err != nil {
			return nil, err
		}
		// The device may encode when it holds exactly the rows the index
		// encodes: float16 input, not normalised.
		exact := src.f16 != nil && !normalise
		_, err = anneal.Train(ctx, dev, pts, anneal.Config{
			M: m, Seed: opt.Seed, MaxIter: opt.MaxIter, Progress: opt.Progress,
			Finish: func(trained *anneal.Model, ds anneal.Dataset) error {
				sum.TrainTime = time.Since(trainStart)
				if err := ctx.Err(); err != nil {
					return err
				}
				setTrained(&plan.Meta, trained)
				sum.Iterations, sum.Converged, sum.Energy = trained.Iterations, trained.Converged, trained.Energy
				plan.Anchors, plan.Assign = trained.Anchors, trained.Assign
				var onDevice bool
				if enc, ok := ds.(quant.DeviceEncoder); ok && exact && spec.Kind == quant.KindRotated {
					plan.Device = recordingEncoder{enc, &onDevice}
				}
				encodeStart := time.Now()
				err := index.WriteContext(ctx, output, plan)
				sum.EncodeTime, written = time.Since(encodeStart), true
				if onDevice {
					sum.Encoder = dev.Name()
				}
				return err
			},
		})
		if err != nil {
			return nil, err
		}
	}
	if !written {
		encodeStart := time.Now()
		if err := index.WriteContext(ctx, output, plan); err != nil {
			return nil, err
		}
		sum.EncodeTime = time.Since(encodeStart)
	}
	if lim, ok := dev.(anneal.MemoryLimiter); ok {
		sum.DevicePeak = lim.PeakMemory()
	}
	st, err := os.Stat(output)
	if err != nil {
		return nil, err
	}
	sum.IndexBytes, sum.BytesPerVector = st.Size(), float64(st.Size())/float64(n)
	sum.SizeRatio = index.SizeRatio(st.Size(), n, d)
	sum.Total = time.Since(start)
	return sum, nil
}

// newCode is the residual code opt asks for (or the model has), for n
// rows of dimension d in m lists.
func newCode(opt Options, model *index.Model, n, d, m int) (quant.Code, error) {
	if model != nil {
		spec := model.Meta.CodeSpec()
		spec.Dim = d
		return quant.New(spec)
	}
	kind, _ := quant.ParseKind(opt.Code) // checked by opt.check
	if opt.autoCode() {
		kind = pickKind(opt, n, d, m)
	}
	switch {
	case opt.Ratio > 0:
		spec, _, err := index.SpecForRatio(n, d, m, kind, opt.Ratio, opt.Seed)
		if err != nil {
			return nil, err
		}
		return quant.New(spec)
	case opt.Subspaces > 0:
		if opt.Subspaces > d {
			return nil, fmt.Errorf("%w: %d subspaces for dimension %d (at most one a dimension)", quant.ErrBits, opt.Subspaces, d)
		}
		return quant.New(quant.Spec{Kind: kind, Dim: d, Subspaces: opt.Subspaces, Seed: opt.Seed})
	}
	return quant.ForBits(kind, opt.Bits, d, opt.Seed)
}

// setTrained records training's statistics in meta.
func setTrained(meta *index.Meta, t *anneal.Model) {
	meta.Iterations, meta.Converged = uint32(t.Iterations), b2u(t.Converged)
	meta.Merged, meta.Split = uint32(t.Merged), uint32(t.Split)
	meta.Energy, meta.InitEnergy = t.Energy, t.InitEnergy
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
