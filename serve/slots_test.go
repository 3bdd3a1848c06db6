package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/serve"
)

// searchJSON is a search body for q, after pad bytes of leading
// whitespace (which JSON allows) for a slow client to dribble.
func searchJSON(q []float32, pad int) []byte {
	j, _ := json.Marshal(map[string]any{"vector": q, "k": 3})
	return append([]byte(strings.Repeat(" ", pad)), j...)
}

// slowEnd is how a slow client's search ended.
type slowEnd struct {
	allIn  bool // it dribbled its whole padding before it was told to stop
	status int
	body   string
	err    error
}

// slowSearch posts body to path on addr as a slow client does: the
// headers (with X-Slow, which the test's handler reports), then pad bytes
// of the body 4 at a time every 100 ms until stop is closed, then the
// rest at once; chunked sends it without a Content-Length.
func slowSearch(addr, path string, body []byte, pad int, chunked bool, stop <-chan struct{}, done chan<- slowEnd) {
	end := slowEnd{}
	defer func() { done <- end }()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		end.err = err
		return
	}
	defer conn.Close()
	send := func(b []byte) error {
		if chunked {
			_, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(b), b)
			return err
		}
		_, err := conn.Write(b)
		return err
	}
	length := "Content-Length: " + strconv.Itoa(len(body))
	if chunked {
		length = "Transfer-Encoding: chunked"
	}
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\nContent-Type: application/json\r\n%s\r\n\r\n", path, length); err != nil {
		end.err = err
		return
	}
	sent := 0
dribble:
	for sent < pad {
		select {
		case <-stop:
			break dribble
		case <-time.After(100 * time.Millisecond):
		}
		if end.err = send(body[sent : sent+4]); end.err != nil {
			return
		}
		sent += 4
	}
	end.allIn = sent >= pad
	if end.err = send(body[sent:]); end.err != nil {
		return
	}
	if chunked {
		if _, end.err = io.WriteString(conn, "0\r\n\r\n"); end.err != nil {
			return
		}
	}
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		end.err = err
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	end.status, end.body = resp.StatusCode, string(b)
}

// Clients that send their bodies slowly do not hold the requests answered
// at once (Limits.InFlight): with every slot's worth of them dribbling
// (two with a Content-Length, one chunked, for two slots), a plain search
// is answered while they are still sending, and they are answered once
// their bodies are in. The server's ReadTimeout is the request timeout,
// as in vlc serve.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	ix, base := fixtureIndex(t)
	srv, err := serve.New(map[string]*vlc.Store{"deep": ix}, serve.Config{Limits: serve.Limits{InFlight: 2}})
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 16)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Slow") != "" {
			entered <- struct{}{} // its headers are in: the handler runs
		}
		srv.ServeHTTP(w, r)
	}))
	ts.Config.ReadTimeout = serve.DefaultLimits.Timeout
	ts.Start()
	defer ts.Close()

	const pad = 400 // 10 s at 4 bytes every 100 ms
	stop := make(chan struct{})
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
		}
	}()
	done := make(chan slowEnd, 3)
	for i, chunked := range []bool{false, false, true} {
		go slowSearch(ts.Listener.Addr().String(), "/v1/indexes/deep/search", searchJSON(base.Row(i, nil), pad), pad, chunked, stop, done)
	}
	for range 3 {
		select {
		case <-entered:
		case <-time.After(20 * time.Second):
			t.Fatal("the slow clients' requests did not reach the handler")
		}
	}

	start := time.Now()
	code, body := call(t, ts, "POST", "/v1/indexes/deep/search", "", map[string]any{"vector": base.Row(7, nil), "k": 3})
	waited := time.Since(start)
	close(stop)
	stopped = true
	var r serve.SearchResponse
	if code != 200 || json.Unmarshal(body, &r) != nil || len(r.Hits) != 3 || r.Hits[0].ID != "doc-7" {
		t.Errorf("the plain search: %d %s", code, body)
	}
	allIn := 0
	for range 3 {
		end := <-done
		if end.allIn {
			allIn++
		}
		if end.err != nil || end.status != 200 || !strings.Contains(end.body, `"hits"`) {
			t.Errorf("a slow client, once its body was in: %d %q %v", end.status, end.body, end.err)
		}
	}
	if allIn > 0 {
		t.Errorf("the plain search was answered (after %v) only once %d of the 3 slow clients had sent their whole bodies: slow bodies hold the request slots", waited.Round(time.Millisecond), allIn)
	}
	t.Logf("the plain search waited %v", waited.Round(time.Millisecond))
}

// metric reads one unlabelled sample from /metrics.
func metric(t *testing.T, ts *httptest.Server, name string) float64 {
	t.Helper()
	code, body := call(t, ts, "GET", "/metrics", "", nil)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
	if code != 200 || m == nil {
		t.Fatalf("/metrics: %d, no %s", code, name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Bodies being read hold memory only under Limits.BodyMemory: while one
// client's declared body takes the whole budget, another request waits
// for it (503 "server busy" if its deadline comes first) and goes on
// once the first is answered; a chunked body is bounded by BodyBytes as
// one with a Content-Length is; the budget is all given back.
func TestBodyMemoryBounded(t *testing.T) {
	const limit = 64 << 10
	ix, base := fixtureIndex(t)
	srv, err := serve.New(map[string]*vlc.Store{"deep": ix}, serve.Config{Limits: serve.Limits{BodyBytes: limit, BodyMemory: limit}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ReadTimeout = serve.DefaultLimits.Timeout
	ts.Start()
	defer ts.Close()
	if got := metric(t, ts, "vlc_request_body_bytes"); got != 0 {
		t.Fatalf("body bytes held by an idle server: %v", got)
	}

	// A slow client declares a body of the whole budget.
	q := base.Row(3, nil)
	j := searchJSON(q, 0)
	big := searchJSON(q, limit-len(j))
	stop := make(chan struct{})
	done := make(chan slowEnd, 1)
	go slowSearch(ts.Listener.Addr().String(), "/v1/indexes/deep/search", big, limit-len(j), false, stop, done)
	for deadline := time.Now().Add(20 * time.Second); metric(t, ts, "vlc_request_body_bytes") != limit; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			t.Fatal("the slow client's body did not take the budget")
		}
	}

	// Another request waits for the budget: until its deadline, 503.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req := httptest.NewRequest("POST", "/v1/indexes/deep/search", strings.NewReader(string(j))).WithContext(ctx)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "server busy") {
		t.Errorf("a search while the budget is taken, its deadline passing: %d %s, want 503 server busy", rec.Code, rec.Body)
	}
	// Or, with time enough, until the budget is given back.
	answered := make(chan string, 1)
	go func() {
		resp, err := ts.Client().Post(ts.URL+"/v1/indexes/deep/search", "application/json", strings.NewReader(string(j)))
		if err != nil {
			answered <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- fmt.Sprint(resp.StatusCode, " ", string(b))
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case a := <-answered:
		t.Errorf("a search was read while another's body held the whole budget: %s", a)
	default:
	}
	close(stop)
	if end := <-done; end.err != nil || end.status != 200 {
		t.Errorf("the slow client: %d %s %v", end.status, end.body, end.err)
	}
	if a := <-answered; !strings.HasPrefix(a, "200 ") {
		t.Errorf("the waiting search: %s", a)
	}

	// A chunked body (the client sends a reader of unknown length so)
	// over the limit is cut off at it.
	resp, err := ts.Client().Post(ts.URL+"/v1/indexes/deep/search", "application/json",
		io.MultiReader(strings.NewReader(`{"vector": [`), strings.NewReader(strings.Repeat("0,", limit))))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), fmt.Sprintf("over the limit of %d bytes", limit)) {
		t.Errorf("a chunked body over the limit: %d %s", resp.StatusCode, b)
	}
	if got := metric(t, ts, "vlc_request_body_bytes"); got != 0 {
		t.Errorf("body bytes held once every request is answered: %v", got)
	}
}

// A body that never finishes is cut off at the request's timeout even
// when the http.Server has no ReadTimeout: 408, and the server goes on.
func TestUnfinishedBodyCutOffAtTimeout(t *testing.T) {
	ix, _ := fixtureIndex(t)
	srv, err := serve.New(map[string]*vlc.Store{"deep": ix}, serve.Config{Limits: serve.Limits{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv) // no ReadTimeout
	defer ts.Close()
	for _, length := range []string{"Content-Length: 1000", "Transfer-Encoding: chunked"} {
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		first := `{"vector": [`
		if strings.Contains(length, "chunked") {
			first = fmt.Sprintf("%x\r\n%s\r\n", len(first), first)
		}
		fmt.Fprintf(conn, "POST /v1/indexes/deep/search HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n%s", length, first)
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s, a body never finished: %v", length, err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 408 || !strings.Contains(string(b), "request body not received in time") {
			t.Errorf("%s, a body never finished: %d %s", length, resp.StatusCode, b)
		}
	}
	if code, _ := call(t, ts, "GET", "/healthz", "", nil); code != 200 {
		t.Fatalf("after bodies never finished the server does not answer: %d", code)
	}
}
