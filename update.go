package vlc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/regfile"
	"github.com/vlc-embed/vlc/internal/vec"
)

// Document is a vector with the caller's id and an optional payload.
type Document struct {
	// ID names the vector, unique in the index, at most MaxIDBytes. ""
	// lets the index pick the next free number (in decimal). Ids are
	// strings because the ids RAG pipelines carry (document and chunk
	// names, UUIDs, LangChainGo's and chromem-go's ids) are strings; a
	// number is its decimal string.
	ID      string
	Vector  []float32
	Payload []byte // returned with hits and by Get; at most MaxPayloadBytes
}

// beginWrite serialises a write: it takes the lock file (kept until
// Close), reads the index again if another process changed it, and
// returns the snapshot to change, referenced; end releases both.
func (ix *Index) beginWrite() (*snapshot, error) {
	ix.wmu.Lock()
	ix.mu.Lock()
	closed := ix.closed
	ix.mu.Unlock()
	if closed {
		ix.wmu.Unlock()
		return nil, index.ErrClosed
	}
	if ix.lock == nil {
		l, err := lockPath(ix.path)
		if err != nil {
			ix.wmu.Unlock()
			return nil, err
		}
		ix.lock = l
	}
	if err := ix.Refresh(); err != nil {
		ix.wmu.Unlock()
		return nil, err
	}
	snap, err := ix.acquire()
	if err != nil {
		ix.wmu.Unlock()
		return nil, err
	}
	return snap, nil
}

func (ix *Index) endWrite(snap *snapshot) {
	snap.release()
	ix.wmu.Unlock()
}

// store returns snap's manifest, deletions and segments to build the next
// version from. A lone index file becomes the first segment of a store:
// it is linked (or copied) into the segment folder, so that the manifest
// can take its path.
func (ix *Index) store(snap *snapshot) (manifest, []*roaring.Bitmap, []*segment, error) {
	deleted := make([]*roaring.Bitmap, len(snap.deleted))
	for i, d := range snap.deleted {
		deleted[i] = d.Clone()
	}
	if snap.man.Segments != nil {
		man := snap.man
		man.Segments = append([]segmentEntry(nil), man.Segments...)
		return man, deleted, append([]*segment(nil), snap.segs...), nil
	}
	dir := segmentDir(ix.path)
	removeUnused(ix.path, &manifest{}) // leftovers of a conversion that never committed
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return manifest{}, nil, nil, err
	}
	const name = "seg-000000.vlc"
	dst := filepath.Join(dir, name)
	if err := os.Link(ix.path, dst); err != nil {
		if err := copyFile(ix.path, dst); err != nil {
			return manifest{}, nil, nil, err
		}
	}
	if err := syncDir(dir); err != nil {
		return manifest{}, nil, nil, err
	}
	first, err := index.Open(dst, index.Options{})
	if err != nil {
		return manifest{}, nil, nil, err
	}
	meta := first.Meta()
	man := manifest{NextSegment: 1, NextID: meta.N, TrainedEnergy: meta.Energy,
		Segments: []segmentEntry{{File: name, Rows: first.Len(), Energy: meta.Energy}}}
	return man, deleted, []*segment{{ix: first, file: name}}, nil
}

// commit writes the manifest (the change's commit point), makes the new
// version current and removes the files no version needs any more.
func (ix *Index) commit(man manifest, deleted []*roaring.Bitmap, segs []*segment) error {
	if err := writeManifest(ix.path, man, deleted); err != nil {
		closeUnshared(segs, ix)
		return err
	}
	snap, err := newSnapshot(man, segs, deleted)
	if err != nil {
		return err
	}
	st, err := os.Stat(ix.path)
	if err != nil {
		snap.release()
		return err
	}
	ix.install(snap, st)
	removeUnused(ix.path, &man)
	return nil
}

// closeUnshared closes the segments a failed change opened.
func closeUnshared(segs []*segment, ix *Index) {
	for _, s := range segs {
		if s.refs.Load() == 0 {
			s.ix.Close()
		}
	}
}

// Add encodes docs against the index's anchors (no training) and adds
// them as a new segment, visible to searches once Add returns; it returns
// their ids, those the index picked included. It checks everything
// first: a vector of the wrong dimension, a value that is not finite or
// beyond float16, an id already live or repeated, a payload over
// MaxPayloadBytes: the error names the document, and the index is
// unchanged. Rows added far from every anchor (Info's Drift) call for
// Retrain.
func (ix *Index) Add(ctx context.Context, docs []Document) ([]string, error) {
	snap, err := ix.beginWrite()
	if err != nil {
		return nil, err
	}
	defer ix.endWrite(snap)
	if len(docs) == 0 {
		return nil, nil
	}
	first := snap.segs[0].ix
	d, metric := first.Dim(), first.Meta().Metric
	if err := checkDocs(docs, d, metric); err != nil {
		return nil, err
	}
	ids := make([]string, len(docs))
	taken := make(map[string]int, len(docs))
	for i, doc := range docs {
		if doc.ID == "" {
			continue
		}
		if j, dup := taken[doc.ID]; dup {
			return nil, fmt.Errorf("%w %q: documents %d and %d", ErrDuplicateID, doc.ID, j, i)
		}
		if _, live := snap.find(doc.ID); live {
			return nil, fmt.Errorf("document %d: %w %q: already in the index", i, ErrDuplicateID, doc.ID)
		}
		taken[doc.ID], ids[i] = i, doc.ID
	}
	man, deleted, segs, err := ix.store(snap)
	if err != nil {
		return nil, err
	}
	for i, doc := range docs {
		if doc.ID != "" {
			continue
		}
		for {
			id := strconv.FormatUint(man.NextID, 10)
			man.NextID++
			if _, dup := taken[id]; !dup {
				if _, live := snap.find(id); !live {
					taken[id], ids[i] = i, id
					break
				}
			}
		}
	}
	rows := make([][]float32, len(docs))
	assign := make([]int32, len(docs))
	payloads := make([][]byte, len(docs))
	hasPayload := false
	var energy float64
	dots := make([]float32, first.NearestScratch())
	for i, doc := range docs {
		x := append([]float32(nil), doc.Vector...)
		if metric == index.Cosine {
			vec.Normalize(x)
		}
		a, dist := first.Nearest(x, dots)
		rows[i], assign[i] = x, int32(a)
		energy += float64(dist)
		payloads[i] = doc.Payload
		hasPayload = hasPayload || doc.Payload != nil
	}
	if !hasPayload {
		payloads = nil
	}
	meta := first.Meta()
	meta.Flags |= index.FlagSegment
	meta.Energy, meta.InitEnergy = energy/float64(len(docs)), 0
	meta.Iterations, meta.Converged, meta.Merged, meta.Split = 0, 0, 0, 0
	name := fmt.Sprintf("seg-%06d.vlc", man.NextSegment)
	man.NextSegment++
	file := filepath.Join(segmentDir(ix.path), name)
	err = index.WriteContext(ctx, file, index.Plan{
		Rows: matrix(rows), Anchors: first.Anchors(), Assign: assign, Meta: meta,
		Keys: ids, Payloads: payloads, Global: first.Global(),
	})
	if err != nil {
		closeUnshared(segs, ix)
		return nil, err
	}
	seg, err := index.Open(file, index.Options{})
	if err != nil {
		closeUnshared(segs, ix)
		return nil, err
	}
	segs = append(segs, &segment{ix: seg, file: name})
	man.Segments = append(man.Segments, segmentEntry{File: name, Rows: len(docs), Added: true, Energy: meta.Energy})
	deleted = append(deleted, roaring.New())
	if err := ix.commit(man, deleted, segs); err != nil {
		return nil, err
	}
	return ids, nil
}

// checkDocs refuses documents Add or Build cannot index under metric,
// naming the first bad one: cosine normalises every finite vector but
// the zero vector (ErrZeroVector), l2 and ip need values within float16
// and a vector zero or not too small for float32 distances (checkScale).
func checkDocs(docs []Document, d int, metric index.Metric) error {
	for i, doc := range docs {
		name := fmt.Sprintf("document %d", i)
		if doc.ID != "" {
			name = fmt.Sprintf("document %d (%q)", i, doc.ID)
			if err := index.CheckKey(doc.ID); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if len(doc.Vector) != d {
			return fmt.Errorf("%s: %w: %d values, the index has dimension %d", name, index.ErrDim, len(doc.Vector), d)
		}
		for j, v := range doc.Vector {
			switch {
			case math.IsNaN(float64(v)) || math.IsInf(float64(v), 0):
				return fmt.Errorf("%s: %w: value %d is %v", name, index.ErrArgument, j, v)
			case math.Abs(float64(v)) > 65504 && metric != index.Cosine:
				return fmt.Errorf("%s: %w: value %d is %g (|x| <= 65504)", name, ErrRange, j, v)
			}
		}
		if metric == index.Cosine && isZeroVector(doc.Vector) {
			return fmt.Errorf("%s: %w: every value is 0; %s", name, ErrZeroVector, zeroFix)
		}
		if why := checkScale(doc.Vector); why != "" && metric != index.Cosine {
			return fmt.Errorf("%s: %w: %s", name, ErrUnderflow, why)
		}
		if len(doc.Payload) > MaxPayloadBytes {
			return fmt.Errorf("%s: %w: %d bytes (at most %d)", name, ErrPayload, len(doc.Payload), MaxPayloadBytes)
		}
	}
	return nil
}

// Delete marks the given ids deleted: searches and Get no longer return
// them, and Compact drops their rows. An id that is not live is an error
// wrapping ErrNotFound, and then nothing is deleted.
func (ix *Index) Delete(ctx context.Context, ids []string) error {
	snap, err := ix.beginWrite()
	if err != nil {
		return err
	}
	defer ix.endWrite(snap)
	rows := make([]int, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		r, ok := snap.find(id)
		if !ok {
			return fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	man, deleted, segs, err := ix.store(snap)
	if err != nil {
		return err
	}
	for _, r := range rows {
		i, local := snap.group.Locate(r)
		deleted[i].Add(uint32(local))
	}
	// A segment added after training whose rows are now all deleted holds
	// nothing: it leaves the store (its file is removed once no search
	// reads it) rather than being read by every search until a
	// compaction. The trained segment stays: it holds the model.
	keep := 0
	for i, e := range man.Segments {
		if i > 0 && e.Added && int(deleted[i].GetCardinality()) == e.Rows {
			continue
		}
		man.Segments[keep], deleted[keep], segs[keep] = e, deleted[i], segs[i]
		keep++
	}
	man.Segments, deleted, segs = man.Segments[:keep], deleted[:keep], segs[:keep]
	return ix.commit(man, deleted, segs)
}

// Compact rewrites the index without its deleted rows. For the rotated
// code (the default) every segment merges into one file, written in
// place of the store's manifest; the codes are carried over (their two
// float16 scalars re-expressed), never encoded again. For the pq and sq8
// codes each segment with deletions is rewritten alone, as their list
// parameters cannot be shared. Searches in flight finish on the old
// files.
func (ix *Index) Compact(ctx context.Context) error {
	snap, err := ix.beginWrite()
	if err != nil {
		return err
	}
	defer ix.endWrite(snap)
	if snap.man.Segments == nil || len(snap.segs) == 1 && snap.gone.IsEmpty() && snap.segs[0].file == "" {
		removeUnused(ix.path, nil) // segments a killed compaction left
		return nil                 // a lone index file: nothing to compact
	}
	if snap.live == 0 {
		return fmt.Errorf("%s: %w: every vector is deleted; compacting would leave an empty index", ix.path, index.ErrArgument)
	}
	first := snap.segs[0].ix
	if first.CanMerge() {
		parts := make([]index.MergePart, 0, len(snap.segs))
		for i, s := range snap.segs {
			if s.ix.Len() == int(snap.deleted[i].GetCardinality()) {
				continue
			}
			parts = append(parts, index.MergePart{Index: s.ix, Keep: keepLive(snap.deleted[i])})
		}
		meta := first.Meta()
		meta.Energy = snap.man.TrainedEnergy
		if _, err := index.Merge(ctx, ix.path, parts, meta, index.MergeOptions{WithKeys: len(snap.segs) > 1}); err != nil {
			return err
		}
		seg, err := index.Open(ix.path, index.Options{})
		if err != nil {
			return err
		}
		st, err := os.Stat(ix.path)
		if err != nil {
			seg.Close()
			return err
		}
		next, err := newSnapshot(manifest{}, []*segment{{ix: seg}}, []*roaring.Bitmap{roaring.New()})
		if err != nil {
			seg.Close()
			return err
		}
		ix.install(next, st)
		removeUnused(ix.path, nil)
		return nil
	}
	man, deleted, segs, err := ix.store(snap)
	if err != nil {
		return err
	}
	var keptSegs []*segment
	var keptEntries []segmentEntry
	var keptDeleted []*roaring.Bitmap
	for i, s := range segs {
		e := man.Segments[i]
		switch n := int(deleted[i].GetCardinality()); {
		case n == 0:
			keptSegs, keptEntries, keptDeleted = append(keptSegs, s), append(keptEntries, e), append(keptDeleted, deleted[i])
			continue
		case n == s.ix.Len():
			continue
		}
		name := fmt.Sprintf("seg-%06d.vlc", man.NextSegment)
		man.NextSegment++
		file := filepath.Join(segmentDir(ix.path), name)
		rows, err := index.Merge(ctx, file, []index.MergePart{{Index: s.ix, Keep: keepLive(deleted[i])}}, s.ix.Meta(), index.MergeOptions{})
		if err != nil {
			closeUnshared(keptSegs, ix)
			return err
		}
		seg, err := index.Open(file, index.Options{})
		if err != nil {
			closeUnshared(keptSegs, ix)
			return err
		}
		e.File, e.Rows = name, rows
		keptSegs, keptEntries, keptDeleted = append(keptSegs, &segment{ix: seg, file: name}), append(keptEntries, e), append(keptDeleted, roaring.New())
	}
	man.Segments = keptEntries
	return ix.commit(man, keptDeleted, keptSegs)
}

func keepLive(deleted *roaring.Bitmap) func(int) bool {
	if deleted.IsEmpty() {
		return nil
	}
	return func(r int) bool { return !deleted.Contains(uint32(r)) }
}

func copyFile(src, dst string) error {
	in, err := regfile.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
