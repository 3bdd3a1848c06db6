package format

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A file holding a graph (section GRPH) is written under version 3 and
// reads back; one whose GRPH asks for version 4 (Section.Version) under
// version 4; the same sections without it keep version 2 and the golden
// bytes (TestGolden); a version past Version is refused.
func TestVersionBySections(t *testing.T) {
	secs := append(smallSections(), Section{Kind: KindOf("GRPH"), Data: []byte("graph")})
	b := encode(t, secs)
	if v := le.Uint32(b[8:]); v != 3 {
		t.Fatalf("file with GRPH written under version %d, want 3", v)
	}
	if v := le.Uint32(encode(t, smallSections())[8:]); v != BaseVersion {
		t.Fatalf("file without GRPH written under version %d, want %d", v, BaseVersion)
	}
	v4 := append(smallSections(), Section{Kind: KindOf("GRPH"), Data: []byte("graph"), Version: 4})
	if v := le.Uint32(encode(t, v4)[8:]); v != 4 {
		t.Fatalf("file with GRPH of version 4 written under version %d", v)
	}
	low := append(smallSections(), Section{Kind: KindOf("GRPH"), Data: []byte("graph"), Version: 1})
	if v := le.Uint32(encode(t, low)[8:]); v != 3 { // never below the kind's
		t.Fatalf("file with GRPH of version 1 written under version %d, want 3", v)
	}
	path := filepath.Join(t.TempDir(), "v3.vlc")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version() != 3 {
		t.Errorf("Version() = %d, want 3", f.Version())
	}
	if d, ok := f.Section(KindOf("GRPH")); !ok || !bytes.Equal(d, []byte("graph")) {
		t.Errorf("GRPH reads %q, %v", d, ok)
	}
	next := bytes.Clone(b)
	le.PutUint32(next[8:], Version+1)
	le.PutUint32(next[24:], headerCRC(next[:headerSize+len(secs)*entrySize]))
	if _, err := parseHeader(next); !errors.Is(err, ErrVersion) {
		t.Errorf("version %d: %v, want ErrVersion", Version+1, err)
	}
}
