package vlc

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// Retrain learns anchors anew from the index's live vectors and encodes
// them again, keeping their ids and payloads, its code, metric and seed,
// and writes the result, one file, in place of the index (atomically, as
// Compress). The original vectors are not kept, so it trains on the
// vectors as the codes give them back (anchor plus decoded residual):
// worth it when Info's Drift shows that added vectors no longer fit the
// anchors, at the cost of one more rounding of every vector. opt may set
// Anchors (default: about sqrt of the live count), Backend, Devices,
// MaxIter, TrainSample, DeviceMemory, Logger and the progress callbacks;
// the rest comes from the index.
func (ix *Index) Retrain(ctx context.Context, opt Options) (*Summary, error) {
	snap, err := ix.beginWrite()
	if err != nil {
		return nil, err
	}
	defer ix.endWrite(snap)
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
	docs := make([]Document, 0, snap.live)
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
			docs = append(docs, Document{ID: rec.ID, Vector: slices.Clone(x), Payload: rec.Payload})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	start := time.Now()
	opt, log, err := opt.prepare(ix.path)
	if err != nil {
		return nil, err
	}
	if err := checkDocs(docs, snap.segs[0].ix.Dim(), snap.segs[0].ix.Meta().Metric); err != nil {
		return nil, fmt.Errorf("%s: a reconstructed vector: %w", ix.path, err)
	}
	src := source{name: ix.path, rows: docRows(docs), checkFinite: func() error { return nil }, keys: make([]string, len(docs))}
	for i, d := range docs {
		src.keys[i] = d.ID
		if d.Payload != nil && src.payloads == nil {
			src.payloads = make([][]byte, len(docs))
		}
		if src.payloads != nil {
			src.payloads[i] = d.Payload
		}
	}
	sum, err := compress(ctx, src, ix.path, opt, log, start)
	if err != nil {
		return nil, err
	}
	seg, err := index.Open(ix.path, index.Options{Verify: true})
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(ix.path)
	if err != nil {
		seg.Close()
		return nil, err
	}
	next, err := newSnapshot(manifest{}, []*segment{{ix: seg}}, []*roaring.Bitmap{roaring.New()})
	if err != nil {
		seg.Close()
		return nil, err
	}
	ix.install(next, st)
	removeUnused(ix.path, nil)
	return sum, nil
}
