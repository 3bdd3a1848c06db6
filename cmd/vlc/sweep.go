package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vlc-embed/vlc/eval"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/regfile"
)

// sweepFlags are eval's flags for measuring at several nprobe values.
type sweepFlags struct {
	sweep   bool
	nprobes string // -sweep-nprobe as given
	efs     string // -sweep-ef as given
	plot    string

	list   []int // -sweep-nprobe parsed (each >= 1); nil for the default
	efList []int // -sweep-ef parsed (each >= 1), or defaultSweepEf
}

// defaultSweepEf are the graph's widths a sweep measures by default.
var defaultSweepEf = []int{16, 24, 32, 48, 64, 96, 128}

func (f *sweepFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.sweep, "sweep", false, "evaluate at nprobe 1, 2, 4, ... up to the number of lists (every list) and print one row each; takes several INDEX arguments to compare")
	fs.StringVar(&f.nprobes, "sweep-nprobe", "", "comma-separated nprobe `values` to sweep instead of the default powers of two (implies -sweep)")
	fs.StringVar(&f.plot, "plot", "", "draw recall@10 against QPS into `file` (.png or .svg; implies -sweep)")
	fs.StringVar(&f.efs, "sweep-ef", "", "comma-separated graph widths (-ef) to sweep for an index that holds a graph, instead of 16,24,32,48,64,96,128 (implies -sweep); such an index is swept by nprobe too only with -sweep-nprobe")
}

// on reports whether eval sweeps: -sweep, -sweep-nprobe, -sweep-ef or -plot.
func (f *sweepFlags) on() bool { return f.sweep || f.nprobes != "" || f.efs != "" || f.plot != "" }

// check validates the sweep flags before any work is done.
func (f *sweepFlags) check(fs *flag.FlagSet) error {
	if !f.on() {
		return nil
	}
	nprobeSet, efSet := false, false
	fs.Visit(func(fl *flag.Flag) { nprobeSet, efSet = nprobeSet || fl.Name == "nprobe", efSet || fl.Name == "ef" })
	if nprobeSet {
		return fmt.Errorf("-nprobe sets a single value; with -sweep give the values as -sweep-nprobe 1,4,16")
	}
	if efSet {
		return fmt.Errorf("-ef sets a single value; with -sweep give the values as -sweep-ef 16,32,64")
	}
	f.efList = defaultSweepEf
	if f.efs != "" {
		f.efList = nil
		for _, s := range strings.Split(f.efs, ",") {
			p, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || p < 1 {
				return fmt.Errorf("-sweep-ef %q: %q is not a whole number of at least 1", f.efs, s)
			}
			f.efList = append(f.efList, p)
		}
	}
	if f.plot != "" {
		if _, err := plotFormat(f.plot); err != nil {
			return err
		}
		dir := filepath.Dir(f.plot)
		if st, err := os.Stat(dir); err != nil {
			return fmt.Errorf("-plot %s: %w", f.plot, err)
		} else if !st.IsDir() {
			return fmt.Errorf("-plot %s: %s is not a folder", f.plot, dir)
		}
		if err := regfile.CheckOutput(f.plot); err != nil { // before the sweep
			return fmt.Errorf("-plot: %w", err)
		}
	}
	if f.nprobes != "" {
		for _, s := range strings.Split(f.nprobes, ",") {
			p, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || p < 1 {
				return fmt.Errorf("-sweep-nprobe %q: %q is not a whole number of at least 1", f.nprobes, s)
			}
			f.list = append(f.list, p)
		}
	}
	return nil
}

// sweepMinTime is how long each row of a sweep searches at least: short
// passes over few queries are repeated, so that the speeds of the rows are
// measured, not the noise of starting a pass on all cores.
var sweepMinTime = 100 * time.Millisecond

// sweepRow is one row of a sweep; Index is set (and printed in -json)
// only when several indexes are compared.
type sweepRow struct {
	Index string `json:"index,omitempty"`
	eval.Result
	// EF is the graph's width of a row that walked it (NProbe is then
	// the lists its seeding searched); 0 for a row of the lists.
	EF int `json:"ef,omitempty"`
}

// sweepIndex is one index of a sweep and the name it is shown under.
type sweepIndex struct {
	path, name string
	ix         *index.Index
	graph      bool // the file holds a graph: swept by ef (sweepGraph)
}

// runSweep evaluates every index at every nprobe of the sweep. The
// queries, the re-rank file and the ground truth are opened, read or
// computed once; the rows go to stdout as a table (or a JSON array) and,
// with -plot, into a chart.
func runSweep(ctx context.Context, paths []string, sf *searchFlags, sw *sweepFlags, gtPath, basePath string, asJSON bool, stdout, stderr io.Writer) error {
	o, err := sf.open(paths[0])
	if err != nil {
		return err
	}
	defer o.Close()
	q, rr := o.q, o.rr
	idxs := []sweepIndex{{path: paths[0], ix: o.ix}}
	defer func() {
		for _, s := range idxs[1:] { // the first is o's
			s.ix.Close()
		}
	}()
	for _, p := range paths[1:] {
		ix, err := openFile(p, rr != nil)
		if err != nil {
			return err
		}
		idxs = append(idxs, sweepIndex{path: p, ix: ix})
		if ix.Len() != o.ix.Len() || ix.Dim() != o.ix.Dim() {
			return fmt.Errorf("%s holds %d vectors of dimension %d, %s %d of dimension %d: indexes compared in one sweep must hold the same vectors",
				paths[0], o.ix.Len(), o.ix.Dim(), p, ix.Len(), ix.Dim())
		}
	}
	names := sweepNames(paths)
	for i := range idxs {
		idxs[i].name = names[i]
		idxs[i].graph = hasGraph(idxs[i].ix.Path()) // a store's: its one segment's file
	}
	multi := len(idxs) > 1

	// Ground truth: read once, or computed once per metric from -base.
	gts := map[index.Metric][][]int{}
	groundTruth := func(ix *index.Index) ([][]int, error) {
		m := index.Metric(ix.Meta().Metric)
		if gtPath != "" {
			m = 0 // the file serves every metric
		}
		if gt, ok := gts[m]; ok {
			return gt, nil
		}
		gt, err := groundTruth(gtPath, basePath, q, ix)
		gts[m] = gt
		return gt, err
	}

	tw := newSweepTable(stdout, idxs, sw, multi)
	if !asJSON {
		if err := tw.header(); err != nil {
			return err
		}
	}
	var rows []sweepRow
	var curves []plotCurve
	for _, s := range idxs {
		gt, err := groundTruth(s.ix)
		if err != nil {
			return err
		}
		c := plotCurve{name: s.name}
		if rr != nil {
			c.name += " +rerank"
		}
		nprobes := eval.NProbes(s.ix.Lists(), sw.list)
		if s.graph {
			gc, err := sweepGraph(ctx, s, sf, sw, rr, q, gt, multi, asJSON, tw, &rows)
			if err != nil {
				return err
			}
			curves = append(curves, gc)
			if sw.list == nil {
				nprobes = nil
			}
		}
		for _, np := range nprobes {
			opt := sf.options(rr, sf.k)
			opt.NProbe = np
			res, err := eval.Measure(ctx, s.ix, q, gt, eval.Options{Search: opt, MinTime: sweepMinTime})
			if err != nil {
				return err
			}
			row := sweepRow{Result: res}
			if multi {
				row.Index = s.name
			}
			rows = append(rows, row)
			c.points = append(c.points, res)
			if !asJSON {
				if err := tw.row(row); err != nil {
					return err
				}
			}
		}
		if len(c.points) > 0 {
			curves = append(curves, c)
		}
	}
	if asJSON {
		if err := writeJSONRows(stdout, rows); err != nil {
			return err
		}
	}
	if sw.plot != "" {
		if err := writePlot(sw.plot, o.ix.Len(), o.ix.Dim(), curves); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", sw.plot)
	}
	return nil
}

// sweepNames names each index by its file's base name, or by its path as
// given where two base names are the same.
func sweepNames(paths []string) []string {
	count := map[string]int{}
	for _, p := range paths {
		count[filepath.Base(p)]++
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
		if count[out[i]] > 1 {
			out[i] = p
		}
	}
	return out
}

// sweepTable prints the rows of a sweep in aligned columns as they come.
type sweepTable struct {
	w                 io.Writer
	multi             bool
	graph             bool // an index holds a graph: an ef column
	efW               int
	nameW, nprobeW    int
	recall1W, recallW int
	qpsW, bytesW      int
}

func newSweepTable(w io.Writer, idxs []sweepIndex, sw *sweepFlags, multi bool) *sweepTable {
	t := &sweepTable{w: w, multi: multi, nameW: len("index"), nprobeW: len("nprobe"),
		recall1W: len("recall@1"), recallW: len("recall@10"), qpsW: 9, bytesW: len("bytes/vector")}
	for _, s := range idxs {
		t.nameW = max(t.nameW, len(s.name))
		t.nprobeW = max(t.nprobeW, len(strconv.Itoa(s.ix.Lists())))
		t.graph = t.graph || s.graph
	}
	t.efW = len("ef")
	for _, ef := range sw.efList {
		t.efW = max(t.efW, len(strconv.Itoa(ef)))
	}
	return t
}

func (t *sweepTable) header() error {
	var b strings.Builder
	if t.multi {
		fmt.Fprintf(&b, "%-*s  ", t.nameW, "index")
	}
	fmt.Fprintf(&b, "%*s  ", t.nprobeW, "nprobe")
	if t.graph {
		fmt.Fprintf(&b, "%*s  ", t.efW, "ef")
	}
	fmt.Fprintf(&b, "%*s  %*s  %*s", t.recall1W, "recall@1", t.recallW, "recall@10", t.qpsW, "qps")
	if t.multi {
		fmt.Fprintf(&b, "  %*s", t.bytesW, "bytes/vector")
	}
	_, err := fmt.Fprintln(t.w, b.String())
	return err
}

func (t *sweepTable) row(r sweepRow) error {
	var b strings.Builder
	if t.multi {
		fmt.Fprintf(&b, "%-*s  ", t.nameW, r.Index)
	}
	fmt.Fprintf(&b, "%*d  ", t.nprobeW, r.NProbe)
	if t.graph {
		ef := "-"
		if r.EF > 0 {
			ef = strconv.Itoa(r.EF)
		}
		fmt.Fprintf(&b, "%*s  ", t.efW, ef)
	}
	fmt.Fprintf(&b, "%*.4f  %*.4f  %*.0f", t.recall1W, r.Recall1, t.recallW, r.Recall10, t.qpsW, r.QPS)
	if t.multi {
		fmt.Fprintf(&b, "  %*.1f", t.bytesW, r.BytesPerVector)
	}
	_, err := fmt.Fprintln(t.w, b.String())
	return err
}

// writeJSONRows prints the rows as one JSON array, one object a line.
func writeJSONRows(w io.Writer, rows []sweepRow) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("[\n")
	for i, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		bw.WriteString("  ")
		bw.Write(b)
		if i < len(rows)-1 {
			bw.WriteString(",")
		}
		bw.WriteString("\n")
	}
	bw.WriteString("]\n")
	return bw.Flush()
}
