package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/serve"
)

// needCreate skips a test that needs vlc.Create while it is the lead's stub.
func needCreate(t *testing.T) {
	t.Helper()
	ix, err := vlc.CreateTemp(vlc.Schema{Dim: 4})
	if errors.Is(err, vlc.ErrUnavailable) {
		t.Skip("vlc.Create and vlc.CreateTemp are stubs (ErrUnavailable)")
	}
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
}

// needRemove skips a test that needs vlc.Remove while it is the lead's stub.
func needRemove(t *testing.T) {
	t.Helper()
	err := vlc.Remove(context.Background(), filepath.Join(t.TempDir(), "none.vlc"))
	if errors.Is(err, vlc.ErrUnavailable) {
		t.Skip("vlc.Remove is a stub (ErrUnavailable)")
	}
}

// dataServer serves the fixture's index as "deep" and the collections of
// a data folder, with token "secret".
func dataServer(t *testing.T, data string, maintain bool) (*httptest.Server, *serve.Server) {
	t.Helper()
	ix, _ := fixtureIndex(t)
	srv, err := serve.New(map[string]*vlc.Store{"deep": ix}, serve.Config{Token: "secret", Data: data, Maintain: maintain})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return ts, srv
}

// What needs a data folder is refused without one; bad names, schemas and
// tokens are refused before anything is made.
func TestServeCollectionsRefused(t *testing.T) {
	ts, _, _ := fixture(t, serve.Limits{})
	for _, c := range []struct {
		name, method, path, token string
		body                      any
		code                      int
		want                      string
	}{
		{"create without a data folder", "POST", "/v1/indexes", "secret", map[string]any{"name": "notes", "dim": 8}, 409, "no data folder"},
		{"snapshot without a data folder", "POST", "/v1/indexes/deep/snapshot", "secret", map[string]any{"name": "copy"}, 409, "no data folder"},
		{"drop of an index given to New", "DELETE", "/v1/indexes/deep", "secret", nil, 409, "does not drop it"},
		{"create without the token", "POST", "/v1/indexes", "", map[string]any{"name": "notes", "dim": 8}, 401, "bearer token"},
		{"drop without the token", "DELETE", "/v1/indexes/deep", "", nil, 401, "bearer token"},
		{"drop of an unknown index", "DELETE", "/v1/indexes/nope", "secret", nil, 404, `no index named "nope"`},
		{"create of an unknown field", "POST", "/v1/indexes", "secret", map[string]any{"name": "notes", "dims": 8}, 400, `unknown field "dims"`},
	} {
		code, body := call(t, ts, c.method, c.path, c.token, c.body)
		if code != c.code || !strings.Contains(errorOf(t, body), c.want) {
			t.Errorf("%s: %d %s; want %d saying %q", c.name, code, body, c.code, c.want)
		}
	}
	data := t.TempDir()
	ts, _ = dataServer(t, data, false)
	for _, c := range []struct {
		name string
		body any
		code int
		want string
	}{
		{"a name with a slash", map[string]any{"name": "a/b", "dim": 8}, 400, `collection name "a/b"`},
		{"the name ..", map[string]any{"name": "..", "dim": 8}, 400, `collection name ".."`},
		{"no name", map[string]any{"dim": 8}, 400, `collection name ""`},
		{"a name served", map[string]any{"name": "deep", "dim": 8}, 409, `"deep" is served already`},
		{"no dimension", map[string]any{"name": "notes"}, 400, "dim 0"},
	} {
		code, body := call(t, ts, "POST", "/v1/indexes", "secret", c.body)
		if code != c.code || !strings.Contains(errorOf(t, body), c.want) {
			t.Errorf("create, %s: %d %s; want %d saying %q", c.name, code, body, c.code, c.want)
		}
	}
	code, body := call(t, ts, "POST", "/v1/indexes/deep/snapshot", "secret", map[string]any{"name": "deep"})
	if code != 409 || !strings.Contains(errorOf(t, body), "served already") {
		t.Errorf("snapshot onto a served name: %d %s", code, body)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Errorf("refused requests left %d files in the data folder", len(entries))
	}
}

// A data folder's NAME.vlc files are served as NAME, beside the indexes
// given by name; a name both ways is refused.
func TestServeDataFolderOpened(t *testing.T) {
	data := t.TempDir()
	ix, _ := fixtureIndex(t)
	if err := ix.Snapshot(context.Background(), filepath.Join(data, "kept.vlc")); errors.Is(err, vlc.ErrUnavailable) {
		// Until Snapshot lands, a copy of the index file does.
		b, err := os.ReadFile(ix.Path())
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(data, "kept.vlc"), b, 0o644)
	} else if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(data, "notes.txt"), []byte("not an index"), 0o644)
	ts, srv := dataServer(t, data, false)
	if got := srv.Names(); !slices.Equal(got, []string{"deep", "kept"}) {
		t.Errorf("served %v, want deep and kept", got)
	}
	code, body := call(t, ts, "POST", "/v1/indexes/kept/count", "", nil)
	if code != 200 || strings.TrimSpace(string(body)) != `{"count":2000}` {
		t.Errorf("count of the data folder's index: %d %s", code, body)
	}
	if _, err := serve.New(map[string]*vlc.Store{"kept": ix}, serve.Config{Data: data}); err == nil || !strings.Contains(err.Error(), `both named "kept"`) {
		t.Errorf("an index named as a data folder's file: %v", err)
	}
}

// A collection is created empty, filled, snapshotted, listed and
// dropped over HTTP; a new server on the folder serves what is left.
func TestServeCollectionLifecycle(t *testing.T) {
	needCreate(t)
	needRemove(t)
	data := t.TempDir()
	ts, srv := dataServer(t, data, false)
	code, body := call(t, ts, "POST", "/v1/indexes", "secret", map[string]any{"name": "notes", "dim": 8, "metric": "cosine", "indexed": []string{"lang"}, "policy": map[string]any{"train_at": 100}})
	var in serve.InfoBody
	if code != 201 || json.Unmarshal(body, &in) != nil || in.Name != "notes" || in.Dim != 8 || in.Metric != "cosine" || in.Live != 0 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body = call(t, ts, "POST", "/v1/indexes", "secret", map[string]any{"name": "notes", "dim": 8}); code != 409 {
		t.Errorf("create again: %d %s, want 409", code, body)
	}
	var docs []any
	for i := range 10 {
		v := make([]float32, 8)
		v[i%8], v[(i+1)%8] = 1, float32(i)
		docs = append(docs, map[string]any{"id": fmt.Sprintf("n%d", i), "vector": v, "payload": map[string]any{"lang": []string{"en", "fr"}[i%2]}})
	}
	if code, body = call(t, ts, "POST", "/v1/indexes/notes/documents", "secret", map[string]any{"documents": docs}); code != 200 {
		t.Fatalf("add: %d %s", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/notes/search", "", map[string]any{"vector": []float32{0, 0, 0, 2, 6, 0, 0, 0}, "k": 1})
	if code != 200 || !strings.Contains(string(body), `"id":"n3"`) {
		t.Errorf("search of the new collection: %d %s, want n3 (the query's direction) first", code, body)
	}
	code, body = call(t, ts, "POST", "/v1/indexes/notes/snapshot", "secret", map[string]any{"name": "notes-copy"})
	if code != 201 || json.Unmarshal(body, &in) != nil || in.Name != "notes-copy" || in.Live != 10 {
		t.Fatalf("snapshot: %d %s", code, body)
	}
	code, body = call(t, ts, "GET", "/v1/indexes", "", nil)
	var list []serve.InfoBody
	if code != 200 || json.Unmarshal(body, &list) != nil || len(list) != 3 || list[1].Name != "notes" || list[2].Name != "notes-copy" {
		t.Fatalf("list: %d %s", code, body)
	}
	if code, body = call(t, ts, "DELETE", "/v1/indexes/notes", "secret", nil); code != 200 || strings.TrimSpace(string(body)) != `{"dropped":"notes"}` {
		t.Fatalf("drop: %d %s", code, body)
	}
	if code, _ = call(t, ts, "GET", "/v1/indexes/notes", "", nil); code != 404 {
		t.Errorf("info after the drop: %d, want 404", code)
	}
	if _, err := os.Stat(filepath.Join(data, "notes.vlc")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dropped collection's file: %v", err)
	}
	srv.Close()
	ts2, _ := dataServer(t, data, false)
	code, body = call(t, ts2, "POST", "/v1/indexes/notes-copy/count", "", nil)
	if code != 200 || strings.TrimSpace(string(body)) != `{"count":10}` {
		t.Errorf("the snapshot served by a new server: %d %s", code, body)
	}
}

// A collection created with a graph policy trains, then its segment
// gets a graph in the server's background work; info counts it and a
// search with "ef" walks it.
func TestServeGraphPolicy(t *testing.T) {
	needCreate(t)
	data := t.TempDir()
	ts, srv := dataServer(t, data, true)
	code, body := call(t, ts, "POST", "/v1/indexes", "secret", map[string]any{"name": "g", "dim": 8, "code": "rotated",
		"policy": map[string]any{"train_at": 60, "graph_at": 50, "graph_degree": 8, "graph_compact": true}})
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var docs []any
	for i := range 80 {
		v := make([]float32, 8)
		for j := range v {
			v[j] = float32((i*7+j*3)%11) + float32(i%5)/10
		}
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "vector": v})
	}
	if code, body := call(t, ts, "POST", "/v1/indexes/g/documents", "secret", map[string]any{"documents": docs}); code != 200 {
		t.Fatalf("add: %d %s", code, body)
	}
	srv.WaitMaintenance()
	var in serve.InfoBody
	if code, body := call(t, ts, "GET", "/v1/indexes/g", "", nil); code != 200 || json.Unmarshal(body, &in) != nil || in.Live != 80 || in.Graphs != 1 {
		t.Fatalf("info: %d %s; want 80 live rows, one graph", code, body)
	}
	if code, body := call(t, ts, "POST", "/v1/indexes/g/search", "", map[string]any{"vector": docs[3].(map[string]any)["vector"], "k": 1, "ef": 16}); code != 200 || !strings.Contains(string(body), `"id":"3"`) {
		t.Fatalf("search with ef: %d %s", code, body)
	}
	// The policy's "graph_compact" reached the build: the segment's graph
	// has compact lists (read through a second handle).
	st, err := vlc.OpenWith(filepath.Join(data, "g.vlc"), vlc.OpenOptions{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	in2, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range in2.Segments {
		if !seg.Graph {
			continue
		}
		ix, err := index.Open(seg.File, index.Options{})
		if err != nil {
			t.Fatal(err)
		}
		g, err := graph.Open(ix)
		if err == nil && !g.Options().Compact {
			err = fmt.Errorf("options %+v", g.Options())
		}
		ix.Close()
		if err != nil {
			t.Fatalf("segment %s: want a graph of compact lists: %v", seg.File, err)
		}
	}
}

// With Maintain, writes leave fewer segments behind than without: the
// server runs the collection's merges after them.
func TestServeMaintainAfterWrites(t *testing.T) {
	needCreate(t)
	segments := func(maintain bool) int {
		ts, srv := dataServer(t, t.TempDir(), maintain)
		code, body := call(t, ts, "POST", "/v1/indexes", "secret", map[string]any{"name": "c", "dim": 4, "policy": map[string]any{"merge_factor": 2}})
		if code != 201 {
			t.Fatalf("create: %d %s", code, body)
		}
		for i := range 20 {
			doc := map[string]any{"id": fmt.Sprint(i), "vector": []float32{float32(i), 1, 2, 3}}
			if code, body := call(t, ts, "POST", "/v1/indexes/c/documents", "secret", map[string]any{"documents": []any{doc}}); code != 200 {
				t.Fatalf("add %d: %d %s", i, code, body)
			}
		}
		srv.WaitMaintenance()
		var in serve.InfoBody
		if code, body := call(t, ts, "GET", "/v1/indexes/c", "", nil); code != 200 || json.Unmarshal(body, &in) != nil || in.Live != 20 {
			t.Fatalf("info: %d %s", code, body)
		}
		return in.Segments
	}
	with, without := segments(true), segments(false)
	if with >= without {
		t.Errorf("20 single adds left %d segments with maintenance, %d without", with, without)
	}
	t.Logf("20 single adds, merge factor 2: %d segments with maintenance, %d without", with, without)
}

// Every route the server answers is in openapi.json, and every path
// there is a route.
func TestServeOpenAPICoversRoutes(t *testing.T) {
	srv, err := serve.New(nil, serve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	code, body := call(t, ts, "GET", "/openapi.json", "", nil)
	var doc struct {
		Paths map[string]map[string]any
	}
	if code != 200 || json.Unmarshal(body, &doc) != nil {
		t.Fatalf("openapi.json: %d", code)
	}
	routes := map[string]bool{}
	for _, r := range srv.Routes() {
		routes[r] = true
		method, path, _ := strings.Cut(r, " ")
		if doc.Paths[path][strings.ToLower(method)] == nil {
			t.Errorf("openapi.json does not describe %s", r)
		}
	}
	for path, ops := range doc.Paths {
		for op := range ops {
			if op == "parameters" || !strings.HasPrefix(path, "/v1/") {
				continue
			}
			if r := strings.ToUpper(op) + " " + path; !routes[r] {
				t.Errorf("openapi.json describes %s, which the server does not answer", r)
			}
		}
	}
}
