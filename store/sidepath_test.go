package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSidePath: a store's side files (lock, segment folder) keep the form
// path + suffix for names that leave room, and for names near 255 bytes
// get a name in the same folder that fits, stays valid UTF-8 and tells
// apart names that differ only at their end; such a file can be made.
func TestSidePath(t *testing.T) {
	for _, c := range []struct{ path, suffix string }{
		{"idx.vlc", ".lock"},
		{"/a/b/idx.vlc", ".d"},
		{"a/" + strings.Repeat("x", 250), ".lock"},
		{"a/" + strings.Repeat("x", 253), ".d"},
		{"", ".lock"},
	} {
		if got := sidePath(c.path, c.suffix); got != c.path+c.suffix {
			t.Errorf("sidePath(%q, %q) = %q, want the path and suffix", c.path, c.suffix, got)
		}
	}
	dir := t.TempDir()
	names := map[string]string{
		"251 bytes":    strings.Repeat("a", 251),
		"255 bytes":    strings.Repeat("a", 251) + ".vlc",
		"3-byte runes": "a" + strings.Repeat("日", 84) + "b",
		"4-byte runes": "aaa" + strings.Repeat("😀", 63),
	}
	for what, base := range names {
		for _, suffix := range []string{".lock", ".d"} {
			path := filepath.Join(dir, base)
			got := sidePath(path, suffix)
			if got != sidePath(path, suffix) {
				t.Fatalf("%s%s: not deterministic", what, suffix)
			}
			side := filepath.Base(got)
			if filepath.Dir(got) != dir || len(side) > 255 || !utf8.ValidString(got) || !strings.HasSuffix(got, suffix) {
				t.Errorf("%s%s: %q (%d bytes, valid UTF-8 %v), want a name of at most 255 bytes in %s ending in %s",
					what, suffix, side, len(side), utf8.ValidString(got), dir, suffix)
			}
			if len(base)+len(suffix) > 255 && len(side) < 255-utf8.UTFMax {
				t.Errorf("%s%s: %d bytes, shortened more than needed", what, suffix, len(side))
			}
			other := base[:len(base)-1] + "z"
			if sidePath(filepath.Join(dir, other), suffix) == got {
				t.Errorf("%s%s: the name and one that differs in its last byte share %q", what, suffix, side)
			}
			if err := os.WriteFile(got, nil, 0o644); err != nil {
				t.Errorf("%s%s: %v", what, suffix, err)
			}
		}
	}
	// The folder part is kept as given, not cleaned.
	long := strings.Repeat("a", 255)
	if got := sidePath("./x//"+long, ".d"); !strings.HasPrefix(got, "./x//") || got == "./x//"+long+".d" {
		t.Errorf("folder part: %q", got)
	}
}
