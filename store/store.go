package store

import (
	"context"
	"errors"
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/filter"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
)

// Store is an open vlc index: the file Compress or Build wrote, and the
// vectors added and deleted since (a store of segments, see Add). Search,
// SearchBatch and Get see a consistent snapshot: a write becomes visible
// whole, to searches that start after it. Writes (Add, Delete, Compact,
// Retrain) are serialised, in this process by the Store and across
// processes by a lock file taken for each write; a write first reads the
// newest version (another process's writes included) and applies its
// change to that. Refresh picks up another process's writes for searches.
// Safe for concurrent use.
type Store struct {
	path   string
	mu     sync.Mutex // guards cur and closed
	cur    *snapshot
	closed bool

	wmu sync.Mutex // held by a write in progress in this process
	// rmu serialises reading a new version with installing it: Refresh,
	// and a write from the version it reads to the one it commits, so
	// that no version is installed over a newer one.
	rmu sync.Mutex

	// background: whether commits start background work (bg).
	background bool
	bg         worker
	// tempDir, for a collection made by CreateTemp, is removed by Close.
	tempDir string
	// dev, when set, searches the segments (OpenOptions.Device).
	dev device.Searcher
}

// ErrNotFound is returned for an id the index does not hold (or holds
// deleted).
var ErrNotFound = errs.New(errs.ErrNotFound, "id not found")

// ErrLocked is returned by a write while another process writes the index.
var ErrLocked = errs.New(errs.ErrLocked, "locked by another writer")

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
	// info is the identity of the file mapped (index.Index.Stat): a
	// segment is reused by a later version only if its name still names
	// this very file.
	info os.FileInfo
	refs atomic.Int32

	// cols is the payload index of the store's indexed fields, built on
	// the first filtered search.
	colsOnce sync.Once
	cols     *filter.Columns
	colsErr  error

	// dev is the segment's copy on the store's device, made by the first
	// version installed that holds the segment (nil: searched on the CPU,
	// for devErr's reason); closed with the segment.
	devOnce sync.Once
	dev     *index.DeviceIndex
	devErr  error

	// graph is the graph the segment's file holds (nil: none), opened
	// by the first version that holds the segment (openGraph) and read
	// from ix's mapping, so valid while ix is open.
	graphOnce sync.Once
	graph     *graph.Graph
	graphErr  error
}

func newSegment(ix *index.Index, file string) *segment {
	return &segment{ix: ix, file: file, info: ix.Stat()}
}

func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		if s.dev != nil {
			s.dev.Close()
		}
		s.ix.Close()
	}
}

// snapshot is the state of the store that searches read: its segments,
// their deleted rows and their group. Immutable once built.
type snapshot struct {
	refs atomic.Int64
	// src is the manifest this version was read from, kept mapped: while
	// it is, no other file can take its identity, so os.SameFile of the
	// path and srcInfo proves the path unchanged. For a lone index file
	// (src nil) the first segment is that file.
	src     *format.File
	srcInfo os.FileInfo
	man     manifest // zero for a lone index file
	segs    []*segment
	deleted []*roaring.Bitmap // per segment
	// origin holds the ids (numbers) whose vector is the row of that
	// number in the input the index was built from: what re-ranking from
	// that file (RowOriginals) covers. Nil for a lone index file, where
	// it is every row of a file without ids and none of one with ids.
	origin *roaring.Bitmap
	group  *index.Group
	// gone holds the deleted rows in group numbering.
	gone *roaring.Bitmap
	live int
	sortedCache
	// goneBits is gone as a bitset, for the searches' filters.
	goneOnce sync.Once
	goneBits bitset
	// walk, when set, is how searches walk the segments' graphs (at
	// least one segment holds one; graph.go).
	walk *walkPlan
}

func (s *snapshot) release() {
	if s.refs.Add(-1) == 0 {
		for _, g := range s.segs {
			g.release()
		}
		if s.src != nil {
			s.src.Close()
		}
	}
}

// newSnapshot builds a snapshot over segs (each gaining a reference); src
// passes to it (closed with it), also on error.
func newSnapshot(src *format.File, srcInfo os.FileInfo, man manifest, segs []*segment, deleted []*roaring.Bitmap, origin *roaring.Bitmap) (*snapshot, error) {
	parts := make([]*index.Index, len(segs))
	for i, s := range segs {
		parts[i] = s.ix
	}
	g, err := index.NewGroup(parts...)
	if err != nil {
		if src != nil {
			src.Close()
		}
		return nil, err
	}
	snap := &snapshot{src: src, srcInfo: srcInfo, man: man, segs: segs, deleted: deleted, origin: origin, group: g, gone: roaring.New()}
	for i, d := range deleted {
		base := uint32(g.Base(i))
		it := d.Iterator()
		for it.HasNext() {
			snap.gone.Add(base + it.Next())
		}
	}
	snap.live = g.Len() - int(snap.gone.GetCardinality())
	if err := snap.planWalks(); err != nil {
		if src != nil {
			src.Close()
		}
		return nil, err
	}
	snap.refs.Store(1)
	for _, s := range segs {
		s.refs.Add(1)
	}
	return snap, nil
}

// lone reports whether the snapshot is a lone index file, not a store.
func (s *snapshot) lone() bool { return s.src == nil }

// Open opens the index at path (a file Compress or Build wrote, or a store
// that Add or Delete made of it) and verifies every checksum once. Should
// another process change the path meanwhile (a write that turns an index
// into a store, a compaction), it reads the new version.
func Open(path string) (*Store, error) {
	return OpenWith(path, OpenOptions{})
}

// OpenOptions are how a Store is opened.
type OpenOptions struct {
	// Manual turns off the background work (merging small segments,
	// training a collection created empty, building the graphs
	// Policy.GraphAt asks for) that a write starts; Maintain runs it on
	// demand.
	Manual bool
	// Logger receives the background training's progress (nil: none).
	Logger *slog.Logger
	// Device, when set, searches each segment in the device's memory
	// (see SearchDevice; OpenSearchDevice opens one by backend name). It
	// must outlive the Store.
	Device device.Searcher
}

// OpenWith is Open with options.
func OpenWith(path string, opt OpenOptions) (*Store, error) {
	snap, err := load(path, nil)
	if err != nil {
		return nil, err
	}
	ix := &Store{path: path, cur: snap, background: !opt.Manual, dev: opt.Device}
	ix.bg.logger = opt.Logger
	ix.onDevice(snap)
	ix.bg.ctx, ix.bg.cancel = context.WithCancel(context.Background())
	ix.bg.logger = opt.Logger
	return ix, nil
}

// loadTries bounds how many versions a load reads in a row while other
// processes keep changing the path under it.
const loadTries = 20

// errChanged marks a load that failed because the path no longer names
// the file it read: another process committed a version meanwhile.
var errChanged = errors.New("the index changed while it was read")

// load reads the store at path, reusing the open segments of old (may be
// nil) that it still names and that are still the same files. A version
// superseded while it is read (its segments removed by a compaction, its
// manifest replaced) is read again, at most loadTries times.
func load(path string, old *snapshot) (*snapshot, error) {
	var err error
	for try := range loadTries {
		var snap *snapshot
		if snap, err = loadOnce(path, old); err == nil || !errors.Is(err, errChanged) {
			return snap, err
		}
		time.Sleep(time.Duration(try+1) * time.Millisecond)
	}
	return nil, fmt.Errorf("%s: another process changed it %d times while it was read: %w", path, loadTries, err)
}

// loadOnce opens path once and reads whatever it holds from that one
// open file: a lone index, or a manifest and its segments.
func loadOnce(path string, old *snapshot) (*snapshot, error) {
	f, err := format.Open(path, format.OpenOptions{Verify: true})
	if err != nil {
		return nil, err
	}
	info := f.Stat()
	if !isManifest(f) {
		ix, err := index.OpenFile(f, index.Options{Verify: true})
		if err != nil {
			return nil, err
		}
		seg := newSegment(ix, "")
		snap, err := newSnapshot(nil, info, manifest{}, []*segment{seg}, []*roaring.Bitmap{roaring.New()}, nil)
		if err != nil {
			ix.Close()
			return nil, err
		}
		return snap, nil
	}
	man, deleted, origin, err := readManifest(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	reuse := map[string]*segment{}
	if old != nil {
		for _, s := range old.segs {
			if s.file != "" {
				reuse[s.file] = s
			}
		}
	}
	dir := segmentDir(path)
	segs := make([]*segment, len(man.Segments))
	fail := func(err error) (*snapshot, error) {
		for _, s := range segs {
			if s != nil && s.refs.Load() == 0 {
				s.ix.Close()
			}
		}
		f.Close()
		// A segment missing or not what the manifest says, while the path
		// names another file than the manifest read: a newer version.
		if st, serr := os.Stat(path); serr == nil && !os.SameFile(st, info) {
			return nil, fmt.Errorf("%w: %w", errChanged, err)
		}
		return nil, err
	}
	for i, e := range man.Segments {
		file := filepath.Join(dir, e.File)
		if s, ok := reuse[e.File]; ok && s.ix.Len() == e.Rows {
			if st, err := os.Stat(file); err == nil && os.SameFile(st, s.info) {
				segs[i] = s
				continue
			}
		}
		ix, err := index.Open(file, index.Options{Verify: true})
		if err != nil {
			return fail(fmt.Errorf("%s: segment %d: %w", path, i, err))
		}
		segs[i] = newSegment(ix, e.File)
		if ix.Len() != e.Rows {
			return fail(fmt.Errorf("%s: %w: segment %s holds %d rows, the manifest says %d", path, index.ErrCorrupt, e.File, ix.Len(), e.Rows))
		}
	}
	if man.Version < 2 {
		origin = firstOrigin(segs[0].ix, deleted[0])
		if !segs[0].ix.HasKeys() {
			man.InputRows = segs[0].ix.Len()
		}
	}
	snap, err := newSnapshot(f, info, man, segs, deleted, origin)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	return snap, nil
}

// firstOrigin is the origin of a store made of first, an index file as
// Compress or Build wrote it: every live row of a file without ids (its
// row r has id r, the input's row r), none of one with ids (they name
// rows by the caller's ids, and a file a compaction wrote renumbered its
// rows).
func firstOrigin(first *index.Index, deleted *roaring.Bitmap) *roaring.Bitmap {
	o := roaring.New()
	if !first.HasKeys() {
		o.AddRange(0, uint64(first.Len()))
		o.AndNot(deleted)
	}
	return o
}

// acquire returns the current snapshot, referenced until release.
func (ix *Store) acquire() (*snapshot, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil, index.ErrClosed
	}
	ix.cur.refs.Add(1)
	return ix.cur, nil
}

// install makes snap current (its reference passes to the Store).
func (ix *Store) install(snap *snapshot) {
	ix.onDevice(snap)
	ix.mu.Lock()
	if ix.closed { // Close released cur already
		ix.mu.Unlock()
		snap.release()
		return
	}
	old := ix.cur
	ix.cur = snap
	ix.mu.Unlock()
	old.release()
}

// Refresh reads the index again if another process changed it since
// Open or the last Refresh, so that later searches see its writes. The
// version held stays mapped, so no other file can take its identity: the
// path names another version when it names another file, or the same
// file with another size or modification time (a file copied over it in
// place, which vlc never does).
func (ix *Store) Refresh() error {
	ix.rmu.Lock()
	defer ix.rmu.Unlock()
	return ix.refreshLocked()
}

// refreshLocked is Refresh with rmu held: reading a version and
// installing it are one step, so that a version read earlier is never
// installed over one read later.
func (ix *Store) refreshLocked() error {
	st, err := os.Stat(ix.path)
	if err != nil {
		return err
	}
	cur, err := ix.acquire()
	if err != nil {
		return err
	}
	defer cur.release()
	if sameVersion(st, cur.srcInfo) {
		return nil
	}
	snap, err := load(ix.path, cur)
	if err != nil {
		return err
	}
	if refreshLoaded != nil {
		refreshLoaded()
	}
	ix.install(snap)
	return nil
}

// refreshLoaded, when set (by tests), is called between a Refresh's
// reading of a version and its installing it: the window in which a
// write of the same handle must not install a newer one.
var refreshLoaded func()

// sameVersion reports whether st, the file at a store's path now,
// is the file a version was read from (whose mapping keeps its identity
// from being reused), unchanged.
func sameVersion(st, read os.FileInfo) bool {
	return os.SameFile(st, read) && st.Size() == read.Size() && st.ModTime().Equal(read.ModTime())
}

// Close releases the index once searches in flight have finished.
func (ix *Store) Close() error {
	ix.stopBackground()
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
	if ix.tempDir != "" {
		return os.RemoveAll(ix.tempDir)
	}
	return nil
}

// Path is the path the index was opened from.
func (ix *Store) Path() string { return ix.path }

// Info describes an index: its training, segments and rows.
type Info struct {
	Meta     index.Meta // of the first segment (the trained one)
	Dim      int
	Lists    int
	Rows     int // live rows: searched and returned
	Deleted  int // rows deleted and not yet compacted away
	Bytes    int64
	Segments []SegmentInfo
	// Sections and ListSizes describe the first segment's file (the
	// trained one), as the snapshot holds it open.
	Sections  []format.SectionInfo
	ListSizes []int
	// FromInput is the live rows whose vector is the row of their id's
	// number in the input the index was built from: those a re-rank from
	// that file (RowOriginals) scores exactly. Rows added later (and an
	// index written with ids of its own) are not among them.
	FromInput int
	// InputRows is the rows of that input (a re-rank file must have
	// them all); 0 when no row is from it.
	InputRows int
	// Drift is the mean squared distance to their anchors of the rows
	// added since training, over that of the trained rows (0 when none
	// were added). Well above 1, the anchors no longer fit: Retrain.
	Drift float64
	// Policy is the store's background work as set (Create, SetPolicy):
	// zeros where the defaults hold.
	Policy Policy
}

// SegmentInfo is one file of an index.
type SegmentInfo struct {
	File          string // path of the file
	Rows, Deleted int
	Added         bool // rows added after training
	Energy        float64
	Bytes         int64
	IDs, Payloads bool // whether it stores ids and payloads
	// Graph is whether its file holds a graph that searches walk
	// (SearchOptions.Ef).
	Graph bool
}

// DriftWarn is the Drift above which Info's readers (vlc info) suggest
// retraining: added rows a third further (in squared distance) from
// their anchors than the trained rows.
const DriftWarn = 1.33

// Info describes the index as the current snapshot holds it.
func (ix *Store) Info() (Info, error) {
	snap, err := ix.acquire()
	if err != nil {
		return Info{}, err
	}
	defer snap.release()
	first := snap.segs[0].ix
	in := Info{Meta: first.Meta(), Dim: first.Dim(), Lists: first.Lists(), Rows: snap.live, Deleted: snap.group.Len() - snap.live,
		Sections: first.Sections(), ListSizes: first.ListSizes(), FromInput: snap.fromInputRows(), InputRows: snap.inputRows(), Policy: snap.setPolicy()}
	var addRows int
	var addEnergy float64
	for i, s := range snap.segs {
		si := SegmentInfo{File: ix.path, Rows: s.ix.Len(), Deleted: int(snap.deleted[i].GetCardinality()), Bytes: s.ix.Size(),
			IDs: s.ix.HasKeys(), Payloads: s.ix.HasPayloads(), Energy: s.ix.Meta().Energy,
			Graph: s.graph != nil}
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

// fromInputRows counts the live rows RowOriginals covers (Info.FromInput).
func (snap *snapshot) fromInputRows() int {
	switch {
	case snap.origin != nil:
		return int(snap.origin.GetCardinality())
	case snap.segs[0].ix.HasKeys():
		return 0
	}
	return snap.live
}

// inputRows is Info.InputRows.
func (snap *snapshot) inputRows() int {
	switch {
	case !snap.lone():
		return snap.man.InputRows
	case snap.segs[0].ix.HasKeys():
		return 0
	}
	return snap.segs[0].ix.Len()
}

// fromInput reports whether group row row, whose id is id, holds the row
// of that number of the input the index was built from (Info.FromInput).
func (snap *snapshot) fromInput(row int, id string) bool {
	n, ok := decimalID(id)
	if !ok {
		return false
	}
	if snap.origin != nil {
		return snap.origin.Contains(n)
	}
	return !snap.segs[0].ix.HasKeys() && int(n) == row
}

// decimalID reads an id that is a row number as an index without ids
// names it (canonical decimal, below 2^32).
func decimalID(id string) (uint32, bool) {
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil || strconv.FormatUint(n, 10) != id {
		return 0, false
	}
	return uint32(n), true
}

// Len is the number of live rows.
func (ix *Store) Len() int {
	snap, err := ix.acquire()
	if err != nil {
		return 0
	}
	defer snap.release()
	return snap.live
}

// Dim is the dimension of the vectors.
func (ix *Store) Dim() int {
	snap, err := ix.acquire()
	if err != nil {
		return 0
	}
	defer snap.release()
	return snap.segs[0].ix.Dim()
}

// Verify checks every checksum of every segment and the manifest again.
func (ix *Store) Verify() error {
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
	// Vector is the decoded vector, when asked for (WithVector).
	Vector []float32
}

// Get returns the record of a live id, or an error wrapping ErrNotFound.
func (ix *Store) Get(id string, opts ...GetOption) (Record, error) {
	var o getOptions
	for _, f := range opts {
		f(&o)
	}
	snap, err := ix.acquire()
	if err != nil {
		return Record{}, err
	}
	defer snap.release()
	row, ok := snap.find(id)
	if !ok {
		return Record{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return snap.getRecord(row, o)
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
