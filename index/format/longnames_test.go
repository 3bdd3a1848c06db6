package format

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// nameMax is the longest file-name component Linux takes (NAME_MAX), in
// bytes; other systems count at least as many.
const nameMax = 255

// longestTail is the longest text createTemp puts after tempPrefix: a
// process id of 10 digits (a 32-bit one), "-", CheckWritable's "probe"
// and a random uint64 in base 36.
var longestTail = len("4294967295-probe" + strconv.FormatUint(^uint64(0), 36))

// longBases are legal output names at and near the limit, some of
// multi-byte runes placed so that cutting the name at a fixed byte count
// would split a rune.
func longBases() map[string]string {
	b := map[string]string{
		"255 bytes": strings.Repeat("a", nameMax-4) + ".vlc",
		"250 bytes": strings.Repeat("b", 250-4) + ".vlc",
	}
	for k := range 4 {
		b[fmt.Sprintf("4-byte runes after %d bytes", k)] = strings.Repeat("a", k) + strings.Repeat("😀", (nameMax-k)/4)
	}
	for k := range 3 {
		b[fmt.Sprintf("3-byte runes after %d bytes", k)] = strings.Repeat("a", k) + strings.Repeat("日", (nameMax-k)/3)
	}
	b["2-byte runes after 1 byte"] = "x" + strings.Repeat("é", (nameMax-1)/2)
	return b
}

// TestLongNamesWrite: WriteFile writes, and replaces, a file whose name is
// as long as the file system allows, leaving nothing else in the folder,
// and the temporary files it makes have names the file system takes:
// within 255 bytes and valid UTF-8 when the name is.
func TestLongNamesWrite(t *testing.T) {
	want := encode(t, smallSections())
	for what, base := range longBases() {
		if len(base) > nameMax {
			t.Fatalf("%s: the test's name has %d bytes", what, len(base))
		}
		dir := t.TempDir()
		path := filepath.Join(dir, base)
		for i := range 2 { // a new file, then one replaced
			if err := WriteFile(path, smallSections()); err != nil {
				t.Fatalf("%s (%d bytes), write %d: %v", what, len(base), i+1, err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: read back %d bytes, %v; want Encode's %d", what, len(got), err, len(want))
		}
		if n := names(t, dir); !slices.Equal(n, []string{base}) {
			t.Errorf("%s: the folder holds %q, want only the file", what, n)
		}
		f, err := createTemp(dir, base, "probe")
		if err != nil {
			t.Fatalf("%s: createTemp: %v", what, err)
		}
		f.Close()
		os.Remove(f.Name())
		name := filepath.Base(f.Name())
		if len(name) > nameMax || !utf8.ValidString(name) {
			t.Errorf("%s: temporary name of %d bytes (valid UTF-8 %v): %q", what, len(name), utf8.ValidString(name), name)
		}
	}
}

// TestLongNamesCheckWritable: CheckWritable passes a writable path whose
// name is as long as the file system allows and leaves nothing behind.
func TestLongNamesCheckWritable(t *testing.T) {
	for what, base := range longBases() {
		dir := t.TempDir()
		if err := CheckWritable(filepath.Join(dir, base)); err != nil {
			t.Errorf("%s (%d bytes): %v", what, len(base), err)
		}
		if n := names(t, dir); len(n) != 0 {
			t.Errorf("%s: the check left %q", what, n)
		}
	}
}

// TestLongNamesTempForm: the temporary names of a path depend only on its
// name, are unchanged (".<base>.tmp-") for names that leave room for the
// longest pid and random part, and are shortened, within 255 bytes with
// that part, for longer ones, two names that differ only at their end
// keeping different forms.
func TestLongNamesTempForm(t *testing.T) {
	for n := 1; n <= nameMax; n++ {
		base := strings.Repeat("a", n)
		p := tempPrefix(base)
		if 1+n+len(".tmp-")+longestTail <= nameMax && p != "."+base+".tmp-" {
			t.Errorf("%d bytes: prefix %q, want the unshortened form", n, p)
		}
		if len(p)+longestTail > nameMax {
			t.Fatalf("%d bytes: prefix of %d bytes leaves no room for the pid and random part (%d bytes)", n, len(p), longestTail)
		}
		if p != tempPrefix(base) {
			t.Fatalf("%d bytes: prefix not deterministic", n)
		}
	}
	for what, base := range longBases() {
		p := tempPrefix(base)
		if !utf8.ValidString(p) || len(p)+longestTail > nameMax {
			t.Errorf("%s: prefix %q (%d bytes, valid UTF-8 %v)", what, p, len(p), utf8.ValidString(p))
		}
		other := base[:len(base)-1] + "z"
		if tempPrefix(other) == p {
			t.Errorf("%s: the name and one that differs in its last byte share the prefix %q", what, p)
		}
	}
}

// TestLongNamesRemoveStaleTemps: RemoveStaleTemps removes a dead writer's
// leftover of a path with a 255-byte name, and not that of another path
// whose name differs only in its last bytes.
func TestLongNamesRemoveStaleTemps(t *testing.T) {
	const dead = 1<<22 + 12345 // above Linux's pid_max: no such process
	old := processStart.Add(-time.Minute)
	dir := t.TempDir()
	a := strings.Repeat("a", nameMax-4) + ".vlc"
	b := strings.Repeat("a", nameMax-4) + ".vlx"
	var leftovers []string
	for _, base := range []string{a, b} {
		name := tempPrefix(base) + strconv.Itoa(dead) + "-x1"
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatalf("a leftover of %d-byte %s: %v", len(base), base[len(base)-4:], err)
		}
		os.Chtimes(p, old, old)
		leftovers = append(leftovers, p)
	}
	removed := RemoveStaleTemps(filepath.Join(dir, a))
	if !slices.Equal(removed, leftovers[:1]) {
		t.Errorf("removed %q, want only %q", removed, leftovers[0])
	}
	if _, err := os.Stat(leftovers[1]); err != nil {
		t.Errorf("the other path's leftover: %v", err)
	}
}
