package shortname

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFit: names within the limit are kept; longer ones are shortened
// within it, deterministically, at a rune boundary, keeping apart names
// that differ only in their last byte.
func TestFit(t *testing.T) {
	if got := Fit("idx.vlc", 10); got != "idx.vlc" {
		t.Errorf("short name became %q", got)
	}
	if got := Fit(strings.Repeat("a", 10), 10); got != strings.Repeat("a", 10) {
		t.Errorf("name of exactly the limit became %q", got)
	}
	for _, r := range []string{"a", "é", "日", "😀"} {
		for k := range 4 {
			for _, limit := range []int{17, 18, 20, 100, 200, 236, Max} {
				name := strings.Repeat("x", k) + strings.Repeat(r, 300/len(r))
				got := Fit(name, limit)
				if len(got) > limit || !utf8.ValidString(got) || got != Fit(name, limit) {
					t.Fatalf("rune %q after %d bytes, limit %d: %q (%d bytes, valid %v)", r, k, limit, got, len(got), utf8.ValidString(got))
				}
				if len(got) < limit-utf8.UTFMax+1 {
					t.Errorf("rune %q after %d bytes, limit %d: %d bytes, more cut than a rune needs", r, k, limit, len(got))
				}
				if !strings.HasPrefix(name, strings.TrimSuffix(got, got[len(got)-hashLen:])) {
					t.Errorf("rune %q, limit %d: %q does not start with the name", r, limit, got)
				}
				other := name[:len(name)-1] + "z"
				if Fit(other, limit) == got {
					t.Errorf("rune %q, limit %d: two names that differ in the last byte share %q", r, limit, got)
				}
			}
		}
	}
	if got := Fit(strings.Repeat("a", 40), 5); len(got) != hashLen || got[0] != '~' {
		t.Errorf("limit below the hash: %q", got)
	}
	// Bytes that are not UTF-8: cut anyway, within the limit.
	bad := strings.Repeat("\x80", 300)
	if got := Fit(bad, 100); len(got) > 100 || len(got) < 100-utf8.UTFMax {
		t.Errorf("invalid UTF-8: %d bytes", len(got))
	}
}
