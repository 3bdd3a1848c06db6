//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLostOutputCLI runs every command that prints on stdout with stdout
// on /dev/full: each must exit 1 with one line saying the output could not
// be written. Each first runs with stdout in a buffer, which must succeed
// and print something, so that it is the lost output that fails it.
func TestLostOutputCLI(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	r := newSpecialRig(t)
	var ids, payloads strings.Builder
	for i := range 300 {
		fmt.Fprintf(&ids, "doc-%d\n", i)
		fmt.Fprintf(&payloads, "{\"row\":%d}\n", i)
	}
	idsFile, plFile, store := filepath.Join(r.dir, "ids300.txt"), filepath.Join(r.dir, "pl300.jsonl"), filepath.Join(r.dir, "store.vlc")
	os.WriteFile(idsFile, []byte(ids.String()), 0o644)
	os.WriteFile(plFile, []byte(payloads.String()), 0o644)
	mustVLC(t, "compress", r.base, "-o", store, "-anchors", "4", "-ids", idsFile, "-payloads", plFile, "-quiet")
	storeBytes := readFile(t, store)
	const S = "{store}" // a fresh copy of the store for each run
	cases := [][]string{
		{"version"},
		{"help"},
		{"help", "info"},
		{"info", "-h"},
		{"info", r.idx},
		{"info", r.idx, "-json"},
		{"verify", r.idx},
		{"search", r.idx, "-query", r.query},
		{"search", S, "-query", r.query, "-payload"},
		{"eval", r.idx, "-query", r.query, "-base", r.base},
		{"eval", r.idx, "-query", r.query, "-base", r.base, "-json"},
		{"eval", r.idx, "-query", r.query, "-base", r.base, "-sweep"},
		{"eval", r.idx, "-query", r.query, "-base", r.base, "-sweep", "-json"},
		{"get", S, "doc-7"},
		{"add", S, r.add},
		{"bench", "-backend", "cpu", "-n", "200", "-dim", "8", "-anchors", "4", "-iters", "1", "-json"},
	}
	for _, c := range cases {
		name := make([]string, len(c))
		for i, a := range c {
			name[i] = filepath.Base(a)
		}
		t.Run(strings.Join(name, " "), func(t *testing.T) {
			args := func() []string {
				p := filepath.Join(t.TempDir(), "store.vlc")
				if err := os.WriteFile(p, storeBytes, 0o644); err != nil {
					t.Fatal(err)
				}
				a := make([]string, len(c))
				for i, s := range c {
					a[i] = strings.ReplaceAll(s, S, p)
				}
				return a
			}
			if code, out, errs := r.vlc(t, nil, args()...); code != 0 || out == "" {
				t.Fatalf("with stdout in a buffer: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			code, _, errs := r.vlc(t, full, args()...)
			if c[0] == "bench" { // its report goes to stderr first: check the last line
				lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
				errs = lines[len(lines)-1] + "\n"
			}
			checkOneLineError(t, code, errs)
			if want := "no space left on device"; !strings.Contains(errs, want) || !strings.HasPrefix(errs, "vlc ") {
				t.Errorf("stderr %q does not start with \"vlc \" and contain %q", errs, want)
			}
		})
	}
	t.Logf("%d commands", len(cases))
}
