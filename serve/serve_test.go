package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/serve"
	"github.com/vlc-embed/vlc/vecfile"
)

const deep = "../testdata/deep10k/"

// fixture builds a 2,000-document store (ids "doc-N", JSON payloads with a
// "group" field) and serves it as "deep" with token "secret".
func fixture(t *testing.T, limits serve.Limits) (*httptest.Server, *vlc.Store, *vecfile.Matrix) {
	t.Helper()
	ix, base := fixtureIndex(t)
	srv, err := serve.New(map[string]*vlc.Store{"deep": ix}, serve.Config{Token: "secret", Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ReadTimeout = 2 * time.Second
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, ix, base
}

// fixtureIndex is fixture's store, not yet served.
func fixtureIndex(t *testing.T) (*vlc.Store, *vecfile.Matrix) {
	t.Helper()
	base, err := vecfile.Open(deep+"base.f16", vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	docs := make([]vlc.Document, 2000)
	for i := range docs {
		docs[i] = vlc.Document{ID: fmt.Sprintf("doc-%d", i), Vector: base.Row(i, nil),
			Payload: []byte(fmt.Sprintf(`{"group":%d,"text":"chunk %d"}`, i%3, i))}
	}
	ix, err := vlc.Build(context.Background(), filepath.Join(t.TempDir(), "deep.vlc"), docs, vlc.Options{Bits: 8, Backend: "cpu", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix, base
}

func call(t *testing.T, ts *httptest.Server, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// Searches over HTTP return the library's hits, one query or a batch;
// filters by id and by payload field; get, add and delete by id.
func TestServeRoundTrip(t *testing.T) {
	ts, ix, base := fixture(t, serve.Limits{})
	q := base.Row(5, nil)
	want, err := ix.Search(context.Background(), q, vlc.SearchOptions{K: 5, NProbe: 8})
	if err != nil {
		t.Fatal(err)
	}
	code, body := call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "k": 5, "nprobe": 8})
	var one serve.SearchResponse
	if code != 200 || json.Unmarshal(body, &one) != nil || len(one.Hits) != 5 {
		t.Fatalf("search: %d %s", code, body)
	}
	for i, h := range one.Hits {
		if h.ID != want[i].ID || h.Distance != want[i].Distance || string(h.Payload) != string(want[i].Payload) {
			t.Fatalf("hit %d: %+v, library %+v", i, h, want[i])
		}
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vectors": [][]float32{q, base.Row(6, nil)}, "k": 5, "nprobe": 8})
	var batch serve.SearchResponse
	if code != 200 || json.Unmarshal(body, &batch) != nil || len(batch.Results) != 2 || batch.Results[0][0].ID != want[0].ID {
		t.Fatalf("batch search: %d %s", code, body)
	}
	// The same batch as base64 float32 bytes.
	var raw []byte
	for _, v := range [][]float32{q, base.Row(6, nil)} {
		for _, x := range v {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
		}
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vectors_f32": raw, "k": 5, "nprobe": 8})
	var batchF32 serve.SearchResponse
	if code != 200 || json.Unmarshal(body, &batchF32) != nil || !reflect.DeepEqual(batchF32, batch) {
		t.Fatalf("batch as vectors_f32: %d %s, want the batch's hits", code, body)
	}
	// Filters.
	code, body = call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "k": 3, "filter": map[string]any{"where": map[string]any{"group": 1}}})
	var f serve.SearchResponse
	if code != 200 || json.Unmarshal(body, &f) != nil || len(f.Hits) != 3 {
		t.Fatalf("where filter: %d %s", code, body)
	}
	for _, h := range f.Hits {
		var p struct{ Group int }
		if json.Unmarshal(h.Payload, &p) != nil || p.Group != 1 {
			t.Fatalf("where group 1 gave %s", h.Payload)
		}
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "filter": map[string]any{"ids": []string{"doc-7", "doc-9"}}})
	if err := json.Unmarshal(body, &f); code != 200 || err != nil || len(f.Hits) != 2 {
		t.Fatalf("ids filter: %d %s", code, body)
	}
	// An empty id list allows nothing (not everything).
	code, body = call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "filter": map[string]any{"ids": []string{}}})
	if code != 200 || string(body) != "{\"hits\":[]}\n" {
		t.Fatalf("empty ids filter: %d %s, want no hits", code, body)
	}
	// Add, get, search, delete.
	v := base.Row(3000, nil)
	code, body = call(t, ts, "POST", "/v1/indexes/deep/documents", "secret", map[string]any{"documents": []any{map[string]any{"id": "new-1", "vector": v, "payload": map[string]any{"group": 7}}}})
	if code != 200 || !strings.Contains(string(body), `"new-1"`) {
		t.Fatalf("add: %d %s", code, body)
	}
	code, body = call(t, ts, "GET", "/v1/indexes/deep/documents/new-1", "", nil)
	if code != 200 || !strings.Contains(string(body), `"group":7`) {
		t.Fatalf("get: %d %s", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": v, "k": 1})
	if code != 200 || !strings.Contains(string(body), `"id":"new-1"`) {
		t.Fatalf("search for the added vector: %d %s", code, body)
	}
	if code, body = call(t, ts, "POST", "/v1/indexes/deep/delete", "secret", map[string]any{"ids": []string{"new-1", "new-1"}}); code != 200 || !strings.Contains(string(body), `"deleted":1`) {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, body = call(t, ts, "GET", "/v1/indexes/deep/documents/new-1", "", nil); code != 404 {
		t.Fatalf("get after delete: %d %s", code, body)
	}
	// Info, health, metrics, OpenAPI.
	if code, body = call(t, ts, "GET", "/v1/indexes/deep", "", nil); code != 200 || !strings.Contains(string(body), `"live":2000`) {
		t.Fatalf("info: %d %s", code, body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body = call(t, ts, "GET", p, "", nil); code != 200 {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}
	if code, body = call(t, ts, "POST", "/v1/indexes/deep/delete", "secret", map[string]any{"ids": []string{"doc-3"}}); code != 200 {
		t.Fatalf("delete doc-3: %d %s", code, body)
	}
	if code, body = call(t, ts, "POST", "/v1/indexes/deep/delete", "secret", map[string]any{"ids": []string{"doc-3"}}); code != 404 || !strings.Contains(string(body), "doc-3") {
		t.Fatalf("delete doc-3 again: %d %s, want 404 naming it", code, body)
	}
	code, body = call(t, ts, "GET", "/metrics", "", nil)
	for _, m := range []string{`vlc_requests_total{code="200",endpoint="search",index="deep"}`, `vlc_index_live_vectors{index="deep"} 1999`, `vlc_index_deleted_vectors{index="deep"} 1`, "vlc_request_duration_seconds_bucket"} {
		if code != 200 || !strings.Contains(string(body), m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	code, body = call(t, ts, "GET", "/openapi.json", "", nil)
	var doc struct{ Paths map[string]any }
	if code != 200 || json.Unmarshal(body, &doc) != nil {
		t.Fatalf("openapi: %d", code)
	}
	for _, p := range []string{"/v1/indexes/{name}/search", "/v1/indexes/{name}/documents", "/v1/indexes/{name}/delete", "/v1/indexes/{name}/documents/{id}", "/metrics", "/readyz"} {
		if doc.Paths[p] == nil {
			t.Errorf("openapi.json does not describe %s", p)
		}
	}
}

// Bad requests get a 4xx with a message naming the problem, and the
// server answers the next request.
func TestServeBadRequests(t *testing.T) {
	ts, _, base := fixture(t, serve.Limits{BodyBytes: 64 << 10, K: 100, Batch: 10, NProbe: 50, Hits: 500})
	q := base.Row(1, nil)
	short := q[:95]
	nanRow := make([]byte, 4*96) // one row, its first value a NaN
	nanRow[2], nanRow[3] = 0xc0, 0x7f
	many := make([][]float32, 11)
	for i := range many {
		many[i] = q
	}
	cases := []struct {
		name, method, path, token string
		body                      any
		code                      int
		want                      string
	}{
		{"malformed JSON", "POST", "/v1/indexes/deep/search", "", `{"vector": [1, 2`, 400, "request body"},
		{"unknown field", "POST", "/v1/indexes/deep/search", "", `{"vectr": [1]}`, 400, `unknown field "vectr"`},
		{"trailing data", "POST", "/v1/indexes/deep/search", "", `{"k": 3} {}`, 400, "after the JSON object"},
		{"no vector", "POST", "/v1/indexes/deep/search", "", map[string]any{"k": 3}, 400, "no query"},
		{"both vector and vectors", "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "vectors": [][]float32{q}}, 400, "give one of"},
		{"vectors_f32 of a partial row", "POST", "/v1/indexes/deep/search", "", map[string]any{"vectors_f32": make([]byte, 4*96+4)}, 400, "not a whole number of 96-value rows"},
		{"vectors_f32 with NaN", "POST", "/v1/indexes/deep/search", "", map[string]any{"vectors_f32": nanRow}, 400, "vector 0, value 0 is NaN"},
		{"wrong dimension", "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": short}, 400, "95 values, the index 96"},
		{"NaN", "POST", "/v1/indexes/deep/search", "", `{"vector": [NaN]}`, 400, "invalid character"},
		{"beyond float32", "POST", "/v1/indexes/deep/search", "", `{"vector": [1e39]}`, 400, "float32"},
		{"k zero", "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "k": 0}, 400, "k 0: must be 1 to 100"},
		{"k huge", "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "k": 1 << 40}, 400, "must be 1 to 100"},
		{"nprobe over the limit", "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "nprobe": 51}, 400, "nprobe 51"},
		{"ef below -1", "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "ef": -2}, 400, "ef -2: must be -1 (the lists) to 4096"},
		{"ef over the bound", "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": q, "ef": 4097}, 400, "ef 4097"},
		{"batch over the limit", "POST", "/v1/indexes/deep/search", "", map[string]any{"vectors": many}, 400, "11 vectors in one search, over the limit of 10"},
		{"body over the limit", "POST", "/v1/indexes/deep/search", "", `{"vectors": [` + strings.Repeat("[1],", 40000) + `[1]]}`, 413, "over the limit of 65536 bytes"},
		{"unknown index", "POST", "/v1/indexes/nope/search", "", map[string]any{"vector": q}, 404, `no index named "nope" (have: deep)`},
		{"unknown id", "GET", "/v1/indexes/deep/documents/nope", "", nil, 404, "nope"},
		{"unknown endpoint", "GET", "/v2/x", "", nil, 404, "no such endpoint"},
		{"wrong method", "DELETE", "/v1/indexes/deep/search", "", nil, 404, "no such endpoint: DELETE /v1/indexes/deep/search"},
		{"add without token", "POST", "/v1/indexes/deep/documents", "", map[string]any{"documents": []any{map[string]any{"vector": q}}}, 401, "bearer token"},
		{"add with a wrong token", "POST", "/v1/indexes/deep/documents", "guess", map[string]any{"documents": []any{map[string]any{"vector": q}}}, 403, "wrong bearer token"},
		{"delete without token", "POST", "/v1/indexes/deep/delete", "", map[string]any{"ids": []string{"doc-1"}}, 401, "bearer token"},
		{"add of a wrong dimension", "POST", "/v1/indexes/deep/documents", "secret", map[string]any{"documents": []any{map[string]any{"vector": short}}}, 400, "document 0: vector has 95 values"},
		{"add of an id already there", "POST", "/v1/indexes/deep/documents", "secret", map[string]any{"documents": []any{map[string]any{"id": "doc-1", "vector": q}}}, 409, `duplicate id "doc-1": already in the index`},
		{"add of an id twice", "POST", "/v1/indexes/deep/documents", "secret", map[string]any{"documents": []any{map[string]any{"id": "new-1", "vector": q}, map[string]any{"vector": q}, map[string]any{"id": "new-1", "vector": q}}}, 400, `documents 0 and 2 have the same id "new-1"`},
		{"add of nothing", "POST", "/v1/indexes/deep/documents", "secret", map[string]any{"documents": []any{}}, 400, "no \"documents\""},
		{"delete of nothing", "POST", "/v1/indexes/deep/delete", "secret", map[string]any{}, 400, "no \"ids\""},
		{"queries x k over the hit limit", "POST", "/v1/indexes/deep/search", "", map[string]any{"vectors": many[:10], "k": 100}, 400, "1000 candidates, over the limit of 500"},
		{"where of bad JSON", "POST", "/v1/indexes/deep/search", "", `{"vector": [` + strings.Repeat("0,", 95) + `0], "filter": {"ids": ["a"], "where": {"g": 1}}}`, 400, "not both"},
	}
	for _, c := range cases {
		code, body := call(t, ts, c.method, c.path, c.token, c.body)
		var e struct{ Error string }
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("%s: error body is not JSON: %s", c.name, body)
		}
		if code != c.code || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s: %d %s; want %d saying %q", c.name, code, body, c.code, c.want)
		}
		if code, _ := call(t, ts, "GET", "/healthz", "", nil); code != 200 {
			t.Fatalf("after %s the server does not answer: %d", c.name, code)
		}
	}
	// The refused adds added nothing.
	if code, body := call(t, ts, "GET", "/v1/indexes/deep/documents/new-1", "", nil); code != 404 {
		t.Errorf("new-1 after a refused add: %d %s, want 404", code, body)
	}
	// A slow client that never finishes its body is cut off by the read
	// timeout; the server goes on.
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/indexes/deep/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"vector\": [")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	status, _ := bufio.NewReader(conn).ReadString('\n')
	if time.Since(start) > 8*time.Second {
		t.Errorf("a body never finished held the connection %v", time.Since(start))
	}
	if status != "" && !strings.Contains(status, " 4") {
		t.Errorf("a body never finished: %q, want a 4xx or a closed connection", status)
	}
	if code, _ := call(t, ts, "GET", "/healthz", "", nil); code != 200 {
		t.Fatalf("after a slow client the server does not answer: %d", code)
	}
}

// "rerank": true re-scores from the original vectors the server was given,
// as the library does; an index served without them refuses it.
func TestServeRerank(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "deep.vlc")
	// The rotated code: pq's training and encoding took 27 of this
	// test's 30 s under -race.
	if _, err := vlc.Compress(context.Background(), deep+"base.f16", out, vlc.Options{Dim: 96, Bits: 4, Code: "rotated", Backend: "cpu", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	ix, err := vlc.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	base, err := vecfile.Open(deep+"base.f16", vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	orig := vlc.RowOriginals(base)
	if _, err := serve.New(map[string]*vlc.Store{"d": ix}, serve.Config{Originals: map[string]vlc.Originals{"other": orig}}); err == nil {
		t.Error("originals for an index not served were accepted")
	}
	srv, err := serve.New(map[string]*vlc.Store{"d": ix, "plain": ix}, serve.Config{Originals: map[string]vlc.Originals{"d": orig}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	q := base.Row(11, nil)
	want, err := ix.Search(context.Background(), q, vlc.SearchOptions{K: 5, Rerank: orig, RerankFactor: 4})
	if err != nil {
		t.Fatal(err)
	}
	code, body := call(t, ts, "POST", "/v1/indexes/d/search", "", map[string]any{"vector": q, "k": 5, "rerank": true, "rerank_factor": 4})
	var r serve.SearchResponse
	if code != 200 || json.Unmarshal(body, &r) != nil || len(r.Hits) != 5 {
		t.Fatalf("re-ranked search: %d %s", code, body)
	}
	for i, h := range r.Hits {
		if h.ID != want[i].ID || h.Distance != want[i].Distance {
			t.Fatalf("hit %d: %+v, library %+v", i, h, want[i])
		}
	}
	if r.Hits[0].ID != "11" || r.Hits[0].Distance != 0 {
		t.Errorf("the query's own row should come first at distance 0 once re-ranked: %+v", r.Hits[0])
	}
	code, body = call(t, ts, "POST", "/v1/indexes/plain/search", "", map[string]any{"vector": q, "rerank": true})
	if code != 400 || !strings.Contains(string(body), "without its original vectors") {
		t.Errorf("re-rank on an index without originals: %d %s", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/d/documents", "", map[string]any{"documents": []any{map[string]any{"vector": q}}})
	if code != 409 || !strings.Contains(string(body), "read-only") {
		t.Errorf("add to an index served with originals: %d %s, want 409", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/d/search", "", map[string]any{"vector": q, "rerank_factor": 3})
	if code != 400 || !strings.Contains(string(body), "without") {
		t.Errorf("rerank_factor alone: %d %s", code, body)
	}
}
