package store

import (
	"os"
	"path/filepath"

	"github.com/vlc-embed/vlc/internal/shortname"
)

// sidePath is the path of a file or folder that a store keeps beside the
// one at path (its write lock, path + ".lock"; its segment folder,
// path + ".d"): path + suffix while the last name component that makes,
// path's file name and suffix, fits in 255 bytes (NAME_MAX on Linux), as
// every name of up to 250 bytes does for ".lock". A longer one is
// shortened in the same folder: path's text up to its last separator,
// unchanged, then the file name shortened to 255 - len(suffix) bytes by
// shortname.Fit (its first bytes cut where a rune starts, "~" and 16
// hexadecimal digits of the SHA-256 of the whole name), then suffix. So
// the result depends on path and suffix alone (every process finds the
// same lock and segment folder), its last component fits in 255 bytes
// when suffix has at most 238, it is valid UTF-8 when path and suffix
// are, and two paths whose long names differ anywhere, their last byte
// included, get different side paths unless 64 bits of hashes collide.
// A name kept whole may still equal another path's shortened side name
// when chosen to (it would end in "~", 16 hexadecimal digits and suffix).
func sidePath(path, suffix string) string {
	i := len(path)
	for i > len(filepath.VolumeName(path)) && !os.IsPathSeparator(path[i-1]) {
		i--
	}
	dir, base := path[:i], path[i:]
	if len(base)+len(suffix) <= shortname.Max {
		return path + suffix
	}
	return dir + shortname.Fit(base, shortname.Max-len(suffix)) + suffix
}
