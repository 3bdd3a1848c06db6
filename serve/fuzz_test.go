package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/serve"
)

// FuzzHandlers sends any body to every JSON endpoint, with and without
// the token. The server must answer each with 2xx or 4xx (a panic is
// answered 500 and fails here), with a JSON body, and keep answering.
func FuzzHandlers(f *testing.F) {
	const n, d = 300, 8
	rng := rand.New(rand.NewPCG(1, 2))
	docs := make([]vlc.Document, n)
	for i := range docs {
		v := make([]float32, d)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		docs[i] = vlc.Document{ID: fmt.Sprintf("d%d", i), Vector: v, Payload: []byte(fmt.Sprintf(`{"g":%d}`, i%4))}
	}
	ix, err := vlc.Build(context.Background(), filepath.Join(f.TempDir(), "f.vlc"), docs, vlc.Options{Bits: 4, Anchors: 4, Backend: "cpu", Seed: 1})
	if err != nil {
		f.Fatal(err)
	}
	defer ix.Close()
	srv, err := serve.New(map[string]*vlc.Store{"f": ix}, serve.Config{Token: "t", Limits: serve.Limits{BodyBytes: 1 << 16, K: 50, Batch: 20}})
	if err != nil {
		f.Fatal(err)
	}
	endpoints := []struct{ method, path string }{
		{"POST", "/v1/indexes/f/search"}, {"POST", "/v1/indexes/f/documents"}, {"POST", "/v1/indexes/f/delete"},
		{"GET", "/v1/indexes/f/documents/d1"}, {"POST", "/v1/indexes/x/search"},
	}
	f.Add(uint8(0), true, []byte(`{"vector":[1,2,3,4,5,6,7,8],"k":3,"nprobe":2}`))
	f.Add(uint8(0), false, []byte(`{"vectors":[[1,2,3,4,5,6,7,8],[0,0,0,0,0,0,0,1e-40]],"filter":{"where":{"g":1}}}`))
	f.Add(uint8(0), false, []byte(`{"vector":[1,2,3,4,5,6,7,8],"filter":{"ids":["d1","d2","zz"]},"payloads":false}`))
	f.Add(uint8(1), true, []byte(`{"documents":[{"id":"n1","vector":[1,2,3,4,5,6,7,8],"payload":{"a":[1,2]}}]}`))
	f.Add(uint8(1), true, []byte(`{"documents":[{"vector":[1,2,3,4,5,6,7,8],"payload_base64":"AAEC"}]}`))
	f.Add(uint8(2), true, []byte(`{"ids":["d3","nope"]}`))
	f.Add(uint8(3), false, []byte(``))
	f.Fuzz(func(t *testing.T, which uint8, token bool, body []byte) {
		e := endpoints[int(which)%len(endpoints)]
		req := httptest.NewRequest(e.method, e.path, bytes.NewReader(body))
		if token {
			req.Header.Set("Authorization", "Bearer t")
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 || rec.Code < 200 {
			t.Fatalf("%s %s %q: %d %s", e.method, e.path, body, rec.Code, rec.Body)
		}
		if rec.Code != http.StatusOK && !bytes.HasPrefix(rec.Body.Bytes(), []byte(`{"error":`)) {
			t.Fatalf("%s %s: %d with body %s", e.method, e.path, rec.Code, rec.Body)
		}
	})
}
