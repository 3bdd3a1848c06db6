package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/eval"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/errs"
	"github.com/vlc-embed/vlc/vecfile"
)

// registerGraph adds the graph's flags to search and eval.
func (f *searchFlags) registerGraph(fs *flag.FlagSet) {
	fs.IntVar(&f.ef, "ef", 0, fmt.Sprintf("where the index holds a graph (vlc graph), walk it with a beam of this width (0: %d); the lists are scanned instead when -nprobe is given without -ef", graph.DefaultEf))
	fs.IntVar(&f.scanLists, "scan-lists", 0, "with a graph, also start each walk from every row of the query's this many nearest lists, scored by the graph's own codes (0: none): -seed-probe's effect without the index's codes")
	fs.IntVar(&f.seedProbe, "seed-probe", 0, "with a graph, also start each walk from the index's own search of this many lists (0: none): what keeps the walk in the query's cluster where clusters lie far apart (graph/README.md), at the cost of that search")
}

// hasGraph reports whether the file at path holds a graph, reading its
// header alone; false for a file that does not open as a container.
func hasGraph(path string) bool {
	f, err := format.Open(path, format.OpenOptions{})
	if err != nil {
		return false
	}
	defer f.Close()
	_, ok := f.Section(graph.SectionKind)
	return ok
}

// isStore reports whether path is a store's manifest, not an index file.
func isStore(path string) bool {
	ix, err := index.Open(path, index.Options{})
	if err == nil {
		ix.Close()
	}
	return errors.Is(err, index.ErrNotIndex)
}

// useGraph decides whether a search of path walks its graph through
// graph.Searcher: where the file holds one, unless -nprobe was given
// without -ef (the lists), the search runs on a device (the lists: the
// graph's walk is the CPU's), or filters (the store's search, which
// walks the graph with the filter: storeWalk). An -ef for an index
// without a graph, or with a device, is an error. A store is searched
// through vlc.Open (storeWalk decides there), or, for one segment on a
// device or in eval, through its segment file (useGraph again with that
// file).
func (f *searchFlags) useGraph(fs *flag.FlagSet, path string, filtered bool) (bool, error) {
	set := setFlags(fs)
	switch {
	case f.ef < 0:
		return false, fmt.Errorf("%w: -ef %d: want 0 (the default width) or more", errs.ErrArgument, f.ef)
	case f.seedProbe < 0:
		return false, fmt.Errorf("%w: -seed-probe %d: want 0 (no seeds) or more", errs.ErrArgument, f.seedProbe)
	case f.scanLists < 0:
		return false, fmt.Errorf("%w: -scan-lists %d: want 0 (none) or more", errs.ErrArgument, f.scanLists)
	}
	explicit := set["ef"] || set["seed-probe"] || set["scan-lists"]
	if !hasGraph(path) {
		switch {
		case explicit && isStore(path) && f.backend != "cpu":
			return false, fmt.Errorf("%w: -ef, -seed-probe and -scan-lists walk the graph on the CPU: leave out -backend %s, or those", errs.ErrArgument, f.backend)
		case explicit && !isStore(path):
			return false, fmt.Errorf("%w: -ef, -seed-probe or -scan-lists: %s holds no graph (vlc graph -base FILE %s builds one)", errs.ErrArgument, path, path)
		}
		return false, nil
	}
	switch {
	case explicit && f.backend != "cpu":
		return false, fmt.Errorf("%w: -ef, -seed-probe and -scan-lists walk the graph on the CPU: leave out -backend %s, or those", errs.ErrArgument, f.backend)
	case f.backend != "cpu" || filtered:
		return false, nil
	case set["nprobe"] && !explicit:
		return false, nil
	}
	return true, nil
}

// setFlags is the names of the flags given.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set
}

// storeWalk sets the graph's options of a search of the store (or index
// file) at path through vlc.Open, by useGraph's rules: its segments'
// graphs are walked (Ef, SeedProbe, ScanLists) unless -nprobe was given without
// -ef, or the search runs on a device; an -ef, -seed-probe or -scan-lists
// for a store whose segments hold no graph is an error. It reports
// whether the search walks.
func (f *searchFlags) storeWalk(fs *flag.FlagSet, path string, in vlc.Info, opt *vlc.SearchOptions) (bool, error) {
	set := setFlags(fs)
	explicit := set["ef"] || set["seed-probe"] || set["scan-lists"]
	graphs := slices.ContainsFunc(in.Segments, func(s vlc.SegmentInfo) bool { return s.Graph })
	switch {
	case !graphs && explicit:
		return false, fmt.Errorf("%w: -ef, -seed-probe or -scan-lists: no segment of %s holds a graph (vlc graph -base FILE INDEX builds one into an index file)", errs.ErrArgument, path)
	case graphs && explicit && f.backend != "cpu":
		return false, fmt.Errorf("%w: -ef, -seed-probe and -scan-lists walk the graph on the CPU: leave out -backend %s, or those", errs.ErrArgument, f.backend)
	case !graphs || f.backend != "cpu" || set["nprobe"] && !explicit:
		opt.Ef, opt.SeedProbe, opt.ScanLists = -1, 0, 0
		return false, nil
	}
	opt.Ef, opt.SeedProbe, opt.ScanLists = f.ef, f.seedProbe, f.scanLists
	return true, nil
}

// graphSearcher opens the graph of o's index.
func (f *searchFlags) graphSearcher(ix *index.Index) (*graph.Searcher, error) {
	g, err := graph.Open(ix)
	if err != nil {
		return nil, err
	}
	return &graph.Searcher{Index: ix, Graph: g, Ef: f.ef, SeedProbe: f.seedProbe, ScanLists: f.scanLists}, nil
}

// searchGraph is vlc search walking the index's graph: the queries
// searched on all cores, hits farther than radius (when above 0)
// dropped, printed as the lists' hits are.
func searchGraph(ctx context.Context, path string, sf *searchFlags, radius float32, out *hitWriter) error {
	o, err := sf.open(path)
	if err != nil {
		return err
	}
	defer o.Close()
	s, err := sf.graphSearcher(o.ix)
	if err != nil {
		return err
	}
	hits, err := s.SearchBatch(ctx, o.q, sf.options(o.rr, sf.k))
	if err != nil {
		return err
	}
	if radius > 0 {
		for i, hs := range hits {
			kept := hs[:0]
			for _, h := range hs {
				if h.Distance <= radius {
					kept = append(kept, h)
				}
			}
			hits[i] = kept
		}
	}
	return writeIndexHits(o, hits, out)
}

// sweepGraph measures s's graph at every width of the sweep (seeded as
// -seed-probe says), adding the rows to rows and printing them as they
// come; it returns the curve for the plot.
func sweepGraph(ctx context.Context, s sweepIndex, sf *searchFlags, sw *sweepFlags, rr, q *vecfile.Matrix, gt [][]int, multi, asJSON bool, tw *sweepTable, rows *[]sweepRow) (plotCurve, error) {
	c := plotCurve{name: s.name + " graph"}
	if rr != nil {
		c.name += " +rerank"
	}
	gs, err := sf.graphSearcher(s.ix)
	if err != nil {
		return c, err
	}
	for _, ef := range sw.efList {
		gs.Ef = ef
		res, err := eval.Measure(ctx, gs, q, gt, eval.Options{Search: sf.options(rr, sf.k), MinTime: sweepMinTime})
		if err != nil {
			return c, err
		}
		row := sweepRow{Result: res, EF: gs.Width(max(sf.k, 10))}
		if multi {
			row.Index = s.name
		}
		*rows = append(*rows, row)
		c.points = append(c.points, res)
		if !asJSON {
			if err := tw.row(row); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}
