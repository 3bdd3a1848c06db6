package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/pipeline"
	"github.com/vlc-embed/vlc/quant"
)

// Retrain learns anchors anew from the index's live vectors and encodes
// them again, keeping their ids and payloads, its code, metric and seed,
// and writes the result as the store's one segment (a new file, committed
// by a new manifest, as every write is; a lone index file becomes a
// store). The original vectors are not kept, so it trains on the
// vectors as the codes give them back (anchor plus decoded residual):
// worth it when Info's Drift shows that added vectors no longer fit the
// anchors, at the cost of one more rounding of every vector. opt may set
// Anchors (default: about sqrt of the live count), Backend, Devices,
// MaxIter, TrainSample, DeviceMemory, Logger and the progress callbacks;
// the rest comes from the index.
func (ix *Store) Retrain(ctx context.Context, opt pipeline.Options) (*pipeline.Summary, error) {
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer w.end()
	snap := w.snap
	if snap.live == 0 {
		return nil, fmt.Errorf("%s: %w: every vector is deleted; nothing to train on", ix.path, index.ErrArgument)
	}
	meta := snap.segs[0].ix.Meta()
	spec := meta.CodeSpec()
	opt.Code, opt.Metric, opt.Seed = quant.Kind(meta.Code).String(), meta.Metric.String(), meta.Seed
	opt.Bits, opt.Ratio, opt.Subspaces, opt.Dim, opt.IDs, opt.Payloads = spec.Bits, 0, 0, 0, nil, nil
	opt.AnchorsFrom, opt.Start, opt.End = "", 0, 0
	if spec.Kind == quant.KindPQ && spec.Bits == 0 {
		opt.Bits, opt.Subspaces = 0, spec.Subspaces
	}
	if sc := snap.man.Schema; sc != nil {
		// A collection created empty trains to its schema's code (its
		// vectors may still be held exactly).
		opt.Code, opt.Bits, opt.Subspaces, opt.Ratio = sc.Code, sc.Bits, sc.Subspaces, sc.Ratio
	}
	docs := make([]pipeline.Document, 0, snap.live)
	for i, s := range snap.segs {
		del := snap.deleted[i]
		err := s.ix.Reconstruct(func(row int, x []float32) error {
			if del.Contains(uint32(row)) {
				return nil
			}
			rec, err := snap.record(snap.group.Base(i) + row)
			if err != nil {
				return err
			}
			docs = append(docs, pipeline.Document{ID: rec.ID, Vector: slices.Clone(x), Payload: rec.Payload})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	start := time.Now()
	opt, err = opt.Prepare("")
	if err != nil {
		return nil, err
	}
	if err := pipeline.CheckDocuments(docs, snap.segs[0].ix.Dim(), snap.segs[0].ix.Meta().Metric); err != nil {
		return nil, fmt.Errorf("%s: a reconstructed vector: %w", ix.path, err)
	}
	v, err := w.next()
	if err != nil {
		return nil, err
	}
	name, file := w.newSegmentFile(v)
	sum, err := pipeline.Run(ctx, pipeline.Job{Source: pipeline.DocumentSource(ix.path, docs), Output: file, Options: opt, Start: start})
	if err != nil {
		closeUnshared(v.segs)
		return nil, err
	}
	seg, err := index.Open(file, index.Options{Verify: true})
	if err != nil {
		closeUnshared(v.segs)
		return nil, err
	}
	closeUnshared(v.segs) // a lone file's link, made by next, is not needed
	v.man.TrainedEnergy = sum.Energy
	if v.man.Schema != nil {
		v.man.TrainedRows = seg.Len()
	}
	v.man.Segments = []segmentEntry{{File: name, Rows: seg.Len(), Energy: sum.Energy}}
	v.deleted = []*roaring.Bitmap{roaring.New()}
	v.segs = []*segment{newSegment(seg, name)}
	v.man.Layout++
	if err := w.commit(v); err != nil {
		return nil, err
	}
	return sum, nil
}
