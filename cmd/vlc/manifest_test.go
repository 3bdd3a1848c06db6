package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/vecfile"
)

// editManifest rewrites the store manifest at path with edit applied to
// its STOR JSON, the other sections kept, checksums made anew: a
// manifest damaged as a hand edit or a bug would, not as the disk would.
func editManifest(t *testing.T, path string, edit func(m map[string]any)) {
	t.Helper()
	f, err := format.Open(path, format.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	var secs []format.Section
	for _, s := range f.Sections() {
		data, _ := f.Section(s.Kind)
		data = append([]byte(nil), data...)
		if s.Kind == format.KindOf("STOR") {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			edit(m)
			if data, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		secs = append(secs, format.Section{Kind: s.Kind, Data: data})
	}
	f.Close()
	if err := format.WriteFile(path, secs); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyFindsManifestThatLosesRows: vlc verify (and every command
// that opens the store) refuses, as corrupt, a manifest that lists a
// segment twice (its rows would count twice, its deletions apply twice)
// or whose next segment number a listed segment already has (the next
// write would rename over that segment and lose its rows).
func TestVerifyFindsManifestThatLosesRows(t *testing.T) {
	dir := t.TempDir()
	ix := filepath.Join(dir, "s.vlc")
	vecs := filepath.Join(dir, "add.f16")
	if err := vecfile.WriteF16(vecs, randomRows(20, 96, 3)); err != nil {
		t.Fatal(err)
	}
	mustVLC(t, "compress", deepBase, "-dim", "96", "-o", ix, "-anchors", "8", "-quiet")
	mustVLC(t, "add", ix, vecs)
	mustVLC(t, "add", ix, vecs)
	good, err := os.ReadFile(ix) // the manifest; the segments stay as they are
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := os.WriteFile(ix, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"a segment listed twice", func(m map[string]any) {
			segs := m["segments"].([]any)
			m["segments"] = append(segs, segs[1])
		}, "are both seg-000001-"},
		{"the next segment number taken", func(m map[string]any) {
			m["next_segment"] = 2
		}, "next segment number 2 is taken by segment 2 (seg-000002-"},
	} {
		restore()
		editManifest(t, ix, c.edit)
		for _, cmd := range []string{"verify", "info", "add"} {
			args := []string{cmd, ix}
			if cmd == "add" {
				args = append(args, vecs)
			}
			code, out, errs := runVLC(t, args...)
			checkOneLineError(t, code, errs)
			if out != "" || !strings.Contains(errs, "corrupt") || !strings.Contains(errs, c.want) {
				t.Errorf("%s: vlc %s: stdout %q, stderr %q; want an error saying corrupt and %q", c.name, cmd, out, errs, c.want)
			}
		}
	}
	restore()
	if out, _ := mustVLC(t, "verify", ix); !strings.HasPrefix(out, fmt.Sprintf("%s: ok (3 segments", ix)) {
		t.Errorf("verify of the store before the edits: %q", out)
	}
}
