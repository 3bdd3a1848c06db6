package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

// TestCompressLikelyDim: a raw .f16 file read at a -dim that divides its
// size but is not its dimension (deep2k's base is 96) is refused with one
// line naming the file, the -dim given and the likely dimension; no index
// is written.
func TestCompressLikelyDim(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.vlc")
	for _, dim := range []string{"48", "192", "32"} {
		checkFails(t, []string{"compress", deepBase, "-dim", dim, "-o", out, "-quiet"},
			[]string{"vlc compress: -dim " + dim + ": " + deepBase + ": read at dimension " + dim, "the dimension is likely 96, not " + dim})
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("-dim %s wrote %s", dim, out)
		}
	}
}

// TestSearchLikelyDim: queries in a raw .f16 file are read at the index's
// dimension; when their values say otherwise the error names the file,
// the likely dimension and the index's.
func TestSearchLikelyDim(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "narrow.npy")
	if err := vecfile.WriteNpy(in, randomRows(300, 48, 5), "<f4"); err != nil {
		t.Fatal(err)
	}
	ix := filepath.Join(dir, "narrow.vlc")
	mustVLC(t, "compress", in, "-o", ix, "-anchors", "4", "-quiet")
	checkFails(t, []string{"search", ix, "-query", deepBase},
		[]string{"queries: " + deepBase, "the dimension is likely 96, not 48", "(read at the index's dimension, 48)"})
}
