package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// compress -anchors-from -rows encodes shards under a model; vlc merge
// joins them into the bytes of one encode of every row but META's means;
// the summary reports peak memory; bad flags fail with one line.
func TestMergeShards(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	base := "../../testdata/deep2k/base.f16"
	mustVLC(t, "compress", base, "-dim", "96", "-rows", ":1500", "-anchors", "20", "-bits", "4", "-code", "rotated", "-o", p("model.vlc"), "-quiet")
	_, sum := mustVLC(t, "compress", base, "-dim", "96", "-anchors-from", p("model.vlc"), "-rows", ":700", "-o", p("a.vlc"))
	for _, want := range []string{"model         " + p("model.vlc") + " (no training)", "peak memory"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	mustVLC(t, "compress", base, "-dim", "96", "-anchors-from", p("model.vlc"), "-rows", "700:", "-o", p("b.vlc"), "-quiet")
	mustVLC(t, "compress", base, "-dim", "96", "-anchors-from", p("model.vlc"), "-o", p("all.vlc"), "-quiet")
	_, msg := mustVLC(t, "merge", p("a.vlc"), p("b.vlc"), "-o", p("merged.vlc"))
	if !strings.Contains(msg, "merged 2 indexes") || !strings.Contains(msg, "2000 vectors") {
		t.Errorf("merge summary %q", msg)
	}
	q := "../../testdata/deep2k/query.fvecs"
	want, _ := mustVLC(t, "search", p("all.vlc"), "-query", q, "-k", "5")
	got, _ := mustVLC(t, "search", p("merged.vlc"), "-query", q, "-k", "5")
	if got != want || got == "" {
		t.Errorf("the merged shards search differently from one encode")
	}
	mustVLC(t, "compress", base, "-dim", "96", "-rows", ":1500", "-anchors", "20", "-bits", "4", "-code", "rotated", "-seed", "9", "-o", p("other.vlc"), "-quiet")
	checkFails(t, []string{"merge", p("a.vlc"), p("other.vlc"), "-o", p("x.vlc")}, []string{"do not share a model"})
	if _, err := os.Stat(p("x.vlc")); err == nil {
		t.Error("a refused merge wrote its output")
	}
	checkFails(t, []string{"merge", p("a.vlc")}, []string{"-o"})
	checkFails(t, []string{"compress", base, "-dim", "96", "-anchors-from", p("model.vlc"), "-bits", "8", "-o", p("x.vlc")}, []string{"-bits 8", "has 4"})
	checkFails(t, []string{"compress", base, "-dim", "96", "-rows", "5:3", "-o", p("x.vlc")}, []string{"-rows"})
	checkFails(t, []string{"compress", base, "-dim", "96", "-rows", "0:99999", "-o", p("x.vlc")}, []string{"rows 0 to 99999", "2000"})
	checkFails(t, []string{"compress", base, "-dim", "96", "-device-memory", "8Q", "-o", p("x.vlc")}, []string{"-device-memory"})
	checkFails(t, []string{"compress", base, "-dim", "96", "-train-sample", "-3", "-o", p("x.vlc")}, []string{"-train-sample"})
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "8GiB": 8 << 30, "512MiB": 512 << 20, "8G": 8 << 30, "1000": 1000, "2tb": 2 << 40} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"8Q", "-1G", "G", "0", "99999999999T"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q): no error", in)
		}
	}
}
