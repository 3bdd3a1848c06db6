package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/errs"
)

// runGraph is vlc graph: a graph built over an index's rows on the CPU
// and written into the index file (section GRPH), replacing the file
// atomically.
func runGraph(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("graph", flag.ContinueOnError)
	base := fs.String("base", "", "the vectors `file` the index was built from (.f16, .npy or .fvecs), row for row: the graph's neighbours are chosen by their exact distances")
	degree := fs.Int("degree", 32, "the most neighbours a row keeps (R)")
	alpha := fs.Float64("alpha", 1.1, "the pruning's factor, at least 1: above 1 keeps some long edges")
	nprobe := fs.Int("nprobe", 8, "find each row's candidate neighbours with the index's own search of this many lists (0: measure every pair of rows, n^2 distances)")
	out := fs.String("o", "", "write the index with its graph to `file` (default: replace INDEX)")
	quiet := fs.Bool("quiet", false, "print nothing on success")
	segment := fs.Int("segment", 0, "for a store: the segment (as vlc info lists them, from 0, the trained one) to build a graph for, committed as a new segment file; -base is then read by id (row i: the vector of id i)")
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	switch {
	case *base == "":
		return fmt.Errorf("-base is required: the vectors the index was built from")
	case *degree < 1 || *degree > 1024:
		return fmt.Errorf("%w: -degree %d: want 1 to 1024", errs.ErrArgument, *degree)
	case !(*alpha >= 1) || *alpha > 1e30:
		return fmt.Errorf("%w: -alpha %v: want a number of at least 1", errs.ErrArgument, *alpha)
	case *nprobe < 0:
		return fmt.Errorf("%w: -nprobe %d: want 0 or more", errs.ErrArgument, *nprobe)
	}
	if isStore(pos[0]) {
		if *out != "" {
			return fmt.Errorf("%w: -o %s: a store's graph goes into a new segment file of the store", errs.ErrArgument, *out)
		}
		return graphStore(ctx, pos[0], *base, *segment, graph.BuildOptions{Degree: *degree, Alpha: float32(*alpha), NProbe: *nprobe}, *quiet, stdout)
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
	start := time.Now()
	g, err := graph.Build(ctx, ix, rows, graph.BuildOptions{Degree: *degree, Alpha: float32(*alpha), NProbe: *nprobe})
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	built := time.Since(start)
	if err := graph.WriteFile(ctx, dst, ix, g); err != nil {
		return err
	}
	if *quiet {
		return nil
	}
	adj, codes := g.Size()
	f16 := float64(g.Float16Size())
	fmt.Fprintf(stdout, "wrote %s: graph of %d rows, degree %d (alpha %g, candidates from %s), built in %.2f s\n",
		dst, g.Len(), g.Degree(), *alpha, candidatesFrom(*nprobe), built.Seconds())
	st, err := os.Stat(dst)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  size        adjacency %.3f + node codes %.3f of float16 (%d + %d bytes); the file %.3f (%d bytes)\n",
		float64(adj)/f16, float64(codes)/f16, adj, codes, float64(st.Size())/f16, st.Size())
	return nil
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
