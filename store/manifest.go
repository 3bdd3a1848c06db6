package store

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
)

// A store is the index file at its path, or, once vectors have been
// added or deleted, a manifest there naming segment files in the folder
// beside it (segmentDir). The manifest is a format container (the same
// header and checksums as an index) with three sections:
//
//	STOR  JSON: the segments in row order, with their rows, deleted rows
//	      and residual energy, and the counters for new names and ids
//	DELS  each segment's deleted rows, a serialised roaring bitmap, at
//	      the offset and length its STOR entry gives
//	ORIG  the ids (numbers) whose vector is still the row of that number
//	      in the input the index was built from (re-ranking from that
//	      file is exact for them), a serialised roaring bitmap
//
// Every change writes new segment files (never modifying one) under
// names never used before in the store (a number from next_segment, which
// only grows, and 64 random bits), then a new manifest to a temporary
// file, synced and renamed over the path: that rename is the commit.
// docs/FORMAT.md ("Stores") has the details.
var (
	secStore   = format.KindOf("STOR")
	secDeleted = format.KindOf("DELS")
	secOrigin  = format.KindOf("ORIG")
)

// manifestVersion is the STOR layout; a reader refuses a newer one.
// Version 1 named segments seg-NNNNNN.vlc and had no ORIG; a store of
// version 1 opens, and its first write upgrades it. Version 3 adds the
// schema of a collection created empty (and the layout count and the
// policy of a store grown from a file); a store without them is still
// written as version 2, which older readers open.
const manifestVersion = 3

type manifest struct {
	Version int `json:"version"`
	// NextSegment is above the number of every segment the store ever
	// named: the next segment file takes it.
	NextSegment int    `json:"next_segment"`
	NextID      uint64 `json:"next_id"` // next id tried for a row added without one
	// InputRows is the rows of the input the index was built from, when
	// its ids are their row numbers there (ORIG); 0 otherwise.
	InputRows int `json:"input_rows,omitempty"`
	// TrainedEnergy is the mean squared distance of the trained rows to
	// their anchors (the first segment's META energy).
	TrainedEnergy float64        `json:"trained_energy"`
	Segments      []segmentEntry `json:"segments"`
	// Schema is what a collection created empty was made with (nil for
	// a store grown from an index file); TrainedRows the live rows its
	// anchors were last trained on, 0 while it holds them exactly.
	Schema      *Schema `json:"schema,omitempty"`
	TrainedRows int     `json:"trained_rows,omitempty"`
	// Layout counts the changes that moved rows between segments
	// (compactions, retrainings, background merges and trainings): a
	// background job whose input segment left while it stayed the same
	// knows the segment's rows were all deleted.
	Layout uint64 `json:"layout,omitempty"`
	// Policy is the background work's policy of a store grown from an
	// index file (SetPolicy; nil: the defaults). A collection keeps its
	// own in Schema.
	Policy *Policy `json:"policy,omitempty"`
}

type segmentEntry struct {
	File    string  `json:"file"` // in the segment folder
	Rows    int     `json:"rows"`
	Deleted int     `json:"deleted"`
	Added   bool    `json:"added"`  // rows added after training (their energy is watched)
	Energy  float64 `json:"energy"` // mean squared distance of its rows to their anchors
	DelOff  int64   `json:"del_offset"`
	DelLen  int64   `json:"del_length"`
}

// segmentDir is the folder of a store's segment files.
func segmentDir(path string) string { return sidePath(path, ".d") }

// isManifest reports whether f is a store manifest rather than an index.
func isManifest(f *format.File) bool {
	_, ok := f.Section(secStore)
	return ok
}

// segmentName is the file name of segment number n: "seg-" n (six digits
// at least) "-" 16 hex digits of randomness ".vlc". The number orders the
// names and the manifest's NextSegment keeps it from repeating within a
// store; the random part keeps a name from repeating across stores made
// at the same path (a store replaced, or removed and made again), so
// that no process can take a new file for one it opened before.
func segmentName(n int) string {
	return fmt.Sprintf("seg-%06d-%016x.vlc", n, rand.Uint64())
}

// segmentNumber parses a segment file name of this version
// ("seg-NNNNNN-XXXXXXXXXXXXXXXX.vlc") or of version 1 ("seg-NNNNNN.vlc").
func segmentNumber(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "seg-")
	if !ok {
		return 0, false
	}
	if rest, ok = strings.CutSuffix(rest, ".vlc"); !ok {
		return 0, false
	}
	num, tag, tagged := strings.Cut(rest, "-")
	if tagged && (len(tag) != 16 || strings.Trim(tag, "0123456789abcdef") != "") {
		return 0, false
	}
	if len(num) < 6 || strings.Trim(num, "0123456789") != "" || len(num) > 6 && num[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil
}

// readManifest parses a manifest container: the manifest, each segment's
// deleted rows and the ids re-ranking from the build's input covers. It
// refuses what would lose rows if trusted: a segment named twice, or a
// next segment number that a listed segment already has.
func readManifest(f *format.File, path string) (manifest, []*roaring.Bitmap, *roaring.Bitmap, error) {
	var m manifest
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", path, index.ErrCorrupt, fmt.Sprintf(format, args...))
	}
	st, _ := f.Section(secStore)
	if err := json.Unmarshal(st, &m); err != nil {
		return m, nil, nil, bad("STOR: %v", err)
	}
	if m.Version > manifestVersion {
		return m, nil, nil, fmt.Errorf("%s: %w: store manifest version %d (this vlc reads up to %d): upgrade vlc", path, index.ErrVersion, m.Version, manifestVersion)
	}
	if m.Version < 1 {
		return m, nil, nil, bad("STOR version %d", m.Version)
	}
	if len(m.Segments) == 0 {
		return m, nil, nil, bad("STOR names no segments")
	}
	if m.NextSegment < 0 {
		return m, nil, nil, bad("next segment number %d", m.NextSegment)
	}
	dels, _ := f.Section(secDeleted)
	bitmaps := make([]*roaring.Bitmap, len(m.Segments))
	seen := make(map[string]int, len(m.Segments))
	for i, s := range m.Segments {
		n, ok := segmentNumber(s.File)
		if !ok {
			return m, nil, nil, bad("segment %d has file name %q, not one vlc writes (seg-NNNNNN-XXXXXXXXXXXXXXXX.vlc)", i, s.File)
		}
		if j, dup := seen[s.File]; dup {
			return m, nil, nil, bad("segments %d and %d are both %s: a segment listed twice would count its rows twice", j, i, s.File)
		}
		seen[s.File] = i
		if n >= m.NextSegment {
			return m, nil, nil, bad("next segment number %d is taken by segment %d (%s): the next write would replace its rows", m.NextSegment, i, s.File)
		}
		if s.Rows < 1 || s.Deleted < 0 || s.Deleted > s.Rows || s.DelOff < 0 || s.DelLen < 0 || s.DelOff > int64(len(dels)) || s.DelLen > int64(len(dels))-s.DelOff {
			return m, nil, nil, bad("segment %d (%s): rows %d, deleted %d, deletions at %d+%d of %d bytes", i, s.File, s.Rows, s.Deleted, s.DelOff, s.DelLen, len(dels))
		}
		b, err := deletions(dels[s.DelOff:s.DelOff+s.DelLen], s.Deleted, s.Rows)
		if err != nil {
			return m, nil, nil, bad("segment %d (%s): deletions: %v", i, s.File, err)
		}
		bitmaps[i] = b
	}
	origin := roaring.New()
	if o, ok := f.Section(secOrigin); ok && len(o) > 0 {
		b, err := readBitmap(o)
		if err != nil {
			return m, nil, nil, bad("ORIG: %v", err)
		}
		origin = b
	}
	return m, bitmaps, origin, nil
}

// deletions decodes a segment's bitmap of deleted rows and checks it
// against the count recorded and the segment's rows.
func deletions(data []byte, deleted, rows int) (*roaring.Bitmap, error) {
	b := roaring.New()
	if len(data) > 0 {
		var err error
		if b, err = readBitmap(data); err != nil {
			return nil, err
		}
	}
	if n := b.GetCardinality(); n != uint64(deleted) {
		return nil, fmt.Errorf("%d deleted rows recorded, %d in the bitmap", deleted, n)
	}
	if !b.IsEmpty() && uint64(b.Maximum()) >= uint64(rows) {
		return nil, fmt.Errorf("deleted row %d of a segment of %d rows", b.Maximum(), rows)
	}
	return b, nil
}

// readBitmap decodes a serialised bitmap from a file. The roaring library
// trusts what it decodes (its Validate checks the structure), and a
// crafted one could still make its methods panic, so a panic here is an
// error too.
func readBitmap(data []byte) (b *roaring.Bitmap, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("bitmap unreadable: %v", r)
		}
	}()
	b = roaring.New()
	if _, err := b.FromUnsafeBytes(append([]byte(nil), data...)); err != nil {
		return nil, err
	}
	if err := b.Validate(); err != nil { // the library's own consistency check
		return nil, err
	}
	return b, nil
}

// writeManifest writes m, the deletion bitmaps and the origin atomically
// over path.
func writeManifest(path string, m manifest, deleted []*roaring.Bitmap, origin *roaring.Bitmap) error {
	var dels []byte
	for i := range m.Segments {
		b := deleted[i].Clone() // the caller's may be a version's, read by searches
		m.Segments[i].Deleted = int(b.GetCardinality())
		m.Segments[i].DelOff, m.Segments[i].DelLen = int64(len(dels)), 0
		if !b.IsEmpty() {
			b.RunOptimize()
			enc, err := b.ToBytes()
			if err != nil {
				return err
			}
			m.Segments[i].DelLen = int64(len(enc))
			dels = append(dels, enc...)
		}
	}
	var orig []byte
	if !origin.IsEmpty() {
		origin = origin.Clone()
		origin.RunOptimize()
		var err error
		if orig, err = origin.ToBytes(); err != nil {
			return err
		}
	}
	m.Version = 2
	if m.Schema != nil || m.TrainedRows > 0 || m.Layout > 0 || m.Policy != nil {
		m.Version = 3
	}
	st, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	return format.WriteFile(path, []format.Section{{Kind: secStore, Data: st}, {Kind: secDeleted, Data: dels}, {Kind: secOrigin, Data: orig}})
}

// removeObsolete deletes the files of the segment folder that vlc wrote
// and m does not name: segments replaced by a compaction or a retraining,
// of a change that never committed, or of a store replaced by a lone
// index (m nil; the folder goes too once empty). A reader that mapped one
// keeps a valid mapping. Files vlc did not write are left alone, and
// named in a warning. The caller holds the store's lock, so no other
// writer's new segment can be among them.
func removeObsolete(path string, m *manifest) {
	dir := segmentDir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	keep := map[string]bool{}
	if m != nil {
		for _, s := range m.Segments {
			keep[s.File] = true
		}
	}
	left := 0
	for _, e := range entries {
		name := e.Name()
		switch {
		case keep[name]:
			left++
		case name == "pending" && e.IsDir():
			// Background outputs not yet committed (pendingDir).
			left++
		case e.Type().IsRegular() && isSegmentName(name):
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				left++
			}
		case isSegmentTemp(name):
			// A temporary file of a segment write: removed only when the
			// process that wrote it is gone (format.RemoveStaleTemps).
			target := filepath.Join(dir, segmentOfTemp(name))
			if len(format.RemoveStaleTemps(target)) == 0 {
				left++
			}
		default:
			left++
			if _, warned := foreignWarned.LoadOrStore(filepath.Join(dir, name), true); !warned {
				slog.Warn("vlc: a file in a store's segment folder that vlc did not write is left alone", "store", path, "file", filepath.Join(dir, name))
			}
		}
	}
	if m == nil && left == 0 {
		os.Remove(dir)
	}
}

// foreignWarned holds the foreign files removeObsolete warned of, so that
// each is named once a process, not at every write.
var foreignWarned sync.Map

// isSegmentName reports whether name is a segment file name vlc writes.
func isSegmentName(name string) bool {
	_, ok := segmentNumber(name)
	return ok
}

// isSegmentTemp reports whether name is a temporary file of a segment's
// write (format.WriteFile's ".<base>.tmp-<pid>-<random>").
func isSegmentTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return false
	}
	base, _, ok := strings.Cut(rest, ".vlc.tmp-")
	return ok && isSegmentName(base+".vlc")
}

// segmentOfTemp is the segment name a temporary file was written for.
func segmentOfTemp(name string) string {
	base, _, _ := strings.Cut(name[1:], ".vlc.tmp-")
	return base + ".vlc"
}
