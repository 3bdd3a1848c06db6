package index_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
)

// where names the part of an index file that holds byte i, as the
// verification error should (alternatives separated by |): the magic, the
// version, the header (and its table), a section, or the padding after
// one.
func where(secs []format.SectionInfo, i int64) (part string, want error) {
	switch {
	case i < 8:
		return "magic", index.ErrNotIndex
	case i < 12:
		return "version", index.ErrVersion
	case i < 64+32*int64(len(secs)):
		if i >= 12 && i < 16 {
			// the count is range-checked before the CRC
			return "section count|header checksum mismatch", index.ErrCorrupt
		}
		return "header checksum mismatch", index.ErrCorrupt
	}
	after := "section table"
	for _, s := range secs {
		if i < s.Offset {
			break
		}
		if i < s.Offset+s.Length {
			return fmt.Sprintf("section %q checksum mismatch", s.Kind), index.ErrCorrupt
		}
		after = fmt.Sprintf("section %q", s.Kind)
	}
	return "padding after " + after, index.ErrCorrupt
}

// Every single-byte change anywhere in a real index (the golden file,
// 6,272 bytes: header, table, six sections and their padding), under three
// masks, is detected by Open with Verify, with the documented sentinel
// and an error that names the file and the damaged part.
func TestEveryByteFlipDetected(t *testing.T) {
	good, err := os.ReadFile(goldenIndex)
	if err != nil {
		t.Fatal(err)
	}
	secs := open(t, goldenIndex).Sections()
	path := filepath.Join(t.TempDir(), "flip.vlc")
	if err := os.WriteFile(path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	// poke writes one byte in place: the index is closed between opens,
	// so no mapping sees the file change.
	poke := func(i int, v byte) {
		if _, err := fh.WriteAt([]byte{v}, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	detected, tried := 0, 0
	masks := []byte{0x01, 0x80, 0xff}
	if testing.Short() {
		masks = masks[:1]
	}
	for i := range good {
		for _, mask := range masks {
			poke(i, good[i]^mask)
			tried++
			ix, err := index.Open(path, index.Options{Verify: true})
			poke(i, good[i])
			if err == nil {
				ix.Close()
				t.Errorf("byte %d ^ %#02x: Open(Verify) succeeded", i, mask)
				continue
			}
			part, want := where(secs, int64(i))
			msg := err.Error()
			if !errors.Is(err, want) || !strings.Contains(msg, path) || (want == index.ErrCorrupt && !containsAny(msg, part)) {
				t.Errorf("byte %d ^ %#02x (%s): %v, want %v naming the file and %q", i, mask, part, err, want, part)
				continue
			}
			detected++
		}
	}
	t.Logf("%d of %d single-byte corruptions detected (%d bytes x %d masks)", detected, tried, len(good), len(masks))
}

// Truncating a real index at any section boundary (start, middle, end of
// each section and of its padding) is refused as corrupt, with Verify and
// without; when the table survives, the error names the section cut.
func TestTruncateAtSectionBoundaries(t *testing.T) {
	good, err := os.ReadFile(goldenIndex)
	if err != nil {
		t.Fatal(err)
	}
	secs := open(t, goldenIndex).Sections()
	path := filepath.Join(t.TempDir(), "cut.vlc")
	cuts := map[int64]bool{0: true, 7: true, 8: true, 63: true, 64: true, int64(len(good)) - 1: true}
	for _, s := range secs {
		end := s.Offset + s.Length
		for _, c := range []int64{s.Offset - 1, s.Offset, s.Offset + 1, s.Offset + s.Length/2, end - 1, end, (end + 63) &^ 63} {
			if c >= 0 && c < int64(len(good)) {
				cuts[c] = true
			}
		}
	}
	refused := 0
	defer func() { t.Logf("%d of %d truncations refused (Verify on and off)", refused, 2*len(cuts)) }()
	for _, c := range slices.Sorted(func(yield func(int64) bool) {
		for c := range cuts {
			if !yield(c) {
				return
			}
		}
	}) {
		if err := os.WriteFile(path, good[:c], 0o644); err != nil {
			t.Fatal(err)
		}
		for _, verify := range []bool{true, false} {
			ix, err := index.Open(path, index.Options{Verify: verify})
			if err == nil {
				ix.Close()
				t.Errorf("cut at %d: Open(Verify %v) succeeded", c, verify)
				continue
			}
			want := index.ErrCorrupt
			if c < 8 {
				want = index.ErrNotIndex
			}
			if !errors.Is(err, want) || !strings.Contains(err.Error(), path) {
				t.Errorf("cut at %d: %v, want %v naming the file", c, err, want)
				continue
			}
			refused++
			// The table is intact from 64+32*len(secs) bytes on: the
			// section that the cut falls in (or before) is named.
			if c >= 64+32*int64(len(secs)) {
				var cut string
				for _, s := range secs {
					if s.Offset+s.Length > c {
						cut = s.Kind.String()
						break
					}
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("truncated in section %q", cut)) {
					t.Errorf("cut at %d: %v does not name section %s", c, err, cut)
				}
			}
		}
	}
}

// containsAny reports whether s contains one of the |-separated parts.
func containsAny(s, parts string) bool {
	for p := range strings.SplitSeq(parts, "|") {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// A checksum-valid file whose ROWS repeat a row (a writer bug, or damage
// with the checksums recomputed) opens without Verify, but verification
// refuses it: each input row must be indexed exactly once.
func TestDuplicateRowIDsRefused(t *testing.T) {
	good, err := os.ReadFile(goldenIndex)
	if err != nil {
		t.Fatal(err)
	}
	var rows format.SectionInfo
	for _, s := range open(t, goldenIndex).Sections() {
		if s.Kind.String() == "ROWS" {
			rows = s
		}
	}
	b := slices.Clone(good)
	// 256 vectors: 8-bit ids, entry e's id is byte e of ROWS.
	if b[rows.Offset] == b[rows.Offset+1] {
		t.Fatal("test premise: entries 0 and 1 have different rows")
	}
	b[rows.Offset+1] = b[rows.Offset]
	fixCRCs(b)
	path := filepath.Join(t.TempDir(), "dup.vlc")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Open(path, index.Options{Verify: true}); !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), "indexed twice") {
		t.Errorf("Open(Verify) = %v, want ErrCorrupt: indexed twice", err)
	}
	ix, err := index.Open(path, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Verify(); !errors.Is(err, index.ErrCorrupt) {
		t.Errorf("Verify = %v, want ErrCorrupt", err)
	}
}
