package store

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
)

// FuzzManifest reads store manifests with fuzzed STOR JSON, DELS and
// ORIG bitmaps (in a valid container, so that the fuzzer gets past the
// checksums). Nothing may panic; a manifest is refused with ErrCorrupt or
// ErrVersion, or its segments and deletions are consistent, no segment is
// named twice and the next segment number is above every segment's.
func FuzzManifest(f *testing.F) {
	dir := f.TempDir()
	seed := filepath.Join(dir, "seed.vlc")
	del := roaring.BitmapOf(1, 5, 70000)
	m := manifest{NextSegment: 3, Segments: []segmentEntry{{File: "seg-000001.vlc", Rows: 100000}, {File: "seg-000002-00000000000000ff.vlc", Rows: 10, Added: true}}}
	if err := writeManifest(seed, m, []*roaring.Bitmap{del, roaring.New()}, roaring.BitmapOf(0, 2, 3)); err != nil {
		f.Fatal(err)
	}
	sf, err := format.Open(seed, format.OpenOptions{})
	if err != nil {
		f.Fatal(err)
	}
	st, _ := sf.Section(secStore)
	dels, _ := sf.Section(secDeleted)
	orig, _ := sf.Section(secOrigin)
	f.Add(append([]byte(nil), st...), append([]byte(nil), dels...), append([]byte(nil), orig...))
	sf.Close()
	f.Add([]byte(`{"version":2,"segments":[]}`), []byte{}, []byte{})
	f.Add([]byte(`{"version":1,"segments":[{"file":"..","rows":1}]}`), []byte{}, []byte{})
	f.Add([]byte(`{"version":2,"next_segment":2,"segments":[{"file":"seg-000001.vlc","rows":1},{"file":"seg-000001.vlc","rows":1}]}`), []byte{}, []byte{})
	f.Add([]byte(`{"version":2,"next_segment":1,"segments":[{"file":"seg-000001.vlc","rows":1}]}`), []byte{}, []byte{})
	path := filepath.Join(dir, "f.vlc")
	f.Fuzz(func(t *testing.T, st, dels, orig []byte) {
		if err := format.WriteFile(path, []format.Section{{Kind: secStore, Data: st}, {Kind: secDeleted, Data: dels}, {Kind: secOrigin, Data: orig}}); err != nil {
			t.Skip(err)
		}
		file, err := format.Open(path, format.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		m, bitmaps, origin, err := readManifest(file, path)
		if err != nil {
			if !errors.Is(err, index.ErrCorrupt) && !errors.Is(err, index.ErrVersion) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		origin.Contains(7)
		names := map[string]bool{}
		for i, s := range m.Segments {
			if n, ok := segmentNumber(s.File); !ok || n >= m.NextSegment || names[s.File] {
				t.Fatalf("segment %d (%s) accepted beside next segment %d and %v", i, s.File, m.NextSegment, names)
			}
			names[s.File] = true
			b := bitmaps[i]
			if int(b.GetCardinality()) != s.Deleted || s.Deleted > s.Rows || !b.IsEmpty() && int(b.Maximum()) >= s.Rows {
				t.Fatalf("segment %d accepted with %d rows, %d deleted, bitmap of %d", i, s.Rows, s.Deleted, b.GetCardinality())
			}
			// What a store does with it later: membership and iteration.
			n := 0
			b.Iterate(func(x uint32) bool {
				if !b.Contains(x) {
					t.Fatalf("segment %d: %d iterated but not contained", i, x)
				}
				n++
				return n < 1000
			})
			b.Contains(uint32(s.Rows))
		}
	})
}
