package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/pipeline"
)

// Background work keeps a store that takes one document at a time as
// fast and as small as one built at once. It is computed from one
// version without the store's lock (writes go on meanwhile) into a file
// of the pending folder, then committed against the newest version
// under the lock: the rows deleted meanwhile are carried over, and a job
// whose inputs a concurrent change replaced is dropped.
//
//   - merge: a run of adjacent segments becomes one (codes copied,
//     deleted rows dropped), when MergeFactor segments of a size tier
//     lie side by side, or when the segments' fixed overhead (each file
//     carries the model's anchors) passes a tenth of the store;
//   - train: a collection created empty trains its anchors once it holds
//     Policy.TrainAt vectors, and again as it grows (RetrainGrowth) or
//     drifts (RetrainDrift); segments added during the training are
//     encoded against the new anchors at its commit;
//   - graph: under Policy.GraphAt, a segment of at least GraphAt live rows
//     without a graph gets one, once no training or merge is due
//     (graphjob.go); its commit needs the segment's file unchanged, and
//     carries the deletions made meanwhile over as they are.

// errSuperseded marks a job whose inputs are gone from the newest
// version (a compaction, a retraining or another job replaced them).
var errSuperseded = errors.New("its segments were replaced meanwhile")

// worker runs a Store's background work in one goroutine at a time.
type worker struct {
	mu      sync.Mutex // guards the fields below
	running bool
	again   bool // a commit came while running: look once more
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	jobs   sync.Mutex // held while a job runs (background or Maintain)
	logger *slog.Logger
}

// kick asks for the due work to be looked at, in the background.
func (ix *Store) kick() {
	if !ix.background {
		return
	}
	b := &ix.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil || b.ctx.Err() != nil {
		return // closed
	}
	if b.running {
		b.again = true
		return
	}
	b.running = true
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			err := ix.maintain(b.ctx)
			b.mu.Lock()
			if err != nil && b.ctx.Err() == nil {
				slog.Warn("vlc: a store's background work failed; it is tried again after the next write", "store", ix.path, "error", err)
			}
			if !b.again || b.ctx.Err() != nil {
				b.running = false
				b.mu.Unlock()
				return
			}
			b.again = false
			b.mu.Unlock()
		}
	}()
}

// stopBackground cancels the background work and waits for it.
func (ix *Store) stopBackground() {
	b := &ix.bg
	b.mu.Lock()
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// Maintain runs the background work that is due (merging small segments,
// training, the graphs Policy.GraphAt asks for) now, in the caller's
// goroutine, and returns once none is left: for a process that writes
// and exits (the CLI), and for tests.
func (ix *Store) Maintain(ctx context.Context) error {
	return ix.maintain(ctx)
}

// maintain runs due jobs one after another until none is due, or until
// jobs were superseded (another process moved their rows) three times in
// a row: the next write looks again.
func (ix *Store) maintain(ctx context.Context) error {
	superseded := 0
	for range 1000 {
		did, err := ix.runJob(ctx)
		if errors.Is(err, errSuperseded) {
			if superseded++; superseded == 3 {
				return nil
			}
			continue
		}
		if err != nil || !did {
			return err
		}
		superseded = 0
	}
	return nil
}

// job is one piece of background work, computed from version from.
type job struct {
	kind   string // "merge", "train" or "graph" (graphjob.go)
	from   *snapshot
	inputs []int // segments of from it replaces, ascending and adjacent
	// newRow[k][r] is the output row of row r of input k, -1 for a row
	// deleted in from (dropped).
	newRow  [][]int32
	pending string // the output file, in the pending folder
	rows    int
	energy  float64 // the output's mean squared distance to its anchors
}

// runJob plans and runs the first due job; it reports whether there was one.
func (ix *Store) runJob(ctx context.Context) (bool, error) {
	ix.bg.jobs.Lock()
	defer ix.bg.jobs.Unlock()
	if err := ix.Refresh(); err != nil {
		return false, err
	}
	snap, err := ix.acquire()
	if err != nil {
		return false, err
	}
	defer snap.release()
	j := snap.plan()
	if j == nil {
		return false, nil
	}
	removeStalePending(ix.path)
	if err := ix.build(ctx, j); err != nil {
		if j.pending != "" {
			os.Remove(j.pending)
		}
		return false, fmt.Errorf("%s: %s of segments %v: %w", ix.path, j.kind, j.inputs, err)
	}
	if jobHook != nil {
		jobHook(j.kind, "written")
	}
	if j.kind == "graph" {
		err = ix.commitGraph(ctx, j)
	} else {
		err = ix.commitJob(ctx, j)
	}
	if errors.Is(err, errSuperseded) {
		os.Remove(j.pending)
		return true, err // the next plan looks at the newest version
	}
	if err != nil {
		os.Remove(j.pending)
		return false, fmt.Errorf("%s: %s of segments %v: %w", ix.path, j.kind, j.inputs, err)
	}
	return true, nil
}

// policy is the store's Policy with its defaults filled in; a store
// built from a file (no schema) merges but never trains by itself.
func (snap *snapshot) policy() Policy {
	p := snap.setPolicy()
	if snap.man.Schema == nil {
		p.TrainAt, p.RetrainGrowth, p.RetrainDrift = -1, -1, -1
	}
	p.TrainAt = cmp.Or(p.TrainAt, DefaultTrainAt)
	p.RetrainGrowth = cmp.Or(p.RetrainGrowth, DefaultRetrainGrowth)
	p.RetrainDrift = cmp.Or(p.RetrainDrift, DriftWarn)
	p.MergeFactor = cmp.Or(p.MergeFactor, DefaultMergeFactor)
	return p
}

// setPolicy is the store's Policy as it was set (Create, SetPolicy),
// zeros where the defaults hold.
func (snap *snapshot) setPolicy() Policy {
	switch {
	case snap.man.Schema != nil:
		return snap.man.Schema.Policy
	case snap.man.Policy != nil:
		return *snap.man.Policy
	}
	return Policy{}
}

// plan returns the first due job, or nil.
func (snap *snapshot) plan() *job {
	if snap.lone() || snap.live == 0 {
		return nil
	}
	p := snap.policy()
	if snap.trainDue(p) {
		all := make([]int, len(snap.segs))
		for i := range all {
			all[i] = i
		}
		return &job{kind: "train", from: snap, inputs: all}
	}
	if run := snap.mergeRun(p); run != nil {
		return &job{kind: "merge", from: snap, inputs: run}
	}
	if i := snap.graphDue(p); i >= 0 {
		return &job{kind: "graph", from: snap, inputs: []int{i}}
	}
	return nil
}

// trainDue reports whether the collection should train its anchors now.
func (snap *snapshot) trainDue(p Policy) bool {
	if snap.man.Schema == nil {
		return false
	}
	if snap.untrained() {
		return p.TrainAt > 0 && snap.live >= p.TrainAt
	}
	if p.RetrainGrowth > 0 && snap.man.TrainedRows > 0 && float64(snap.live) >= p.RetrainGrowth*float64(snap.man.TrainedRows) {
		return true
	}
	return p.RetrainDrift > 0 && snap.drift() >= p.RetrainDrift
}

// mergeRun picks the adjacent segments to merge, or nil: the first run
// of MergeFactor segments side by side whose tiers (rows in powers of
// MergeFactor) are at most some t, smallest t first; failing that, when
// the segments' fixed overhead passes a tenth of the store's bytes, the
// run of adjacent segments with the fewest rows that brings their number
// within the budget; failing that, a segment more than half deleted.
func (snap *snapshot) mergeRun(p Policy) []int {
	n := len(snap.segs)
	if n < 2 {
		return snap.vacuumRun(p)
	}
	f := max(p.MergeFactor, 2)
	if !snap.segs[0].ix.CanMerge() {
		// pq and sq8: segments fitted apart cannot be joined (their list
		// parameters differ); each is only rewritten without its deleted rows.
		return snap.vacuumRun(p)
	}
	tier := make([]int, n)
	top := 0
	for i, s := range snap.segs {
		tier[i] = int(math.Floor(math.Log(float64(max(s.ix.Len(), 1))) / math.Log(float64(f))))
		top = max(top, tier[i])
	}
	// A run of adjacent segments of tier at most t merges once it holds
	// MergeFactor of tier exactly t (the smaller ones between are swept
	// in): a large segment is never rewritten for a few small ones.
	for t := 0; t <= top; t++ {
		start, count := -1, 0
		for i := 0; i <= n; i++ {
			if i < n && tier[i] <= t {
				if start < 0 {
					start, count = i, 0
				}
				if tier[i] == t {
					count++
				}
				continue
			}
			if start >= 0 && count >= f {
				return span(start, i)
			}
			start = -1
		}
	}
	var bytes int64
	for _, s := range snap.segs {
		bytes += s.ix.Size()
	}
	budget := max(f, int(float64(bytes)/10/float64(overhead(snap.segs[0].ix))))
	if n > budget {
		width := n - budget + 1
		best, bestRows := 0, math.MaxInt
		for i := 0; i+width <= n; i++ {
			rows := 0
			for _, s := range snap.segs[i : i+width] {
				rows += s.ix.Len()
			}
			if rows < bestRows {
				best, bestRows = i, rows
			}
		}
		return span(best, best+width)
	}
	return snap.vacuumRun(p)
}

// vacuumRun returns a segment of at least MergeFactor rows more than half
// deleted, to rewrite without them, or nil.
func (snap *snapshot) vacuumRun(p Policy) []int {
	for i, s := range snap.segs {
		if d := int(snap.deleted[i].GetCardinality()); s.ix.Len() >= p.MergeFactor && 2*d > s.ix.Len() && d < s.ix.Len() {
			return []int{i}
		}
	}
	return nil
}

func span(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// overhead is the bytes a segment file of this model holds whatever its
// rows: the anchors (float16), the list offsets and parameters, and the
// headers.
func overhead(ix *index.Index) int64 {
	m := int64(ix.Lists())
	return m*int64(2*ix.Dim()+8) + int64(len(ix.Params())) + int64(len(ix.Global())) + 4096
}

// untrained reports whether the store holds its vectors exactly, not yet
// trained (a collection created empty).
func (snap *snapshot) untrained() bool {
	return snap.man.Schema != nil && snap.man.TrainedRows == 0
}

// drift is Info.Drift of the snapshot.
func (snap *snapshot) drift() float64 {
	var rows int
	var energy float64
	for i, e := range snap.man.Segments {
		if e.Added {
			live := e.Rows - int(snap.deleted[i].GetCardinality())
			rows += live
			energy += e.Energy * float64(live)
		}
	}
	trained := snap.man.TrainedEnergy
	if rows == 0 || trained <= 0 {
		return 0
	}
	return energy / float64(rows) / trained
}

// pendingDir holds background outputs until their commit gives them a
// segment name: files named PID-RANDOM.vlc, removed once their process
// has exited (removeStalePending).
func pendingDir(path string) string { return filepath.Join(segmentDir(path), "pending") }

func newPendingFile(path string) (string, error) {
	dir := pendingDir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, fmt.Sprintf("%d-%016x.vlc", os.Getpid(), rand.Uint64())), nil
}

// removeStalePending removes the pending files of processes that exited.
func removeStalePending(path string) {
	dir := pendingDir(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		// PID-RANDOM.vlc, or a temporary file of its write (.PID-...).
		pidText, _, ok := strings.Cut(strings.TrimPrefix(e.Name(), "."), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil {
			continue
		}
		if info, err := e.Info(); err == nil && format.Stale(pid, info.ModTime()) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// build writes the job's output to a pending file.
func (ix *Store) build(ctx context.Context, j *job) error {
	snap := j.from
	if j.kind == "graph" {
		var err error
		if j.pending, err = newPendingFile(ix.path); err != nil {
			return err
		}
		return ix.buildGraph(ctx, j)
	}
	j.newRow = make([][]int32, len(j.inputs))
	for k, i := range j.inputs {
		rows := make([]int32, snap.segs[i].ix.Len())
		for r := range rows {
			if snap.deleted[i].Contains(uint32(r)) {
				rows[r] = -1
			} else {
				rows[r] = int32(j.rows)
				j.rows++
			}
		}
		j.newRow[k] = rows
	}
	if j.rows == 0 {
		return fmt.Errorf("%w: every row is deleted", index.ErrArgument)
	}
	var err error
	if j.pending, err = newPendingFile(ix.path); err != nil {
		return err
	}
	if j.kind == "train" {
		return ix.buildTrained(ctx, j)
	}
	parts := make([]index.MergePart, len(j.inputs))
	withKeys := len(j.inputs) > 1 || snap.deleted[j.inputs[0]].GetCardinality() > 0
	var energy float64
	for k, i := range j.inputs {
		s := snap.segs[i].ix
		parts[k] = index.MergePart{Index: s, Keep: keepLive(snap.deleted[i])}
		live := s.Len() - int(snap.deleted[i].GetCardinality())
		energy += snap.man.Segments[i].Energy * float64(live)
		withKeys = withKeys || s.HasKeys()
	}
	j.energy = energy / float64(j.rows)
	meta := snap.segs[j.inputs[0]].ix.Meta()
	meta.Energy = j.energy
	_, err = index.Merge(ctx, j.pending, parts, meta, index.MergeOptions{WithKeys: withKeys})
	return err
}

// buildTrained trains anchors on the live vectors of every segment (as
// their codes give them back: exactly, for a collection not yet
// trained) and encodes them, in row order, to the pending file.
func (ix *Store) buildTrained(ctx context.Context, j *job) error {
	snap := j.from
	docs, err := snap.liveDocuments(j.inputs)
	if err != nil {
		return err
	}
	opt, err := snap.man.Schema.options(ix.bg.logger)
	if err != nil {
		return err
	}
	// Half of sqrt(rows) lists, twice as large as a build's: these
	// anchors will hold up to RetrainGrowth times the rows they were
	// trained on, and at the default NProbe the larger lists keep recall
	// (100,000 rows of bench/ragstore's data, NProbe 16: recall@10 0.969
	// with 158 lists, 0.935 with 316).
	opt.Anchors = max(2, int(math.Round(math.Sqrt(float64(len(docs)))/2)))
	sum, err := pipeline.Run(ctx, pipeline.Job{Source: pipeline.DocumentSource(ix.path, docs), Output: j.pending, Options: opt})
	if err != nil {
		return err
	}
	j.energy = sum.Energy
	return nil
}

// liveDocuments returns the live rows of the given segments, in row
// order, as documents: id, payload, and the vector the code gives back.
func (snap *snapshot) liveDocuments(segs []int) ([]pipeline.Document, error) {
	var docs []pipeline.Document
	for _, i := range segs {
		s, del := snap.segs[i].ix, snap.deleted[i]
		vecs := make([][]float32, s.Len())
		err := s.Reconstruct(func(row int, x []float32) error {
			if !del.Contains(uint32(row)) {
				vecs[row] = append([]float32(nil), x...)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for r, x := range vecs {
			if x == nil {
				continue
			}
			rec, err := snap.record(snap.group.Base(i) + r)
			if err != nil {
				return nil, err
			}
			docs = append(docs, pipeline.Document{ID: rec.ID, Vector: x, Payload: rec.Payload})
		}
	}
	return docs, nil
}

// commitJob installs a built job's output in the newest version.
func (ix *Store) commitJob(ctx context.Context, j *job) error {
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer w.end()
	newest := w.snap
	if newest.lone() {
		return errSuperseded
	}
	at := make(map[string]int, len(newest.segs))
	for i, s := range newest.segs {
		at[s.file] = i
	}
	inputs := map[int]int{} // newest's segment -> input k
	outDel := roaring.New()
	for k, i := range j.inputs {
		n, ok := at[j.from.segs[i].file]
		switch {
		case ok:
			inputs[n] = k
		case newest.man.Version >= 3 && newest.man.Layout == j.from.man.Layout:
			// (A version 2 manifest may come from an older vlc, which
			// does not count the layout.)
			// No change has moved rows since the job began: the segment
			// left because a write deleted all its rows (dropEmpty).
			for _, r := range j.newRow[k] {
				if r >= 0 {
					outDel.Add(uint32(r))
				}
			}
		default:
			return errSuperseded
		}
	}
	if len(inputs) == 0 {
		return errSuperseded
	}
	for n, k := range inputs {
		gone := roaring.AndNot(newest.deleted[n], j.from.deleted[j.inputs[k]])
		it := gone.Iterator()
		for it.HasNext() {
			if r := j.newRow[k][it.Next()]; r >= 0 {
				outDel.Add(uint32(r))
			}
		}
	}
	v, name, out, err := w.installPending(j.pending)
	if err != nil {
		return err
	}
	outSeg := newSegment(out, name)
	entry := segmentEntry{File: name, Rows: out.Len(), Energy: j.energy}
	for n := range inputs {
		entry.Added = entry.Added || v.man.Segments[n].Added
	}
	var segs []*segment
	var entries []segmentEntry
	var deleted []*roaring.Bitmap
	placed := false
	for n := range newest.segs {
		if _, in := inputs[n]; in {
			if !placed && j.kind == "merge" {
				segs, entries, deleted = append(segs, outSeg), append(entries, entry), append(deleted, outDel)
				placed = true
			}
			continue
		}
		segs, entries, deleted = append(segs, v.segs[n]), append(entries, v.man.Segments[n]), append(deleted, v.deleted[n])
	}
	if j.kind == "train" {
		entry.Added = false
		segs, entries, deleted = append([]*segment{outSeg}, segs...), append([]segmentEntry{entry}, entries...), append([]*roaring.Bitmap{outDel}, deleted...)
		// Segments written during the training hold codes of the old
		// model (or none): encode their live rows against the new one.
		for k := len(segs) - 1; k >= 1; k-- {
			n := at[segs[k].file]
			docs, err := newest.liveDocuments([]int{n})
			if err != nil {
				closeUnshared(append(append(v.segs, segs...), outSeg))
				return err
			}
			if len(docs) == 0 {
				segs, entries, deleted = append(segs[:k], segs[k+1:]...), append(entries[:k], entries[k+1:]...), append(deleted[:k], deleted[k+1:]...)
				continue
			}
			ids := make([]string, len(docs))
			for i, d := range docs {
				ids[i] = d.ID
			}
			seg, e, err := w.encode(ctx, v, out, docs, ids)
			if err != nil {
				closeUnshared(append(append(v.segs, segs...), outSeg))
				return err
			}
			segs[k], entries[k], deleted[k] = seg, e, roaring.New()
		}
		v.man.TrainedEnergy, v.man.TrainedRows = j.energy, j.rows
	}
	v.segs, v.man.Segments, v.deleted = segs, entries, deleted
	v.man.Layout++
	v.dropEmpty()
	return w.commit(v)
}
