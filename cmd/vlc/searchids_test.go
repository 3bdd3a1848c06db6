package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

// idsIndex compresses deep2k rows 0-199 with ids that a line-and-tab
// reader would trip on (a tab, a newline, a carriage return, a line
// separator, a leading double quote, a backslash, bytes that are not
// UTF-8) among plain ones, and payloads: row 1's JSON spread over lines,
// row 2's not JSON at all. It returns the index and the ids by row.
func idsIndex(t *testing.T, dir string) (string, []string, [][]byte) {
	t.Helper()
	const n = 200
	in := filepath.Join(dir, "ids.fvecs")
	if err := vecfile.WriteFvecs(in, deepRows(t, 0, n)); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	payloads := make([][]byte, n)
	for i := range ids {
		ids[i] = "row-" + strconv.Itoa(i)
		payloads[i] = []byte(`{"row":` + strconv.Itoa(i) + `}`)
	}
	copy(ids, []string{"plain", "tab\there", "new\nline", `"starts with a quote`, `back\slash`, "bad\xffutf8", "cr\rret", "uni\u2028sep", "unicodé"})
	payloads[1] = []byte("{\"a\":\n\t1,\n \"b\": \"x y\"}")
	payloads[2] = []byte("\x00raw\nbytes")
	out := filepath.Join(dir, "ids.vlc")
	if _, err := vlc.Compress(context.Background(), in, out, vlc.Options{Anchors: 4, IDs: ids, Payloads: payloads}); err != nil {
		t.Fatal(err)
	}
	return out, ids, payloads
}

// TestSearchIDsText: vlc search prints ids holding tabs, newlines and
// other control characters quoted (strconv.Quote), and payloads on one
// line, so every hit is one line of five tab-separated fields; plain
// ids, and printable UTF-8, stay as they are. Each of the special rows,
// searched for, is its own first hit. vlc get quotes the same way.
func TestSearchIDsText(t *testing.T) {
	dir := t.TempDir()
	ix, ids, _ := idsIndex(t, dir)
	rows := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	q := deepQueries(t, dir, "q", rows)
	out, _ := mustVLC(t, "search", ix, "-query", q, "-k", "3", "-nprobe", "4", "-payload")
	hits := byQuery(t, parseStoreHits(t, out, true), len(rows))
	for i, r := range rows {
		if len(hits[i]) != 3 {
			t.Fatalf("query %d: %d hits, want 3", i, len(hits[i]))
		}
		got := hits[i][0].id
		if strings.HasPrefix(got, `"`) {
			var err error
			if got, err = strconv.Unquote(got); err != nil {
				t.Fatalf("query %d: id field %q does not unquote: %v", i, hits[i][0].id, err)
			}
		}
		if got != ids[r] {
			t.Errorf("query %d: first hit %q (printed %q), want %q", i, got, hits[i][0].id, ids[r])
		}
	}
	printed := map[string]string{
		"plain": "plain", "unicodé": "unicodé", // as they are
		"tab\there": `"tab\there"`, "new\nline": `"new\nline"`, `"starts with a quote`: `"\"starts with a quote"`,
		`back\slash`: `"back\\slash"`, "bad\xffutf8": `"bad\xffutf8"`, "cr\rret": `"cr\rret"`, "uni\u2028sep": `"uni\u2028sep"`,
	}
	for i, r := range rows {
		if want := printed[ids[r]]; hits[i][0].id != want {
			t.Errorf("id %q printed %q, want %q", ids[r], hits[i][0].id, want)
		}
	}
	if p := hits[1][0].payload; p != `{"a":1,"b":"x y"}` {
		t.Errorf("row 1's payload printed %q, want it compacted to one line", p)
	}
	if p := hits[2][0].payload; p != `"\x00raw\nbytes"` {
		t.Errorf("row 2's payload (not JSON) printed %q, want it quoted", p)
	}
	for _, id := range []string{"tab\there", "new\nline", "plain"} {
		out, _ := mustVLC(t, "get", ix, id)
		if want := printed[id] + "\t"; !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
			t.Errorf("get %q: %q, want one line starting %q", id, out, want)
		}
	}
}

// TestSearchJSON: vlc search -json prints one JSON object per query, in
// order: its number and its hits (id, distance, and with -payload the
// payload as JSON, or as base64 when it is not JSON), the same objects
// as vlc serve's hits. The text output's hits are the same. The device
// path (-backend auto, here without a GPU: the CPU) prints the same.
func TestSearchJSON(t *testing.T) {
	dir := t.TempDir()
	ix, ids, payloads := idsIndex(t, dir)
	rows := []int{0, 1, 2, 3, 5, 7, 100}
	q := deepQueries(t, dir, "q", rows)
	args := []string{"search", ix, "-query", q, "-k", "3", "-nprobe", "4", "-json"}
	decode := func(out string) []queryHits {
		t.Helper()
		var res []queryHits
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			var line queryHits
			if err := dec.Decode(&line); err != nil {
				t.Fatalf("%v in %q", err, out)
			}
			res = append(res, line)
		}
		if strings.Count(out, "\n") != len(res) {
			t.Fatalf("%d lines for %d objects:\n%s", strings.Count(out, "\n"), len(res), out)
		}
		return res
	}

	plain, _ := mustVLC(t, args...)
	res := decode(plain)
	text, _ := mustVLC(t, args[:len(args)-1]...)
	textHits := byQuery(t, parseStoreHits(t, text, false), len(rows))
	if len(res) != len(rows) {
		t.Fatalf("%d objects for %d queries", len(res), len(rows))
	}
	for i, r := range rows {
		if res[i].Query != i || len(res[i].Hits) != 3 {
			t.Fatalf("object %d: %+v", i, res[i])
		}
		want := strings.ToValidUTF8(ids[r], "\ufffd") // JSON strings are UTF-8
		if h := res[i].Hits[0]; h.ID != want || h.Payload != nil || h.PayloadBase64 != nil {
			t.Errorf("query %d: first hit %+v, want id %q and no payload", i, h, want)
		}
		for j, h := range res[i].Hits {
			id := textHits[i][j].id
			if uq, err := strconv.Unquote(id); err == nil {
				id = uq
			}
			if strings.ToValidUTF8(id, "\ufffd") != h.ID || strconv.FormatFloat(float64(h.Distance), 'g', -1, 32) != strconv.FormatFloat(textHits[i][j].dist, 'g', -1, 32) {
				t.Errorf("query %d hit %d: JSON %+v, text %+v", i, j, h, textHits[i][j])
			}
		}
	}

	withPayloads, _ := mustVLC(t, append(args, "-payload")...)
	res = decode(withPayloads)
	for i, r := range rows {
		h := res[i].Hits[0]
		switch r {
		case 2: // not JSON: base64
			if h.Payload != nil || !bytes.Equal(h.PayloadBase64, payloads[r]) {
				t.Errorf("row 2: %+v, want payload_base64 %q", h, payloads[r])
			}
		default:
			var got, want any
			if json.Unmarshal(h.Payload, &got) != nil || json.Unmarshal(payloads[r], &want) != nil || !jsonEqual(got, want) {
				t.Errorf("row %d: payload %s, want %s", r, h.Payload, payloads[r])
			}
		}
	}

	device, _ := mustVLC(t, append(args, "-payload", "-backend", "auto")...)
	if device != withPayloads {
		t.Errorf("-backend auto printed\n%s\nthe CPU\n%s", device, withPayloads)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
