package vlc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
)

// A store is the index file at its path, or, once vectors have been
// added or deleted, a manifest there naming segment files in the folder
// beside it (path + ".d"). The manifest is a format container (the same
// header and checksums as an index) with two sections:
//
//	STOR  JSON: the segments in row order, with their rows, deleted rows
//	      and residual energy, and the counters for new names and ids
//	DELS  each segment's deleted rows, a serialised roaring bitmap, at
//	      the offset and length its STOR entry gives
//
// Every change writes new segment files (never modifying one), then a new
// manifest to a temporary file, synced and renamed over the path: that
// rename is the commit. docs/FORMAT.md ("Stores") has the details.
var (
	secStore   = format.KindOf("STOR")
	secDeleted = format.KindOf("DELS")
)

// manifestVersion is the STOR layout; a reader refuses a newer one.
const manifestVersion = 1

type manifest struct {
	Version     int    `json:"version"`
	NextSegment int    `json:"next_segment"` // number of the next segment file
	NextID      uint64 `json:"next_id"`      // next id tried for a row added without one
	// TrainedEnergy is the mean squared distance of the trained rows to
	// their anchors (the first segment's META energy).
	TrainedEnergy float64        `json:"trained_energy"`
	Segments      []segmentEntry `json:"segments"`
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
func segmentDir(path string) string { return path + ".d" }

// isManifest reports whether f is a store manifest rather than an index.
func isManifest(f *format.File) bool {
	_, ok := f.Section(secStore)
	return ok
}

// readManifest parses a manifest container and its deletion bitmaps.
func readManifest(f *format.File, path string) (manifest, []*roaring.Bitmap, error) {
	var m manifest
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", path, index.ErrCorrupt, fmt.Sprintf(format, args...))
	}
	st, _ := f.Section(secStore)
	if err := json.Unmarshal(st, &m); err != nil {
		return m, nil, bad("STOR: %v", err)
	}
	if m.Version > manifestVersion {
		return m, nil, fmt.Errorf("%s: %w: store manifest version %d (this vlc reads %d): upgrade vlc", path, index.ErrVersion, m.Version, manifestVersion)
	}
	if len(m.Segments) == 0 {
		return m, nil, bad("STOR names no segments")
	}
	dels, _ := f.Section(secDeleted)
	bitmaps := make([]*roaring.Bitmap, len(m.Segments))
	for i, s := range m.Segments {
		if s.File == "" || strings.ContainsAny(s.File, `/\`) || s.File == "." || s.File == ".." {
			return m, nil, bad("segment %d has file name %q", i, s.File)
		}
		if s.Rows < 1 || s.Deleted < 0 || s.Deleted > s.Rows || s.DelOff < 0 || s.DelLen < 0 || s.DelOff > int64(len(dels)) || s.DelLen > int64(len(dels))-s.DelOff {
			return m, nil, bad("segment %d (%s): rows %d, deleted %d, deletions at %d+%d of %d bytes", i, s.File, s.Rows, s.Deleted, s.DelOff, s.DelLen, len(dels))
		}
		b, err := deletions(dels[s.DelOff:s.DelOff+s.DelLen], s.Deleted, s.Rows)
		if err != nil {
			return m, nil, bad("segment %d (%s): deletions: %v", i, s.File, err)
		}
		bitmaps[i] = b
	}
	return m, bitmaps, nil
}

// deletions decodes a segment's bitmap of deleted rows and checks it
// against the count recorded and the segment's rows. The bitmap comes
// from a file: the roaring library trusts what it decodes (its Validate
// checks the structure), and a crafted one could still make its methods
// panic, so a panic here is an error too.
func deletions(data []byte, deleted, rows int) (b *roaring.Bitmap, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("bitmap unreadable: %v", r)
		}
	}()
	b = roaring.New()
	if len(data) > 0 {
		if _, err := b.FromUnsafeBytes(append([]byte(nil), data...)); err != nil {
			return nil, err
		}
		if err := b.Validate(); err != nil { // the library's own consistency check
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

// writeManifest writes m and the deletion bitmaps atomically over path.
func writeManifest(path string, m manifest, deleted []*roaring.Bitmap) error {
	var dels []byte
	for i := range m.Segments {
		b := deleted[i]
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
	m.Version = manifestVersion
	st, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	return format.WriteFile(path, []format.Section{{Kind: secStore, Data: st}, {Kind: secDeleted, Data: dels}})
}

// removeUnused deletes the files of the segment folder that m does not
// name: segments of a change that never committed, or replaced by a
// compaction. A reader that mapped one keeps a valid mapping.
func removeUnused(path string, m *manifest) {
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
	for _, e := range entries {
		if !keep[e.Name()] {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if m == nil {
		os.Remove(dir)
	}
}
