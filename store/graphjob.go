package store

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"

	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
)

// The graph job (Policy.GraphAt) gives a segment of at least GraphAt live
// rows that has no graph one: graph.Build over the segment's file as a
// version holds it, from the rows' decoded vectors, written with the
// file's sections to a pending file (graph.WriteFile), outside the
// store's lock; then, under it, the pending file takes a new segment name
// in place of the segment's file, as BuildGraph's output does.
//
//   - Rows. A segment's file never changes (a change writes a new file
//     under a new name), and the graph is over every row of the file, so
//     it holds for the segment for as long as the newest version names
//     that file. The commit looks the file up by name in the newest
//     version; where it is gone (merged, compacted, retrained, vacuumed,
//     given a graph by another process) the job is dropped
//     (errSuperseded) and the next plan looks at what replaced it.
//   - Deletions. Rows deleted before or during the build stay in the
//     graph as waypoints: its walks go through them and the search's
//     filter (the deleted rows, as every store search has it) keeps them
//     from the hits (graph.go). The commit keeps the newest version's
//     deleted rows of the segment as they are. A segment mostly deleted
//     is rewritten without them by a vacuum merge, and its graph with it.
//   - Vectors. The store keeps no original vectors, so the neighbours are
//     chosen by distances between the rows' decoded vectors (what their
//     codes give back, index.Index.Vector): a graph somewhat worse than
//     one from the originals (BuildGraph, vlc graph -base), measured in
//     graph/README.md ("A store's graphs").
//   - Order. plan puts training and merges first: a graph is built only
//     for a segment no merge is due to replace.

// graphDue returns a segment that should get a graph under p and has
// none, or -1.
func (snap *snapshot) graphDue(p Policy) int {
	if p.GraphAt <= 0 {
		return -1
	}
	for i, s := range snap.segs {
		live := s.ix.Len() - int(snap.deleted[i].GetCardinality())
		if s.graph == nil && live >= p.GraphAt && graph.Supported(s.ix) == nil {
			return i
		}
	}
	return -1
}

// buildGraph builds the graph of the job's segment and writes the
// segment's file with it to the pending file.
func (ix *Store) buildGraph(ctx context.Context, j *job) error {
	snap := j.from
	s := snap.segs[j.inputs[0]].ix
	rows := &decodedRows{ix: s}
	g, err := graph.Build(ctx, s, rows, snap.policy().graphOptions())
	if err := rows.failed(); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	if jobHook != nil {
		jobHook(j.kind, "computed")
	}
	j.rows = s.Len()
	return graph.WriteFile(ctx, j.pending, s, g)
}

// commitGraph installs a graph job's output in the newest version, in
// place of its segment's file, where that version still names the file.
func (ix *Store) commitGraph(ctx context.Context, j *job) error {
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer w.end()
	newest := w.snap
	if newest.lone() {
		return errSuperseded
	}
	src := j.from.segs[j.inputs[0]]
	n := -1
	for i, s := range newest.segs {
		if s.file == src.file {
			n = i
		}
	}
	// Segment names are never used twice, so the same name is the same
	// file: the same rows the graph was built over.
	if n < 0 || newest.segs[n].ix.Len() != j.rows || !os.SameFile(newest.segs[n].info, src.info) {
		return errSuperseded
	}
	v, name, out, err := w.installPending(j.pending)
	if err != nil {
		return err
	}
	seg := newSegment(out, name)
	// The version's searches will walk the graph: it must open (every
	// field and neighbour checked) before the manifest names it.
	if out.Len() != j.rows {
		err = fmt.Errorf("%s: %w: %d rows written, the segment holds %d", out.Path(), index.ErrCorrupt, out.Len(), j.rows)
	} else {
		err = seg.openGraph()
	}
	if err == nil && seg.graph == nil {
		err = fmt.Errorf("%s: %w: no graph written", out.Path(), index.ErrCorrupt)
	}
	if err != nil {
		out.Close()
		closeUnshared(v.segs)
		return err
	}
	v.segs[n] = seg
	v.man.Segments[n].File = name
	// The rows stay where they are, but a merge begun before this commit
	// finds its input's file gone: a change of layout makes it start
	// again (commitJob) rather than take the rows for deleted, which
	// would write them as deleted copies beside this file (no row lost,
	// but a vacuum's work; TestMergeAfterGraphCommit).
	v.man.Layout++
	return w.commit(v)
}

// decodedRows gives a segment's rows as their codes decode them
// (index.Rows for graph.Build); a row that does not decode is NaN, which
// Build refuses, and failed returns the error.
type decodedRows struct {
	ix    *index.Index
	mu    sync.Mutex
	first error
}

func (d *decodedRows) Len() int { return d.ix.Len() }
func (d *decodedRows) Dim() int { return d.ix.Dim() }

func (d *decodedRows) Row(i int, dst []float32) []float32 {
	dst = dst[:d.ix.Dim()]
	if _, err := d.ix.Vector(i, dst); err != nil {
		d.mu.Lock()
		if d.first == nil {
			d.first = fmt.Errorf("row %d: %w", i, err)
		}
		d.mu.Unlock()
		nan := float32(math.NaN())
		for j := range dst {
			dst[j] = nan
		}
	}
	return dst
}

func (d *decodedRows) failed() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.first
}

// jobHook, when set (by tests), is called by a background job with its
// kind and a stage: "computed" once a graph is built, before it is
// written; "written" once the job's output is in its pending file,
// before the commit.
var jobHook func(kind, stage string)
