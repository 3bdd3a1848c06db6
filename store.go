package vlc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
)

// Index is an open vlc index: the file Compress or Build wrote, and the
// vectors added and deleted since (a store of segments, see Add). Search,
// SearchBatch and Get see a consistent snapshot: a write becomes visible
// whole, to searches that start after it. Writes (Add, Delete, Compact,
// Retrain) are serialised, in this process by the Index and across
// processes by a lock file; Refresh picks up another process's writes.
// Safe for concurrent use.
type Index struct {
	path string
	mu   sync.Mutex // guards cur and closed
	cur  *snapshot
	// id is the identity of the file at path that cur was read from.
	id     os.FileInfo
	closed bool

	wmu  sync.Mutex // held by a write in progress
	lock *lockFile  // the lock file, once a write took it; released by Close
}

// ErrNotFound is returned for an id the index does not hold (or holds
// deleted).
var ErrNotFound = errors.New("vlc: id not found")

// ErrLocked is returned by a write while another process writes the index.
var ErrLocked = errors.New("vlc: index locked by another writer")

// ErrNotRegular is returned for a path that is not a regular file (a
// named pipe, a device, a socket, a folder): an index or input refused
// without blocking on it, or an output refused rather than replaced.
var ErrNotRegular = index.ErrNotRegular

// Errors of ids and payloads, from the index package.
var (
	ErrDuplicateID = index.ErrDuplicateKey
	ErrID          = index.ErrKey
	ErrPayload     = index.ErrPayload
)

// Limits on what one vector may carry.
const (
	MaxIDBytes      = index.MaxKeyBytes
	MaxPayloadBytes = index.MaxPayloadBytes
)

// segment is one open index file of a store, shared by the snapshots
// that include it and closed when the last of them is released.
type segment struct {
	ix   *index.Index
	file string // name in the segment folder; "" for the index file at path
	refs atomic.Int32
}

func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.ix.Close()
	}
}

// snapshot is the state of the store that searches read: its segments,
// their deleted rows and their group. Immutable once built.
type snapshot struct {
	refs    atomic.Int64
	man     manifest // zero for a lone index file
	segs    []*segment
	deleted []*roaring.Bitmap // per segment
	group   *index.Group
	// gone holds the deleted rows in group numbering.
	gone *roaring.Bitmap
	live int
}

func (s *snapshot) release() {
	if s.refs.Add(-1) == 0 {
		for _, g := range s.segs {
			g.release()
		}
	}
}

// newSnapshot builds a snapshot over segs (each gaining a reference).
func newSnapshot(man manifest, segs []*segment, deleted []*roaring.Bitmap) (*snapshot, error) {
	parts := make([]*index.Index, len(segs))
	for i, s := range segs {
		parts[i] = s.ix
	}
	g, err := index.NewGroup(parts...)
	if err != nil {
		return nil, err
	}
	snap := &snapshot{man: man, segs: segs, deleted: deleted, group: g, gone: roaring.New()}
	for i, d := range deleted {
		base := uint32(g.Base(i))
		it := d.Iterator()
		for it.HasNext() {
			snap.gone.Add(base + it.Next())
		}
	}
	snap.live = g.Len() - int(snap.gone.GetCardinality())
	snap.refs.Store(1)
	for _, s := range segs {
		s.refs.Add(1)
	}
	return snap, nil
}

// Open opens the index at path (a file Compress or Build wrote, or a store
// that Add or Delete made of it) and verifies every checksum once.
func Open(path string) (*Index, error) {
	snap, id, err := load(path, nil)
	if err != nil {
		return nil, err
	}
	return &Index{path: path, cur: snap, id: id}, nil
}

// load reads the store at path, reusing the open segments of old (may be
// nil) that it still names. A segment file removed by a compaction
// between reading the manifest and opening it means the manifest changed:
// it reads again.
func load(path string, old *snapshot) (*snapshot, os.FileInfo, error) {
	for try := 0; ; try++ {
		snap, id, err := loadOnce(path, old)
		if err == nil || !errors.Is(err, os.ErrNotExist) || try == 3 {
			return snap, id, err
		}
	}
}

func loadOnce(path string, old *snapshot) (*snapshot, os.FileInfo, error) {
	f, err := format.Open(path, format.OpenOptions{Verify: true})
	if err != nil {
		return nil, nil, err
	}
	id, err := os.Stat(path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !isManifest(f) {
		f.Close()
		ix, err := index.Open(path, index.Options{Verify: true})
		if err != nil {
			return nil, nil, err
		}
		seg := &segment{ix: ix}
		snap, err := newSnapshot(manifest{}, []*segment{seg}, []*roaring.Bitmap{roaring.New()})
		if err != nil {
			ix.Close()
			return nil, nil, err
		}
		return snap, id, nil
	}
	man, deleted, err := readManifest(f, path)
	f.Close()
	if err != nil {
		return nil, nil, err
	}
	reuse := map[string]*segment{}
	if old != nil {
		for _, s := range old.segs {
			if s.file != "" {
				reuse[s.file] = s
			}
		}
	}
	segs := make([]*segment, len(man.Segments))
	fail := func(err error) (*snapshot, os.FileInfo, error) {
		for _, s := range segs {
			if s != nil && s.refs.Load() == 0 {
				s.ix.Close()
			}
		}
		return nil, nil, err
	}
	for i, e := range man.Segments {
		if s, ok := reuse[e.File]; ok {
			segs[i] = s
			continue
		}
		ix, err := index.Open(filepath.Join(segmentDir(path), e.File), index.Options{Verify: true})
		if err != nil {
			return fail(fmt.Errorf("%s: segment %d: %w", path, i, err))
		}
		segs[i] = &segment{ix: ix, file: e.File}
		if ix.Len() != e.Rows {
			return fail(fmt.Errorf("%s: %w: segment %s holds %d rows, the manifest says %d", path, index.ErrCorrupt, e.File, ix.Len(), e.Rows))
		}
	}
	snap, err := newSnapshot(man, segs, deleted)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	return snap, id, nil
}

// acquire returns the current snapshot, referenced until release.
func (ix *Index) acquire() (*snapshot, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil, index.ErrClosed
	}
	ix.cur.refs.Add(1)
	return ix.cur, nil
}

// install makes snap current (its reference passes to the Index).
func (ix *Index) install(snap *snapshot, id os.FileInfo) {
	ix.mu.Lock()
	old := ix.cur
	ix.cur, ix.id = snap, id
	ix.mu.Unlock()
	old.release()
}

// Refresh reads the index again if another process changed it since
// Open or the last Refresh, so that later searches see its writes.
func (ix *Index) Refresh() error {
	st, err := os.Stat(ix.path)
	if err != nil {
		return err
	}
	ix.mu.Lock()
	same := ix.id != nil && os.SameFile(st, ix.id) && st.ModTime().Equal(ix.id.ModTime()) && st.Size() == ix.id.Size()
	closed := ix.closed
	ix.mu.Unlock()
	if closed {
		return index.ErrClosed
	}
	if same {
		return nil
	}
	old, err := ix.acquire()
	if err != nil {
		return err
	}
	defer old.release()
	snap, id, err := load(ix.path, old)
	if err != nil {
		return err
	}
	ix.install(snap, id)
	return nil
}

// Close releases the index once searches in flight have finished, and
// the write lock if a write took it.
func (ix *Index) Close() error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return nil
	}
	ix.closed = true
	cur := ix.cur
	ix.mu.Unlock()
	cur.release()
	if ix.lock != nil {
		ix.lock.unlock()
		ix.lock = nil
	}
	return nil
}

// Path is the path the index was opened from.
func (ix *Index) Path() string { return ix.path }

// Info describes an index: its training, segments and rows.
type Info struct {
	Meta     index.Meta // of the first segment (the trained one)
	Dim      int
	Lists    int
	Rows     int // live rows: searched and returned
	Deleted  int // rows deleted and not yet compacted away
	Bytes    int64
	Segments []SegmentInfo
	// Drift is the mean squared distance to their anchors of the rows
	// added since training, over that of the trained rows (0 when none
	// were added). Well above 1, the anchors no longer fit: Retrain.
	Drift float64
}

// SegmentInfo is one file of an index.
type SegmentInfo struct {
	File          string // path of the file
	Rows, Deleted int
	Added         bool // rows added after training
	Energy        float64
	Bytes         int64
	IDs, Payloads bool // whether it stores ids and payloads
}

// DriftWarn is the Drift above which Info's readers (vlc info) suggest
// retraining: added rows a third further (in squared distance) from
// their anchors than the trained rows.
const DriftWarn = 1.33

// Info describes the index as the current snapshot holds it.
func (ix *Index) Info() (Info, error) {
	snap, err := ix.acquire()
	if err != nil {
		return Info{}, err
	}
	defer snap.release()
	first := snap.segs[0].ix
	in := Info{Meta: first.Meta(), Dim: first.Dim(), Lists: first.Lists(), Rows: snap.live, Deleted: snap.group.Len() - snap.live}
	var addRows int
	var addEnergy float64
	for i, s := range snap.segs {
		si := SegmentInfo{File: ix.path, Rows: s.ix.Len(), Deleted: int(snap.deleted[i].GetCardinality()), Bytes: s.ix.Size(),
			IDs: s.ix.HasKeys(), Payloads: s.ix.HasPayloads(), Energy: s.ix.Meta().Energy}
		if s.file != "" {
			si.File = filepath.Join(segmentDir(ix.path), s.file)
			e := snap.man.Segments[i]
			si.Added, si.Energy = e.Added, e.Energy
		}
		if si.Added {
			addRows += si.Rows - si.Deleted
			addEnergy += si.Energy * float64(si.Rows-si.Deleted)
		}
		in.Bytes += si.Bytes
		in.Segments = append(in.Segments, si)
	}
	trained := first.Meta().Energy
	if snap.man.TrainedEnergy > 0 {
		trained = snap.man.TrainedEnergy
	}
	if addRows > 0 && trained > 0 {
		in.Drift = addEnergy / float64(addRows) / trained
	}
	return in, nil
}

// Len is the number of live rows.
func (ix *Index) Len() int {
	snap, err := ix.acquire()
	if err != nil {
		return 0
	}
	defer snap.release()
	return snap.live
}

// Dim is the dimension of the vectors.
func (ix *Index) Dim() int {
	snap, err := ix.acquire()
	if err != nil {
		return 0
	}
	defer snap.release()
	return snap.segs[0].ix.Dim()
}

// Verify checks every checksum of every segment and the manifest again.
func (ix *Index) Verify() error {
	snap, err := ix.acquire()
	if err != nil {
		return err
	}
	defer snap.release()
	for _, s := range snap.segs {
		if err := s.ix.Verify(); err != nil {
			return err
		}
	}
	return nil
}

// Record is what Get returns for an id.
type Record struct {
	ID      string
	Payload []byte // a copy; nil when the row has none
}

// Get returns the record of a live id, or an error wrapping ErrNotFound.
func (ix *Index) Get(id string) (Record, error) {
	snap, err := ix.acquire()
	if err != nil {
		return Record{}, err
	}
	defer snap.release()
	row, ok := snap.find(id)
	if !ok {
		return Record{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return snap.record(row)
}

// find returns the live group row of id.
func (snap *snapshot) find(id string) (int, bool) {
	// Newest first: an id deleted and added again lives in a later segment.
	for i := len(snap.segs) - 1; i >= 0; i-- {
		if r, ok := snap.segs[i].ix.Find(id); ok && !snap.deleted[i].Contains(uint32(r)) {
			return snap.group.Base(i) + r, true
		}
	}
	return 0, false
}

// record returns the id and payload of a group row, copied.
func (snap *snapshot) record(row int) (Record, error) {
	i, r := snap.group.Locate(row)
	ix := snap.segs[i].ix
	k, err := ix.Key(r)
	if err != nil {
		return Record{}, err
	}
	p, err := ix.Payload(r)
	if err != nil {
		return Record{}, err
	}
	rec := Record{ID: string(k)}
	if p != nil {
		rec.Payload = append([]byte{}, p...)
	}
	return rec, nil
}
