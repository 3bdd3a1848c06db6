package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/errs"
)

// runGraph is vlc graph: a graph built over an index's rows and written
// into the index file (section GRPH), replacing the file atomically. With
// -backend the candidates come from the index's search on a GPU (one
// batched search of every row); with cuda the measuring, the pruning and
// the refinement's searches run there too (-prune-on), the same bytes;
// the rest of the build runs on the CPU.
func runGraph(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("graph", flag.ContinueOnError)
	base := fs.String("base", "", "the vectors `file` the index was built from (.f16, .npy or .fvecs), row for row: the graph's neighbours are chosen by their exact distances")
	degree := fs.Int("degree", 32, "the most neighbours a row keeps (R)")
	alpha := fs.Float64("alpha", 1.1, "the pruning's factor, at least 1: above 1 keeps some long edges")
	nprobe := fs.Int("nprobe", 8, "find each row's candidate neighbours with the index's own search of this many lists (0: measure every pair of rows, n^2 distances)")
	bits := fs.Int("bits", 0, "a split code: the graph codes every row itself at this many bits (5 to 8) against the index's anchors and rotation, walks by the top 4 bits of each level and scores its best rows again by all of them (0: the index's own codes)")
	compact := fs.Bool("compact", false, "store each row's neighbours sorted and delta-coded in the fewest bits its gaps need, rather than in -degree slots of fixed width (with -at: the store's background graphs)")
	candidates := fs.Int("candidates", 0, "candidate neighbours a row's first neighbours are pruned from (0: twice -degree)")
	startsPerList := fs.Int("starts-per-list", 8, "rows of each list a walk may start from, spread over it (farthest first): where lists hold many clusters far apart (high dimensions), enough to give each cluster one, such as 128")
	passes := fs.Int("passes", 1, "passes that choose every row's neighbours again from a search of the graph so far (0: none, the pruned candidates alone)")
	var sf searchFlags
	fs.StringVar(&sf.backend, "backend", "cpu", "where to search for the candidates: cpu, or a GPU (cuda, webgpu) holding the index in its memory, every row a query of one batched search, or auto (cuda, then webgpu, then cpu); cuda also measures the candidates, prunes and runs the refinement's searches (-prune-on), the same graph bytes; the rest of the build runs on the CPU")
	fs.StringVar(&sf.devices, "devices", "", "with -backend, spread the index over several devices of the backend: all, or device numbers such as 0,1")
	fs.StringVar(&sf.spread, "spread", "queries", "with -devices, how the index is spread over them: queries (each device the whole index, a share of each batch) or lists (each device a share of the lists)")
	out := fs.String("o", "", "write the index with its graph to `file` (default: replace INDEX)")
	pruneOn := fs.String("prune-on", "device", "with -backend: where the candidates are measured and pruned and the refinement pass searches: device (the GPU, where its backend can; the same graph bytes as the CPU's) or cpu")
	quiet := fs.Bool("quiet", false, "print nothing on success")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the command (the build, or a store's due graphs) to `file` (go tool pprof)")
	progress := fs.Bool("progress", false, "print each stage of the build on stderr as it ends (an index file)")
	segment := fs.Int("segment", 0, "for a store: the segment (as vlc info lists them, from 0, the trained one) to build a graph for, committed as a new segment file; -base is then read by id (row i: the vector of id i)")
	at := fs.Int("at", 0, "instead of -base: set the store's policy (an index file becomes a store) to give every segment of at least this many live rows a graph, built in the background from the rows' decoded vectors after merges and writes, with -degree, -alpha, -nprobe and -compact; the due graphs are built now. 0 turns the policy off")
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["at"] && *base != "":
		return fmt.Errorf("%w: -at %d and -base both given: -at builds graphs from the rows' decoded vectors, in the background; -base builds one now from the vectors given", errs.ErrArgument, *at)
	case set["at"] && (set["segment"] || set["o"]):
		return fmt.Errorf("%w: -at %d sets the policy of the whole store: no -segment or -o", errs.ErrArgument, *at)
	case set["at"] && *bits != 0:
		return fmt.Errorf("%w: -at %d with -bits: the store's background graphs use the segment's own codes (a split code needs the original vectors, which a store does not keep)", errs.ErrArgument, *at)
	case *bits != 0 && (*bits < 5 || *bits > 8):
		return fmt.Errorf("%w: -bits %d: want 5 to 8, or 0 for the index's own codes", errs.ErrArgument, *bits)
	case set["at"] && *at < 0:
		return fmt.Errorf("%w: -at %d: want the live rows from which a segment gets a graph, or 0 for none", errs.ErrArgument, *at)
	case *base == "" && !set["at"]:
		return fmt.Errorf("-base is required: the vectors the index was built from (or -at, for graphs the store builds itself)")
	case *degree < 1 || *degree > 1024:
		return fmt.Errorf("%w: -degree %d: want 1 to 1024", errs.ErrArgument, *degree)
	case !(*alpha >= 1) || *alpha > 1e30:
		return fmt.Errorf("%w: -alpha %v: want a number of at least 1", errs.ErrArgument, *alpha)
	case *nprobe < 0:
		return fmt.Errorf("%w: -nprobe %d: want 0 or more", errs.ErrArgument, *nprobe)
	case *candidates < 0 || *candidates > device.MaxKeep-1:
		return fmt.Errorf("%w: -candidates %d: want 0 (twice -degree) to %d", errs.ErrArgument, *candidates, device.MaxKeep-1)
	case *passes < 0:
		return fmt.Errorf("%w: -passes %d: want 0 (none) or more", errs.ErrArgument, *passes)
	case *startsPerList < 1 || *startsPerList > 1024:
		return fmt.Errorf("%w: -starts-per-list %d: want 1 to 1024", errs.ErrArgument, *startsPerList)
	case set["at"] && set["starts-per-list"]:
		return fmt.Errorf("%w: -at %d with -starts-per-list: the store's background graphs keep the default starting rows", errs.ErrArgument, *at)
	case *pruneOn != "device" && *pruneOn != "cpu":
		return fmt.Errorf("%w: -prune-on %q: want device or cpu", errs.ErrArgument, *pruneOn)
	}
	if err := sf.checkDevices(); err != nil {
		return err
	}
	stopProfile, err := startProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	onGPU := sf.backend != "cpu" && sf.backend != ""
	if onGPU && *nprobe == 0 {
		return fmt.Errorf("%w: -backend %s finds the candidates with the index's search: give -nprobe 1 or more (0 measures every pair of rows, on the CPU)", errs.ErrArgument, sf.backend)
	}
	opt := graph.BuildOptions{Degree: *degree, Alpha: float32(*alpha), NProbe: *nprobe, Candidates: *candidates, Passes: *passes, Bits: *bits, Compact: *compact, StartsPerList: *startsPerList}
	if *passes == 0 {
		opt.Passes = -1 // BuildOptions' 0 is the default, one pass
	}
	if set["at"] {
		p := graphPolicy{At: *at, Compact: *compact}
		if set["degree"] {
			p.Degree = *degree
		}
		if set["alpha"] {
			p.Alpha = *alpha
		}
		if set["nprobe"] {
			p.NProbe = *nprobe
			if *nprobe == 0 {
				p.NProbe = -1 // every pair
			}
		}
		return setGraphPolicy(ctx, pos[0], p, *quiet, stdout, stderr)
	}
	if isStore(pos[0]) {
		switch {
		case *out != "":
			return fmt.Errorf("%w: -o %s: a store's graph goes into a new segment file of the store", errs.ErrArgument, *out)
		case onGPU:
			return fmt.Errorf("%w: -backend %s: a store's segment builds its graph on the CPU; vlc graph -backend takes an index file", errs.ErrArgument, sf.backend)
		}
		return graphStore(ctx, pos[0], *base, *segment, opt, *quiet, stdout)
	}
	if *segment != 0 {
		return fmt.Errorf("%w: -segment %d: %s is an index file, not a store", errs.ErrArgument, *segment, pos[0])
	}
	dst := *out
	if dst == "" {
		dst = pos[0]
	}
	ix, err := index.Open(pos[0], index.Options{Verify: true})
	if err != nil {
		return err // a store or a model file: the error says which
	}
	defer ix.Close()
	rows, err := openLike(*base, ix.Dim())
	if err == nil && rows.Len() != ix.Len() {
		rows.Close()
		err = fmt.Errorf("%w: %s has %d vectors, the index %d", errs.ErrArgument, *base, rows.Len(), ix.Len())
	}
	if err != nil {
		return fmt.Errorf("-base: %w", err)
	}
	defer rows.Close()
	if _, err := index.PrepareWrite(dst); err != nil {
		return err
	}
	from := candidatesFrom(*nprobe)
	start := time.Now()
	if onGPU {
		di, release, err := sf.onDevice(ix, stderr)
		if err != nil {
			return err
		}
		defer release()
		if di != nil {
			opt.Searcher = di
			from += " on " + sf.device
			if *pruneOn == "device" {
				opt.Device = rowMeter(sf.dev)
			}
		}
	}
	upload := time.Since(start)
	var times graph.BuildTimes
	if *progress {
		if opt.Searcher != nil {
			fmt.Fprintf(stderr, "vlc graph: %s: device %.2f s\n", pos[0], upload.Seconds())
		}
		times.Report = func(stage string, took time.Duration) {
			fmt.Fprintf(stderr, "vlc graph: %s: %s %.2f s\n", pos[0], stage, took.Seconds())
		}
	}
	opt.Times = &times
	g, err := graph.Build(ctx, ix, rows, opt)
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	built := time.Since(start)
	switch {
	case times.Device:
		from += ", measured and pruned there"
	case times.DeviceSkipped != nil:
		from += fmt.Sprintf(", measured and pruned on the CPU (the device could not take the rows: %v)", times.DeviceSkipped)
	case opt.Device != nil:
		from += fmt.Sprintf(", measured and pruned on the CPU (the device's lane sums need a dimension that is a multiple of 8, not %d)", ix.Dim())
	}
	if err := graph.WriteFile(ctx, dst, ix, g); err != nil {
		return err
	}
	written := time.Since(start) - built
	if *progress {
		fmt.Fprintf(stderr, "vlc graph: %s: written %.2f s\n", dst, written.Seconds())
	}
	if *quiet {
		return nil
	}
	adj, codes := g.Size()
	f16 := float64(g.Float16Size())
	var shape string
	if *bits != 0 {
		shape += fmt.Sprintf(", a %d-bit split code", *bits)
	}
	if *compact {
		shape += ", compact lists"
	}
	fmt.Fprintf(stdout, "wrote %s: graph of %d rows, degree %d%s (alpha %g, candidates from %s), built in %.2f s\n",
		dst, g.Len(), g.Degree(), shape, *alpha, from, built.Seconds())
	st, err := os.Stat(dst)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  size        adjacency %.3f + node codes %.3f = %.3f of float16, what a search reads (%d + %d bytes); the file %.3f (%d bytes)\n",
		float64(adj)/f16, float64(codes)/f16, float64(adj+codes)/f16, adj, codes, float64(st.Size())/f16, st.Size())
	fmt.Fprintf(stdout, "  stages      %s; written in %.2f s\n", stageTimes(times, upload, opt.Searcher != nil), written.Seconds())
	return nil
}

// rowMeter is dev's device.RowMeter (a MultiDevice's first device's), or
// nil where it has none.
func rowMeter(dev device.Device) device.RowMeter {
	if md, ok := dev.(*device.MultiDevice); ok {
		dev = md.Devices()[0]
	}
	m, _ := dev.(device.RowMeter)
	return m
}

// stageTimes lists a build's stages and their seconds (graph.BuildTimes),
// first, where the candidates were searched for on a device, the time
// the device took to open and take the index.
func stageTimes(t graph.BuildTimes, upload time.Duration, batched bool) string {
	var b strings.Builder
	sec := func(name string, d time.Duration) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f", name, d.Seconds())
	}
	if batched {
		sec("device", upload)
	}
	sec("rows", t.Rows)
	sec("candidates", t.Candidates)
	if batched {
		fmt.Fprintf(&b, " (search %.2f, waited %.2f)", t.Search.Seconds(), t.Wait.Seconds())
	}
	sec("prune", t.Prune)
	sec("starts", t.Starts)
	sec("reverse", t.Reverse)
	sec("refine", t.Refine)
	sec("connect", t.Connect)
	if t.ConnectSearches > 0 {
		fmt.Fprintf(&b, " (%d rounds, %d searches)", t.ConnectRounds, t.ConnectSearches)
	}
	sec("pack", t.Pack)
	sec("total", t.Total)
	b.WriteString(" s")
	return b.String()
}

func candidatesFrom(nprobe int) string {
	if nprobe == 0 {
		return "every pair of rows"
	}
	return fmt.Sprintf("the index's search of %d lists", nprobe)
}

// graphStore is vlc graph on a store: the graph of one segment, built
// from -base by id (vlc.RowOriginals) and committed as a new segment
// file (Store.BuildGraph).
func graphStore(ctx context.Context, path, base string, segment int, opt graph.BuildOptions, quiet bool, stdout io.Writer) error {
	st, err := vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
	if err != nil {
		return err
	}
	defer st.Close()
	rows, err := openLike(base, st.Dim())
	if err != nil {
		return fmt.Errorf("-base: %w", err)
	}
	defer rows.Close()
	start := time.Now()
	if err := st.BuildGraph(ctx, segment, vlc.RowOriginals(rows), opt); err != nil {
		return err
	}
	if quiet {
		return nil
	}
	in, err := st.Info()
	if err != nil {
		return err
	}
	s := in.Segments[segment]
	fmt.Fprintf(stdout, "wrote %s: segment %d (%d rows) with a graph, %s, built and written in %.2f s\n", path, segment, s.Rows, s.File, time.Since(start).Seconds())
	return nil
}

// graphPolicy is the graph part of a store's policy, as vlc graph -at
// sets it.
type graphPolicy struct {
	At, Degree, NProbe int
	Alpha              float64
	Compact            bool
}

// setGraphPolicy is vlc graph -at: the store's policy, its other fields
// kept, asks for graphs (or none, at 0); then the due work runs.
func setGraphPolicy(ctx context.Context, path string, gp graphPolicy, quiet bool, stdout, stderr io.Writer) error {
	st, err := vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
	if err != nil {
		return err
	}
	defer st.Close()
	in, err := st.Info()
	if err != nil {
		return err
	}
	p := in.Policy
	p.GraphAt, p.GraphDegree, p.GraphAlpha, p.GraphNProbe, p.GraphCompact = gp.At, gp.Degree, gp.Alpha, gp.NProbe, gp.Compact
	start := time.Now()
	if err := st.SetPolicy(ctx, p); err != nil {
		return err
	}
	if err := runMaintain(ctx, st, stderr); err != nil {
		return err
	}
	if quiet {
		return nil
	}
	if in, err = st.Info(); err != nil {
		return err
	}
	if gp.At == 0 {
		fmt.Fprintf(stdout, "%s: no graphs built in the background; %s\n", path, graphCount(in))
		return nil
	}
	fmt.Fprintf(stdout, "%s: graphs for segments of at least %d live rows, built in the background; %s (%.2f s)\n", path, gp.At, graphCount(in), time.Since(start).Seconds())
	return nil
}

// graphCount says how many of a store's segments hold a graph.
func graphCount(in vlc.Info) string {
	n, rows := 0, 0
	for _, s := range in.Segments {
		if s.Graph {
			n++
			rows += s.Rows - s.Deleted
		}
	}
	return fmt.Sprintf("%d of %d segment(s) hold a graph (%d of %d live rows)", n, len(in.Segments), rows, in.Rows)
}
