//go:build !unix

package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// SpecialFiles: only a folder here.
func SpecialFiles(t testing.TB, ext string) []Special {
	p := filepath.Join(t.TempDir(), "folder"+ext)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return []Special{{"folder", p, "a folder"}}
}
