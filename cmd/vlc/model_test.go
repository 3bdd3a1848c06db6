package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

// vlc model writes an index's model to a small file; compress
// -anchors-from that file writes the bytes it writes from the index
// itself, for the rotated and the pq code. The model of a store, and of
// a model file, is the same file.
func TestModelCommand(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	base := "../../testdata/deep2k/base.f16"
	for _, code := range []string{"rotated", "pq"} {
		t.Run(code, func(t *testing.T) {
			ix, model := p(code+".vlc"), p(code+".model")
			mustVLC(t, "compress", base, "-dim", "96", "-rows", ":1500", "-anchors", "20", "-bits", "4", "-code", code, "-o", ix, "-quiet")
			_, sum := mustVLC(t, "model", ix, "-o", model)
			if !strings.Contains(sum, "model of "+ix+" -> "+model+": 20 anchors of dimension 96") || !strings.Contains(sum, "metric l2, seed 1") {
				t.Errorf("summary %q", sum)
			}
			if mb, ib := len(readFile(t, model)), len(readFile(t, ix)); mb*3 > ib {
				t.Errorf("the model file has %d bytes, the index %d", mb, ib)
			}
			fromIndex, fromModel := p(code+"-ix.vlc"), p(code+"-m.vlc")
			mustVLC(t, "compress", base, "-dim", "96", "-rows", "1000:", "-anchors-from", ix, "-o", fromIndex, "-quiet")
			mustVLC(t, "compress", base, "-dim", "96", "-rows", "1000:", "-anchors-from", model, "-o", fromModel, "-quiet")
			if !bytes.Equal(readFile(t, fromModel), readFile(t, fromIndex)) {
				t.Error("compress -anchors-from the model file differs from -anchors-from the index")
			}
			again := p(code + "-again.model")
			mustVLC(t, "model", model, "-o", again, "-quiet")
			if !bytes.Equal(readFile(t, again), readFile(t, model)) {
				t.Error("the model of a model file differs from it")
			}
		})
	}

	store := p("store.vlc")
	if err := os.Link(p("rotated.vlc"), store); err != nil {
		t.Fatal(err)
	}
	vecs := p("add.f16")
	if err := vecfile.WriteF16(vecs, randomRows(20, 96, 3)); err != nil {
		t.Fatal(err)
	}
	mustVLC(t, "add", store, vecs)
	mustVLC(t, "model", store, "-o", p("store.model"), "-quiet")
	if !bytes.Equal(readFile(t, p("store.model")), readFile(t, p("rotated.model"))) {
		t.Error("the model of a store differs from the model of the index it grew from")
	}

	indexBytes := readFile(t, p("rotated.vlc"))
	checkFails(t, []string{"model", p("rotated.vlc"), "-o", p("rotated-ix.vlc")}, []string{"output " + p("rotated-ix.vlc") + " is an index or a store"})
	checkFails(t, []string{"model", p("rotated.vlc"), "-o", store}, []string{"is an index or a store"})
	checkFails(t, []string{"model", p("rotated.vlc")}, []string{"-o"})
	checkFails(t, []string{"model", vecs, "-o", p("x.model")}, []string{vecs, "not a vlc index"})
	checkFails(t, []string{"model", p("none.vlc"), "-o", p("x.model")}, []string{"none.vlc", "no such file"})
	checkFails(t, []string{"info", p("rotated.model")}, []string{"it is a model file"})
	checkFails(t, []string{"compress", base, "-dim", "96", "-anchors-from", p("rotated.model"), "-bits", "8", "-o", p("x.vlc")}, []string{"-bits 8", "has 4"})
	checkFails(t, []string{"compress", "../../testdata/golden/small.f16", "-dim", "16", "-anchors-from", p("rotated.model"), "-o", p("x.vlc")}, []string{"dimension 16", "has 96"})
	if _, err := os.Stat(p("x.model")); err == nil {
		t.Error("a refused command wrote its output")
	}
	if !bytes.Equal(readFile(t, p("rotated.vlc")), indexBytes) {
		t.Error("a refused model changed the index")
	}
}
