package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

// storeHit is one line of vlc search -payload: query, rank, id, distance,
// payload.
type storeHit struct {
	q, rank int
	id      string
	dist    float64
	payload string
}

// parseStoreHits parses search output with string ids and, with payload,
// a fifth field.
func parseStoreHits(t *testing.T, out string, payload bool) []storeHit {
	t.Helper()
	if out == "" {
		return nil
	}
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("search output does not end in a newline: %q", out)
	}
	want := 4
	if payload {
		want = 5
	}
	var hits []storeHit
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		f := strings.SplitN(line, "\t", 5)
		if len(f) != want {
			t.Fatalf("line %d %q: %d tab-separated fields, want %d", i+1, line, len(f), want)
		}
		var h storeHit
		var err error
		if h.q, err = strconv.Atoi(f[0]); err != nil {
			t.Fatalf("line %d %q: query: %v", i+1, line, err)
		}
		if h.rank, err = strconv.Atoi(f[1]); err != nil {
			t.Fatalf("line %d %q: rank: %v", i+1, line, err)
		}
		h.id = f[2]
		if h.dist, err = strconv.ParseFloat(f[3], 64); err != nil {
			t.Fatalf("line %d %q: distance: %v", i+1, line, err)
		}
		if payload {
			h.payload = f[4]
		}
		hits = append(hits, h)
	}
	return hits
}

// byQuery groups hits by query, checking ranks run 1, 2, ... within each.
func byQuery(t *testing.T, hits []storeHit, nq int) [][]storeHit {
	t.Helper()
	out := make([][]storeHit, nq)
	for _, h := range hits {
		if h.q < 0 || h.q >= nq {
			t.Fatalf("hit %+v: query out of [0, %d)", h, nq)
		}
		if h.rank != len(out[h.q])+1 {
			t.Fatalf("hit %+v: rank %d, want %d", h, h.rank, len(out[h.q])+1)
		}
		out[h.q] = append(out[h.q], h)
	}
	return out
}

// storeID and storePayload are the id and the payload the tests give the
// deep2k row i (part says whether it was compressed or added).
func storeID(i int) string { return fmt.Sprintf("doc-%04d", i) }

func storePayload(i int, part string) string {
	return fmt.Sprintf(`{"row":%d,"part":%q,"tags":["deep","x\ty"]}`, i, part)
}

// writeLines writes lines, each ending in a newline.
func writeLines(t *testing.T, path string, lines []string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// deepRows reads rows [lo, hi) of the deep2k base.
func deepRows(t *testing.T, lo, hi int) [][]float32 {
	t.Helper()
	m, err := vecfile.Open(deepBase, vecfile.Options{Dim: deepDim})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rows := make([][]float32, 0, hi-lo)
	for i := lo; i < hi; i++ {
		rows = append(rows, m.Row(i, nil))
	}
	return rows
}

// deepPart writes rows [lo, hi) of deep2k as .fvecs, with their ids and
// payloads files (payloads only when part is not empty).
func deepPart(t *testing.T, dir, name string, lo, hi int, part string) (vecs, ids, payloads string) {
	t.Helper()
	vecs = filepath.Join(dir, name+".fvecs")
	if err := vecfile.WriteFvecs(vecs, deepRows(t, lo, hi)); err != nil {
		t.Fatal(err)
	}
	var idl, pl []string
	for i := lo; i < hi; i++ {
		idl = append(idl, storeID(i))
		pl = append(pl, storePayload(i, part))
	}
	ids = writeLines(t, filepath.Join(dir, name+".ids"), idl)
	payloads = writeLines(t, filepath.Join(dir, name+".jsonl"), pl)
	return vecs, ids, payloads
}

// deepQueries writes the deep2k rows given as a query file.
func deepQueries(t *testing.T, dir, name string, rows []int) string {
	t.Helper()
	all := deepRows(t, 0, deepN)
	var q [][]float32
	for _, r := range rows {
		q = append(q, all[r])
	}
	p := filepath.Join(dir, name+".fvecs")
	if err := vecfile.WriteFvecs(p, q); err != nil {
		t.Fatal(err)
	}
	return p
}

// storeState describes the bytes of a store: the file at path and every
// file of path.d (name, size and hash), or that path.d does not exist.
func storeState(t *testing.T, path string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %x\n", filepath.Base(path), sha256.Sum256(readFile(t, path)))
	ents, err := os.ReadDir(path + ".d")
	if os.IsNotExist(err) {
		b.WriteString("no segment folder\n")
		return b.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(path+".d", e.Name())
		fmt.Fprintf(&b, "%s %x\n", e.Name(), sha256.Sum256(readFile(t, p)))
	}
	return b.String()
}

// storeInfo is what the tests read of vlc info -json.
type storeInfo struct {
	Vectors  int `json:"vectors"`
	Live     int `json:"live"`
	Deleted  int `json:"deleted"`
	Segments []struct {
		File     string `json:"file"`
		Rows     int    `json:"rows"`
		Deleted  int    `json:"deleted"`
		Added    bool   `json:"added"`
		IDs      bool   `json:"ids"`
		Payloads bool   `json:"payloads"`
	} `json:"segments"`
}

func storeInfoJSON(t *testing.T, path string) storeInfo {
	t.Helper()
	out, _ := mustVLC(t, "info", "-json", path)
	var in storeInfo
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatalf("info -json output %q: %v", out, err)
	}
	return in
}

// checkSelfFirst searches for the deep2k rows given and checks that each
// finds its own id first, with its payload, and never an id of gone.
func checkSelfFirst(t *testing.T, ix, dir, name string, rows []int, payloadOf func(int) string, gone map[string]bool) {
	t.Helper()
	q := deepQueries(t, dir, name, rows)
	out, _ := mustVLC(t, "search", ix, "-query", q, "-k", "5", "-nprobe", "1000", "-payload")
	hits := byQuery(t, parseStoreHits(t, out, true), len(rows))
	for i, r := range rows {
		if len(hits[i]) != 5 {
			t.Fatalf("query %d (row %d): %d hits, want 5", i, r, len(hits[i]))
		}
		if h := hits[i][0]; h.id != storeID(r) || h.payload != payloadOf(r) {
			t.Errorf("query %d (row %d): first hit %q payload %s, want %q payload %s", i, r, h.id, h.payload, storeID(r), payloadOf(r))
		}
		for _, h := range hits[i] {
			if gone[h.id] {
				t.Errorf("query %d (row %d): deleted id %q returned", i, r, h.id)
			}
		}
	}
}

// TestStoreCLI runs the store commands end to end on deep2k: compress
// 1500 rows with ids and payloads, add the other 500, get, delete (from
// a file and as arguments), info, verify, compact and retrain, checking
// what search and get return after each.
func TestStoreCLI(t *testing.T) {
	dir := t.TempDir()
	const split = 1500
	baseVecs, baseIDs, basePayloads := deepPart(t, dir, "base", 0, split, "base")
	addVecs, addIDs, addPayloads := deepPart(t, dir, "added", split, deepN, "added")
	ix := filepath.Join(dir, "s.vlc")
	mustVLC(t, "compress", baseVecs, "-o", ix, "-code", "rotated", "-ids", baseIDs, "-payloads", basePayloads, "-quiet")

	payloadOf := func(i int) string {
		if i < split {
			return storePayload(i, "base")
		}
		return storePayload(i, "added")
	}
	baseRows := []int{0, 1, 3, 777, split - 1}
	checkSelfFirst(t, ix, dir, "q-base", baseRows, payloadOf, nil)
	// Without -payload: four fields, the ids.
	q := deepQueries(t, dir, "q-plain", baseRows)
	out, _ := mustVLC(t, "search", ix, "-query", q, "-k", "1", "-nprobe", "1000")
	for i, h := range parseStoreHits(t, out, false) {
		if h.id != storeID(baseRows[i]) {
			t.Errorf("search without -payload: query %d: %q, want %q", i, h.id, storeID(baseRows[i]))
		}
	}
	if in := storeInfoJSON(t, ix); in.Live != split || in.Deleted != 0 || len(in.Segments) != 1 || !in.Segments[0].IDs || !in.Segments[0].Payloads {
		t.Errorf("info after compress: %+v", in)
	}
	out, _ = mustVLC(t, "get", ix, storeID(777))
	if want := storeID(777) + "\t" + storePayload(777, "base") + "\n"; out != want {
		t.Errorf("get %s: %q, want %q", storeID(777), out, want)
	}

	// Add the other 500 rows.
	_, out = mustVLC(t, "add", ix, addVecs, "-ids", addIDs, "-payloads", addPayloads)
	if want := fmt.Sprintf("%s: added %d vectors (ids %s .. %s); %d live\n", ix, deepN-split, storeID(split), storeID(deepN-1), deepN); out != want {
		t.Errorf("add: %q, want %q", out, want)
	}
	out, _ = mustVLC(t, "get", ix, storeID(1700))
	if want := storeID(1700) + "\t" + storePayload(1700, "added") + "\n"; out != want {
		t.Errorf("get %s: %q, want %q", storeID(1700), out, want)
	}
	addRows := []int{split, 1600, 1700, 1999}
	checkSelfFirst(t, ix, dir, "q-added", append(slices.Clone(baseRows), addRows...), payloadOf, nil)

	// Delete three ids from a file, two as arguments.
	delFile := writeLines(t, filepath.Join(dir, "del.ids"), []string{storeID(3), storeID(10), storeID(1600)})
	_, out = mustVLC(t, "delete", ix, "-ids", delFile, storeID(20), storeID(1999))
	if want := fmt.Sprintf("%s: deleted 5 ids; %d live\n", ix, deepN-5); out != want {
		t.Errorf("delete: %q, want %q", out, want)
	}
	deletedRows := []int{3, 10, 20, 1600, 1999}
	gone := map[string]bool{}
	for _, r := range deletedRows {
		gone[storeID(r)] = true
	}
	checkGone := func(stage string) {
		t.Helper()
		for id := range gone {
			code, out, errs := runVLC(t, "get", ix, id)
			checkOneLineError(t, code, errs)
			if out != "" || !strings.Contains(errs, "not found") || !strings.Contains(errs, strconv.Quote(id)) {
				t.Errorf("%s: get deleted %s: stdout %q, stderr %q", stage, id, out, errs)
			}
		}
		// Searching for the deleted vectors themselves returns other ids.
		q := deepQueries(t, dir, "q-gone", deletedRows)
		out, _ := mustVLC(t, "search", ix, "-query", q, "-k", "20", "-nprobe", "1000", "-payload")
		hits := parseStoreHits(t, out, true)
		if len(hits) != 20*len(deletedRows) {
			t.Errorf("%s: %d hits for %d queries, want 20 each", stage, len(hits), len(deletedRows))
		}
		for _, h := range hits {
			if gone[h.id] {
				t.Errorf("%s: search returned deleted id %q (query %d rank %d)", stage, h.id, h.q, h.rank)
			}
		}
	}
	checkGone("after delete")
	checkSelfFirst(t, ix, dir, "q-live", []int{0, 1, 777, split, 1700}, payloadOf, gone)

	// info and verify show the two segments and the counts.
	out, _ = mustVLC(t, "info", ix)
	for _, want := range []string{
		fmt.Sprintf("rows        %d live, 5 deleted, in 2 segment(s)", deepN-5),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		fmt.Sprintf(`segment     %s: %d rows, 3 deleted, trained, ids true, payloads true`, regexp.QuoteMeta(filepath.Join(ix+".d", "seg-000000-"))+"[0-9a-f]{16}[.]vlc", split),
		fmt.Sprintf(`segment     %s: %d rows, 2 deleted, added, ids true, payloads true`, regexp.QuoteMeta(filepath.Join(ix+".d", "seg-000001-"))+"[0-9a-f]{16}[.]vlc", deepN-split),
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("info lacks a line matching %q:\n%s", want, out)
		}
	}
	in := storeInfoJSON(t, ix)
	if in.Live != deepN-5 || in.Deleted != 5 || len(in.Segments) != 2 {
		t.Fatalf("info -json: live %d, deleted %d, %d segments; want %d, 5, 2", in.Live, in.Deleted, len(in.Segments), deepN-5)
	}
	for i, want := range []struct {
		rows, deleted int
		added         bool
	}{{split, 3, false}, {deepN - split, 2, true}} {
		s := in.Segments[i]
		if s.Rows != want.rows || s.Deleted != want.deleted || s.Added != want.added || !s.IDs || !s.Payloads {
			t.Errorf("info -json segment %d: %+v, want rows %d, deleted %d, added %v, ids and payloads", i, s, want.rows, want.deleted, want.added)
		}
	}
	out, errs := mustVLC(t, "verify", ix)
	if want := fmt.Sprintf("%s: ok (2 segments, %d live and 5 deleted vectors,", ix, deepN-5); !strings.HasPrefix(out, want) || errs != "" {
		t.Errorf("verify: stdout %q, stderr %q; want it to start %q", out, errs, want)
	}

	// Compact: one segment, nothing deleted, the same live ids.
	_, out = mustVLC(t, "compact", ix)
	if want := fmt.Sprintf("%s: %d live vectors in 1 segment(s)", ix, deepN-5); !strings.HasPrefix(out, want) {
		t.Errorf("compact: %q, want it to start %q", out, want)
	}
	// The store stays a store: one new segment (a name never used
	// before), the replaced segments' files removed.
	in = storeInfoJSON(t, ix)
	if in.Live != deepN-5 || in.Deleted != 0 || len(in.Segments) != 1 || in.Vectors != deepN-5 || filepath.Dir(in.Segments[0].File) != ix+".d" {
		t.Errorf("info -json after compact: %+v", in)
	}
	out, _ = mustVLC(t, "info", ix)
	if want := fmt.Sprintf("rows        %d live, 0 deleted, in 1 segment(s)", deepN-5); !strings.Contains(out, want) {
		t.Errorf("info after compact lacks %q:\n%s", want, out)
	}
	if files, err := os.ReadDir(ix + ".d"); err != nil || len(files) != 1 || filepath.Join(ix+".d", files[0].Name()) != in.Segments[0].File || !strings.HasPrefix(files[0].Name(), "seg-000002-") {
		t.Errorf("after compact the segment folder holds %v (%v), want only %s, named seg-000002-*", files, err, in.Segments[0].File)
	}
	out, _ = mustVLC(t, "verify", ix)
	if !strings.HasPrefix(out, ix+": ok (") {
		t.Errorf("verify after compact: %q", out)
	}
	checkGone("after compact")
	checkSelfFirst(t, ix, dir, "q-compact", []int{0, 1, 777, split, 1700}, payloadOf, gone)
	out, _ = mustVLC(t, "get", ix, storeID(1700))
	if want := storeID(1700) + "\t" + storePayload(1700, "added") + "\n"; out != want {
		t.Errorf("get %s after compact: %q, want %q", storeID(1700), out, want)
	}
	assertNoTempFiles(t, dir)

	// Retrain: still the same live ids and payloads, each row found first.
	_, out = mustVLC(t, "retrain", ix)
	if want := fmt.Sprintf("%s: retrained on %d vectors:", ix, deepN-5); !strings.HasPrefix(out, want) {
		t.Errorf("retrain: %q, want it to start %q", out, want)
	}
	in = storeInfoJSON(t, ix)
	if in.Live != deepN-5 || in.Deleted != 0 || len(in.Segments) != 1 || in.Vectors != deepN-5 {
		t.Errorf("info -json after retrain: %+v", in)
	}
	mustVLC(t, "verify", ix)
	checkGone("after retrain")
	checkSelfFirst(t, ix, dir, "q-retrain", []int{0, 1, 777, 1234, split, 1700, 1998}, payloadOf, gone)
	out, _ = mustVLC(t, "get", ix, storeID(0))
	if want := storeID(0) + "\t" + storePayload(0, "base") + "\n"; out != want {
		t.Errorf("get %s after retrain: %q, want %q", storeID(0), out, want)
	}
	assertNoTempFiles(t, dir)
}

// TestStoreBadInput: add and delete refuse bad input with exit status 1
// and one line naming the problem, and leave the index's bytes (the file
// at its path and the files of its segment folder) as they were, both for
// a lone index file and for a store of segments.
func TestStoreBadInput(t *testing.T) {
	dir := t.TempDir()
	const n = 600
	baseVecs, baseIDs, basePayloads := deepPart(t, dir, "base", 0, n, "base")
	addVecs, addIDs, addPayloads := deepPart(t, dir, "added", n, n+5, "added")

	// Inputs of five rows, each bad in one way.
	dupVecs, _, dupPayloads := deepPart(t, dir, "dup", 1000, 1005, "added")
	dupOld := writeLines(t, filepath.Join(dir, "dup-old.ids"), []string{"new-1", "new-2", storeID(7), "new-4", "new-5"})
	dupNew := writeLines(t, filepath.Join(dir, "dup-new.ids"), []string{"new-1", "new-2", "new-3", "new-2", "new-5"})
	emptyID := writeLines(t, filepath.Join(dir, "empty.ids"), []string{"new-1", "", "new-3", "new-4", "new-5"})
	shortIDs := writeLines(t, filepath.Join(dir, "short.ids"), []string{"new-1", "new-2", "new-3"})
	notJSON := writeLines(t, filepath.Join(dir, "bad.jsonl"), []string{`{"a":1}`, `{"a":2}`, `{"a":3`, `4`, `"five"`})
	shortPayloads := writeLines(t, filepath.Join(dir, "short.jsonl"), []string{`1`, `2`})
	goodIDs := writeLines(t, filepath.Join(dir, "good.ids"), []string{"new-1", "new-2", "new-3", "new-4", "new-5"})
	narrow := filepath.Join(dir, "narrow.fvecs")
	if err := vecfile.WriteFvecs(narrow, randomRows(5, 64, 3)); err != nil {
		t.Fatal(err)
	}
	unknownIDs := writeLines(t, filepath.Join(dir, "unknown.ids"), []string{storeID(1), "nope"})

	bad := func(ix string) []struct {
		name string
		args []string
		want []string
	} {
		return []struct {
			name string
			args []string
			want []string
		}{
			{"add an id already live", []string{"add", ix, dupVecs, "-ids", dupOld}, []string{"duplicate", strconv.Quote(storeID(7)), "already in the index"}},
			{"add an id twice", []string{"add", ix, dupVecs, "-ids", dupNew, "-payloads", dupPayloads}, []string{"duplicate", `"new-2"`, "documents 1 and 3"}},
			{"add an empty id", []string{"add", ix, dupVecs, "-ids", emptyID}, []string{emptyID, "line 2", "empty id"}},
			{"add the wrong dimension", []string{"add", ix, narrow, "-ids", goodIDs}, []string{narrow, "dimension 64", "the index 96"}},
			{"add too few ids", []string{"add", ix, dupVecs, "-ids", shortIDs}, []string{shortIDs, "3 ids", "5 vectors"}},
			{"add too few payloads", []string{"add", ix, dupVecs, "-ids", goodIDs, "-payloads", shortPayloads}, []string{shortPayloads, "2 payloads", "5 vectors"}},
			{"add a payload that is not JSON", []string{"add", ix, dupVecs, "-ids", goodIDs, "-payloads", notJSON}, []string{notJSON, "line 3", "not one JSON value"}},
			{"add a missing file", []string{"add", ix, filepath.Join(dir, "missing.fvecs")}, []string{"missing.fvecs"}},
			{"delete an unknown id", []string{"delete", ix, "nope"}, []string{"not found", `"nope"`}},
			{"delete an unknown id among known ones", []string{"delete", ix, storeID(2), "nope", storeID(n + 1)}, []string{"not found", `"nope"`}},
			{"delete an unknown id from a file", []string{"delete", ix, "-ids", unknownIDs}, []string{"not found", `"nope"`}},
			{"delete nothing", []string{"delete", ix}, []string{"no ids to delete"}},
			{"get an unknown id", []string{"get", ix, "nope"}, []string{"not found", `"nope"`}},
		}
	}
	check := func(t *testing.T, ix string, live int) {
		before := storeState(t, ix)
		for _, tc := range bad(ix) {
			t.Run(tc.name, func(t *testing.T) {
				checkFails(t, tc.args, tc.want)
				if after := storeState(t, ix); after != before {
					t.Errorf("the index changed:\nbefore:\n%safter:\n%s", before, after)
				}
			})
		}
		if in := storeInfoJSON(t, ix); in.Live != live {
			t.Errorf("after the bad commands: %d live, want %d", in.Live, live)
		}
		mustVLC(t, "verify", ix)
		for _, id := range []string{"new-1", "new-3", "new-5"} {
			if code, _, _ := runVLC(t, "get", ix, id); code != 1 {
				t.Errorf("get %s: exit %d: a refused add added it", id, code)
			}
		}
	}

	ix := filepath.Join(dir, "s.vlc")
	mustVLC(t, "compress", baseVecs, "-o", ix, "-code", "rotated", "-anchors", "16", "-ids", baseIDs, "-payloads", basePayloads, "-quiet")
	t.Run("lone index", func(t *testing.T) {
		check(t, ix, n)
		if _, err := os.Stat(ix + ".d"); !os.IsNotExist(err) {
			t.Errorf("a refused change made the segment folder (%v)", err)
		}
	})
	mustVLC(t, "add", ix, addVecs, "-ids", addIDs, "-payloads", addPayloads)
	mustVLC(t, "delete", ix, storeID(5), storeID(n+2))
	t.Run("store", func(t *testing.T) {
		if in := storeInfoJSON(t, ix); len(in.Segments) != 2 {
			t.Fatalf("%d segments, want 2", len(in.Segments))
		}
		check(t, ix, n+5-2)
	})
	// Deleted ids are unknown too.
	before := storeState(t, ix)
	checkFails(t, []string{"delete", ix, storeID(5)}, []string{"not found", strconv.Quote(storeID(5))})
	checkFails(t, []string{"get", ix, storeID(n + 2)}, []string{"not found", strconv.Quote(storeID(n + 2))})
	if after := storeState(t, ix); after != before {
		t.Errorf("deleting a deleted id changed the index:\nbefore:\n%safter:\n%s", before, after)
	}
	// A deleted id may be added again.
	mustVLC(t, "add", ix, deepQueries(t, dir, "again", []int{5}), "-ids", writeLines(t, filepath.Join(dir, "again.ids"), []string{storeID(5)}))
	if out, _ := mustVLC(t, "get", ix, storeID(5)); out != storeID(5)+"\t\n" {
		t.Errorf("get %s added again without a payload: %q", storeID(5), out)
	}
	// Compacting keeps the new row of the id, not the deleted one.
	mustVLC(t, "compact", ix)
	if in := storeInfoJSON(t, ix); in.Live != n+5-1 || in.Deleted != 0 || len(in.Segments) != 1 {
		t.Errorf("info -json after compact: %+v", in)
	}
	if out, _ := mustVLC(t, "get", ix, storeID(5)); out != storeID(5)+"\t\n" {
		t.Errorf("get %s after compact: %q", storeID(5), out)
	}
	if out, _ := mustVLC(t, "get", ix, storeID(6)); out != storeID(6)+"\t"+storePayload(6, "base")+"\n" {
		t.Errorf("get %s after compact: %q", storeID(6), out)
	}
	mustVLC(t, "verify", ix)
}

// TestStoreRowNumbers: an index compressed without -ids names its rows by
// number, and add without -ids picks the next free numbers; the numbers
// stay the rows' ids through delete and compact (which renumbers the rows
// it keeps), and a later add skips the numbers still live.
func TestStoreRowNumbers(t *testing.T) {
	dir := t.TempDir()
	const n = 1000
	baseVecs := filepath.Join(dir, "base.fvecs")
	if err := vecfile.WriteFvecs(baseVecs, deepRows(t, 0, n)); err != nil {
		t.Fatal(err)
	}
	ix := filepath.Join(dir, "r.vlc")
	mustVLC(t, "compress", baseVecs, "-o", ix, "-code", "rotated", "-anchors", "16", "-quiet")
	row := func(i int) string { return strconv.Itoa(i) }
	search := func(rows []int, want []string) {
		t.Helper()
		q := deepQueries(t, dir, "q", rows)
		out, _ := mustVLC(t, "search", ix, "-query", q, "-k", "3", "-nprobe", "100", "-payload")
		hits := byQuery(t, parseStoreHits(t, out, true), len(rows))
		for i := range rows {
			if len(hits[i]) == 0 || hits[i][0].id != want[i] {
				t.Errorf("query %d (deep row %d): hits %+v, want %q first", i, rows[i], hits[i], want[i])
			}
		}
	}

	more := filepath.Join(dir, "more.fvecs")
	if err := vecfile.WriteFvecs(more, deepRows(t, n, n+10)); err != nil {
		t.Fatal(err)
	}
	_, out := mustVLC(t, "add", ix, more)
	if want := fmt.Sprintf("%s: added 10 vectors (ids %d .. %d); %d live\n", ix, n, n+9, n+10); out != want {
		t.Errorf("add: %q, want %q", out, want)
	}
	search([]int{0, 6, n - 1, n, n + 9}, []string{row(0), row(6), row(n - 1), row(n), row(n + 9)})
	mustVLC(t, "delete", ix, row(5), row(n+3))
	mustVLC(t, "compact", ix)
	if in := storeInfoJSON(t, ix); in.Live != n+8 || in.Deleted != 0 || len(in.Segments) != 1 {
		t.Errorf("info -json after compact: %+v", in)
	}
	for _, id := range []string{row(0), row(6), row(n - 1), row(n), row(n + 4), row(n + 9)} {
		if out, _ := mustVLC(t, "get", ix, id); out != id+"\t\n" {
			t.Errorf("get %s after compact: %q", id, out)
		}
	}
	for _, id := range []string{row(5), row(n + 3)} {
		checkFails(t, []string{"get", ix, id}, []string{"not found", strconv.Quote(id)})
	}
	search([]int{0, 6, 7, n - 1, n, n + 4, n + 9}, []string{row(0), row(6), row(7), row(n - 1), row(n), row(n + 4), row(n + 9)})

	// The next free numbers: n+10 on (those below are live or were deleted).
	last := filepath.Join(dir, "last.fvecs")
	if err := vecfile.WriteFvecs(last, deepRows(t, n+10, n+13)); err != nil {
		t.Fatal(err)
	}
	out, _ = mustVLC(t, "add", ix, last)
	t.Logf("add after compact: %s", out)
	in := storeInfoJSON(t, ix)
	if in.Live != n+11 {
		t.Errorf("after the last add: %d live, want %d", in.Live, n+11)
	}
	q := deepQueries(t, dir, "q-last", []int{n + 10, n + 11, n + 12, 6, n + 9})
	out, _ = mustVLC(t, "search", ix, "-query", q, "-k", "1", "-nprobe", "100")
	var got []string
	for _, h := range parseStoreHits(t, out, false) {
		got = append(got, h.id)
	}
	// The added rows get distinct new ids, none of an earlier live row.
	if len(got) != 5 || got[3] != row(6) || got[4] != row(n+9) {
		t.Fatalf("search: %v", got)
	}
	for i, id := range got[:3] {
		v, err := strconv.Atoi(id)
		if err != nil || v < n+10 || slices.Contains(got[:i], id) {
			t.Errorf("row %d added without an id got %q (all: %v)", n+10+i, id, got[:3])
		}
	}
	mustVLC(t, "verify", ix)
}

// TestStoreDeleteRepeatedID: an id given twice (in the -ids file and as
// an argument, or twice as arguments) is deleted once, and delete's
// summary counts the ids deleted, not the arguments.
func TestStoreDeleteRepeatedID(t *testing.T) {
	dir := t.TempDir()
	vecs, ids, payloads := deepPart(t, dir, "base", 0, 300, "base")
	ix := filepath.Join(dir, "s.vlc")
	mustVLC(t, "compress", vecs, "-o", ix, "-anchors", "8", "-ids", ids, "-payloads", payloads, "-quiet")
	delFile := writeLines(t, filepath.Join(dir, "del.ids"), []string{storeID(1), storeID(2)})
	_, out := mustVLC(t, "delete", ix, "-ids", delFile, storeID(2), storeID(3), storeID(3))
	if in := storeInfoJSON(t, ix); in.Live != 297 || in.Deleted != 3 {
		t.Fatalf("info -json: %d live, %d deleted; want 297 and 3", in.Live, in.Deleted)
	}
	if want := fmt.Sprintf("%s: deleted 3 ids; 297 live\n", ix); out != want {
		t.Errorf("delete: %q, want %q", out, want)
	}
}

// TestStoreSearchRerankAfterDelete: an index compressed without -ids
// names its rows by number, so its input file still serves -rerank (by
// id: row i is id i) after some ids are deleted; search returns the hits
// it returned before, less the deleted ids.
func TestStoreSearchRerankAfterDelete(t *testing.T) {
	dir := t.TempDir()
	ix := filepath.Join(dir, "d.vlc")
	copyFile(t, deepIndexPath(t), ix, func(b []byte) []byte { return b })
	q := deepQueries(t, dir, "q", []int{0, 1, 2, 3})
	args := []string{"search", ix, "-query", q, "-k", "5", "-rerank", deepBase}
	out, _ := mustVLC(t, args...)
	before := byQuery(t, parseStoreHits(t, out, false), 4)
	gone := before[0][0].id // the vector's own id
	mustVLC(t, "delete", ix, gone)
	code, out, errs := runVLC(t, args...)
	if code != 0 {
		t.Fatalf("search -rerank %s after deleting id %s: exit %d, stderr %q", deepBase, gone, code, errs)
	}
	after := byQuery(t, parseStoreHits(t, out, false), 4)
	for i := range after {
		var want []string
		for _, h := range before[i] {
			if h.id != gone {
				want = append(want, h.id)
			}
		}
		var got []string
		for _, h := range after[i] {
			got = append(got, h.id)
		}
		if len(got) != 5 || !slices.Equal(got[:len(want)], want) {
			t.Errorf("query %d: ids %v after deleting %s, before %v", i, got, gone, want)
		}
	}
}
