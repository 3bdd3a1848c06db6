package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

// skipStub skips a test that needs a library call main still has as a
// stub (its error wraps vlc.ErrUnavailable), naming it.
func skipStub(t *testing.T, name string, err error) {
	t.Helper()
	if errors.Is(err, vlc.ErrUnavailable) {
		t.Skipf("%s is a stub on main: %v", name, err)
	}
}

// needCreate skips while vlc.Create is a stub.
func needCreate(t *testing.T) {
	t.Helper()
	st, err := vlc.Create(context.Background(), filepath.Join(t.TempDir(), "probe.vlc"), vlc.Schema{Dim: 4})
	skipStub(t, "vlc.Create", err)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
}

// needParseFilter skips while vlc.ParseFilter is a stub.
func needParseFilter(t *testing.T) {
	t.Helper()
	_, err := vlc.ParseFilter([]byte(`{"cat": "a"}`))
	skipStub(t, "vlc.ParseFilter", err)
	if err != nil {
		t.Fatal(err)
	}
}

// catStore compresses n random rows of dimension 8 with ids "d000", ...
// and payloads {"cat": "a"|"b"|"c", "n": i} (cat by i mod 3), with
// -anchors 4. It returns the store's path and the rows.
func catStore(t *testing.T, dir string, n int) (string, [][]float32) {
	t.Helper()
	rows := randomRows(n, 8, 7)
	in := filepath.Join(dir, "cat.fvecs")
	if err := vecfile.WriteFvecs(in, rows); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	payloads := make([][]byte, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("d%03d", i)
		payloads[i] = []byte(fmt.Sprintf(`{"cat":%q,"n":%d}`, string(rune('a'+i%3)), i))
	}
	out := filepath.Join(dir, "cat.vlc")
	if _, err := vlc.Compress(context.Background(), in, out, vlc.Options{Anchors: 4, Metric: "l2", IDs: ids, Payloads: payloads}); err != nil {
		t.Fatal(err)
	}
	return out, rows
}

// TestCreateErrors: the create command lines refused before any file is
// written: no -dim, -bits with -ratio, an empty -index field, a
// -train-at below -1, a path that exists, a missing PATH (usage, exit 2).
func TestCreateErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.vlc")
	exists := filepath.Join(dir, "exists.vlc")
	if err := os.WriteFile(exists, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no dim", []string{"create", p}, []string{"-dim is required"}},
		{"negative dim", []string{"create", p, "-dim", "-3"}, []string{"-dim -3"}},
		{"bits and ratio", []string{"create", p, "-dim", "8", "-bits", "4", "-ratio", "0.1"}, []string{"-bits 4 and -ratio 0.1 both given"}},
		{"empty index field", []string{"create", p, "-dim", "8", "-index", "cat,,n"}, []string{`-index "cat,,n": field 2 is empty`}},
		{"train-at", []string{"create", p, "-dim", "8", "-train-at", "-2"}, []string{"-train-at -2"}},
		{"graph-at", []string{"create", p, "-dim", "8", "-graph-at", "-2"}, []string{"-graph-at -2"}},
		{"graph-at ip", []string{"create", p, "-dim", "8", "-metric", "ip", "-graph-at", "100"}, []string{"graph_at 100", "l2 metric only"}},
		{"graph-at pq", []string{"create", p, "-dim", "8", "-code", "pq", "-graph-at", "100"}, []string{"graph_at 100", "rotated code only"}},
		{"exists", []string{"create", exists, "-dim", "8"}, []string{exists + ": a file exists at the path", "vlc drop"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkFails(t, tc.args, tc.want) })
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused create left %s: %v", p, err)
	}
	if b := readFile(t, exists); string(b) != "x" {
		t.Errorf("create over an existing file changed it: %q", b)
	}
	checkUsageError(t, []string{"create", "-dim", "8"}, "missing PATH argument")
}

// TestCreateThenAdd: vlc create makes an empty collection (count 0, list
// nothing) that vlc add fills from its first document; the rows added
// are found, each its own nearest, and count and get see them.
func TestCreateThenAdd(t *testing.T) {
	needCreate(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "c.vlc")
	_, msg := mustVLC(t, "create", p, "-dim", "8", "-metric", "cosine", "-train-at", "50", "-index", "cat")
	if want := p + ": empty collection of dimension 8, metric cosine; trains at 50 vectors\n"; msg != want {
		t.Errorf("create: stderr %q, want %q", msg, want)
	}
	if out, _ := mustVLC(t, "count", p); out != "0\n" {
		t.Errorf("count of an empty collection: %q, want 0", out)
	}
	if out, _ := mustVLC(t, "list", p); out != "" {
		t.Errorf("list of an empty collection: %q, want nothing", out)
	}
	checkFails(t, []string{"create", p, "-dim", "8"}, []string{p + ": a file exists at the path"})

	rows := randomRows(20, 8, 3)
	vecs := filepath.Join(dir, "v.fvecs")
	if err := vecfile.WriteFvecs(vecs, rows); err != nil {
		t.Fatal(err)
	}
	var pl []string
	for i := range rows {
		pl = append(pl, fmt.Sprintf(`{"cat":%q}`, string(rune('a'+i%3))))
	}
	payloads := writeLines(t, filepath.Join(dir, "v.jsonl"), pl)
	out, _ := mustVLC(t, "add", p, vecs, "-payloads", payloads)
	want := ""
	for i := range rows {
		want += strconv.Itoa(i) + "\n"
	}
	if out != want {
		t.Errorf("add to an empty collection printed %q, want the ids 0..19", out)
	}
	if out, _ := mustVLC(t, "count", p); out != "20\n" {
		t.Errorf("count after add: %q, want 20", out)
	}
	needParseFilter(t)
	if out, _ := mustVLC(t, "count", p, "-filter", `{"cat": "b"}`); out != "7\n" {
		t.Errorf("count -filter on the indexed field: %q, want 7 (rows 1, 4, ..., 19)", out)
	}
	out, _ = mustVLC(t, "search", p, "-query", vecs, "-k", "1")
	for i, h := range parseStoreHits(t, out, false) {
		if h.id != strconv.Itoa(i) {
			t.Errorf("query %d: nearest %q, want itself", i, h.id)
		}
	}
}

// TestUpsert: vlc upsert replaces the vector and payload of an id held
// live and adds a new one, where vlc add refuses the held id.
func TestUpsert(t *testing.T) {
	dir := t.TempDir()
	p, rows := catStore(t, dir, 30)
	// d005 gets d020's vector and a new payload; d100 is new.
	vecs := filepath.Join(dir, "up.fvecs")
	if err := vecfile.WriteFvecs(vecs, [][]float32{rows[20], rows[7]}); err != nil {
		t.Fatal(err)
	}
	ids := writeLines(t, filepath.Join(dir, "up.ids"), []string{"d005", "d100"})
	payloads := writeLines(t, filepath.Join(dir, "up.jsonl"), []string{`{"cat":"z"}`, `{"cat":"y"}`})
	code, _, errs := runVLC(t, "add", p, vecs, "-ids", ids, "-payloads", payloads)
	if code != 1 || !strings.Contains(errs, "d005") {
		t.Errorf("add of a held id: exit %d, stderr %q; want 1 naming d005", code, errs)
	}
	out, msg := mustVLC(t, "upsert", p, vecs, "-ids", ids, "-payloads", payloads)
	if out != "d005\nd100\n" {
		t.Errorf("upsert printed %q, want the two ids", out)
	}
	if !strings.HasPrefix(msg, p+": upserted 2 vectors (ids d005 .. d100); 31 live\n") {
		t.Errorf("upsert summary %q", msg)
	}
	if out, _ := mustVLC(t, "get", p, "d005"); out != "d005\t{\"cat\":\"z\"}\n" {
		t.Errorf("get d005 after upsert: %q", out)
	}
	if out, _ := mustVLC(t, "count", p); out != "31\n" {
		t.Errorf("count after upsert: %q, want 31", out)
	}
	// d005 now holds d020's vector: searching for it finds both.
	q := filepath.Join(dir, "q.fvecs")
	if err := vecfile.WriteFvecs(q, [][]float32{rows[20]}); err != nil {
		t.Fatal(err)
	}
	out, _ = mustVLC(t, "search", p, "-query", q, "-k", "2", "-nprobe", "4")
	var got []string
	for _, h := range parseStoreHits(t, out, false) {
		got = append(got, h.id)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"d005", "d020"}) {
		t.Errorf("search for d020's vector after upsert: %v, want d005 and d020", got)
	}
}

// TestListAndGetVector: vlc list pages through the ids in byte order
// (-limit, -after from the note on stderr, -limit 0 for all, -json), and
// get -vector prints the decoded vector, near the one added.
func TestListAndGetVector(t *testing.T) {
	dir := t.TempDir()
	p, rows := catStore(t, dir, 30)
	out, msg := mustVLC(t, "list", p, "-limit", "4")
	want := ""
	for i := range 4 {
		want += fmt.Sprintf("d%03d\t{\"cat\":%q,\"n\":%d}\n", i, string(rune('a'+i%3)), i)
	}
	if out != want {
		t.Errorf("list -limit 4:\n%s\nwant:\n%s", out, want)
	}
	if w := p + ": 4 records printed; more follow: -after d003\n"; msg != w {
		t.Errorf("list -limit 4: stderr %q, want %q", msg, w)
	}
	out, msg = mustVLC(t, "list", p, "-after", "d003", "-limit", "0")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 26 || !strings.HasPrefix(lines[0], "d004\t") || !strings.HasPrefix(lines[25], "d029\t") || msg != "" {
		t.Errorf("list -after d003 -limit 0: %d lines from %q to %q, stderr %q; want d004..d029, nothing", len(lines), lines[0], lines[len(lines)-1], msg)
	}
	out, _ = mustVLC(t, "list", p, "-limit", "1", "-after", "d010", "-json", "-vectors")
	var rec struct {
		ID      string          `json:"id"`
		Payload json.RawMessage `json:"payload"`
		Vector  []float32       `json:"vector"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("list -json %q: %v", out, err)
	}
	if rec.ID != "d011" || string(rec.Payload) != `{"cat":"c","n":11}` || len(rec.Vector) != 8 {
		t.Errorf("list -json -vectors after d010: %+v", rec)
	}

	out, _ = mustVLC(t, "get", p, "d011", "-vector")
	f := strings.Split(strings.TrimSuffix(out, "\n"), "\t")
	if len(f) != 3 || f[0] != "d011" || f[1] != `{"cat":"c","n":11}` {
		t.Fatalf("get -vector: %q, want three fields", out)
	}
	var v []float32
	if err := json.Unmarshal([]byte(f[2]), &v); err != nil {
		t.Fatalf("get -vector: the vector %q: %v", f[2], err)
	}
	if !slices.Equal(v, rec.Vector) {
		t.Errorf("get -vector %v, list -vectors %v", v, rec.Vector)
	}
	var d2, n2 float64
	for i, x := range v {
		d := float64(x - rows[11][i])
		d2 += d * d
		n2 += float64(rows[11][i]) * float64(rows[11][i])
	}
	if d2 > 0.1*n2 {
		t.Errorf("get -vector of d011: %v, %.3g (squared) from the vector added %v", v, d2, rows[11])
	}
	checkFails(t, []string{"get", p, "nope", "-vector"}, []string{`"nope"`})
	checkFails(t, []string{"list", p, "-limit", "-1"}, []string{"-limit -1"})
}

// TestFilters: count, list and search take -filter in the JSON syntax:
// the rows they return are exactly those whose payload matches.
func TestFilters(t *testing.T) {
	dir := t.TempDir()
	p, rows := catStore(t, dir, 30)
	needParseFilter(t)
	checkFails(t, []string{"count", p, "-filter", `{"cat": `}, []string{"-filter: ", "invalid JSON"})
	checkFails(t, []string{"search", p, "-query", p, "-filter", `{"n": {"$foo": 1}}`}, []string{"-filter: ", "$foo"})
	for _, tc := range []struct {
		filter string
		keep   func(i int) bool
	}{
		{`{"cat": "a"}`, func(i int) bool { return i%3 == 0 }},
		{`{"n": {"$gte": 10, "$lt": 20}}`, func(i int) bool { return i >= 10 && i < 20 }},
		{`{"$or": [{"cat": {"$in": ["b"]}}, {"n": {"$lt": 3}}]}`, func(i int) bool { return i%3 == 1 || i < 3 }},
		{`{"$not": {"cat": {"$ne": "c"}}}`, func(i int) bool { return i%3 == 2 }},
	} {
		var want []string
		for i := range rows {
			if tc.keep(i) {
				want = append(want, fmt.Sprintf("d%03d", i))
			}
		}
		if out, _ := mustVLC(t, "count", p, "-filter", tc.filter); out != fmt.Sprintf("%d\n", len(want)) {
			t.Errorf("count -filter %s: %q, want %d", tc.filter, out, len(want))
		}
		out, _ := mustVLC(t, "list", p, "-filter", tc.filter, "-limit", "0")
		var listed []string
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			listed = append(listed, strings.SplitN(l, "\t", 2)[0])
		}
		if !slices.Equal(listed, want) {
			t.Errorf("list -filter %s: %v, want %v", tc.filter, listed, want)
		}
		q := filepath.Join(dir, "q.fvecs")
		if err := vecfile.WriteFvecs(q, rows[:5]); err != nil {
			t.Fatal(err)
		}
		out, _ = mustVLC(t, "search", p, "-query", q, "-k", "30", "-nprobe", "4", "-filter", tc.filter, "-json")
		for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var line queryHits
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range line.Hits {
				got = append(got, h.ID)
			}
			slices.Sort(got)
			if line.Query != i || !slices.Equal(got, want) {
				t.Errorf("search -filter %s -k 30, query %d: %v, want every match %v", tc.filter, i, got, want)
			}
		}
	}
}

// TestSearchRadius: -radius keeps exactly the hits of the search without
// it that lie within the radius.
func TestSearchRadius(t *testing.T) {
	dir := t.TempDir()
	p, rows := catStore(t, dir, 30)
	q := filepath.Join(dir, "q.fvecs")
	if err := vecfile.WriteFvecs(q, rows[:3]); err != nil {
		t.Fatal(err)
	}
	all, _ := mustVLC(t, "search", p, "-query", q, "-k", "30", "-nprobe", "4")
	hits := byQuery(t, parseStoreHits(t, all, false), 3)
	radius := hits[0][4].Distance() // query 0 keeps 5 (unless ties)
	out, _ := mustVLC(t, "search", p, "-query", q, "-k", "30", "-nprobe", "4", "-radius", strconv.FormatFloat(radius, 'g', -1, 32))
	got := byQuery(t, parseStoreHits(t, out, false), 3)
	for i := range hits {
		var want []storeHit
		for _, h := range hits[i] {
			if h.dist <= radius {
				want = append(want, h)
			}
		}
		if !slices.Equal(got[i], want) {
			t.Errorf("query %d -radius %g: %v, want %v", i, radius, got[i], want)
		}
	}
	if len(got[0]) < 5 || len(got[0]) == 30 {
		t.Errorf("query 0 -radius %g: %d hits, want 5 (or more on ties) of 30", radius, len(got[0]))
	}
	checkFails(t, []string{"search", p, "-query", q, "-radius", "1", "-backend", "auto"}, []string{"-radius", "CPU"})
}

// Distance is the hit's distance, as search printed it.
func (h storeHit) Distance() float64 { return h.dist }

// TestSetPayload: set-payload replaces a payload and keeps the vector;
// a payload that is not JSON, or an id not held, is refused.
func TestSetPayload(t *testing.T) {
	dir := t.TempDir()
	p, _ := catStore(t, dir, 30)
	before, _ := mustVLC(t, "get", p, "d004", "-vector")
	mustVLC(t, "set-payload", p, "d004", `{"cat": "q"}`)
	after, _ := mustVLC(t, "get", p, "d004", "-vector")
	b, a := strings.Split(before, "\t"), strings.Split(after, "\t")
	if a[1] != `{"cat":"q"}` || a[2] != b[2] {
		t.Errorf("get after set-payload: %q (before %q)", after, before)
	}
	checkFails(t, []string{"set-payload", p, "d004", "{nope"}, []string{"not one JSON value"})
	checkFails(t, []string{"set-payload", p, "d999", "1"}, []string{"d999"})
}

// TestSnapshotAndDrop: snapshot copies a store to a new path that opens
// on its own with the same records; drop removes it. A snapshot over an
// existing path is refused.
func TestSnapshotAndDrop(t *testing.T) {
	dir := t.TempDir()
	p, _ := catStore(t, dir, 30)
	checkFails(t, []string{"snapshot", p, p}, []string{p + ": a file exists at the path"})
	snap := filepath.Join(dir, "snap.vlc")
	code, _, errs := runVLC(t, "snapshot", p, snap)
	if strings.Contains(errs, "not yet built") {
		t.Skipf("Store.Snapshot is a stub on main: %s", errs)
	}
	if code != 0 {
		t.Fatalf("snapshot: exit %d, %s", code, errs)
	}
	mustVLC(t, "delete", p, "d001")
	if out, _ := mustVLC(t, "count", snap); out != "30\n" {
		t.Errorf("count of the snapshot after a delete from the store: %q, want 30", out)
	}
	code, _, errs = runVLC(t, "drop", snap)
	if strings.Contains(errs, "not yet built") {
		t.Skipf("vlc.Remove is a stub on main: %s", errs)
	}
	if code != 0 {
		t.Fatalf("drop: exit %d, %s", code, errs)
	}
	for _, q := range []string{snap, snap + ".d"} {
		if _, err := os.Lstat(q); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after drop, %s: %v", q, err)
		}
	}
	if out, _ := mustVLC(t, "count", p); out != "29\n" {
		t.Errorf("count of the store after dropping its snapshot: %q, want 29", out)
	}
	checkFails(t, []string{"drop", snap}, []string{snap})
}

// TestAddMaintains: single-vector adds with -maintain=false leave a
// segment each; the next add, maintaining, merges them and, past
// -train-at, trains.
func TestAddMaintains(t *testing.T) {
	needCreate(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "m.vlc")
	mustVLC(t, "create", p, "-dim", "8", "-train-at", "40")
	rows := randomRows(60, 8, 5)
	for i := range 12 {
		one := filepath.Join(dir, "one.fvecs")
		if err := vecfile.WriteFvecs(one, rows[i:i+1]); err != nil {
			t.Fatal(err)
		}
		_, msg := mustVLC(t, "add", p, one, "-maintain=false")
		if strings.Contains(msg, "maintenance") {
			t.Errorf("add -maintain=false: %q", msg)
		}
	}
	before := storeInfoJSON(t, p)
	rest := filepath.Join(dir, "rest.fvecs")
	if err := vecfile.WriteFvecs(rest, rows[12:]); err != nil {
		t.Fatal(err)
	}
	_, msg := mustVLC(t, "add", p, rest)
	after := storeInfoJSON(t, p)
	if len(after.Segments) >= len(before.Segments) || !strings.Contains(msg, "maintenance: ") {
		t.Errorf("add with maintenance: %d segments before, %d after; stderr %q", len(before.Segments), len(after.Segments), msg)
	}
	in, err := vlc.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	info, err := in.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Lists < 2 || info.Rows != 60 {
		t.Errorf("60 vectors past -train-at 40, maintained: %d lists, %d rows; want trained (2 lists or more)", info.Lists, info.Rows)
	}
}

// TestEvalStore: eval measures a store with added and deleted vectors
// as it is: its ids are the rows of the base file, -base computes the
// exact neighbours among the live rows and -gt drops the rows not held,
// so both measure the same recall; a store whose ids are not row
// numbers, or a base without its rows, is refused.
func TestEvalStore(t *testing.T) {
	dir := t.TempDir()
	first, rest := filepath.Join(dir, "first.fvecs"), filepath.Join(dir, "rest.fvecs")
	if err := vecfile.WriteFvecs(first, deepRows(t, 0, 1500)); err != nil {
		t.Fatal(err)
	}
	if err := vecfile.WriteFvecs(rest, deepRows(t, 1500, deepN)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "s.vlc")
	mustVLC(t, "compress", first, "-o", p, "-seed", "1", "-quiet")
	out, _ := mustVLC(t, "add", p, rest)
	if !strings.HasPrefix(out, "1500\n") {
		t.Fatalf("add without -ids: ids %.20q..., want 1500 first", out)
	}
	var gone []string
	for i := 0; i < deepN; i += 7 {
		gone = append(gone, strconv.Itoa(i))
	}
	mustVLC(t, append([]string{"delete", p}, gone...)...)

	byBase := evalJSON(t, p, "-query", deepQuery, "-base", deepBase, "-nprobe", "4", "-json")
	byGT := evalJSON(t, p, "-query", deepQuery, "-gt", deepGT, "-nprobe", "4", "-json")
	t.Logf("eval -nprobe 4: %v", byBase)
	r10 := byBase["recall@10"].(float64)
	if r10 < 0.75 || math.Abs(r10-byGT["recall@10"].(float64)) > 0.002 {
		t.Errorf("eval of the store: recall@10 %v with -base, %v with -gt; want at least 0.75 and the same", r10, byGT["recall@10"])
	}
	text, _ := mustVLC(t, "eval", p, "-query", deepQuery, "-base", deepBase)
	if live := deepN - len(gone); !strings.Contains(text, fmt.Sprintf("store            %d live vectors in 2 segment(s), %d deleted", live, len(gone))) {
		t.Errorf("eval text of a store:\n%s", text)
	}

	short := filepath.Join(dir, "short.fvecs")
	if err := vecfile.WriteFvecs(short, deepRows(t, 0, 1000)); err != nil {
		t.Fatal(err)
	}
	checkFails(t, []string{"eval", p, "-query", deepQuery, "-base", short}, []string{short, "1000 base vectors", "id 1999"})

	named, _ := catStore(t, dir, 30)
	mustVLC(t, "delete", named, "d003")
	checkFails(t, []string{"eval", named, "-query", first, "-base", first}, []string{"id d000 is not a row number"})
}
