package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/serve"
	"github.com/vlc-embed/vlc/vecfile"
)

// An index opened on a device (the reference) is searched there over
// HTTP: the hits are the CPU's ids, and /metrics shows the device memory
// it holds and the batch sizes searched.
func TestServeOnDevice(t *testing.T) {
	ctx := context.Background()
	base, err := vecfile.Open(deep+"base.f16", vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	docs := make([]vlc.Document, 1000)
	for i := range docs {
		docs[i] = vlc.Document{ID: fmt.Sprintf("doc-%d", i), Vector: base.Row(i, nil)}
	}
	path := filepath.Join(t.TempDir(), "d.vlc")
	b, err := vlc.Build(ctx, path, docs, vlc.Options{Code: "rotated", Bits: 8, Backend: "cpu", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	cpu, err := vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	ix, err := vlc.OpenWith(path, vlc.OpenOptions{Manual: true, Device: devicetest.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	srv, err := serve.New(map[string]*vlc.Store{"d": ix}, serve.Config{Device: devicetest.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	queries := [][]float32{base.Row(5000, nil), base.Row(5001, nil), base.Row(5002, nil)}
	want, err := cpu.SearchBatch(ctx, queries, vlc.SearchOptions{K: 3, NProbe: 8})
	if err != nil {
		t.Fatal(err)
	}
	code, body := call(t, ts, "POST", "/v1/indexes/d/search", "", map[string]any{"vectors": queries, "k": 3, "nprobe": 8})
	var got struct{ Results [][]serve.HitBody }
	if code != 200 || json.Unmarshal(body, &got) != nil || len(got.Results) != 3 {
		t.Fatalf("search: %d %s", code, body)
	}
	for i := range want {
		for r := range want[i] {
			if got.Results[i][r].ID != want[i][r].ID {
				t.Errorf("query %d rank %d: %s, cpu %s", i, r, got.Results[i][r].ID, want[i][r].ID)
			}
		}
	}
	code, body = call(t, ts, "GET", "/metrics", "", nil)
	text := string(body)
	if m := regexp.MustCompile(`vlc_index_device_bytes\{index="d"\} (\S+)`).FindStringSubmatch(text); code != 200 || m == nil || m[1] == "0" || strings.HasPrefix(m[1], "-") {
		t.Errorf("metrics: device bytes %v, want above 0", m)
	}
	if !strings.Contains(text, `vlc_device_batch_queries_bucket{le="4"} 1`) || !strings.Contains(text, "vlc_device_batch_queries_count 1") {
		t.Errorf("metrics lack the batch of 3 queries:\n%s", grepLines(text, "vlc_device_batch"))
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
