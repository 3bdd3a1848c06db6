package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/serve"
)

// needParseFilter skips a test that needs vlc.ParseFilter while it is
// the lead's stub.
func needParseFilter(t *testing.T) {
	t.Helper()
	if _, err := vlc.ParseFilter([]byte(`{}`)); errors.Is(err, vlc.ErrUnavailable) {
		t.Skip("vlc.ParseFilter is a stub (ErrUnavailable)")
	}
}

// errorOf is the message of an error body.
func errorOf(t *testing.T, body []byte) string {
	t.Helper()
	var e struct{ Error string }
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Fatalf("not an error body: %s", body)
	}
	return e.Error
}

// Upsert replaces a document by id and adds a new one; a refused upsert
// changes nothing.
func TestServeUpsert(t *testing.T) {
	ts, ix, base := fixture(t, serve.Limits{})
	v := base.Row(4000, nil)
	code, body := call(t, ts, "POST", "/v1/indexes/deep/upsert", "secret", map[string]any{"documents": []any{
		map[string]any{"id": "doc-1", "vector": v, "payload": map[string]any{"group": 9}},
		map[string]any{"id": "brand-new", "vector": base.Row(4001, nil)},
	}})
	if code != 200 || string(body) != "{\"ids\":[\"doc-1\",\"brand-new\"]}\n" {
		t.Fatalf("upsert: %d %s", code, body)
	}
	rec, err := ix.Get("doc-1")
	if err != nil || string(rec.Payload) != `{"group":9}` {
		t.Fatalf("doc-1 after the upsert: %+v %v", rec, err)
	}
	if n, err := ix.Count(nil); err != nil || n != 2001 {
		t.Fatalf("count after replacing one and adding one: %d %v, want 2001", n, err)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": v, "k": 1})
	if code != 200 || !strings.Contains(string(body), `"id":"doc-1"`) || !strings.Contains(string(body), `"group":9`) {
		t.Fatalf("search for the replacing vector: %d %s", code, body)
	}
	cases := []struct {
		name, token string
		body        any
		code        int
		want        string
	}{
		{"no token", "", map[string]any{"documents": []any{map[string]any{"id": "doc-2", "vector": v}}}, 401, "bearer token"},
		{"an id twice", "secret", map[string]any{"documents": []any{map[string]any{"id": "doc-2", "vector": v}, map[string]any{"id": "doc-2", "vector": v}}}, 400, `documents 0 and 1 have the same id "doc-2"`},
		{"wrong dimension", "secret", map[string]any{"documents": []any{map[string]any{"id": "doc-2", "vector": v[:5]}}}, 400, "vector has 5 values, the index 96"},
		{"nothing", "secret", map[string]any{"documents": []any{}}, 400, `no "documents"`},
	}
	for _, c := range cases {
		code, body := call(t, ts, "POST", "/v1/indexes/deep/upsert", c.token, c.body)
		if code != c.code || !strings.Contains(errorOf(t, body), c.want) {
			t.Errorf("%s: %d %s; want %d saying %q", c.name, code, body, c.code, c.want)
		}
	}
	if rec, err := ix.Get("doc-2"); err != nil || string(rec.Payload) != `{"group":2,"text":"chunk 2"}` {
		t.Errorf("doc-2 after refused upserts: %+v %v", rec, err)
	}
}

// Payload updates replace and remove payloads by id; one unknown id
// refuses the whole request.
func TestServePayloads(t *testing.T) {
	ts, ix, _ := fixture(t, serve.Limits{})
	code, body := call(t, ts, "POST", "/v1/indexes/deep/payloads", "secret", map[string]any{"documents": []any{
		map[string]any{"id": "doc-2", "payload": map[string]any{"group": 5}},
		map[string]any{"id": "doc-4"},
		map[string]any{"id": "doc-6", "payload_base64": []byte{0xff, 0}},
	}})
	if code != 200 || string(body) != "{\"updated\":3}\n" {
		t.Fatalf("payloads: %d %s", code, body)
	}
	for id, want := range map[string]string{"doc-2": `{"group":5}`, "doc-4": "", "doc-6": "\xff\x00", "doc-8": `{"group":2,"text":"chunk 8"}`} {
		if rec, err := ix.Get(id); err != nil || string(rec.Payload) != want {
			t.Errorf("%s: %q %v, want %q", id, rec.Payload, err, want)
		}
	}
	code, body = call(t, ts, "GET", "/v1/indexes/deep/documents/doc-6", "", nil)
	if code != 200 || string(body) != "{\"id\":\"doc-6\",\"payload_base64\":\"/wA=\"}\n" {
		t.Errorf("get of a binary payload: %d %s", code, body)
	}
	cases := []struct {
		name, token string
		body        any
		code        int
		want        string
	}{
		{"no token", "", map[string]any{"documents": []any{map[string]any{"id": "doc-2"}}}, 401, "bearer token"},
		{"an unknown id", "secret", map[string]any{"documents": []any{map[string]any{"id": "doc-2", "payload": 1}, map[string]any{"id": "nope", "payload": 1}}}, 404, `"nope"`},
		{"an id twice", "secret", map[string]any{"documents": []any{map[string]any{"id": "doc-2"}, map[string]any{"id": "doc-2"}}}, 400, `documents 0 and 1 have the same id "doc-2"`},
		{"no id", "secret", map[string]any{"documents": []any{map[string]any{"payload": 1}}}, 400, "document 0: no id"},
		{"both payloads", "secret", map[string]any{"documents": []any{map[string]any{"id": "doc-2", "payload": 1, "payload_base64": "AA=="}}}, 400, "not both"},
		{"nothing", "secret", map[string]any{}, 400, `no "documents"`},
	}
	for _, c := range cases {
		code, body := call(t, ts, "POST", "/v1/indexes/deep/payloads", c.token, c.body)
		if code != c.code || !strings.Contains(errorOf(t, body), c.want) {
			t.Errorf("%s: %d %s; want %d saying %q", c.name, code, body, c.code, c.want)
		}
	}
	if rec, err := ix.Get("doc-2"); err != nil || string(rec.Payload) != `{"group":5}` {
		t.Errorf("doc-2 after refused updates: %q %v", rec.Payload, err)
	}
}

// Count counts all documents, or those a filter allows.
func TestServeCount(t *testing.T) {
	ts, _, _ := fixture(t, serve.Limits{})
	for _, c := range []struct {
		name string
		body any
		want string
	}{
		{"no body", nil, `{"count":2000}`},
		{"an empty object", map[string]any{}, `{"count":2000}`},
		{"ids", map[string]any{"filter": map[string]any{"ids": []string{"doc-1", "doc-2", "nope"}}}, `{"count":2}`},
		{"equality", map[string]any{"filter": map[string]any{"where": map[string]any{"group": 1}}}, `{"count":667}`},
	} {
		code, body := call(t, ts, "POST", "/v1/indexes/deep/count", "", c.body)
		if code != 200 || strings.TrimSpace(string(body)) != c.want {
			t.Errorf("count, %s: %d %s, want %s", c.name, code, body, c.want)
		}
	}
	code, body := call(t, ts, "POST", "/v1/indexes/deep/count", "", `{"where": {"group": 1}, "filter": {"ids": []}}`)
	if code != 400 || !strings.Contains(errorOf(t, body), `give "where" or "filter", not both`) {
		t.Errorf("count with where and filter: %d %s", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/nope/count", "", nil)
	if code != 404 {
		t.Errorf("count of an unknown index: %d %s", code, body)
	}
	t.Run("where", func(t *testing.T) {
		needParseFilter(t)
		for where, want := range map[string]string{
			`{"group": 1}`:                                 `{"count":667}`,
			`{"group": {"$in": [0, 2]}}`:                   `{"count":1333}`,
			`{"$or": [{"group": 0}, {"text": "chunk 1"}]}`: `{"count":668}`,
			`{"group": {"$gte": 1, "$lt": 2}}`:             `{"count":667}`,
		} {
			code, body := call(t, ts, "POST", "/v1/indexes/deep/count", "", `{"where": `+where+`}`)
			if code != 200 || strings.TrimSpace(string(body)) != want {
				t.Errorf("count where %s: %d %s, want %s", where, code, body, want)
			}
		}
		code, body := call(t, ts, "POST", "/v1/indexes/deep/count", "", `{"where": {"group": {"$bogus": 1}}}`)
		if code != 400 || !strings.Contains(errorOf(t, body), "$bogus") {
			t.Errorf("count with a bad where: %d %s, want 400 naming $bogus", code, body)
		}
	})
}

// List pages through every document once, in id order, with vectors on
// request.
func TestServeList(t *testing.T) {
	ts, ix, _ := fixture(t, serve.Limits{Batch: 600})
	var ids []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("more pages than the documents fill")
		}
		code, body := call(t, ts, "POST", "/v1/indexes/deep/list", "", map[string]any{"after": after, "limit": 600})
		var page serve.ListResponse
		if code != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("list after %q: %d %s", after, code, body)
		}
		for _, d := range page.Documents {
			ids = append(ids, d.ID)
			if d.Vector != nil || len(d.Payload) == 0 {
				t.Fatalf("list without vectors: %+v", d)
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(ids) != 2000 || !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != 2000 {
		t.Fatalf("list gave %d ids (sorted: %v), want the 2,000 once each in order", len(ids), slices.IsSorted(ids))
	}
	code, body := call(t, ts, "POST", "/v1/indexes/deep/list", "", map[string]any{"limit": 2, "vectors": true, "filter": map[string]any{"where": map[string]any{"group": 2}}})
	var page serve.ListResponse
	if code != 200 || json.Unmarshal(body, &page) != nil || len(page.Documents) != 2 || page.Next != page.Documents[1].ID {
		t.Fatalf("a filtered page of 2 with vectors: %d %s", code, body)
	}
	for _, d := range page.Documents {
		rec, err := ix.Get(d.ID, vlc.WithVector())
		if err != nil || !slices.Equal(d.Vector, rec.Vector) || !strings.Contains(string(d.Payload), `"group":2`) {
			t.Errorf("%s: vector %d values, payload %s; the library's %d values, %v", d.ID, len(d.Vector), d.Payload, len(rec.Vector), err)
		}
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/list", "", nil)
	if err := json.Unmarshal(body, &page); code != 200 || err != nil || len(page.Documents) != 100 {
		t.Errorf("list without a body: %d, %d documents, want the default 100", code, len(page.Documents))
	}
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"limit": 601}, "limit 601: must be 1 to 600"},
		{map[string]any{"limit": -1}, "limit -1"},
		{map[string]any{"limt": 1}, `unknown field "limt"`},
	} {
		code, body := call(t, ts, "POST", "/v1/indexes/deep/list", "", c.body)
		if code != 400 || !strings.Contains(errorOf(t, body), c.want) {
			t.Errorf("list %v: %d %s, want 400 saying %q", c.body, code, body, c.want)
		}
	}
}

// Get with ?vector=true returns the vector the codes give back.
func TestServeGetVector(t *testing.T) {
	ts, ix, base := fixture(t, serve.Limits{})
	code, body := call(t, ts, "GET", "/v1/indexes/deep/documents/doc-5?vector=true", "", nil)
	var d serve.DocumentBody
	if code != 200 || json.Unmarshal(body, &d) != nil || len(d.Vector) != 96 {
		t.Fatalf("get with vector: %d %s", code, body)
	}
	rec, err := ix.Get("doc-5", vlc.WithVector())
	if err != nil || !slices.Equal(d.Vector, rec.Vector) {
		t.Fatalf("the vector over HTTP is not the library's: %v", err)
	}
	// At 8 bits the decoded vector lies near the one added.
	orig := base.Row(5, nil)
	var errSq, norm float64
	for i := range orig {
		e := float64(d.Vector[i] - orig[i])
		errSq += e * e
		norm += float64(orig[i]) * float64(orig[i])
	}
	if errSq > 0.01*norm {
		t.Errorf("decoded vector's squared error %.4g is over 1%% of the vector's %.4g", errSq, norm)
	}
	code, body = call(t, ts, "GET", "/v1/indexes/deep/documents/doc-5", "", nil)
	if code != 200 || strings.Contains(string(body), "vector") {
		t.Errorf("get without vector=true: %d %s", code, body)
	}
	code, body = call(t, ts, "GET", "/v1/indexes/deep/documents/doc-5?vector=yes", "", nil)
	if code != 400 || !strings.Contains(errorOf(t, body), `vector="yes": want true or false`) {
		t.Errorf("get with vector=yes: %d %s", code, body)
	}
}

// Search by radius returns the hits within it; "where" filters with the
// JSON syntax; a bad one is a 400 naming the problem.
func TestServeSearchRadiusAndWhere(t *testing.T) {
	ts, ix, base := fixture(t, serve.Limits{})
	q := base.Row(9, nil)
	all, err := ix.Search(context.Background(), q, vlc.SearchOptions{K: 20, NProbe: 8})
	if err != nil {
		t.Fatal(err)
	}
	radius := all[4].Distance
	code, body := call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "k": 20, "nprobe": 8, "radius": radius})
	var r serve.SearchResponse
	if code != 200 || json.Unmarshal(body, &r) != nil {
		t.Fatalf("search by radius: %d %s", code, body)
	}
	want := 0
	for _, h := range all {
		if h.Distance <= radius {
			want++
		}
	}
	if len(r.Hits) != want || want < 5 {
		t.Fatalf("search by radius %v: %d hits, want the %d of the unbounded search within it", radius, len(r.Hits), want)
	}
	for i, h := range r.Hits {
		if h.ID != all[i].ID {
			t.Errorf("hit %d: %s, the unbounded search's %s", i, h.ID, all[i].ID)
		}
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/search", "", `{"vector": [`+strings.Repeat("0,", 95)+`0], "where": {"group": 1}, "filter": {"ids": ["doc-1"]}}`)
	if code != 400 || !strings.Contains(errorOf(t, body), `give "where" or "filter", not both`) {
		t.Errorf("search with where and filter: %d %s", code, body)
	}
	t.Run("where", func(t *testing.T) {
		needParseFilter(t)
		code, body := call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "k": 10, "where": map[string]any{"group": map[string]any{"$in": []int{0, 2}}}})
		var r serve.SearchResponse
		if code != 200 || json.Unmarshal(body, &r) != nil || len(r.Hits) != 10 {
			t.Fatalf("search where $in: %d %s", code, body)
		}
		for _, h := range r.Hits {
			var p struct{ Group int }
			if json.Unmarshal(h.Payload, &p) != nil || p.Group == 1 {
				t.Errorf("where group in [0, 2] gave %s", h.Payload)
			}
		}
		for where, want := range map[string]string{
			`{"group": {"$bogus": 1}}`: "$bogus",
			`{"group": {"$in": 1}}`:    "$in",
			`[1]`:                      "where",
		} {
			code, body := call(t, ts, "POST", "/v1/indexes/deep/search", "", fmt.Sprintf(`{"vector": [%s0], "where": %s}`, strings.Repeat("0,", 95), where))
			if code != 400 || !strings.Contains(errorOf(t, body), want) {
				t.Errorf("where %s: %d %s, want 400 naming %s", where, code, body, want)
			}
		}
	})
}

// Compact, retrain and maintain answer the index's description after
// the work, behind the token.
func TestServeAdmin(t *testing.T) {
	ts, _, _ := fixture(t, serve.Limits{})
	if code, body := call(t, ts, "POST", "/v1/indexes/deep/delete", "secret", map[string]any{"ids": []string{"doc-1", "doc-2"}}); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	code, body := call(t, ts, "POST", "/v1/indexes/deep/compact", "", nil)
	if code != 401 {
		t.Errorf("compact without the token: %d %s", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/compact", "secret", nil)
	var in serve.InfoBody
	if code != 200 || json.Unmarshal(body, &in) != nil || in.Live != 1998 || in.Deleted != 0 {
		t.Fatalf("compact: %d %s, want 1,998 live and none deleted", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/retrain", "secret", nil)
	if code != 200 || json.Unmarshal(body, &in) != nil || in.Live != 1998 || in.Lists < 2 {
		t.Fatalf("retrain: %d %s", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/maintain", "secret", nil)
	if code != 200 || json.Unmarshal(body, &in) != nil || in.Live != 1998 {
		t.Fatalf("maintain: %d %s", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/compact", "secret", map[string]any{"now": true})
	if code != 400 || !strings.Contains(errorOf(t, body), `unknown field "now"`) {
		t.Errorf("compact with a body: %d %s", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/nope/retrain", "secret", nil)
	if code != 404 {
		t.Errorf("retrain of an unknown index: %d %s", code, body)
	}
}
