package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
)

// TestLongNamesCompress: compress writes an index whose name is as long as
// the file system allows (255 bytes, NAME_MAX on Linux), which opens and
// verifies, and leaves nothing else in the folder.
func TestLongNamesCompress(t *testing.T) {
	dir := t.TempDir()
	name := strings.Repeat("a", 255-len(".vlc")) + ".vlc"
	out := filepath.Join(dir, name)
	mustVLC(t, "compress", deepBase, "-dim", "96", "-o", out, "-seed", "1", "-quiet")
	ix, err := index.Open(out, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Len() != deepN {
		t.Errorf("%d rows, want %d", ix.Len(), deepN)
	}
	checkOnly(t, dir, name)
}

// TestLongNamesPlot: eval -plot writes, and replaces, a plot whose name is
// 255 bytes long.
func TestLongNamesPlot(t *testing.T) {
	ix := deepIndexPath(t)
	dir := t.TempDir()
	name := strings.Repeat("日", (255-len(".png"))/3) + ".png"
	png := filepath.Join(dir, name)
	for range 2 {
		mustVLC(t, "eval", ix, "-query", deepQuery, "-gt", deepGT, "-sweep-nprobe", "1", "-plot", png)
	}
	checkPNG(t, png)
	checkOnly(t, dir, name)
}
