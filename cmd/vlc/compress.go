package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/enctrace"
	"github.com/vlc-embed/vlc/internal/regfile"
	"github.com/vlc-embed/vlc/quant"
)

func runCompress(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compress", flag.ContinueOnError)
	out := fs.String("o", "", "output index `file` (default: INPUT with the extension .vlc)")
	dim := fs.Int("dim", 0, "dimension of a raw .f16 input (checked against .npy and .fvecs)")
	bits := fs.Int("bits", 8, "bits per dimension of the residual codes: 1, 2, 4 or 8")
	codeName := fs.String("code", "auto", "residual code: rotated, pq (learned codebooks: better recall at 1-4 bits up to 128 dimensions, slower to build and search, 256*dim bytes more), sq8, or auto (pq where it measured better at the size asked, else rotated; -subspaces means pq)")
	ratio := fs.Float64("ratio", 0, "pick the largest code whose index fits in this `fraction` of the float16 size (instead of -bits): the most bits, or for pq the most subspaces")
	subspaces := fs.Int("subspaces", 0, "pq only, instead of -bits: bytes of code per vector, 1 to the dimension (-bits b means ceil(dim*b/8))")
	anchors := fs.Int("anchors", 0, "anchors (inverted lists); 0 picks about sqrt(n)")
	metric := fs.String("metric", "l2", "distance: l2, ip or cosine")
	backend := fs.String("backend", "auto", "training backend: auto or "+strings.Join(device.Backends(), ", "))
	devices := fs.String("devices", "", "train on several devices of the backend, the points split between them (the same index as one device): all, or device numbers such as 0,1 (a number twice: two shares on one device, for tests)")
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives a byte-identical index")
	maxIter := fs.Int("max-iter", 0, fmt.Sprintf("annealing iterations at most (0: the default, %d)", anneal.DefaultMaxIter))
	quiet := fs.Bool("quiet", false, "no progress bar and no summary")
	idsFile := fs.String("ids", "", "ids of the input's vectors, one a line, in row order: the whole file's, or with -rows the range's (default: the row numbers)")
	payloads := fs.String("payloads", "", "payloads of the input's vectors, a JSON Lines `file` (one JSON value a line, in row order)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the compression to `file` (go tool pprof)")
	anchorsFrom := fs.String("anchors-from", "", "encode with the model (anchors, code, list parameters) of this `file`, a model file (vlc model), an index or a store, without training: indexes encoded under one model merge (vlc merge) into what one encode of all their rows gives")
	rowsFlag := fs.String("rows", "", "compress only the input's rows START:END (END excluded; either may be left out); the index numbers them from 0")
	trainSample := fs.Int("train-sample", 0, fmt.Sprintf("rows training learns from, evenly spaced through the input, before every row is assigned and encoded (0: on a GPU every row that fits in its memory, on the CPU %d per anchor)", vlc.DefaultSamplePerAnchor))
	replace := fs.Bool("replace", false, "write over a store at the output (an index that took adds or deletes, holding vectors no input has); an index file compress wrote is replaced without it")
	deviceMemory := fs.String("device-memory", "", "GPU memory to size the work to, e.g. 8GiB (default: what is free): the anchors' state, then the training sample and the assignment's windows; larger point sets stream through in batches")
	pos, err := parse(fs, args, []string{"INPUT"}, stdout)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["bits"] {
		*bits = 0 // the library's default, unless -ratio or -subspaces sizes the code
	}
	if *anchorsFrom != "" && !set["metric"] {
		*metric = "" // the model's
	}
	start, end, err := parseRows(*rowsFlag)
	if err != nil {
		return err
	}
	devMem, err := parseBytes(*deviceMemory)
	if err != nil {
		return fmt.Errorf("-device-memory: %w", err)
	}
	input := pos[0]
	if *out == "" {
		*out = strings.TrimSuffix(input, filepath.Ext(input)) + ".vlc"
	}

	var bars *progress
	if !*quiet {
		bars = newProgress(stderr, *maxIter, isTerminal(stderr))
	}
	stop, err := startProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	opt := vlc.Options{
		Dim: *dim, Bits: *bits, Ratio: *ratio, Subspaces: *subspaces, Code: *codeName, Anchors: *anchors, Metric: *metric,
		Backend: *backend, Devices: *devices, Seed: *seed, MaxIter: *maxIter,
		AnchorsFrom: *anchorsFrom, Start: start, End: end, TrainSample: *trainSample, DeviceMemory: devMem, Replace: *replace,
	}
	if *idsFile != "" {
		if opt.IDs, err = readIDs(*idsFile); err != nil {
			return err
		}
	}
	if *payloads != "" {
		if opt.Payloads, err = readPayloads(*payloads); err != nil {
			return err
		}
	}
	if bars != nil {
		opt.Progress, opt.AssignProgress, opt.EncodeProgress = bars.training, bars.assigning, bars.encoding
	}
	peak := sampleMemory()
	enctrace.Printf("compress trace: the process ran %v before compressing\n", time.Since(processStart).Round(time.Millisecond))
	sum, err := vlc.Compress(ctx, input, *out, opt)
	bars.finish()
	rss, rssOK := peak()
	if oe := (*vlc.OptionError)(nil); errors.As(err, &oe) {
		return errors.New(oe.Message(flagName))
	}
	if err != nil {
		return err
	}
	if !*quiet {
		printSummary(stderr, input, *out, *anchorsFrom, devMem, sum, rss, rssOK)
	}
	return nil
}

// printSummary tells what compress did and where the time and memory went.
func printSummary(stderr io.Writer, input, out, anchorsFrom string, devMem int64, sum *vlc.Summary, rss int64, rssOK bool) {
	conv := "stopped at -max-iter"
	if sum.Converged {
		conv = "converged"
	}
	fmt.Fprintf(stderr, "compressed %s -> %s\n", input, out)
	fmt.Fprintf(stderr, "  vectors       %d x %d\n", sum.N, sum.Dim)
	fmt.Fprintf(stderr, "  anchors       %d\n", sum.Anchors)
	fmt.Fprintf(stderr, "  codes         %s, metric %s\n", codeText(sum), sum.Metric)
	fmt.Fprintf(stderr, "  backend       %s\n", sum.Backend)
	switch {
	case anchorsFrom != "":
		fmt.Fprintf(stderr, "  model         %s (no training)\n", anchorsFrom)
	case sum.TrainRows < sum.N:
		fmt.Fprintf(stderr, "  trained on    %d of the %d rows (evenly spaced), then every row assigned\n", sum.TrainRows, sum.N)
	}
	if anchorsFrom == "" {
		fmt.Fprintf(stderr, "  iterations    %d (%s)\n", sum.Iterations, conv)
	}
	fmt.Fprintf(stderr, "  energy        %.6g (mean squared distance to anchors)\n", sum.Energy)
	fmt.Fprintf(stderr, "  index         %d bytes, %.1f bytes/vector\n", sum.IndexBytes, sum.BytesPerVector)
	fmt.Fprintf(stderr, "  size ratio    %.3f of float16 (%d bytes)\n", sum.SizeRatio, 2*sum.N*sum.Dim)
	assign := ""
	if sum.AssignTime > 0 {
		assign = fmt.Sprintf(", assigning every row %s", sum.AssignTime.Round(time.Millisecond))
	}
	train := fmt.Sprintf(", training %s", sum.TrainTime.Round(time.Millisecond))
	if anchorsFrom != "" {
		train = "" // the model's
	}
	fmt.Fprintf(stderr, "  time          %s (input %s%s%s, encoding on %s and writing %s)\n", sum.Total.Round(time.Millisecond),
		sum.ReadTime.Round(time.Millisecond), train, assign, sum.Encoder, sum.EncodeTime.Round(time.Millisecond))
	if tt := sum.TrainTimes; anchorsFrom == "" {
		ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
		fmt.Fprintf(stderr, "  training      loading %s, k-means++ %s, %d steps %s, maintenance %s, final assign %s\n",
			ms(tt.Load), ms(tt.Seed), sum.Iterations, ms(tt.Steps), ms(tt.Maintain), ms(tt.Final))
	}
	if len(sum.Split.Shares) > 1 {
		fmt.Fprintf(stderr, "  training on   %d devices, %d passes:\n", len(sum.Split.Shares), sum.Split.Passes)
		splitDelta(device.SplitReport{Shares: make([]device.ShareReport, len(sum.Split.Shares))}, sum.Split).print(stderr, "                ")
	}
	if wt := sum.WriteTimes; wt.Build > 0 {
		spill := ""
		if sum.SpillDir != "" {
			spill = fmt.Sprintf(" (the codes kept in files in %s: twice their size is over a quarter of the available memory)", sum.SpillDir)
		}
		fmt.Fprintf(stderr, "  encoding      %s, writing the file %s%s\n", wt.Build.Round(time.Millisecond), wt.Write.Round(time.Millisecond), spill)
	}
	if len(sum.EncodeShares) > 1 {
		parts := make([]string, len(sum.EncodeShares))
		for i, sh := range sum.EncodeShares {
			parts[i] = fmt.Sprintf("device %d %s (%d entries)", sh.Device, sh.Time.Round(time.Millisecond), sh.Entries)
		}
		fmt.Fprintf(stderr, "  on devices    %s\n", strings.Join(parts, ", "))
	}
	if rssOK {
		fmt.Fprintf(stderr, "  peak memory   %s anonymous (RssAnon, sampled every %s)\n", mib(rss), memorySampleEvery)
	}
	if sum.DevicePeak > 0 {
		limit := "no cap"
		if devMem > 0 {
			limit = "cap " + mib(devMem)
		}
		fmt.Fprintf(stderr, "  device memory %s at most (%s)\n", mib(sum.DevicePeak), limit)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// parseRows reads -rows START:END; "" is every row (0, 0).
func parseRows(s string) (start, end int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("-rows %q: want START:END, e.g. 0:1000000", s)
	}
	if a != "" {
		if start, err = strconv.Atoi(a); err != nil || start < 0 {
			return 0, 0, fmt.Errorf("-rows %q: START is not a row number", s)
		}
	}
	if b != "" {
		if end, err = strconv.Atoi(b); err != nil || end <= start {
			return 0, 0, fmt.Errorf("-rows %q: END is not a row number after START", s)
		}
	}
	return start, end, nil
}

// parseBytes reads a size such as 8GiB, 512MiB, 8G or 1000000 (bytes);
// "" is 0.
func parseBytes(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.TrimSpace(strings.ToLower(s[len(num):]))
	mult, ok := map[string]int64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
		"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}[unit]
	v, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || v <= 0 || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q: want a size such as 8GiB, 512MiB or a number of bytes", s)
	}
	return v * mult, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// flagName is compress's flag for an Options field.
func flagName(field string) string {
	if f, ok := map[string]string{"Bits": "-bits", "Ratio": "-ratio", "Subspaces": "-subspaces", "Anchors": "-anchors", "MaxIter": "-max-iter", "Devices": "-devices",
		"TrainSample": "-train-sample", "DeviceMemory": "-device-memory", "Code": "-code", "Metric": "-metric", "Start": "-rows START", "End": "-rows END", "Dim": "-dim", "AnchorsFrom": "-anchors-from"}[field]; ok {
		return f
	}
	return field
}

// progress shows training as a bar of iterations, finished at the
// iteration training stopped at (convergence comes before the limit) and
// left on its line; then the assignment of every row after training on a
// sample, and encoding, as bars of vectors with the time left, cleared at
// the end for the summary. Redraws are throttled: encoding reports after
// every list. Where stderr is not a terminal (a log), a phase that has
// run for plainEvery prints a line, with the time left, every plainEvery
// (short runs print only their summary).
type progress struct {
	w        io.Writer
	tty      bool
	train    *progressbar.ProgressBar
	bar      *progressbar.ProgressBar // the assign or encode bar showing
	phase    string
	lastIter int
	start    time.Time // of the phase
	printed  time.Time // the last line in plain mode
}

const plainEvery = 10 * time.Second

func newProgress(w io.Writer, maxIter int, tty bool) *progress {
	if maxIter == 0 {
		maxIter = anneal.DefaultMaxIter
	}
	p := &progress{w: w, tty: tty, start: time.Now(), printed: time.Now()}
	if tty {
		p.train = progressbar.NewOptions(maxIter,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("training"),
			progressbar.OptionShowCount(),
			progressbar.OptionThrottle(50*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
	}
	return p
}

func (p *progress) training(it anneal.Iteration) {
	p.lastIter = it.Iter
	if !p.tty {
		if time.Since(p.printed) >= plainEvery {
			p.printed = time.Now()
			fmt.Fprintf(p.w, "training: iteration %d, T=%.3f, energy %.5g\n", it.Iter, it.Temperature, it.Energy)
		}
		return
	}
	p.train.Describe(fmt.Sprintf("training (T=%.3f, energy %.5g)", it.Temperature, it.Energy))
	p.train.Set(it.Iter)
}

func (p *progress) assigning(done, total int) { p.vectors("assigning", done, total) }
func (p *progress) encoding(done, total int)  { p.vectors("encoding", done, total) }

// vectors shows a phase that counts vectors.
func (p *progress) vectors(phase string, done, total int) {
	if p.phase != phase {
		if p.bar != nil {
			p.bar.Finish()
		}
		p.phase, p.start, p.printed = phase, time.Now(), time.Now()
		if p.tty {
			if p.lastIter > 0 {
				p.train.Describe("trained")
				p.train.ChangeMax(max(p.lastIter, 1))
				p.train.Finish()
				p.lastIter = -1 // finished
			}
			p.bar = progressbar.NewOptions(total,
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(phase),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(50*time.Millisecond),
				progressbar.OptionClearOnFinish())
		}
	}
	if p.tty {
		p.bar.Set(done)
		return
	}
	if done > 0 && time.Since(p.printed) >= plainEvery {
		p.printed = time.Now()
		el := time.Since(p.start)
		left := time.Duration(float64(el) * float64(total-done) / float64(done))
		fmt.Fprintf(p.w, "%s: %d of %d vectors (%.0f%%), %s elapsed, about %s left\n", phase, done, total, 100*float64(done)/float64(total),
			el.Round(time.Second), left.Round(time.Second))
	}
}

// finish ends whichever bar is showing; p may be nil (no progress).
func (p *progress) finish() {
	switch {
	case p == nil || !p.tty || p.lastIter == 0 && p.bar == nil: // nothing drawn
	case p.bar != nil:
		p.bar.Finish()
	default:
		p.train.Exit() // training failed or was interrupted: keep its line
	}
}

// codeText describes the code a compress wrote, as vlc info does.
func codeText(sum *vlc.Summary) string {
	kind, _ := quant.ParseKind(sum.Code) // a name Compress returned
	return quant.Spec{Kind: kind, Dim: sum.Dim, Bits: sum.Bits, Subspaces: sum.Subspaces}.String()
}

// startProfile starts a Go CPU profile into path (none for ""); the
// returned function stops it and closes the file.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	if err := regfile.CheckOutput(path); err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
