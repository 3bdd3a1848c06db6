package index_test

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/quant"
)

// allocLimit bounds what opening a crafted file may allocate. The largest
// honest allocation before the sizes are checked is the rotation of a
// 65536-dimensional code (3 x 65536 float32 signs, 768 KiB).
const allocLimit = 2 << 20

// allocated returns the bytes f allocates on the heap (the test must not
// run in parallel with others).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Files whose length fields claim huge sizes (a corrupt or hostile file)
// are refused as corrupt without allocating anything near what they
// claim: every length read from the file is bounded by the file's size
// before it is used.
func TestOpenHugeClaimsBoundedAllocation(t *testing.T) {
	golden, err := os.ReadFile(goldenIndex)
	if err != nil {
		t.Fatal(err)
	}
	ix := open(t, goldenIndex)
	secs := ix.Sections()
	ix.Close()
	at := map[string]int64{}
	for _, s := range secs {
		at[s.Kind.String()] = s.Offset
	}
	le := binary.LittleEndian
	meta := at["META"]
	entry := func(kind string) int {
		return 64 + 32*slices.IndexFunc(secs, func(s format.SectionInfo) bool { return s.Kind.String() == kind })
	}
	cases := []struct {
		name string
		edit func(b []byte)
	}{
		{"META N 2^32-1", func(b []byte) { le.PutUint64(b[meta:], math.MaxUint32) }},
		{"META N 2^63", func(b []byte) { le.PutUint64(b[meta:], 1<<63) }},
		{"META N 2^64-1", func(b []byte) { le.PutUint64(b[meta:], math.MaxUint64) }},
		{"META N file/4, M N", func(b []byte) {
			n := uint64(len(b) / 4)
			le.PutUint64(b[meta:], n)
			le.PutUint32(b[meta+12:], uint32(n))
		}},
		{"META D 65536", func(b []byte) { le.PutUint32(b[meta+8:], 1<<16) }},
		{"META D 2^32-1", func(b []byte) { le.PutUint32(b[meta+8:], math.MaxUint32) }},
		{"META M 2^32-1", func(b []byte) { le.PutUint32(b[meta+12:], math.MaxUint32) }},
		{"META D 65536, product code", func(b []byte) {
			le.PutUint32(b[meta+8:], 1<<16)
			le.PutUint32(b[meta+16:], uint32(quant.KindPQ))
			le.PutUint32(b[meta+20:], 1)
		}},
		{"ANCH length 2^62", func(b []byte) { le.PutUint64(b[entry("ANCH")+16:], 1<<62) }},
		{"CODE length 2^64-1", func(b []byte) { le.PutUint64(b[entry("CODE")+16:], math.MaxUint64) }},
		{"CODE offset 2^63", func(b []byte) { le.PutUint64(b[entry("CODE")+8:], 1<<63) }},
		{"section count 2^32-1", func(b []byte) { le.PutUint32(b[12:], math.MaxUint32) }},
		{"file size field 2^63", func(b []byte) { le.PutUint64(b[16:], 1<<63) }},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := slices.Clone(golden)
			c.edit(b)
			// Recompute the checksums but keep the edited size field.
			size := le.Uint64(b[16:])
			fixCRCs(b)
			if c.name == "file size field 2^63" {
				le.PutUint64(b[16:], size)
				fixHeaderOnly(b)
			}
			path := filepath.Join(dir, "huge.vlc")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, verify := range []bool{false, true} {
				var err error
				got := allocated(func() {
					var ix *index.Index
					ix, err = index.Open(path, index.Options{Verify: verify})
					if err == nil {
						ix.Close()
					}
				})
				if !errors.Is(err, index.ErrCorrupt) {
					t.Errorf("verify %v: Open = %v, want ErrCorrupt", verify, err)
				}
				if got > allocLimit {
					t.Errorf("verify %v: Open allocated %d bytes, limit %d", verify, got, allocLimit)
				}
				t.Logf("verify %v: %d bytes allocated; %v", verify, got, err)
			}
		})
	}
}

// A search into a slice with room allocates nothing once the index's
// scratch is warm, for every metric (the rotated 8-bit code; its scorer,
// the probe and the top-k are the same for all codes).
func TestSearchAppendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector are not the program's")
	}
	for _, metric := range []index.Metric{index.L2, index.IP, index.Cosine} {
		path, _, queries := build(t, metric, 45)
		ix := open(t, path)
		q := queries.Row(3, nil)
		opt := index.SearchOptions{K: 10, NProbe: 8}
		dst := make([]index.Hit, 0, 10)
		want, err := ix.Search(q, opt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ix.SearchAppend(dst, q, opt)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%v: SearchAppend %v, %v; Search %v", metric, got, err, want)
		}
		if allocs := testing.AllocsPerRun(100, func() {
			dst, _ = ix.SearchAppend(dst[:0], q, opt)
		}); allocs != 0 {
			t.Errorf("%v: SearchAppend allocates %.1f times per query", metric, allocs)
		}
		prefix := []index.Hit{{ID: -1}}
		got, err = ix.SearchAppend(prefix, q, index.SearchOptions{K: 0})
		if !errors.Is(err, index.ErrArgument) || len(got) != 1 || got[0].ID != -1 {
			t.Errorf("%v: a failed SearchAppend returned %v, %v; want the prefix and ErrArgument", metric, got, err)
		}
	}
}
