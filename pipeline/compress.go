package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/enctrace"
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
	TrainTimes      anneal.Times     // where TrainTime went
	AssignTime      time.Duration    // assigning every row after training on a sample, or under AnchorsFrom
	EncodeTime      time.Duration    // encoding and writing the index
	WriteTimes      index.WriteTimes // where EncodeTime went: encoding and packing, writing the file
	// SpillDir is the folder where the encoding kept the code arrays in
	// memory-mapped files (index.Plan.SpillDir), "" when they fit in memory.
	SpillDir     string
	Encoder      string             // "host", or the backend that encoded (the rotated code of float16 input on a GPU)
	EncodeShares []device.ShareTime // each device's part of an encode split over several (Device: its place in Options.Devices); nil otherwise
	Total        time.Duration
	// Split is training's record of the shares of a point set split over
	// several devices (Options' devices), when every row trained; zero
	// otherwise.
	Split device.SplitReport
}

// OpenInput opens the vectors in input (.f16 with Options.Dim, .npy or
// .fvecs) as a Source: the rows Options.Start to End, with Options.IDs
// and Payloads (the range's, or the whole file's, of which the range's
// are taken). Close the returned file when the Source is done with.
func OpenInput(input string, opt Options) (Source, io.Closer, error) {
	mat, err := vecfile.Open(input, vecfile.Options{Dim: opt.Dim})
	if errors.Is(err, vecfile.ErrDim) && opt.Dim != 0 {
		return Source{}, nil, &OptionError{Fields: []string{"Dim"}, Value: opt.Dim, Reason: err.Error(), Err: err}
	}
	if err != nil {
		return Source{}, nil, err
	}
	lo, hi := opt.Start, opt.End
	if hi == 0 {
		hi = mat.Len()
	}
	if lo >= hi || hi > mat.Len() {
		mat.Close()
		return Source{}, nil, fmt.Errorf("%s: %w: rows %d to %d asked, the file has %d", input, index.ErrArgument, lo, hi, mat.Len())
	}
	ids, payloads := opt.IDs, opt.Payloads
	if len(ids) == mat.Len() && hi-lo < mat.Len() {
		ids = ids[lo:hi] // the whole file's ids: the range's
	}
	if len(payloads) == mat.Len() && hi-lo < mat.Len() {
		payloads = payloads[lo:hi]
	}
	src := Source{Name: input, Rows: rowRange{mat, lo, hi - lo}, First: lo, Keys: ids, Payloads: payloads,
		CheckRows: func(nonZero bool) error { return zeroRows(mat.CheckRows(lo, hi, nonZero)) }}
	if f16, ok := mat.Float16(); ok {
		src.F16 = f16[lo*mat.Dim() : hi*mat.Dim()]
	}
	return src, mat, nil
}

// Prepare checks opt, sets its defaults and readies output, removing the
// temporary files of interrupted writes there ("": none, a store's
// segment, which the store readies).
func (opt Options) Prepare(output string) (Options, error) {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if err := opt.check(); err != nil {
		return opt, err
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
			return opt, err
		}
	}
	if output == "" { // a store's segment (Retrain): the store checks it
		return opt, nil
	}
	removed, err := index.PrepareWrite(output)
	for _, name := range removed {
		opt.Logger.Info("removed a temporary file left by an interrupted compress", "file", name)
	}
	return opt, err
}

// Source is what a compression trains on and indexes: an input file's
// rows or documents in memory, with their ids and payloads.
type Source struct {
	Name  string     // the input file, or what the rows are, for errors
	Rows  index.Rows // as given (not normalised)
	First int        // the file's number of Rows' row 0, for errors
	F16   []uint16   // the rows when the input holds exactly them as float16, else nil
	// CheckRows refuses the rows a metric cannot index before any work:
	// values not finite and, with nonZero, zero rows (ErrZeroVector), in
	// one pass over a file. nil: the rows were checked already
	// (documents, by CheckDocuments).
	CheckRows func(nonZero bool) error
	Keys      []string // nil: rows named by number
	Payloads  [][]byte // nil: none
}

// Job is one compression: the rows, where the index goes and how it is
// built.
type Job struct {
	Source Source
	Output string // the index file written, atomically
	// Options as Prepare returned them: checked, their defaults set.
	Options Options
	// Model, where set, is what the rows are encoded under, without
	// training (Options.AnchorsFrom's, read by the caller).
	Model *Model
	Start time.Time // when the caller began, for Summary; zero: now
}

// Run compresses job.Source into the index file job.Output in stages, a
// value handed from each to the next: plan (checks, code, devices and
// sample size), train (or the model's anchors), assign (every row to
// the anchors, where training did not see them all), then encode and
// write. The devices are released as soon as they have encoded, while
// the file's last codes are still being written.
func Run(ctx context.Context, job Job) (*Summary, error) {
	if job.Start.IsZero() {
		job.Start = time.Now()
	}
	p, err := plan(job)
	if err != nil {
		return nil, err
	}
	var t *trained
	p.release = sync.OnceFunc(func() {
		if lim, ok := p.dev.(device.MemoryLimiter); ok {
			p.sum.DevicePeak = lim.PeakMemory()
		}
		if t != nil {
			traced("freeing the points on the devices", t.close)
		}
		traced("closing the devices", func() { p.dev.Close() })
	})
	defer p.release()
	tr, err := p.train(ctx)
	t = tr // freed by release, even with an error
	if err != nil {
		return nil, err
	}
	if t.assign == nil {
		if err := p.assign(ctx, t); err != nil {
			return nil, err
		}
	}
	if err := p.write(ctx, t); err != nil {
		return nil, err
	}
	p.release() // or waits for the release the encoding started
	return p.finish()
}

// planned is the plan stage's result: what every later stage needs.
type planned struct {
	job       Job
	opt       Options
	log       *slog.Logger
	n, d, m   int
	sample    int // rows training learns from
	metric    index.Metric
	rows      index.Rows // src.Rows, normalised under cosine
	normalise bool
	spec      quant.Spec
	codeBytes int // a row's code
	dev       device.Device
	sum       *Summary
	// release records the devices' peak memory, frees the trained
	// points and closes the devices, once; later calls wait for the
	// first to end.
	release func()
}

// plan checks the job's rows, ids and payloads, picks the code, opens
// the devices and sizes the training sample to them.
func plan(job Job) (*planned, error) {
	src, opt, model := job.Source, job.Options, job.Model
	log := cmp.Or(opt.Logger, slog.Default()) // Prepare set it; a Job made by hand may not
	metric, _ := index.ParseMetric(opt.Metric)
	n, d := src.Rows.Len(), src.Rows.Dim()
	if src.Keys != nil && len(src.Keys) != n {
		return nil, fmt.Errorf("%s: %w: %d ids for %d vectors", src.Name, index.ErrArgument, len(src.Keys), n)
	}
	if src.Payloads != nil && len(src.Payloads) != n {
		return nil, fmt.Errorf("%s: %w: %d payloads for %d vectors", src.Name, index.ErrArgument, len(src.Payloads), n)
	}
	if src.Keys != nil {
		if err := index.CheckKeys(src.Keys); err != nil {
			return nil, fmt.Errorf("%s: %w", src.Name, err)
		}
	}
	if err := index.CheckPayloads(src.Payloads); err != nil {
		return nil, fmt.Errorf("%s: %w", src.Name, err)
	}
	m := opt.Anchors
	if model != nil {
		if model.Dim != d {
			return nil, fmt.Errorf("%w: the input has dimension %d, the model %s has %d", index.ErrDim, d, model.Path, model.Dim)
		}
		m, metric = model.M, model.Meta.Metric
	}
	if m == 0 {
		m = anneal.DefaultAnchors(n)
	}
	if n < m && model == nil {
		return nil, fmt.Errorf("%s: %w: %d vectors, %d anchors", src.Name, anneal.ErrTooFewPoints, n, m)
	}
	code, err := newCode(opt, model, n, d, m)
	if err != nil {
		return nil, err
	}
	// The rows are checked (a pass over the whole input) while the
	// devices open (a context and the kernels' JIT a GPU).
	checked := make(chan error, 1)
	go func() { checked <- src.check(metric) }()
	p := &planned{job: job, opt: opt, log: log, n: n, d: d, m: m, metric: metric, rows: src.Rows, normalise: metric == index.Cosine, spec: code.Spec(), codeBytes: code.CodeBytes()}
	if p.normalise {
		p.rows = normalized{src.Rows}
	}
	dev, skipped, err := device.OpenDevices(opt.Backend, opt.Devices)
	if cerr := <-checked; cerr != nil { // bad input first: it names the row
		if err == nil {
			dev.Close()
		}
		return nil, cerr
	}
	for _, s := range skipped {
		log.Info("backend skipped", "reason", s)
	}
	if err != nil {
		return nil, err
	}
	p.dev = dev
	if p.sample, err = p.sampleSize(); err != nil {
		dev.Close()
		return nil, err
	}
	log.Debug("training", "backend", dev.Name(), "n", n, "dim", d, "anchors", m, "sample", p.sample)
	spec := p.spec
	p.sum = &Summary{N: n, Dim: d, Anchors: m, Bits: spec.Bits, Subspaces: spec.Subspaces, BitsPerDim: spec.BitsPerDim(),
		Code: spec.Kind.String(), Metric: metric.String(), Backend: dev.Name(), Encoder: "host", TrainRows: p.sample,
		ReadTime: time.Since(job.Start)}
	if model != nil {
		p.sum.TrainRows = 0
	}
	return p, nil
}

// sampleSize caps the device's memory as Options.DeviceMemory says and
// returns how many rows training learns from.
func (p *planned) sampleSize() (int, error) {
	opt, n, d, m := p.opt, p.n, p.d, p.m
	free := int64(-1) // what the points may take on the device, where it says
	if lim, ok := p.dev.(device.MemoryLimiter); ok {
		if opt.DeviceMemory > 0 {
			// The device sizes its datasets to the cap less the
			// anchors' state, which comes first.
			points := pointMemory(opt.DeviceMemory, m, d)
			if points < opt.DeviceMemory/4 {
				return 0, &OptionError{Fields: []string{"DeviceMemory"}, Value: opt.DeviceMemory,
					Reason: fmt.Sprintf("too small: %d anchors of dimension %d take %d MiB of it on the device", m, d, (opt.DeviceMemory-points)>>20)}
			}
			if err := lim.SetMemoryLimit(points); err != nil {
				return 0, err
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
	if sample < m && p.job.Model == nil {
		field, value := "TrainSample", any(opt.TrainSample)
		if opt.TrainSample == 0 && opt.DeviceMemory > 0 {
			field, value = "DeviceMemory", opt.DeviceMemory
		}
		return 0, &OptionError{Fields: []string{field}, Value: value, Reason: fmt.Sprintf("leaves %d training rows, fewer than the %d anchors", sample, m)}
	}
	return sample, nil
}

// trained is the train stage's result: the anchors and the statistics
// the index records and, when every row trained, their assignments and
// the dataset still resident on the device, which may encode them.
type trained struct {
	anchors []float32
	assign  []int32 // nil until every row is assigned
	meta    index.Meta
	params  []byte // the model's list parameters; nil: fitted when encoding
	global  []byte
	ds      device.Dataset // nil unless every row trained
}

func (t *trained) close() {
	if t.ds != nil {
		t.ds.Close()
	}
}

// train learns the anchors: on every row where the sample holds them
// all, else on an evenly spaced sample; or takes the model's.
func (p *planned) train(ctx context.Context) (*trained, error) {
	start := time.Now()
	spec, metric := p.spec, p.metric
	t := &trained{meta: index.Meta{Code: uint32(spec.Kind), Bits: uint32(spec.Bits), Subspaces: uint32(spec.Subspaces),
		Metric: metric, Seed: p.opt.Seed, Flags: ipFlag(metric, spec.Kind)}}
	if model := p.job.Model; model != nil {
		// Frozen: the model's anchors, code and list parameters.
		t.meta = model.Meta
		t.meta.Flags &^= index.FlagSegment
		if p.m > p.n {
			t.meta.Flags |= index.FlagSegment // a shard may hold fewer rows than lists
		}
		t.meta.Energy, t.meta.InitEnergy = 0, 0
		t.meta.Iterations, t.meta.Converged, t.meta.Merged, t.meta.Split = 0, 0, 0, 0
		t.anchors, t.params, t.global = model.Anchors, model.Params, model.Global
		return t, nil
	}
	src := p.job.Source
	cfg := anneal.Config{M: p.m, Seed: p.opt.Seed, MaxIter: p.opt.MaxIter, Progress: p.opt.Progress}
	var model *anneal.Model
	if p.sample < p.n {
		// Out of core: train on an evenly spaced sample; every row is
		// assigned to the anchors afterwards, a window at a time.
		n, sample := p.n, p.sample
		pts, err := points(src, pickRows{p.rows, sample}, p.normalise, func(k int) int { return pickRow(k, n, sample) })
		if err != nil {
			return nil, err
		}
		if model, err = anneal.Train(ctx, p.dev, pts, cfg); err != nil {
			return nil, err
		}
		pts = device.Points{}
		debug.FreeOSMemory() // the sample's memory, before the windows take theirs
	} else {
		pts, err := points(src, p.rows, p.normalise, nil)
		if err != nil {
			return nil, err
		}
		if model, t.ds, err = anneal.TrainResident(ctx, p.dev, pts, cfg); err != nil {
			return nil, err
		}
		t.assign = model.Assign
		p.sum.Energy = model.Energy
		if r, ok := t.ds.(device.SplitReporter); ok {
			p.sum.Split = r.SplitReport()
		}
	}
	setTrained(&t.meta, model)
	t.anchors = model.Anchors
	p.sum.Iterations, p.sum.Converged = model.Iterations, model.Converged
	p.sum.TrainTimes = model.Times
	p.sum.TrainTime = time.Since(start)
	return t, ctx.Err()
}

// assign assigns every row to the trained anchors, a window at a time,
// where training saw a sample (or nothing: a model's anchors).
func (p *planned) assign(ctx context.Context, t *trained) error {
	start := time.Now()
	src := p.job.Source
	w := window(p.n, p.d, p.sample, src.F16 == nil || p.normalise)
	var err error
	if t.assign, p.sum.Energy, err = assignRows(ctx, p.dev, src, p.rows, p.normalise, t.anchors, p.m, w, p.opt.AssignProgress); err != nil {
		return err
	}
	t.meta.Energy = p.sum.Energy
	p.sum.AssignTime = time.Since(start)
	return nil
}

// write encodes every row against its anchor and writes the index: on
// the device when it holds exactly the rows the index encodes (every
// row trained, float16 input, not normalised, the rotated code), else on
// the host.
func (p *planned) write(ctx context.Context, t *trained) error {
	src := p.job.Source
	plan := index.Plan{
		Rows: p.rows, Progress: p.opt.EncodeProgress, Keys: src.Keys, Payloads: src.Payloads, SpillDir: spillDir(p.job.Output, p.n, p.codeBytes),
		Meta: t.meta, Anchors: t.anchors, Assign: t.assign, Params: t.params, Global: t.global,
	}
	var onDevice bool
	if enc, ok := t.ds.(device.RotatedEncoder); ok && src.F16 != nil && !p.normalise && p.spec.Kind == quant.KindRotated {
		// Once the devices have encoded, they are released on a
		// goroutine of their own while the sink writes the last codes.
		plan.Device = recordingEncoder{enc, &onDevice, func() { go p.release() }}
	}
	plan.Times = &p.sum.WriteTimes
	p.sum.SpillDir = plan.SpillDir
	start := time.Now()
	enctrace.Printf("compress trace: encoding starts %v after the start\n", start.Sub(p.job.Start).Round(time.Millisecond))
	if err := index.WriteContext(ctx, p.job.Output, plan); err != nil {
		return err
	}
	p.sum.EncodeTime = time.Since(start)
	if onDevice {
		p.sum.Encoder = p.dev.Name()
		if st, ok := t.ds.(device.ShareTimer); ok {
			p.sum.EncodeShares = st.EncodeShares()
		}
	}
	return nil
}

// finish completes the summary with the index's size (after release,
// which recorded the devices' peak).
func (p *planned) finish() (*Summary, error) {
	sum := p.sum
	st, err := os.Stat(p.job.Output)
	if err != nil {
		return nil, err
	}
	sum.IndexBytes, sum.BytesPerVector = st.Size(), float64(st.Size())/float64(p.n)
	sum.SizeRatio = index.SizeRatio(st.Size(), p.n, p.d)
	sum.Total = time.Since(p.job.Start)
	return sum, nil
}

// newCode is the residual code opt asks for (or the model has), for n
// rows of dimension d in m lists.
func newCode(opt Options, model *Model, n, d, m int) (quant.Code, error) {
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
// the points stream from the host), and calls done once it has: the
// devices have no more work.
type recordingEncoder struct {
	device.RotatedEncoder
	used *bool
	done func()
}

func (e recordingEncoder) EncodeRotated(c device.RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte) error {
	err := e.RotatedEncoder.EncodeRotated(c, anchors, ids, offsets, codes, params)
	e.record(err)
	return err
}

func (e recordingEncoder) EncodeRotatedStream(c device.RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte, ready func(lo, hi int)) error {
	err := device.EncodeRotatedStream(e.RotatedEncoder, c, anchors, ids, offsets, codes, params, ready)
	e.record(err)
	return err
}

func (e recordingEncoder) record(err error) {
	*e.used = err == nil
	if err == nil {
		e.done()
	}
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

// traced runs f, and with VLC_ENCODE_TRACE set prints how long it took
// to standard error: what a compress spends past its summary's total.
func traced(what string, f func()) {
	start := time.Now()
	f()
	enctrace.Printf("compress trace: %s took %v\n", what, time.Since(start).Round(time.Millisecond))
}
