// Package shortname fits the names of files derived from another file's
// name (its temporary files, its lock, its folder of segments) within the
// file system's limit on one name component, so that any name a user may
// give a file can also be given the files beside it.
package shortname

import (
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"
)

// Max is the longest name component, in bytes, that the file systems of
// Linux take (NAME_MAX). Other systems count their limit (255) in UTF-16
// units or characters, never more of them than a name has bytes, so a name
// within Max bytes fits there too.
const Max = 255

// hashLen is the length of the hash part of a shortened name: a separator
// "~" and 16 hexadecimal digits.
const hashLen = 1 + 16

// Fit returns name unchanged when it has at most limit bytes, and a
// longer name shortened to at most limit bytes: its first bytes, cut where
// a rune starts (so a valid UTF-8 name stays valid; where the bytes are not
// UTF-8, at most 3 more are dropped looking for a start), then "~" and the
// first 16 hexadecimal digits of the SHA-256 of the whole name. The result
// depends on name and limit alone, and two long names that differ
// anywhere, their last byte included, get different forms unless 64 bits
// of their hashes collide. A name that is short enough to be kept as it is
// can still equal another's shortened form when chosen to (it ends in "~"
// and those 16 digits). A limit below 17 leaves no room for the hash: the
// result is then "~" and the 16 digits, longer than limit.
func Fit(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "~" + hex.EncodeToString(sum[:8])
	n := max(0, limit-hashLen)
	for back := 0; n > 0 && back < utf8.UTFMax-1 && !utf8.RuneStart(name[n]); back++ {
		n--
	}
	return name[:n] + tail
}
