// Command graphbench builds a graph over a vlc index and prints, for each
// beam width, recall@10 against ground truth and queries per second (the
// queries shared by GOMAXPROCS goroutines, best of -reps passes), one JSON
// line each, like the npm peer script's.
//
//	graphbench -index x.vlc -base base.fvecs -query query.fvecs -gt gt.ivecs -maxq 1000 -ef 16,32,64 -rerank
//
// With -filter, the searches allow a seeded random draw of each share of
// the rows (0: no filter, recall against -gt), and recall is against
// exact search over the allowed rows, computed here; -plan lists how the
// graph searches them, or the index's own filtered search (ivf). The
// cases take turns, pass by pass, so that a change in the machine's load
// meets them all.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "graphbench:", err)
		os.Exit(1)
	}
}

func run() error {
	ixPath := flag.String("index", "", "vlc index (rotated code, l2)")
	basePath := flag.String("base", "", "the vectors the index was built from (.fvecs, .npy, .f16)")
	queryPath := flag.String("query", "", "queries")
	gtPath := flag.String("gt", "", "ground truth (.ivecs)")
	maxq := flag.Int("maxq", 0, "use the first maxq queries (0: all)")
	efs := flag.String("ef", "16,32,64,128,256", "beam widths")
	rerank := flag.Bool("rerank", false, "re-rank the best candidates from -base rounded to float16 (a .f16 copy in a temporary folder)")
	rerankCount := flag.Int("rerank-count", 0, "candidates re-ranked (0: ef)")
	starts := flag.Int("starts", 0, "anchors nearest the query whose rows start the walk (0: graph.DefaultStarts)")
	seedProbe := flag.Int("seed-probe", 0, "also start the walk from the index's own search of this many lists (0: none)")
	scanLists := flag.Int("scan-lists", 0, "also start the walk from every row of the query's this many nearest lists, scored by the graph's codes (graph.SearchOptions.ScanLists; 0: none)")
	seedK := flag.Int("seed-k", 0, "rows that search hands the walk (0: ef)")
	reps := flag.Int("reps", 3, "timed passes over the queries (after one untimed); the best counts")
	name := flag.String("name", "", "dataset name for the output")
	shares := flag.String("filter", "0", "shares of the rows allowed, drawn at random, comma-separated (0: no filter)")
	filterSeed := flag.Uint64("filter-seed", 1, "seed of the -filter draw")
	planNames := flag.String("plan", "auto", "filtered search, comma-separated: auto, walk, scan (the graph's plans), ivf (the index's search with the filter)")
	fixedWidth := flag.Bool("fixed-width", false, "filtered walk: walk at the -ef widths as given (graph.SearchOptions.FilterEf), not widened")
	ivfProbe := flag.Int("ivf-nprobe", 8, "-plan ivf: lists probed before the filter widens the probe")
	var opt graph.BuildOptions
	flag.IntVar(&opt.Degree, "degree", 0, "most neighbours per row (0: 32)")
	alpha := flag.Float64("alpha", 0, "robust pruning's alpha (0: 1.1)")
	flag.IntVar(&opt.Candidates, "candidates", 0, "candidates per row before pruning (0: 2*degree)")
	flag.IntVar(&opt.NProbe, "nprobe", 0, "find candidates with the index's search at this nprobe (0: exact, n^2)")
	flag.IntVar(&opt.Passes, "passes", 0, "refinement passes (0: 1, negative: none)")
	flag.IntVar(&opt.StartsPerList, "starts-per-list", 0, "starting rows kept per list, spread over it (0: 8)")
	flag.IntVar(&opt.BuildEf, "build-ef", 0, "beam width of the refinement searches (0: 64)")
	flag.BoolVar(&opt.Decoded, "decoded", false, "score by the decoded code rather than the estimate")
	flag.IntVar(&opt.Bits, "bits", 0, "split code: the graph codes the rows at this width (5..8), walks by the top 4 bits, re-ranks by all (0: the index's codes)")
	flag.BoolVar(&opt.Compact, "compact", false, "compact adjacency: neighbour lists sorted and delta-coded")
	buildDecoded := flag.Bool("build-decoded", false, "choose the neighbours by the rows' decoded vectors (what their codes give back), as a store's background graph job does, rather than by -base")
	filePath := flag.String("file", "", "write -index with the graph to this `file` (graph.WriteFile), check that the graph read from it (graph.Open, mapped) finds the hits of the one built for every query at every -ef, and search that one")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the searches (not the build) to this file")
	buildProfile := flag.String("cpuprofile-build", "", "write a CPU profile of the build to this file")
	batched := flag.Bool("batched", false, "find the candidates with one batched search of the index (graph.BuildOptions.Searcher; needs -nprobe)")
	flag.Parse()
	opt.Alpha = float32(*alpha)

	ix, err := index.Open(*ixPath, index.Options{})
	if err != nil {
		return err
	}
	defer ix.Close()
	base, err := vecfile.Open(*basePath, vecfile.Options{})
	if err != nil {
		return err
	}
	defer base.Close()
	queries, err := vecfile.Open(*queryPath, vecfile.Options{})
	if err != nil {
		return err
	}
	defer queries.Close()
	nq := queries.Len()
	if *maxq > 0 {
		nq = min(nq, *maxq)
	}
	qs := make([][]float32, nq)
	for i := range qs {
		qs[i] = queries.Row(i, make([]float32, queries.Dim()))
	}
	cases, err := filterCases(*shares, *planNames, base, qs, *filterSeed)
	if err != nil {
		return err
	}
	for _, c := range cases {
		if c.allowed != nil {
			continue
		}
		gt, err := vecfile.ReadIvecs(*gtPath)
		if err != nil {
			return err
		}
		if len(gt) < nq {
			return fmt.Errorf("%s: %d rows of ground truth for %d queries", *gtPath, len(gt), nq)
		}
		c.gt = gt
	}

	var rerankRows index.Rows
	if *rerank {
		f16Rows, cleanup, err := float16Copy(base)
		if err != nil {
			return err
		}
		defer cleanup()
		rerankRows = f16Rows
	}

	if *buildProfile != "" {
		f, err := os.Create(*buildProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
	}
	var buildRows index.Rows = base
	if *buildDecoded {
		buildRows = decodedRows{ix}
	}
	var times graph.BuildTimes
	opt.Times = &times
	if *batched {
		opt.Searcher = ix
	}
	t0 := time.Now()
	g, err := graph.Build(context.Background(), ix, buildRows, opt)
	if *buildProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	buildS := time.Since(t0).Seconds()
	adjBytes, codeBytes := g.Size()
	f16 := g.Float16Size()
	edges := 0
	for i := range g.Len() {
		edges += len(g.Neighbours(i))
	}
	fmt.Fprintf(os.Stderr, "graphbench: %d x %d, degree %d (mean %.1f), built in %.2f s on %d threads; adjacency %d B, codes %d B (%.3f of float16)\n",
		g.Len(), g.Dim(), g.Degree(), float64(edges)/float64(g.Len()), buildS, runtime.GOMAXPROCS(0), adjBytes, codeBytes, float64(adjBytes+codeBytes)/float64(f16))
	fmt.Fprintf(os.Stderr, "graphbench: stages rows %.2f, candidates %.2f (search %.2f, waited %.2f), prune %.2f, starts %.2f, reverse %.2f, refine %.2f, connect %.2f, pack %.2f s\n",
		times.Rows.Seconds(), times.Candidates.Seconds(), times.Search.Seconds(), times.Wait.Seconds(), times.Prune.Seconds(), times.Starts.Seconds(),
		times.Reverse.Seconds(), times.Refine.Seconds(), times.Connect.Seconds(), times.Pack.Seconds())

	if *filePath != "" {
		fg, closeFile, err := fromFile(ix, g, *filePath, qs, *efs, graph.SearchOptions{K: 10, RerankCount: *rerankCount, Starts: *starts, ScanLists: *scanLists, Rerank: rerankRows})
		if err != nil {
			return err
		}
		defer closeFile()
		g = fg
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, f := range strings.Split(*efs, ",") {
		ef, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-ef: %w", err)
		}
		for _, c := range cases {
			c.sopt = graph.SearchOptions{K: 10, Ef: max(ef, 10), RerankCount: *rerankCount, Starts: *starts, ScanLists: *scanLists, Rerank: rerankRows}
			c.search = g.Search
			if c.allowed != nil {
				c.sopt.Filter, c.sopt.Plan = c.allowed, plans[c.plan]
				if *fixedWidth {
					c.sopt.FilterEf = c.sopt.Ef
				}
			}
			if c.plan == "ivf" {
				iopt := index.SearchOptions{K: 10, NProbe: *ivfProbe, Rerank: rerankRows, Filter: c.sopt.Filter}
				if *rerank {
					iopt.RerankFactor = max(1, cmp.Or(*rerankCount, c.sopt.Ef)/10)
				}
				c.search = func(q []float32, _ graph.SearchOptions) ([]index.Hit, error) { return ix.Search(q, iopt) }
			}
			c.found, c.best, c.reads = make([][]index.Hit, nq), time.Duration(1<<62), graph.Reads{}
		}
		// Pass 0 warms up and samples reads, untimed; the cases take
		// turns, so that a change in the machine's load meets them all.
		for r := 0; r <= *reps; r++ {
			for _, c := range cases {
				if err := c.pass(ix, qs, r == 0, *seedProbe, *seedK); err != nil {
					return err
				}
			}
		}
		for _, c := range cases {
			hit, total := 0, 0
			for i := range nq {
				want := map[int32]bool{}
				for _, id := range c.gt[i][:min(10, len(c.gt[i]))] {
					want[id] = true
				}
				total += len(want)
				for _, h := range c.found[i] {
					if c.allowed != nil && !c.allowed.Allows(h.ID) {
						return fmt.Errorf("query %d: hit row %d is not allowed", i, h.ID)
					}
					if want[int32(h.ID)] {
						hit++
					}
				}
			}
			size := adjBytes + codeBytes
			if *rerank {
				size += f16
			}
			reads := c.reads
			per := func(b int64) float64 { return float64(b) / float64(reads.Searches) }
			out := map[string]any{
				"dataset": *name, "system": "vlc-graph", "index": fmt.Sprintf("graph R=%d %s rerank=%v%s", g.Degree(), describeGraph(ix, opt), *rerank, describeStarts(*seedProbe, *scanLists)),
				"param": map[string]any{"ef": ef, "threads": runtime.GOMAXPROCS(0)}, "recall@10": float64(hit) / float64(total),
				"qps": int(float64(nq) / c.best.Seconds()), "size_ratio": float64(size) / float64(f16), "build_s": buildS,
			}
			if reads.Searches > 0 { // the index's search (-plan ivf) counts none
				out["bytes_per_query"] = map[string]float64{"adjacency": per(reads.Adjacency), "codes": per(reads.Codes), "rerank_f16": per(reads.Rerank)}
			}
			if c.allowed != nil {
				out["filter"] = map[string]any{"share": c.share, "allowed": c.allowed.Count(), "plan": c.plan, "fixed_width": *fixedWidth}
				if reads.Searches > 0 {
					out["rows_scored"] = per(reads.Codes) / float64(codeBytes/int64(g.Len()))
				} else {
					out["system"], out["index"] = "vlc-ivf", fmt.Sprintf("%s nprobe=%d rerank=%v", describe(ix), *ivfProbe, *rerank)
				}
			}
			line, _ := json.Marshal(out)
			fmt.Println(string(line))
		}
	}
	return nil
}

// fromFile writes ix's file with g to path, opens the graph it holds and
// checks that it finds g's hits for every query at every width of efs
// (opt's other fields as given); it returns that graph and what closes
// its index.
func fromFile(ix *index.Index, g *graph.Graph, path string, qs [][]float32, efs string, opt graph.SearchOptions) (*graph.Graph, func(), error) {
	if err := graph.WriteFile(context.Background(), path, ix, g); err != nil {
		return nil, nil, err
	}
	fix, err := index.Open(path, index.Options{Verify: true})
	if err != nil {
		return nil, nil, err
	}
	fg, err := graph.Open(fix)
	if err != nil {
		fix.Close()
		return nil, nil, err
	}
	for _, f := range strings.Split(efs, ",") {
		ef, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fix.Close()
			return nil, nil, fmt.Errorf("-ef: %w", err)
		}
		opt.Ef = max(ef, 10)
		for i, q := range qs {
			want, err1 := g.Search(q, opt)
			got, err2 := fg.Search(q, opt)
			if err := errors.Join(err1, err2); err != nil || !reflect.DeepEqual(got, want) {
				fix.Close()
				return nil, nil, fmt.Errorf("-file: query %d, ef %d: the graph read finds %v, the one built %v (%v)", i, ef, got, want, err)
			}
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		fix.Close()
		return nil, nil, err
	}
	f16 := float64(g.Float16Size())
	fmt.Fprintf(os.Stderr, "graphbench: wrote %s, %d bytes (%.3f of float16; the index alone %.3f): the graph read from it finds the hits of the one built for all %d queries at ef %s; searching it\n",
		path, st.Size(), float64(st.Size())/f16, ix.SizeRatio(), len(qs), efs)
	return fg, func() { fix.Close() }, nil
}

var readsMu sync.Mutex

func mergeReads(dst, src *graph.Reads) {
	readsMu.Lock()
	defer readsMu.Unlock()
	dst.Searches += src.Searches
	dst.Adjacency += src.Adjacency
	dst.Codes += src.Codes
	dst.Rerank += src.Rerank
}

// float16Copy writes base as float16 to a temporary file and opens it:
// the re-rank then reads 2 bytes a value, as a float16 input would.
func float16Copy(base *vecfile.Matrix) (*vecfile.Matrix, func(), error) {
	dir, err := os.MkdirTemp("", "graphbench")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	rows := make([][]float32, base.Len())
	for i := range rows {
		rows[i] = base.Row(i, make([]float32, base.Dim()))
	}
	path := filepath.Join(dir, "base.f16")
	if err := vecfile.WriteF16(path, rows); err != nil {
		cleanup()
		return nil, nil, err
	}
	m, err := vecfile.Open(path, vecfile.Options{Dim: base.Dim()})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return m, func() { m.Close(); cleanup() }, nil
}

func describeGraph(ix *index.Index, opt graph.BuildOptions) string {
	s := describe(ix)
	if opt.Bits != 0 {
		s = fmt.Sprintf("split %db (walk 4b)", opt.Bits)
	}
	if opt.Compact {
		s += " compact"
	}
	if opt.Alpha != 0 && opt.Alpha != 1.1 {
		s += fmt.Sprintf(" alpha=%g", opt.Alpha)
	}
	if opt.Candidates != 0 {
		s += fmt.Sprintf(" candidates=%d", opt.Candidates)
	}
	if opt.Passes != 0 {
		s += fmt.Sprintf(" passes=%d", opt.Passes)
	}
	return s
}

func describe(ix *index.Index) string {
	m := ix.Meta()
	return fmt.Sprintf("rotated %db", m.Bits)
}

// decodedRows are the index's rows as their codes give them back
// (-build-decoded).
type decodedRows struct{ ix *index.Index }

func (d decodedRows) Len() int { return d.ix.Len() }
func (d decodedRows) Dim() int { return d.ix.Dim() }
func (d decodedRows) Row(i int, dst []float32) []float32 {
	v, err := d.ix.Vector(i, dst[:d.ix.Dim()])
	if err != nil {
		panic(err)
	}
	return v
}

// describeStarts names the walk's extra starting rows, if any, so that
// configurations that differ in them only stay apart in best.py.
func describeStarts(seedProbe, scanLists int) string {
	var b strings.Builder
	if seedProbe > 0 {
		fmt.Fprintf(&b, " seed-probe=%d", seedProbe)
	}
	if scanLists > 0 {
		fmt.Fprintf(&b, " scan-lists=%d", scanLists)
	}
	return b.String()
}
