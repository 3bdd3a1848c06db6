package store

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
)

// BuildGraph builds a graph (graph.Build, on the CPU) over the rows of
// segment seg (Info.Segments' numbering; 0 is the trained one) and
// commits that segment rewritten with it, as a new segment file named as
// a merge's output is: the same rows, codes, ids and payloads, and the
// graph in section GRPH, which later searches walk (SearchOptions.Ef).
// The old file is left to the versions that hold it and removed with the
// last of them, as a merge's inputs are; no file is rewritten in place.
//
// The graph's neighbours are chosen by exact distances between the rows'
// vectors: orig gives them by id (RowOriginals: a row of the input file
// for the rows that are from it, Info.FromInput). A row orig does not
// cover (under RowOriginals, a row added later; a deleted row orig no
// longer has) is placed by its decoded vector; a live row orig refuses
// otherwise is an error. The write lock is held for the whole build,
// so other writes wait for it. A lone index file becomes a store of one
// segment, as with Add (vlc graph writes a lone file's graph into it).
// Policy.GraphAt has the store's background work build graphs itself,
// outside the lock, from the decoded vectors (graphjob.go).
func (ix *Store) BuildGraph(ctx context.Context, seg int, orig Originals, opt graph.BuildOptions) error {
	if orig == nil {
		return fmt.Errorf("%w: BuildGraph needs the original vectors", index.ErrArgument)
	}
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer w.end()
	snap := w.snap
	switch {
	case seg < 0 || seg >= len(snap.segs):
		return fmt.Errorf("%w: segment %d: the store has %d (0 to %d)", index.ErrArgument, seg, len(snap.segs), len(snap.segs)-1)
	case snap.segs[seg].ix.Len() == 0:
		return fmt.Errorf("%w: segment %d holds no rows: a graph needs one", index.ErrArgument, seg)
	}
	rows, err := snap.segmentVectors(seg, orig)
	if err != nil {
		return err
	}
	src := snap.segs[seg].ix
	g, err := graph.Build(ctx, src, rows, opt)
	if err != nil {
		return fmt.Errorf("segment %d: %w", seg, err)
	}
	v, err := w.next()
	if err != nil {
		return err
	}
	name, file := w.newSegmentFile(v)
	err = graph.WriteFile(ctx, file, v.segs[seg].ix, g)
	if err == nil {
		err = syncDir(filepath.Dir(file))
	}
	var out *index.Index
	if err == nil {
		out, err = index.Open(file, index.Options{Verify: true})
	}
	if err == nil && out.Len() != src.Len() {
		out.Close()
		err = fmt.Errorf("%s: %w: %d rows written, the segment holds %d", file, index.ErrCorrupt, out.Len(), src.Len())
	}
	if err != nil {
		closeUnshared(v.segs)
		return err
	}
	if old := v.segs[seg]; old.refs.Load() == 0 { // opened by this write (a lone file made a store)
		old.ix.Close()
	}
	v.segs[seg] = newSegment(out, name)
	v.man.Segments[seg].File = name
	// The rows stay where they are, but a merge begun before this write
	// finds its input's file gone: count a change of layout so that it
	// starts again rather than take the rows for deleted.
	v.man.Layout++
	return w.commit(v)
}

// segmentVectors returns the vectors of segment seg's rows, by their
// ids from orig, where orig does not cover them (BuildGraph) decoded.
func (snap *snapshot) segmentVectors(seg int, orig Originals) (index.Rows, error) {
	s := snap.segs[seg].ix
	n, d := s.Len(), s.Dim()
	base := snap.group.Base(seg)
	_, fromFile := orig.(rowOriginals)
	out := make(matrix, n)
	for r := range n {
		rec, err := snap.record(base + r)
		if err != nil {
			return nil, err
		}
		live := !snap.deleted[seg].Contains(uint32(r))
		var v []float32
		if !fromFile || snap.fromInput(base+r, rec.ID) {
			v, err = orig.Vector(rec.ID, make([]float32, d))
			if err != nil && live {
				return nil, fmt.Errorf("segment %d, id %q: %w", seg, rec.ID, err)
			}
		}
		if v == nil || err != nil {
			if v, err = s.Vector(r, make([]float32, d)); err != nil {
				return nil, fmt.Errorf("segment %d, row %d: %w", seg, r, err)
			}
		}
		if len(v) != d {
			return nil, fmt.Errorf("%w: the original vector of %q has %d values, the index %d", index.ErrDim, rec.ID, len(v), d)
		}
		for j, x := range v {
			if x-x != 0 {
				return nil, fmt.Errorf("%w: the original vector of %q: value %d is %v", index.ErrArgument, rec.ID, j, x)
			}
		}
		out[r] = v
	}
	return out, nil
}
