package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

// TestCompressOverStoreNeedsReplace: compress refuses to write over a
// store (an index that took adds or deletes) unless -replace, naming the
// store and the flag, and leaves it as it was; an index file it wrote is
// replaced without asking.
func TestCompressOverStoreNeedsReplace(t *testing.T) {
	dir := t.TempDir()
	ix := filepath.Join(dir, "s.vlc")
	vecs := filepath.Join(dir, "add.f16")
	if err := vecfile.WriteF16(vecs, randomRows(20, 96, 3)); err != nil {
		t.Fatal(err)
	}
	compress := []string{"compress", deepBase, "-dim", "96", "-o", ix, "-anchors", "8", "-quiet"}
	mustVLC(t, compress...)
	mustVLC(t, compress...) // an index file: replaced
	mustVLC(t, "add", ix, vecs)
	before := storeState(t, ix)
	code, out, errs := runVLC(t, compress...)
	checkOneLineError(t, code, errs)
	if out != "" || !strings.Contains(errs, "it is a store (2020 live vectors in 2 segments") || !strings.Contains(errs, "-replace") {
		t.Errorf("compress over a store: stdout %q, stderr %q", out, errs)
	}
	if after := storeState(t, ix); after != before {
		t.Errorf("a refused compress changed the store:\n%s\nthen\n%s", before, after)
	}
	mustVLC(t, append(compress, "-replace")...)
	if in := storeInfoJSON(t, ix); in.Live != deepN || len(in.Segments) != 1 || in.Segments[0].File != ix {
		t.Errorf("after compress -replace: %+v, want one index file of %d vectors", in, deepN)
	}
	if _, err := os.Stat(ix + ".d"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("compress -replace left the store's segment folder: %v", err)
	}
}

// TestSearchRerankSkipsIDsAddedAgain: vlc search -rerank FILE re-scores
// from the file only the vectors that are still its rows: an id deleted
// and added again with another vector keeps its code's estimate, and
// stderr says how many vectors are not rows of the file.
func TestSearchRerankSkipsIDsAddedAgain(t *testing.T) {
	dir := t.TempDir()
	ix := filepath.Join(dir, "s.vlc")
	mustVLC(t, "compress", deepBase, "-dim", "96", "-o", ix, "-quiet", "-seed", "1")
	rows := deepRows(t, 0, deepN)
	fresh := filepath.Join(dir, "fresh.fvecs")
	if err := vecfile.WriteFvecs(fresh, [][]float32{rows[1500]}); err != nil {
		t.Fatal(err)
	}
	mustVLC(t, "delete", ix, "5")
	mustVLC(t, "add", ix, fresh, "-ids", writeLines(t, filepath.Join(dir, "id5"), []string{"5"}))
	out, errs := mustVLC(t, "search", ix, "-query", fresh, "-k", "2", "-nprobe", "64", "-rerank", deepBase)
	if want := "vlc search: re-rank: 1 of the 2000 live vectors are not rows of " + deepBase; !strings.Contains(errs, want) {
		t.Errorf("stderr %q, want it to say %q", errs, want)
	}
	hits := parseStoreHits(t, out, false)
	dist := map[string]float64{}
	for _, h := range hits {
		dist[h.id] = h.dist
	}
	d5, ok5 := dist["5"]
	d1500, ok1500 := dist["1500"]
	if len(hits) != 2 || !ok5 || !ok1500 {
		t.Fatalf("hits %+v, want 5 (the vector added) and 1500 (its row in the file)", hits)
	}
	if d1500 != 0 {
		t.Errorf("row 1500 of the file, re-ranked from it: distance %g, want 0", d1500)
	}
	var old float64
	for j, x := range rows[5] {
		d := float64(x - rows[1500][j])
		old += d * d
	}
	if d5 > old/10 {
		t.Errorf("id 5 at %g, near its distance to row 5 of the file (%g): re-ranked from a row it no longer holds", d5, old)
	}
}
