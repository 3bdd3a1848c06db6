package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/serve"
)

// TestServeRefusesZeroVectorUnderCosine: a zero query or document sent to
// a cosine index is the client's error, 400 with the library's message
// (naming the query of a batch, the document of an add), not a 500.
func TestServeRefusesZeroVectorUnderCosine(t *testing.T) {
	const n, d = 200, 8
	rng := rand.New(rand.NewPCG(1, 2))
	docs := make([]vlc.Document, n)
	for i := range docs {
		v := make([]float32, d)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		docs[i] = vlc.Document{ID: fmt.Sprintf("doc-%d", i), Vector: v}
	}
	ix, err := vlc.Build(context.Background(), filepath.Join(t.TempDir(), "cos.vlc"), docs, vlc.Options{Metric: "cosine", Anchors: 4, Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	srv, err := serve.New(map[string]*vlc.Store{"cos": ix}, serve.Config{Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	zero, q := make([]float32, d), docs[0].Vector
	for _, c := range []struct {
		name, path, token string
		body              any
		want              []string
	}{
		{"search", "/v1/indexes/cos/search", "", map[string]any{"vector": zero}, []string{"zero vector", "every value of the query is 0"}},
		{"batch search", "/v1/indexes/cos/search", "", map[string]any{"vectors": [][]float32{q, zero}}, []string{"query 1", "zero vector"}},
		{"add", "/v1/indexes/cos/documents", "secret", map[string]any{"documents": []any{map[string]any{"id": "blank", "vector": zero}}}, []string{`document 0 ("blank")`, "every value is 0"}},
	} {
		code, body := call(t, ts, "POST", c.path, c.token, c.body)
		var e struct{ Error string }
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("%s: error body is not JSON: %s", c.name, body)
		}
		if code != 400 {
			t.Errorf("%s: status %d (%s), want 400", c.name, code, body)
		}
		for _, w := range c.want {
			if !strings.Contains(e.Error, w) {
				t.Errorf("%s: %q does not say %q", c.name, e.Error, w)
			}
		}
	}
	if code, body := call(t, ts, "POST", "/v1/indexes/cos/search", "", map[string]any{"vector": q, "k": 3}); code != 200 {
		t.Errorf("a query that is not zero: %d %s", code, body)
	}
}
