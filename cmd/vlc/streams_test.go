package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputStreams: what a script consumes goes to stdout (search hits,
// get's payload, info, the ids add gave), what people read to stderr
// (compress's, add's, delete's, compact's and retrain's summaries and
// warnings); each stream is checked whole.
func TestOutputStreams(t *testing.T) {
	dir := t.TempDir()
	vecs, ids, payloads := deepPart(t, dir, "base", 0, 300, "base")
	ix := filepath.Join(dir, "s.vlc")
	check := func(args []string, stdout func(string) bool, stderr func(string) bool) {
		t.Helper()
		out, errs := mustVLC(t, args...)
		if !stdout(out) || !stderr(errs) {
			t.Errorf("vlc %s:\nstdout %q\nstderr %q", strings.Join(args, " "), out, errs)
		}
	}
	empty := func(s string) bool { return s == "" }
	has := func(want ...string) func(string) bool {
		return func(s string) bool {
			for _, w := range want {
				if !strings.Contains(s, w) {
					return false
				}
			}
			return true
		}
	}
	check([]string{"compress", vecs, "-o", ix, "-anchors", "8", "-ids", ids, "-payloads", payloads},
		empty, has("compressed "+vecs+" -> "+ix, "size ratio"))

	// add: the ids it gave on stdout, one a line, in order; its summary
	// on stderr. Given ids (one holding a double quote, printed quoted)
	// and then ids the index picks.
	addVecs, _, _ := deepPart(t, dir, "add", 300, 303, "")
	addIDs := writeLines(t, filepath.Join(dir, "add.ids"), []string{"new-1", `say "hi"`, "new-3"})
	check([]string{"add", ix, addVecs, "-ids", addIDs},
		func(s string) bool { return s == "new-1\n"+`"say \"hi\""`+"\nnew-3\n" },
		func(s string) bool { return s == ix+`: added 3 vectors (ids new-1 .. new-3); 303 live`+"\n" })
	more, _, _ := deepPart(t, dir, "more", 303, 305, "")
	check([]string{"add", ix, more},
		func(s string) bool { return s == "300\n301\n" }, // the next free numbers
		has(": added 2 vectors", "305 live"))

	check([]string{"get", ix, storeID(7)}, func(s string) bool { return s == storeID(7)+"\t"+storePayload(7, "base")+"\n" }, empty)
	check([]string{"info", ix}, has("rows        305 live"), empty)
	check([]string{"verify", ix}, has(": ok ("), empty)
	q := deepQueries(t, dir, "q", []int{7})
	check([]string{"search", ix, "-query", q, "-k", "2"}, has("0\t1\t"+storeID(7)+"\t", "\n0\t2\t"), empty)

	check([]string{"delete", ix, storeID(1), storeID(2)}, empty, func(s string) bool { return s == fmt.Sprintf("%s: deleted 2 ids; 303 live\n", ix) })
	check([]string{"compact", ix}, empty, has(ix+": 303 live vectors in 1 segment(s)"))
	check([]string{"retrain", ix, "-backend", "cpu"}, empty, has(ix+": retrained on 303 vectors:"))
}
