package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/anneal"
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
	backend := fs.String("backend", "auto", "training backend: auto or "+strings.Join(anneal.Backends(), ", "))
	devices := fs.String("devices", "", "train on several devices of the backend, the points split between them (the same index as one device): all, or device numbers such as 0,1 (a number twice: two shares on one device, for tests)")
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives a byte-identical index")
	maxIter := fs.Int("max-iter", 0, fmt.Sprintf("annealing iterations at most (0: the default, %d)", anneal.DefaultMaxIter))
	quiet := fs.Bool("quiet", false, "no progress bar and no summary")
	idsFile := fs.String("ids", "", "ids of the input's vectors, one a line, in row order (default: the row numbers)")
	payloads := fs.String("payloads", "", "payloads of the input's vectors, a JSON Lines `file` (one JSON value a line, in row order)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the compression to `file` (go tool pprof)")
	pos, err := parse(fs, args, []string{"INPUT"}, stdout)
	if err != nil {
		return err
	}
	bitsSet := false
	fs.Visit(func(f *flag.Flag) { bitsSet = bitsSet || f.Name == "bits" })
	if !bitsSet {
		*bits = 0 // the library's default, unless -ratio or -subspaces sizes the code
	}
	input := pos[0]
	if *out == "" {
		*out = strings.TrimSuffix(input, filepath.Ext(input)) + ".vlc"
	}

	var bars *progress
	if !*quiet && isTerminal(stderr) {
		bars = newProgress(stderr, *maxIter)
	}
	stop, err := startProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	opt := vlc.Options{
		Dim: *dim, Bits: *bits, Ratio: *ratio, Subspaces: *subspaces, Code: *codeName, Anchors: *anchors, Metric: *metric,
		Backend: *backend, Devices: *devices, Seed: *seed, MaxIter: *maxIter,
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
		opt.Progress, opt.EncodeProgress = bars.training, bars.encoding
	}
	sum, err := vlc.Compress(ctx, input, *out, opt)
	bars.finish()
	if oe := (*vlc.OptionError)(nil); errors.As(err, &oe) {
		return errors.New(oe.Message(flagName))
	}
	if err != nil {
		return err
	}
	if *quiet {
		return nil
	}
	conv := "stopped at -max-iter"
	if sum.Converged {
		conv = "converged"
	}
	fmt.Fprintf(stderr, "compressed %s -> %s\n", input, *out)
	fmt.Fprintf(stderr, "  vectors       %d x %d\n", sum.N, sum.Dim)
	fmt.Fprintf(stderr, "  anchors       %d\n", sum.Anchors)
	fmt.Fprintf(stderr, "  codes         %s, metric %s\n", codeText(sum), sum.Metric)
	fmt.Fprintf(stderr, "  backend       %s\n", sum.Backend)
	fmt.Fprintf(stderr, "  iterations    %d (%s)\n", sum.Iterations, conv)
	fmt.Fprintf(stderr, "  energy        %.6g (mean squared distance to anchors)\n", sum.Energy)
	fmt.Fprintf(stderr, "  index         %d bytes, %.1f bytes/vector\n", sum.IndexBytes, sum.BytesPerVector)
	fmt.Fprintf(stderr, "  size ratio    %.3f of float16 (%d bytes)\n", sum.SizeRatio, 2*sum.N*sum.Dim)
	fmt.Fprintf(stderr, "  time          %s (input %s, training %s, encoding on %s and writing %s)\n", sum.Total.Round(time.Millisecond),
		sum.ReadTime.Round(time.Millisecond), sum.TrainTime.Round(time.Millisecond), sum.Encoder, sum.EncodeTime.Round(time.Millisecond))
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// flagName is compress's flag for an Options field.
func flagName(field string) string {
	if f, ok := map[string]string{"Bits": "-bits", "Ratio": "-ratio", "Subspaces": "-subspaces", "Anchors": "-anchors", "MaxIter": "-max-iter", "Devices": "-devices"}[field]; ok {
		return f
	}
	return field

}

// progress shows training as a bar of iterations, finished at the
// iteration training stopped at (convergence comes before the limit) and
// left on its line; then encoding as a bar of vectors, cleared at the end
// for the summary. Redraws are throttled: encoding reports after every
// list.
type progress struct {
	w        io.Writer
	train    *progressbar.ProgressBar
	encode   *progressbar.ProgressBar
	lastIter int
}

func newProgress(w io.Writer, maxIter int) *progress {
	if maxIter == 0 {
		maxIter = anneal.DefaultMaxIter
	}
	return &progress{w: w, train: progressbar.NewOptions(maxIter,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("training"),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(50*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))}
}

func (p *progress) training(it anneal.Iteration) {
	p.lastIter = it.Iter
	p.train.Describe(fmt.Sprintf("training (T=%.3f, energy %.5g)", it.Temperature, it.Energy))
	p.train.Set(it.Iter)
}

func (p *progress) encoding(done, total int) {
	if p.encode == nil {
		p.train.Describe("trained")
		p.train.ChangeMax(max(p.lastIter, 1))
		p.train.Finish()
		p.encode = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription("encoding"),
			progressbar.OptionShowCount(),
			progressbar.OptionThrottle(50*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	p.encode.Set(done)
}

// finish ends whichever bar is showing; p may be nil (no bars).
func (p *progress) finish() {
	switch {
	case p == nil || p.lastIter == 0: // no bar, or none drawn yet
	case p.encode != nil:
		p.encode.Finish()
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
