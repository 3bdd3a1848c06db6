package main

import (
	"context"
	"flag"
	"fmt"

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

// useGraph decides whether a search of path walks its graph: where the
// file holds one, unless -nprobe was given without -ef (the lists), or
// the search runs on a device or filters (the lists: the graph's walk is
// the CPU's and has no filters). An -ef for an index without a graph, or
// with those, is an error.
func (f *searchFlags) useGraph(fs *flag.FlagSet, path string, filtered bool) (bool, error) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case f.ef < 0:
		return false, fmt.Errorf("%w: -ef %d: want 0 (the default width) or more", errs.ErrArgument, f.ef)
	case f.seedProbe < 0:
		return false, fmt.Errorf("%w: -seed-probe %d: want 0 (no seeds) or more", errs.ErrArgument, f.seedProbe)
	}
	explicit := set["ef"] || set["seed-probe"]
	if !hasGraph(path) {
		if explicit {
			return false, fmt.Errorf("%w: -ef or -seed-probe: %s holds no graph (vlc graph -base FILE %s builds one)", errs.ErrArgument, path, path)
		}
		return false, nil
	}
	switch {
	case explicit && f.backend != "cpu":
		return false, fmt.Errorf("%w: -ef walks the graph on the CPU: leave out -backend %s, or -ef", errs.ErrArgument, f.backend)
	case explicit && filtered:
		return false, fmt.Errorf("%w: -filter scans the lists: leave out -ef, or -filter", errs.ErrArgument)
	case f.backend != "cpu" || filtered:
		return false, nil
	case set["nprobe"] && !explicit:
		return false, nil
	}
	return true, nil
}

// graphSearcher opens the graph of o's index.
func (f *searchFlags) graphSearcher(ix *index.Index) (*graph.Searcher, error) {
	g, err := graph.Open(ix)
	if err != nil {
		return nil, err
	}
	return &graph.Searcher{Index: ix, Graph: g, Ef: f.ef, SeedProbe: f.seedProbe}, nil
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
