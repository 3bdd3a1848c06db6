package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

// TestCosineRefusesZeroRowCLI: vlc compress -metric cosine refuses an
// input with a zero row, in one line naming the file and the row, and
// writes nothing (it used to store it, at distance 0.5 from every query);
// vlc search refuses a zero query naming its number, vlc add a zero
// vector naming its document (its row). -metric l2 takes the file.
func TestCosineRefusesZeroRowCLI(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	rows := randomRows(300, 8, 7)
	good := p("good.f16")
	if err := vecfile.WriteF16(good, rows); err != nil {
		t.Fatal(err)
	}
	rows[17] = make([]float32, 8)
	zero := p("zero.f16")
	if err := vecfile.WriteF16(zero, rows); err != nil {
		t.Fatal(err)
	}
	queries := p("q.fvecs")
	if err := vecfile.WriteFvecs(queries, [][]float32{rows[0], rows[1], make([]float32, 8)}); err != nil {
		t.Fatal(err)
	}
	out := p("out.vlc")
	checkFails(t, []string{"compress", zero, "-dim", "8", "-metric", "cosine", "-anchors", "4", "-o", out, "-quiet"},
		[]string{zero + ": row 17: every value is 0", "no direction under the cosine metric", "l2 or ip metric"})
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused compress left %s: %v", out, err)
	}
	mustVLC(t, "compress", zero, "-dim", "8", "-metric", "l2", "-anchors", "4", "-o", p("l2.vlc"), "-quiet")

	cos := p("cos.vlc")
	mustVLC(t, "compress", good, "-dim", "8", "-metric", "cosine", "-anchors", "4", "-o", cos, "-quiet")
	checkFails(t, []string{"search", cos, "-query", queries}, []string{"query 2", "zero vector under the cosine metric"})
	checkFails(t, []string{"add", cos, zero}, []string{"document 17", "zero vector under the cosine metric"})
}
