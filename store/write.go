package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/regfile"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/pipeline"
)

// write is a write in progress: the store's lock, held, and the newest
// version, read under it, to change.
type write struct {
	ix   *Store
	lock *lockFile
	snap *snapshot
}

// beginWrite serialises a write: it takes the store's lock file (waiting
// up to lockWait while another process writes), reads the newest version
// (another process may have committed since this one read the index) and
// returns it to change. A change is computed from that version only, never
// from an older one, so row numbers always refer to the files committed.
func (ix *Store) beginWrite(ctx context.Context) (*write, error) {
	ix.wmu.Lock()
	ix.mu.Lock()
	closed := ix.closed
	ix.mu.Unlock()
	if closed {
		ix.wmu.Unlock()
		return nil, index.ErrClosed
	}
	l, err := lockStore(ctx, ix.path)
	if err != nil {
		ix.wmu.Unlock()
		return nil, err
	}
	ix.rmu.Lock() // no Refresh of this handle installs a version until the write ends
	fail := func(err error) (*write, error) {
		ix.rmu.Unlock()
		l.unlock()
		ix.wmu.Unlock()
		return nil, err
	}
	if err := ix.refreshLocked(); err != nil {
		return fail(err)
	}
	snap, err := ix.acquire()
	if err != nil {
		return fail(err)
	}
	// The lock is held and no other goroutine of this handle installs:
	// snap is the newest version, which the path names.
	if st, err := os.Stat(ix.path); err != nil || !sameVersion(st, snap.srcInfo) {
		snap.release()
		if err == nil {
			err = fmt.Errorf("%s changed under the store's lock (a program that does not take it wrote it)", ix.path)
		}
		return fail(err)
	}
	return &write{ix: ix, lock: l, snap: snap}, nil
}

// end releases the version and the locks.
func (w *write) end() {
	w.snap.release()
	w.ix.rmu.Unlock()
	w.lock.unlock()
	w.ix.wmu.Unlock()
}

// version is what a write builds the next version from: the manifest, each
// segment's deleted rows (copies) and the origin (a copy).
type version struct {
	man     manifest
	deleted []*roaring.Bitmap
	origin  *roaring.Bitmap
	segs    []*segment
}

// next returns the version to change. A lone index file becomes the first
// segment of a store: it is linked (or copied) into the segment folder
// under a new name, so that the manifest can take its path.
func (w *write) next() (*version, error) {
	snap, path := w.snap, w.ix.path
	v := &version{deleted: make([]*roaring.Bitmap, len(snap.deleted))}
	for i, d := range snap.deleted {
		v.deleted[i] = d.Clone()
	}
	if !snap.lone() {
		v.man = snap.man
		v.man.Segments = append([]segmentEntry(nil), snap.man.Segments...)
		v.origin = snap.origin.Clone()
		v.segs = append([]*segment(nil), snap.segs...)
		return v, nil
	}
	dir := segmentDir(path)
	removeObsolete(path, &manifest{}) // leftovers of a conversion that never committed
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := segmentName(0)
	dst := filepath.Join(dir, name)
	if err := os.Link(path, dst); err != nil {
		if err := copyFile(path, dst); err != nil {
			return nil, err
		}
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	first, err := index.Open(dst, index.Options{})
	if err != nil {
		return nil, err
	}
	if !os.SameFile(first.Stat(), snap.srcInfo) && (first.Len() != snap.segs[0].ix.Len() || first.Size() != snap.segs[0].ix.Size()) {
		first.Close()
		return nil, fmt.Errorf("%s: the index file changed while it was made a store (another program wrote it without the lock)", path)
	}
	meta := first.Meta()
	v.man = manifest{NextSegment: 1, NextID: meta.N, TrainedEnergy: meta.Energy,
		Segments: []segmentEntry{{File: name, Rows: first.Len(), Energy: meta.Energy}}}
	v.origin = firstOrigin(first, roaring.New())
	if !first.HasKeys() {
		v.man.InputRows = first.Len()
	}
	v.segs = []*segment{newSegment(first, name)}
	return v, nil
}

// newSegmentFile returns the name and path of the next segment file.
func (w *write) newSegmentFile(v *version) (name, file string) {
	name = segmentName(v.man.NextSegment)
	v.man.NextSegment++
	return name, filepath.Join(segmentDir(w.ix.path), name)
}

// commit writes v's manifest (the change's commit point), makes it the
// current version and removes the files no version needs any more. On
// error the segments v opened are closed. Once the manifest has taken
// the path the change is made, whatever fails after (syncing the folder,
// mapping the new manifest): that is logged, not returned, so that no
// caller retries a change that is in the store.
func (w *write) commit(v *version) error {
	path := w.ix.path
	if err := writeManifest(path, v.man, v.deleted, v.origin); err != nil {
		if st, serr := os.Stat(path); serr != nil || sameVersion(st, w.snap.srcInfo) {
			closeUnshared(v.segs)
			return err // not committed: the path names the version read
		}
		// Renamed (only this writer holds the lock), not made durable.
		slog.Warn("vlc: a store's change is made, but not yet durable", "store", path, "error", err)
	}
	// The manifest just written, mapped: the new version's identity. The
	// lock is held, so the path names it.
	f, err := format.Open(path, format.OpenOptions{})
	var snap *snapshot
	if err == nil {
		snap, err = newSnapshot(f, f.Stat(), v.man, v.segs, v.deleted, v.origin)
	}
	if err != nil {
		closeUnshared(v.segs)
		slog.Warn("vlc: a store's change is made, but this handle could not read it; Refresh reads it", "store", path, "error", err)
		return nil
	}
	w.ix.install(snap)
	removeObsolete(path, &v.man)
	w.ix.kick()
	return nil
}

// installPending starts the next version and gives a background job's
// output, written to pending, the next segment name in it: renamed,
// the folder synced, the file opened and checked. On an error the
// segments the version opened are closed.
func (w *write) installPending(pending string) (v *version, name string, out *index.Index, err error) {
	if v, err = w.next(); err != nil {
		return nil, "", nil, err
	}
	name, file := w.newSegmentFile(v)
	if err = os.Rename(pending, file); err == nil {
		err = syncDir(filepath.Dir(file))
	}
	if err == nil {
		out, err = index.Open(file, index.Options{Verify: true})
	}
	if err != nil {
		closeUnshared(v.segs)
		return nil, "", nil, err
	}
	return v, name, out, nil
}

// closeUnshared closes the segments a failed change opened.
func closeUnshared(segs []*segment) {
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
func (ix *Store) Add(ctx context.Context, docs []pipeline.Document) ([]string, error) {
	return ix.put(ctx, docs, false)
}

// Upsert is Add, except that a document whose id is live replaces it:
// the old row is deleted and the new one added in one commit, so a search
// sees the one or the other, never both or neither. An id repeated within
// docs is still an error (which of the two would stay is not clear).
func (ix *Store) Upsert(ctx context.Context, docs []pipeline.Document) ([]string, error) {
	return ix.put(ctx, docs, true)
}

func (ix *Store) put(ctx context.Context, docs []pipeline.Document, replace bool) ([]string, error) {
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer w.end()
	snap := w.snap
	if len(docs) == 0 {
		return nil, nil
	}
	first := snap.segs[0].ix
	if err := pipeline.CheckDocuments(docs, first.Dim(), first.Meta().Metric); err != nil {
		return nil, err
	}
	ids := make([]string, len(docs))
	taken := make(map[string]int, len(docs))
	var replaced []int // group rows of the live ids replaced
	for i, doc := range docs {
		if doc.ID == "" {
			continue
		}
		if j, dup := taken[doc.ID]; dup {
			return nil, fmt.Errorf("%w %q: documents %d and %d", ErrDuplicateID, doc.ID, j, i)
		}
		if row, live := snap.find(doc.ID); live {
			if !replace {
				return nil, fmt.Errorf("document %d: %w %q: already in the index", i, ErrDuplicateID, doc.ID)
			}
			replaced = append(replaced, row)
		}
		taken[doc.ID], ids[i] = i, doc.ID
	}
	v, err := w.next()
	if err != nil {
		return nil, err
	}
	for i, doc := range docs {
		if doc.ID != "" {
			continue
		}
		for {
			id := strconv.FormatUint(v.man.NextID, 10)
			v.man.NextID++
			if _, dup := taken[id]; !dup {
				if _, live := snap.find(id); !live {
					taken[id], ids[i] = i, id
					break
				}
			}
		}
	}
	seg, entry, err := w.encode(ctx, v, first, docs, ids)
	if err != nil {
		closeUnshared(v.segs)
		return nil, err
	}
	v.deleteRows(snap, replaced, ids)
	v.segs = append(v.segs, seg)
	v.man.Segments = append(v.man.Segments, entry)
	v.deleted = append(v.deleted, roaring.New())
	v.dropEmpty()
	if err := w.commit(v); err != nil {
		return nil, err
	}
	return ids, nil
}

// encode writes docs, named ids, as a new segment file encoded against
// model's anchors, and opens it.
func (w *write) encode(ctx context.Context, v *version, model *index.Index, docs []pipeline.Document, ids []string) (*segment, segmentEntry, error) {
	metric := model.Meta().Metric
	rows := make([][]float32, len(docs))
	assign := make([]int32, len(docs))
	payloads := make([][]byte, len(docs))
	hasPayload := false
	var energy float64
	dots := make([]float32, model.NearestScratch())
	for i, doc := range docs {
		x := append([]float32(nil), doc.Vector...)
		if metric == index.Cosine {
			vec.Normalize(x)
		}
		a, dist := model.Nearest(x, dots)
		rows[i], assign[i] = x, int32(a)
		energy += float64(dist)
		payloads[i] = doc.Payload
		hasPayload = hasPayload || doc.Payload != nil
	}
	if !hasPayload {
		payloads = nil
	}
	meta := model.Meta()
	meta.Flags |= index.FlagSegment
	meta.Energy, meta.InitEnergy = energy/float64(len(docs)), 0
	meta.Iterations, meta.Converged, meta.Merged, meta.Split = 0, 0, 0, 0
	name, file := w.newSegmentFile(v)
	err := index.WriteContext(ctx, file, index.Plan{
		Rows: matrix(rows), Anchors: model.Anchors(), Assign: assign, Meta: meta,
		Keys: ids, Payloads: payloads, Global: model.Global(),
	})
	if err != nil {
		return nil, segmentEntry{}, err
	}
	ix, err := index.Open(file, index.Options{})
	if err != nil {
		return nil, segmentEntry{}, err
	}
	return newSegment(ix, name), segmentEntry{File: name, Rows: len(docs), Added: true, Energy: meta.Energy}, nil
}

// deleteRows marks group rows of snap (the version v was made from)
// deleted in v, and takes ids out of the origin: their rows are gone,
// and an id added again is another vector.
func (v *version) deleteRows(snap *snapshot, rows []int, ids []string) {
	for _, r := range rows {
		i, local := snap.group.Locate(r)
		v.deleted[i].Add(uint32(local))
	}
	for _, id := range ids {
		if n, ok := decimalID(id); ok {
			v.origin.Remove(n)
		}
	}
}

// dropEmpty takes out of v the segments added after training whose rows
// are all deleted: they hold nothing, and would be read by every search
// until a compaction (their files are removed once no search reads
// them). The first segment stays: it holds the model.
func (v *version) dropEmpty() {
	keep := 0
	for i, e := range v.man.Segments {
		if i > 0 && e.Added && int(v.deleted[i].GetCardinality()) == e.Rows {
			continue
		}
		v.man.Segments[keep], v.deleted[keep], v.segs[keep] = e, v.deleted[i], v.segs[i]
		keep++
	}
	v.man.Segments, v.deleted, v.segs = v.man.Segments[:keep], v.deleted[:keep], v.segs[:keep]
}

// SetPayloads replaces the payloads of live ids (a nil Payload removes
// one) in one commit, without encoding their vectors again: their codes
// are copied into a new segment with the new payloads, and the old rows
// deleted. An id that is not live is an error wrapping ErrNotFound, and
// then nothing changes.
func (ix *Store) SetPayloads(ctx context.Context, recs []Record) error {
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer w.end()
	snap := w.snap
	bySeg := map[int]map[int][]byte{}
	seen := map[string]bool{}
	var rows []int
	for k, rec := range recs {
		if seen[rec.ID] {
			return fmt.Errorf("%w %q: records %d and an earlier one", ErrDuplicateID, rec.ID, k)
		}
		seen[rec.ID] = true
		if len(rec.Payload) > MaxPayloadBytes {
			return fmt.Errorf("record %d (%q): %w: %d bytes (at most %d)", k, rec.ID, ErrPayload, len(rec.Payload), MaxPayloadBytes)
		}
		row, ok := snap.find(rec.ID)
		if !ok {
			return fmt.Errorf("record %d: %w: %q", k, ErrNotFound, rec.ID)
		}
		i, local := snap.group.Locate(row)
		if bySeg[i] == nil {
			bySeg[i] = map[int][]byte{}
		}
		bySeg[i][local] = rec.Payload
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil
	}
	v, err := w.next()
	if err != nil {
		return err
	}
	var parts []index.MergePart
	var energy float64
	for i := range snap.segs {
		changed, ok := bySeg[i]
		if !ok {
			continue
		}
		parts = append(parts, index.MergePart{Index: v.segs[i].ix, Keep: func(r int) bool { _, ok := changed[r]; return ok }, Payloads: changed})
		energy += v.segs[i].ix.Meta().Energy * float64(len(changed))
	}
	// One new segment of every changed row; for the pq and sq8 codes,
	// whose segments' list parameters differ, one per segment changed.
	groups := [][]index.MergePart{parts}
	if !parts[0].Index.CanMerge() {
		groups = groups[:0]
		for _, p := range parts {
			groups = append(groups, []index.MergePart{p})
		}
	}
	for _, g := range groups {
		meta := g[0].Index.Meta()
		meta.Flags |= index.FlagSegment
		meta.Energy = energy / float64(len(rows))
		name, file := w.newSegmentFile(v)
		n, err := index.Merge(ctx, file, g, meta, index.MergeOptions{WithKeys: true})
		if err != nil {
			closeUnshared(v.segs)
			return err
		}
		seg, err := index.Open(file, index.Options{})
		if err != nil {
			closeUnshared(v.segs)
			return err
		}
		v.segs = append(v.segs, newSegment(seg, name))
		v.man.Segments = append(v.man.Segments, segmentEntry{File: name, Rows: n, Added: true, Energy: meta.Energy})
		v.deleted = append(v.deleted, roaring.New())
	}
	// The rows keep their vectors: their place in the origin stays.
	v.deleteRows(snap, rows, nil)
	v.dropEmpty()
	return w.commit(v)
}

// Delete marks the given ids deleted: searches and Get no longer return
// them, and Compact drops their rows. An id that is not live is an error
// wrapping ErrNotFound, and then nothing is deleted.
func (ix *Store) Delete(ctx context.Context, ids []string) error {
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer w.end()
	snap := w.snap
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
	v, err := w.next()
	if err != nil {
		return err
	}
	ids = ids[:0:0]
	for id := range seen {
		ids = append(ids, id)
	}
	v.deleteRows(snap, rows, ids)
	v.dropEmpty()
	return w.commit(v)
}

// Compact rewrites the store without its deleted rows. For the rotated
// code (the default) every segment merges into one new segment file; the
// codes are carried over (their two float16 scalars re-expressed), never
// encoded again. For the pq and sq8 codes each segment with deletions is
// rewritten alone, as their list parameters cannot be shared. The store
// stays a store (its counters of names and ids go on), and searches in
// flight finish on the old files. A lone index file, or a store of one
// segment without deletions, is left as it is.
func (ix *Store) Compact(ctx context.Context) error {
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer w.end()
	snap := w.snap
	if snap.lone() {
		removeObsolete(ix.path, nil) // segments of a conversion that never committed
		return nil
	}
	if len(snap.segs) == 1 && snap.gone.IsEmpty() {
		return nil
	}
	if snap.live == 0 {
		if snap.man.Schema != nil {
			return nil // a collection that holds nothing yet: nothing to compact
		}
		return fmt.Errorf("%s: %w: every vector is deleted; compacting would leave an empty index", ix.path, index.ErrArgument)
	}
	v, err := w.next()
	if err != nil {
		return err
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
		meta.Energy = v.man.TrainedEnergy
		name, file := w.newSegmentFile(v)
		rows, err := index.Merge(ctx, file, parts, meta, index.MergeOptions{WithKeys: len(snap.segs) > 1})
		if err != nil {
			return err
		}
		seg, err := index.Open(file, index.Options{})
		if err != nil {
			return err
		}
		v.man.Segments = []segmentEntry{{File: name, Rows: rows, Energy: v.man.TrainedEnergy}}
		v.deleted = []*roaring.Bitmap{roaring.New()}
		v.segs = []*segment{newSegment(seg, name)}
		v.man.Layout++
		return w.commit(v)
	}
	var keptSegs []*segment
	var keptEntries []segmentEntry
	var keptDeleted []*roaring.Bitmap
	for i, s := range v.segs {
		e := v.man.Segments[i]
		switch n := int(v.deleted[i].GetCardinality()); {
		case n == 0:
			keptSegs, keptEntries, keptDeleted = append(keptSegs, s), append(keptEntries, e), append(keptDeleted, v.deleted[i])
			continue
		case n == s.ix.Len():
			continue
		}
		name, file := w.newSegmentFile(v)
		rows, err := index.Merge(ctx, file, []index.MergePart{{Index: s.ix, Keep: keepLive(v.deleted[i])}}, s.ix.Meta(), index.MergeOptions{})
		if err != nil {
			closeUnshared(keptSegs)
			return err
		}
		seg, err := index.Open(file, index.Options{})
		if err != nil {
			closeUnshared(keptSegs)
			return err
		}
		e.File, e.Rows = name, rows
		keptSegs, keptEntries, keptDeleted = append(keptSegs, newSegment(seg, name)), append(keptEntries, e), append(keptDeleted, roaring.New())
	}
	v.man.Segments, v.deleted, v.segs = keptEntries, keptDeleted, keptSegs
	v.man.Layout++
	return w.commit(v)
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
