package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func infoJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	out, _ := mustVLC(t, "info", path, "-json")
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("info -json output %q: %v", out, err)
	}
	return m
}

type sectionInfo struct {
	Kind   string `json:"kind"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	CRC    string `json:"crc32c"`
}

func sections(t *testing.T, path string) []sectionInfo {
	t.Helper()
	out, _ := mustVLC(t, "info", "-json", path)
	var v struct {
		Sections []sectionInfo `json:"sections"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v.Sections
}

func TestInfoVerify(t *testing.T) {
	ix := deepIndexPath(t)
	st, err := os.Stat(ix)
	if err != nil {
		t.Fatal(err)
	}

	out, _ := mustVLC(t, "info", ix)
	for _, want := range []string{"2000 x 96", "metric l2", "anchors     45", "8 bits per dimension", fmt.Sprintf("%d bytes", st.Size())} {
		if !strings.Contains(out, want) {
			t.Errorf("info output lacks %q:\n%s", want, out)
		}
	}

	m := infoJSON(t, ix)
	for k, want := range map[string]any{
		"vectors": 2000.0, "dim": 96.0, "anchors": 45.0, "bits": 8.0, "metric": "l2",
		"seed": 1.0, "bytes": float64(st.Size()), "path": ix,
	} {
		if m[k] != want {
			t.Errorf("info -json %s = %v, want %v", k, m[k], want)
		}
	}
	for _, k := range []string{"list_min", "list_median", "list_max"} {
		if v, _ := m[k].(float64); v < 1 || v > deepN {
			t.Errorf("info -json %s = %v", k, m[k])
		}
	}
	if !(m["list_min"].(float64) <= m["list_median"].(float64) && m["list_median"].(float64) <= m["list_max"].(float64)) {
		t.Errorf("list sizes min %v median %v max %v are not ordered", m["list_min"], m["list_median"], m["list_max"])
	}

	secs := sections(t, ix)
	var kinds []string
	end := int64(0)
	for _, s := range secs {
		kinds = append(kinds, s.Kind)
		if s.Offset < end || s.Length <= 0 || s.Offset+s.Length > st.Size() {
			t.Errorf("section %+v out of order or out of the %d-byte file", s, st.Size())
		}
		if len(s.CRC) != 8 {
			t.Errorf("section %s crc32c %q, want 8 hex digits", s.Kind, s.CRC)
		}
		end = s.Offset + s.Length
	}
	if want := []string{"META", "ANCH", "LIST", "ROWS", "PARM", "CODE", "SCAN"}; !slices.Equal(kinds, want) {
		t.Errorf("sections %v, want %v", kinds, want)
	}

	out, errs := mustVLC(t, "verify", ix)
	if !strings.Contains(out, "ok") || !strings.Contains(out, "7 sections") {
		t.Errorf("verify output %q", out)
	}
	if errs != "" {
		t.Errorf("verify wrote to stderr: %q", errs)
	}
}

func copyFile(t *testing.T, src, dst string, edit func([]byte) []byte) {
	t.Helper()
	b := readFile(t, src)
	b = edit(slices.Clone(b))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCorruption(t *testing.T) {
	ix := deepIndexPath(t)
	dir := t.TempDir()
	secs := sections(t, ix)
	if len(secs) == 0 {
		t.Fatal("info -json lists no sections")
	}
	for _, s := range secs {
		t.Run("flip "+s.Kind, func(t *testing.T) {
			bad := filepath.Join(dir, "flip-"+s.Kind+".vlc")
			copyFile(t, ix, bad, func(b []byte) []byte {
				b[s.Offset+s.Length/2] ^= 0x40
				return b
			})
			code, out, errs := runVLC(t, "verify", bad)
			checkOneLineError(t, code, errs)
			if out != "" {
				t.Errorf("verify printed %q on stdout", out)
			}
			for _, w := range []string{s.Kind, bad} {
				if !strings.Contains(errs, w) {
					t.Errorf("verify stderr %q does not name %q", errs, w)
				}
			}
			// search and eval verify the checksums too.
			code, out, errs = runVLC(t, "search", bad, "-query", deepQuery, "-k", "3")
			checkOneLineError(t, code, errs)
			if out != "" || !strings.Contains(errs, s.Kind) {
				t.Errorf("search on a damaged %s: stdout %d bytes, stderr %q", s.Kind, len(out), errs)
			}
			// info does not read the sections' data; it must not crash
			// (META damage, which info decodes, may be reported or not).
			code, _, errs = runVLC(t, "info", bad)
			if code != 0 {
				checkOneLineError(t, code, errs)
			}
		})
	}

	// Damage outside the sections: the header, the table and the zero
	// padding between sections are covered too.
	var listSec sectionInfo
	for _, s := range secs {
		if s.Kind == "LIST" {
			listSec = s
		}
	}
	if listSec.Length%64 == 0 {
		t.Fatalf("LIST section %+v has no padding to damage", listSec)
	}
	others := []struct {
		name string
		off  int64
		want []string
	}{
		{"header size field", 20, []string{"header checksum mismatch"}},
		{"table entry", 64 + 32 + 10, []string{"header checksum mismatch"}},
		{"padding after LIST", listSec.Offset + listSec.Length + 1, []string{"padding", "LIST"}},
		{"magic", 0, []string{"not a vlc index"}},
		{"version", 8, []string{"version"}},
	}
	for _, o := range others {
		t.Run("flip "+o.name, func(t *testing.T) {
			bad := filepath.Join(dir, "flip-"+strings.ReplaceAll(o.name, " ", "-")+".vlc")
			copyFile(t, ix, bad, func(b []byte) []byte {
				b[o.off] ^= 0x01
				return b
			})
			code, out, errs := runVLC(t, "verify", bad)
			checkOneLineError(t, code, errs)
			if out != "" {
				t.Errorf("verify printed %q on stdout", out)
			}
			for _, w := range append(o.want, bad) {
				if !strings.Contains(errs, w) {
					t.Errorf("verify stderr %q does not contain %q", errs, w)
				}
			}
		})
	}

	cuts := []struct {
		name string
		size func(n int) int
	}{
		{"half", func(n int) int { return n / 2 }},
		{"half on a 64-byte boundary", func(n int) int { return n / 2 &^ 63 }},
		{"last 64 bytes", func(n int) int { return n - 64 }},
		{"last byte", func(n int) int { return n - 1 }},
		{"header only", func(n int) int { return 100 }},
		{"magic only", func(n int) int { return 4 }},
		{"empty", func(n int) int { return 0 }},
	}
	for _, c := range cuts {
		t.Run("truncate "+c.name, func(t *testing.T) {
			bad := filepath.Join(dir, "cut-"+strings.ReplaceAll(c.name, " ", "-")+".vlc")
			copyFile(t, ix, bad, func(b []byte) []byte { return b[:c.size(len(b))] })
			for _, cmd := range [][]string{
				{"search", bad, "-query", deepQuery, "-k", "5"},
				{"verify", bad},
				{"info", bad},
				{"eval", bad, "-query", deepQuery, "-gt", deepGT},
			} {
				code, out, errs := runVLC(t, cmd...)
				checkOneLineError(t, code, errs)
				if out != "" {
					t.Errorf("%s: stdout %q, want nothing", cmd[0], out)
				}
				if !strings.Contains(errs, bad) {
					t.Errorf("%s: stderr %q does not name the file", cmd[0], errs)
				}
			}
		})
	}
}
