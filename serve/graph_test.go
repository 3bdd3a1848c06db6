package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/serve"
	"github.com/vlc-embed/vlc/vecfile"
)

// A search request's ef reaches the store: on an index whose file holds
// a graph, "ef": 8 gives the library's walk at width 8 and "ef": -1 its
// search of the lists, which differ.
func TestServeGraphEf(t *testing.T) {
	ctx := context.Background()
	base, err := vecfile.Open(deep+"base.f16", vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	n := 600
	docs := make([]vlc.Document, n)
	for i := range docs {
		docs[i] = vlc.Document{ID: fmt.Sprintf("doc-%d", i), Vector: base.Row(i, nil)}
	}
	path := filepath.Join(t.TempDir(), "g.vlc")
	st, err := vlc.Build(ctx, path, docs, vlc.Options{Bits: 4, Code: "rotated", Backend: "cpu", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	ix, err := index.Open(path, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = docs[i].Vector
	}
	g, err := graph.Build(ctx, ix, matrix(rows), graph.BuildOptions{Degree: 8})
	if err == nil {
		err = graph.WriteFile(ctx, path, ix, g)
	}
	ix.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st, err = vlc.Open(path); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := serve.New(map[string]*vlc.Store{"g": st}, serve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	q := base.Row(n+1, nil)
	var got [2][]vlc.Hit
	for i, ef := range []int{8, -1} {
		want, err := st.Search(ctx, q, vlc.SearchOptions{K: 5, Ef: ef})
		if err != nil {
			t.Fatal(err)
		}
		code, body := serveCall(t, srv, map[string]any{"vector": q, "k": 5, "ef": ef, "payloads": false})
		var r serve.SearchResponse
		if code != 200 || json.Unmarshal(body, &r) != nil || len(r.Hits) != len(want) {
			t.Fatalf("ef %d: %d %s", ef, code, body)
		}
		for k, h := range r.Hits {
			if h.ID != want[k].ID || h.Distance != want[k].Distance {
				t.Fatalf("ef %d, hit %d: %+v, the library's %+v", ef, k, h, want[k])
			}
		}
		got[i] = want
	}
	if reflect.DeepEqual(got[0], got[1]) {
		t.Fatalf("the walk and the lists gave the same hits %v: this test cannot tell whether ef reached the store", got[0])
	}
}

// matrix presents rows as index.Rows.
type matrix [][]float32

func (m matrix) Len() int                           { return len(m) }
func (m matrix) Dim() int                           { return len(m[0]) }
func (m matrix) Row(i int, dst []float32) []float32 { return append(dst[:0], m[i]...) }

// serveCall posts body to srv's search of index g.
func serveCall(t *testing.T, srv http.Handler, body any) (int, []byte) {
	t.Helper()
	j, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/indexes/g/search", bytes.NewReader(j)))
	return rec.Code, rec.Body.Bytes()
}
