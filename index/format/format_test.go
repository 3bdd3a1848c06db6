package format

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/v2-small.bin")

// goldenPath is what this version writes; v1Path the same sections as
// version 1 wrote them, which must still open.
const (
	goldenPath = "testdata/v2-small.bin"
	v1Path     = "testdata/v1-small.bin"
)

// smallSections is the golden container's content. META holds the CRC
// check string, so its table entry must carry the published CRC-32C check
// value 0xe3069283.
func smallSections() []Section {
	anch := make([]byte, 100)
	for i := range anch {
		anch[i] = byte(i)
	}
	return []Section{
		{Kind: KindOf("META"), Data: []byte("123456789")},
		{Kind: KindOf("ANCH"), Data: anch},
	}
}

func encode(t testing.TB, secs []Section) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, secs); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeTemp(t testing.TB, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.vlc")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// openBytes writes b to a file and opens it; a successful open is closed at
// the end of the test.
func openBytes(t testing.TB, b []byte, verify bool) (*File, string, error) {
	t.Helper()
	path := writeTemp(t, b)
	f, err := Open(path, OpenOptions{Verify: verify})
	if err == nil {
		t.Cleanup(func() { f.Close() })
	}
	return f, path, err
}

func isFormatErr(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotIndex) || errors.Is(err, ErrVersion)
}

func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	cases := map[string][]Section{
		"small": smallSections(),
		"odd sizes": {
			{Kind: KindOf("EMPT"), Data: nil},
			{Kind: KindOf("ONE!"), Data: []byte{7}},
			{Kind: KindOf("SIXF"), Data: bytes.Repeat([]byte{0xff}, 64)},
			{Kind: KindOf("S65_"), Data: bytes.Repeat([]byte{0xaa}, 65)},
			{Kind: KindOf("BIG."), Data: big},
			{Kind: KindOf("EMP2"), Data: []byte{}},
		},
		"max sections": func() []Section {
			var s []Section
			for i := range maxSections {
				s = append(s, Section{Kind: KindOf(fmt.Sprintf("S%03d", i)), Data: bytes.Repeat([]byte{byte(i)}, i)})
			}
			return s
		}(),
	}
	for name, secs := range cases {
		t.Run(name, func(t *testing.T) {
			want := encode(t, secs)
			if len(want)%align != 0 {
				t.Fatalf("encoded size %d is not a multiple of %d", len(want), align)
			}
			if again := encode(t, secs); !bytes.Equal(again, want) {
				t.Fatal("Encode is not deterministic")
			}
			path := filepath.Join(t.TempDir(), "idx.vlc")
			if err := WriteFile(path, secs); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("WriteFile bytes differ from Encode bytes")
			}
			for _, verify := range []bool{false, true} {
				f, err := Open(path, OpenOptions{Verify: verify})
				if err != nil {
					t.Fatal(err)
				}
				if f.Size() != int64(len(want)) {
					t.Errorf("Size() = %d, want %d", f.Size(), len(want))
				}
				infos := f.Sections()
				if len(infos) != len(secs) {
					t.Fatalf("%d sections, want %d", len(infos), len(secs))
				}
				for i, s := range secs {
					in := infos[i]
					if in.Kind != s.Kind || in.Length != int64(len(s.Data)) {
						t.Errorf("info %d = %+v, want kind %v length %d", i, in, s.Kind, len(s.Data))
					}
					if in.Offset%align != 0 {
						t.Errorf("section %v offset %d not %d-aligned", s.Kind, in.Offset, align)
					}
					if in.CRC != crc32.Checksum(s.Data, castagnoli) {
						t.Errorf("section %v CRC %#x", s.Kind, in.CRC)
					}
					data, ok := f.Section(s.Kind)
					if !ok || !bytes.Equal(data, s.Data) {
						t.Errorf("Section(%v) = %d bytes, %v; want %d bytes", s.Kind, len(data), ok, len(s.Data))
					}
				}
				if _, ok := f.Section(KindOf("NONE")); ok {
					t.Error("Section(NONE) found a section")
				}
				if err := f.Verify(); err != nil {
					t.Error(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
				if _, ok := f.Section(secs[0].Kind); ok {
					t.Error("Section after Close returned data")
				}
				if err := f.Verify(); !errors.Is(err, os.ErrClosed) {
					t.Errorf("Verify after Close = %v, want os.ErrClosed", err)
				}
			}
		})
	}
}

// A version 1 file, the same container under version 1, still opens,
// and says so.
func TestReadsVersion1(t *testing.T) {
	f, err := Open(v1Path, OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version() != 1 {
		t.Errorf("Version() = %d, want 1", f.Version())
	}
	for _, s := range smallSections() {
		if d, ok := f.Section(s.Kind); !ok || !bytes.Equal(d, s.Data) {
			t.Errorf("section %v differs from what was written", s.Kind)
		}
	}
}

func TestGolden(t *testing.T) {
	got := encode(t, smallSections())
	if *update {
		if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("encoded bytes differ from %s at offset %d (got %d bytes, want %d)\ngot:\n%s\nwant:\n%s",
			goldenPath, i, len(got), len(want), hex.Dump(got), hex.Dump(want))
	}
	// Spot-check the layout by hand, so the golden file is not only
	// "whatever the code wrote".
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"version", uint64(le.Uint32(want[8:])), 2},
		{"count", uint64(le.Uint32(want[12:])), 2},
		{"file size", le.Uint64(want[16:]), 320},
		{"META offset", le.Uint64(want[64+8:]), 128},
		{"META length", le.Uint64(want[64+16:]), 9},
		{"META crc", uint64(le.Uint32(want[64+24:])), 0xe3069283},
		{"ANCH offset", le.Uint64(want[96+8:]), 192},
		{"ANCH length", le.Uint64(want[96+16:]), 100},
		{"real size", uint64(len(want)), 320},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if string(want[:8]) != "VLCINDEX" || string(want[64:68]) != "META" || string(want[96:100]) != "ANCH" {
		t.Error("magic or kinds not where expected")
	}
	f, _, err := openBytes(t, want, true)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := f.Section(KindOf("META")); string(d) != "123456789" {
		t.Errorf("META = %q", d)
	}
}

func TestEveryByteFlipDetected(t *testing.T) {
	// The golden container, and one with padding between table and section.
	for _, secs := range [][]Section{smallSections(), {{Kind: KindOf("ONLY"), Data: []byte("x")}}} {
		testFlips(t, encode(t, secs))
	}
}

func testFlips(t *testing.T, orig []byte) {
	f, _, err := openBytes(t, orig, true)
	if err != nil {
		t.Fatal(err)
	}
	infos := f.Sections()
	path := filepath.Join(t.TempDir(), "x.vlc")
	b := make([]byte, len(orig))
	for i := range orig {
		for _, mask := range []byte{0xff, 0x01} {
			copy(b, orig)
			b[i] ^= mask
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path, OpenOptions{Verify: true})
			if err == nil {
				f.Close()
				t.Errorf("byte %d ^ %#02x: Open succeeded", i, mask)
				continue
			}
			if !isFormatErr(err) {
				t.Errorf("byte %d ^ %#02x: error %v wraps no sentinel", i, mask, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("byte %d ^ %#02x: error %q does not name the file", i, mask, err)
			}
			for _, s := range infos {
				if int64(i) >= s.Offset && int64(i) < s.Offset+s.Length {
					want := fmt.Sprintf("section %q checksum mismatch", s.Kind)
					if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
						t.Errorf("byte %d ^ %#02x in section %v: error %q, want it to contain %q", i, mask, s.Kind, err, want)
					}
				}
			}
		}
	}
}

func TestTruncation(t *testing.T) {
	orig := encode(t, []Section{
		{Kind: KindOf("EMPT"), Data: nil},
		{Kind: KindOf("DATA"), Data: bytes.Repeat([]byte{1, 2, 3}, 400)},
		{Kind: KindOf("TAIL"), Data: bytes.Repeat([]byte{9}, 64)},
	})
	var cuts []int
	for n := 0; n < len(orig); n += align {
		cuts = append(cuts, n)
	}
	cuts = append(cuts, 1, 7, 8, 9, 12, 63, 65, 100, 127, 129, 200, len(orig)-1)
	for _, n := range cuts {
		_, path, err := openBytes(t, orig[:n], true)
		if !isFormatErr(err) {
			t.Errorf("truncated to %d bytes: Open error %v, want a format sentinel", n, err)
			continue
		}
		if n < 8 && !errors.Is(err, ErrNotIndex) {
			t.Errorf("truncated to %d bytes: %v, want ErrNotIndex", n, err)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("truncated to %d bytes: error %q does not name the file", n, err)
		}
	}
}

func TestInvalidHeaders(t *testing.T) {
	const e0, e1 = headerSize, headerSize + entrySize // table entries of the golden file
	put32 := func(at int, v uint32) func([]byte) { return func(b []byte) { le.PutUint32(b[at:], v) } }
	put64 := func(at int, v uint64) func([]byte) { return func(b []byte) { le.PutUint64(b[at:], v) } }
	cases := []struct {
		name   string
		edit   func([]byte)
		fixCRC bool // recompute the header CRC, so the check under test is the one that fires
		want   error
		msg    string
	}{
		{"bad magic", func(b []byte) { b[0] = 'X' }, true, ErrNotIndex, "bad magic"},
		{"version 0", put32(8, 0), true, ErrVersion, "version 0"},
		{"version 5", put32(8, Version+1), true, ErrVersion, "version 5"},
		{"count 0", put32(12, 0), true, ErrCorrupt, "section count 0"},
		{"count 65", put32(12, 65), true, ErrCorrupt, "section count 65"},
		{"count 2^32-1", put32(12, math.MaxUint32), true, ErrCorrupt, "section count 4294967295"},
		{"count 3 reads data as a table entry", put32(12, 3), true, ErrCorrupt, ""},
		{"header crc", func(b []byte) { b[24] ^= 1 }, false, ErrCorrupt, "header checksum mismatch"},
		{"size field", put64(16, 384), true, ErrCorrupt, "header says the file is 384 bytes"},
		{"size field 2^64-1", put64(16, math.MaxUint64), true, ErrCorrupt, "header says"},
		{"reserved header byte", func(b []byte) { b[40] = 1 }, true, ErrCorrupt, "reserved header"},
		{"kind not ASCII", func(b []byte) { b[e0+1] = 0x80 }, true, ErrCorrupt, "not 4 printable ASCII"},
		{"kind has NUL", func(b []byte) { b[e0+3] = 0 }, true, ErrCorrupt, "not 4 printable ASCII"},
		{"duplicate kinds", func(b []byte) { copy(b[e1:], "META") }, true, ErrCorrupt, `section "META" appears twice`},
		{"flags", put32(e1+4, 1), true, ErrCorrupt, `section "ANCH": flags 0x1`},
		{"reserved entry byte", func(b []byte) { b[e1+31] = 1 }, true, ErrCorrupt, `section "ANCH": reserved`},
		{"misaligned offset", put64(e0+8, 129), true, ErrCorrupt, "not a multiple of 64"},
		{"offset inside table", put64(e0+8, 64), true, ErrCorrupt, "inside the section table"},
		{"offset zero", put64(e0+8, 0), true, ErrCorrupt, "inside the section table"},
		{"overlapping sections", put64(e1+8, 128), true, ErrCorrupt, `overlaps section "META"`},
		{"sections out of order", func(b []byte) {
			le.PutUint64(b[e0+8:], 192)
			le.PutUint64(b[e1+8:], 128)
		}, true, ErrCorrupt, "overlaps"},
		{"length past end", put64(e1+16, 129), true, ErrCorrupt, "runs past the end"},
		{"offset past end", put64(e1+8, 1<<20), true, ErrCorrupt, "runs past the end"},
		{"offset near 2^64", put64(e1+8, math.MaxUint64-63), true, ErrCorrupt, "runs past the end"},
		{"length near 2^64", put64(e1+16, math.MaxUint64-63), true, ErrCorrupt, "runs past the end"},
		{"length 2^64-1", put64(e1+16, math.MaxUint64), true, ErrCorrupt, "runs past the end"},
		{"offset+length wraps to small", func(b []byte) {
			le.PutUint64(b[e1+8:], 1<<63)
			le.PutUint64(b[e1+16:], 1<<63+64)
		}, true, ErrCorrupt, "runs past the end"},
		{"section crc (Verify)", func(b []byte) { b[e1+24] ^= 1 }, true, ErrCorrupt, `section "ANCH" checksum mismatch`},
		{"padding after section (Verify)", func(b []byte) { b[140] = 1 }, false, ErrCorrupt, `padding after section "META"`},
		{"padding at end (Verify)", func(b []byte) { b[319] = 1 }, false, ErrCorrupt, `padding after section "ANCH"`},
	}
	orig := encode(t, smallSections())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(orig)
			c.edit(b)
			if c.fixCRC {
				if n := le.Uint32(b[12:]); n >= 1 && n <= maxSections && headerSize+int(n)*entrySize <= len(b) {
					le.PutUint32(b[24:], headerCRC(b[:headerSize+int(n)*entrySize]))
				}
			}
			_, path, err := openBytes(t, b, true)
			if !errors.Is(err, c.want) {
				t.Fatalf("Open = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q should name %s and contain %q", err, path, c.msg)
			}
			if c.want != ErrCorrupt && errors.Is(err, ErrCorrupt) {
				t.Errorf("error %v also matches ErrCorrupt", err)
			}
		})
	}
}

// A reader accepts zero padding beyond the minimum (the layout is "aligned
// and ascending", not "exactly what Encode writes"); Verify checks it.
func TestExtraZeroPaddingAccepted(t *testing.T) {
	b := encode(t, smallSections())
	b = append(b, make([]byte, 128)...)
	le.PutUint64(b[16:], uint64(len(b)))
	le.PutUint32(b[24:], headerCRC(b[:headerSize+2*entrySize]))
	if _, _, err := openBytes(t, b, true); err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] = 1
	if _, _, err := openBytes(t, b, true); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("non-zero trailing padding: %v, want ErrCorrupt", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.vlc")
	if _, err := Open(missing, OpenOptions{}); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(dir, OpenOptions{}); !errors.Is(err, ErrNotIndex) || !strings.Contains(err.Error(), dir) {
		t.Errorf("folder: %v", err)
	}
	_, path, err := openBytes(t, nil, false)
	if !errors.Is(err, ErrNotIndex) || !strings.Contains(err.Error(), path) {
		t.Errorf("empty file: %v", err)
	}
	_, _, err = openBytes(t, bytes.Repeat([]byte("not an index at all! "), 10), true)
	if !errors.Is(err, ErrNotIndex) {
		t.Errorf("text file: %v", err)
	}
}

func TestPaddingAfterTable(t *testing.T) {
	b := encode(t, []Section{{Kind: KindOf("ONLY"), Data: []byte("x")}}) // table [64,96), section at 128
	b[100] = 1
	_, _, err := openBytes(t, b, true)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "padding after section table") {
		t.Fatalf("Open = %v", err)
	}
}

func TestEncodeRejects(t *testing.T) {
	many := make([]Section, maxSections+1)
	for i := range many {
		many[i].Kind = KindOf(fmt.Sprintf("K%03d", i))
	}
	cases := map[string][]Section{
		"no sections":      nil,
		"65 sections":      many,
		"duplicate kinds":  {{Kind: KindOf("META"), Data: nil}, {Kind: KindOf("ANCH"), Data: nil}, {Kind: KindOf("META"), Data: []byte{1}}},
		"zero kind":        {{Kind: Kind{}}},
		"version too new":  {{Kind: KindOf("META"), Data: nil, Version: Version + 1}},
		"kind with space":  {{Kind: KindOf("ME A"), Data: nil}},
		"kind not ASCII":   {{Kind: KindOf("MÉA"), Data: nil}},
		"kind control chr": {{Kind: KindOf("ME\nA"), Data: nil}},
	}
	for name, secs := range cases {
		var buf bytes.Buffer
		if err := Encode(&buf, secs); err == nil {
			t.Errorf("%s: Encode succeeded", name)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: Encode wrote %d bytes before failing", name, buf.Len())
		}
	}
}

func TestKindOf(t *testing.T) {
	if k := KindOf("CODE"); k.String() != "CODE" || k != (Kind{'C', 'O', 'D', 'E'}) {
		t.Errorf("KindOf(CODE) = %v", k)
	}
	for _, s := range []string{"", "ABC", "ABCDE"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("KindOf(%q) did not panic", s)
				}
			}()
			KindOf(s)
		}()
	}
}

// names lists a folder, failing the test on error.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

func TestWriteFileMissingFolder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "no", "such", "idx.vlc")
	err := WriteFile(path, smallSections())
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("WriteFile = %v, want an error naming %s", err, path)
	}
	if n := names(t, dir); len(n) != 0 {
		t.Errorf("left behind: %v", n)
	}
}

func TestWriteFileFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idx.vlc")
	if err := WriteFile(path, smallSections()); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dup := []Section{{Kind: KindOf("META"), Data: []byte("new")}, {Kind: KindOf("META"), Data: []byte("new")}}
	err = WriteFile(path, dup)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("WriteFile with duplicate kinds = %v", err)
	}
	now, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(now, old) {
		t.Fatalf("existing file changed (err %v)", err)
	}
	if n := names(t, dir); len(n) != 1 || n[0] != "idx.vlc" {
		t.Errorf("folder holds %v, want only idx.vlc", n)
	}
}

// The rename fails when path is a non-empty folder: the temporary file has
// been written by then and must be removed.
func TestWriteFileRenameFailureRemovesTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idx.vlc")
	if err := os.MkdirAll(filepath.Join(path, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(path, smallSections())
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("WriteFile over a folder = %v", err)
	}
	if n := names(t, dir); len(n) != 1 || n[0] != "idx.vlc" {
		t.Errorf("folder holds %v, want only idx.vlc", n)
	}
	if n := names(t, path); len(n) != 1 || n[0] != "inner" {
		t.Errorf("target folder changed: %v", n)
	}
}

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idx.vlc")
	if err := WriteFile(path, smallSections()); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	next := []Section{{Kind: KindOf("NEXT"), Data: []byte("second version")}}
	if err := WriteFile(path, next); err != nil {
		t.Fatal(err)
	}
	// The open mapping still shows the old file: it was replaced, not rewritten.
	if d, ok := f.Section(KindOf("META")); !ok || string(d) != "123456789" {
		t.Errorf("old mapping changed: %q %v", d, ok)
	}
	g, err := Open(path, OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if d, ok := g.Section(KindOf("NEXT")); !ok || string(d) != "second version" {
		t.Errorf("new file: %q %v", d, ok)
	}
	if n := names(t, dir); len(n) != 1 {
		t.Errorf("folder holds %v, want only idx.vlc", n)
	}
}

func TestWriteFileReadOnlyFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root, which bypasses folder permissions, so the write would succeed")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "idx.vlc")
	if err := WriteFile(path, smallSections()); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	err := WriteFile(path, []Section{{Kind: KindOf("NEXT"), Data: nil}})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("WriteFile into read-only folder = %v", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
		t.Error("existing file changed")
	}
	if n := names(t, dir); len(n) != 1 {
		t.Errorf("folder holds %v, want only idx.vlc", n)
	}
}

// FuzzOpen checks that no content makes Open panic, and what it accepts.
// Random bytes almost never carry a right CRC, so each input is also tried
// with its header CRC, and then its section CRCs, recomputed: that lets the
// fuzzer reach the table checks and the accepting path.
func FuzzOpen(f *testing.F) {
	golden, err := os.ReadFile(goldenPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add(golden[:128])
	// A real index (testdata/golden/v1.vlc: six sections, 6,272 bytes).
	index, err := os.ReadFile("../../testdata/golden/v1.vlc")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(index)
	f.Add(encode(f, []Section{{Kind: KindOf("EMPT"), Data: nil}}))
	f.Add(encode(f, []Section{{Kind: KindOf("A___"), Data: []byte{1}}, {Kind: KindOf("B___"), Data: bytes.Repeat([]byte{2}, 70)}, {Kind: KindOf("C___"), Data: nil}}))
	path := filepath.Join(f.TempDir(), "f.vlc") // one per worker process; calls within it are sequential
	f.Fuzz(func(t *testing.T, b []byte) {
		checkOpen(t, path, b)
		b = bytes.Clone(b)
		if !fixHeaderCRC(b) {
			return
		}
		checkOpen(t, path, b)
		if infos, err := parseHeader(b); err == nil {
			for i, in := range infos {
				le.PutUint32(b[headerSize+i*entrySize+24:], crc32.Checksum(b[in.Offset:in.Offset+in.Length], castagnoli))
			}
			fixHeaderCRC(b)
			checkOpen(t, path, b)
		}
	})
}

// fixHeaderCRC recomputes the header CRC of b if its table fits in b.
func fixHeaderCRC(b []byte) bool {
	if len(b) < headerSize {
		return false
	}
	n := le.Uint32(b[12:])
	if n < 1 || n > maxSections || headerSize+int(n)*entrySize > len(b) {
		return false
	}
	le.PutUint32(b[24:], headerCRC(b[:headerSize+int(n)*entrySize]))
	return true
}

func checkOpen(t *testing.T, path string, b []byte) {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	lazy, lerr := Open(path, OpenOptions{})
	file, err := Open(path, OpenOptions{Verify: true})
	if lerr != nil {
		if err == nil {
			file.Close()
			t.Fatal("Open without Verify failed but with Verify succeeded")
		}
		if !isFormatErr(lerr) || !strings.Contains(lerr.Error(), path) {
			t.Fatalf("error does not wrap a sentinel or name the file: %v", lerr)
		}
		return
	}
	defer lazy.Close()
	if err != nil {
		if verr := lazy.Verify(); !errors.Is(err, ErrCorrupt) || verr == nil || err.Error() != verr.Error() {
			t.Fatalf("Open(Verify) = %v, lazy Verify = %v", err, verr)
		}
		return
	}
	defer file.Close()
	// Accepted: the sections must re-encode into these very bytes, less
	// any extra zero padding.
	var secs []Section
	for _, in := range file.Sections() {
		d, ok := file.Section(in.Kind)
		if !ok || int64(len(d)) != in.Length || crc32.Checksum(d, castagnoli) != in.CRC {
			t.Fatalf("section %v inconsistent with its table entry", in.Kind)
		}
		secs = append(secs, Section{Kind: in.Kind, Data: d})
	}
	re := encode(t, secs)
	if v := file.Version(); v != int(le.Uint32(re[8:])) { // the same container, under the file's version
		le.PutUint32(re[8:], uint32(v))
		le.PutUint32(re[24:], headerCRC(re[:headerSize+len(secs)*entrySize]))
	}
	if len(re) > len(b) {
		t.Fatalf("accepted file is %d bytes, smaller than its minimal encoding (%d)", len(b), len(re))
	}
	if len(re) == len(b) && !bytes.Equal(re, b) {
		t.Fatal("accepted file of minimal size differs from its re-encoding")
	}
}

func BenchmarkVerify(b *testing.B) {
	data := make([]byte, 64<<20-192) // file: exactly 64 MiB
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(b.TempDir(), "big.vlc")
	if err := WriteFile(path, []Section{{Kind: KindOf("META"), Data: []byte("meta")}, {Kind: KindOf("VECS"), Data: data}}); err != nil {
		b.Fatal(err)
	}
	f, err := Open(path, OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(f.Size())
	for b.Loop() {
		if err := f.Verify(); err != nil {
			b.Fatal(err)
		}
	}
}
