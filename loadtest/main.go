// Command loadtest measures vlc serve on loopback against the same
// searches made in process: it opens an index, serves it (package serve)
// on 127.0.0.1 in this process, and attacks it with vegeta (as a library)
// from a fixed number of concurrent clients for a bounded time, with one
// query a request and with batches, alone and with a writer adding and
// deleting all the while. It prints QPS, latency percentiles, errors, and
// the ratio to the in-process SearchBatch QPS at the same nprobe (what
// `vlc eval` measures).
//
// It is its own module so that the core module does not depend on vegeta:
//
//	cd loadtest && go run . -index x.vlc -query q.fvecs -nprobe 8 -clients 32 -duration 30s
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/serve"
	"github.com/vlc-embed/vlc/vecfile"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run() error {
	indexPath := flag.String("index", "", "index file (a copy in a temporary folder is served: the writer changes it)")
	queryPath := flag.String("query", "", "query vectors (.fvecs, .npy, .f16 with -dim)")
	nprobe := flag.Int("nprobe", 8, "lists a query scans")
	k := flag.Int("k", 10, "hits a query")
	clients := flag.Int("clients", 32, "concurrent clients")
	duration := flag.Duration("duration", 30*time.Second, "length of each attack")
	batch := flag.Int("batch", 100, "queries a request in the batch attack")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the attacks (server and load generator: one process) to `file`")
	only := flag.String("only", "", "run only the attacks whose name holds this text")
	backend := flag.String("backend", "cpu", "where the server and the in-process search run: cpu, or a GPU backend (cuda, webgpu, auto) holding the index")
	f32 := flag.Bool("f32", false, "send batches as vectors_f32 (base64 float32) rather than JSON numbers")
	flag.Parse()
	if *indexPath == "" || *queryPath == "" {
		return errors.New("-index and -query are required")
	}
	// The writer changes what it serves: serve a copy.
	tmp, err := os.MkdirTemp("", "vlc-loadtest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	served := filepath.Join(tmp, filepath.Base(*indexPath))
	if err := copyFile(*indexPath, served); err != nil {
		return err
	}
	sd, err := vlc.OpenSearchDevice(*backend, "", vlc.SpreadLists)
	if err != nil {
		return err
	}
	defer sd.Close()
	ix, err := vlc.OpenWith(served, vlc.OpenOptions{Device: sd.Searcher})
	if err != nil {
		return err
	}
	defer ix.Close()
	fmt.Printf("searching on %s\n", sd.Name)
	qm, err := vecfile.Open(*queryPath, vecfile.Options{Dim: ix.Dim()})
	if err != nil {
		return err
	}
	defer qm.Close()
	queries := make([][]float32, qm.Len())
	for i := range queries {
		queries[i] = qm.Row(i, nil)
	}
	opt := vlc.SearchOptions{K: *k, NProbe: *nprobe}

	// In process: SearchBatch over all queries, repeated for at least 3 s.
	var searched int
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		if _, err := ix.SearchBatch(context.Background(), queries, opt); err != nil {
			return err
		}
		searched += len(queries)
	}
	inProcess := float64(searched) / time.Since(start).Seconds()
	fmt.Printf("in process: SearchBatch of %d queries, nprobe %d, k %d: %.0f QPS\n", len(queries), *nprobe, *k, inProcess)

	srv, err := serve.New(map[string]*vlc.Store{"x": ix}, serve.Config{Token: "load"})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	url := "http://" + ln.Addr().String()

	bodies := func(per int) [][]byte {
		var out [][]byte
		for lo := 0; lo < len(queries); lo += per {
			var b []byte
			if per == 1 {
				b, _ = json.Marshal(map[string]any{"vector": queries[lo], "k": *k, "nprobe": *nprobe, "payloads": false})
			} else if *f32 {
				var raw []byte
				for _, q := range queries[lo:min(lo+per, len(queries))] {
					for _, x := range q {
						raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
					}
				}
				b, _ = json.Marshal(map[string]any{"vectors_f32": raw, "k": *k, "nprobe": *nprobe, "payloads": false})
			} else {
				b, _ = json.Marshal(map[string]any{"vectors": queries[lo:min(lo+per, len(queries))], "k": *k, "nprobe": *nprobe, "payloads": false})
			}
			out = append(out, b)
		}
		return out
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, w := range []bool{false, true} {
		for _, per := range []int{1, *batch} {
			name := fmt.Sprintf("%d clients, %d queries a request", *clients, per)
			if per > 1 && *f32 {
				name += " (vectors_f32)"
			}
			var stopWriter func() (writes, snapshotErrs int, err error)
			if w {
				name += ", a writer adding and deleting"
			}
			if !strings.Contains(name, *only) {
				continue
			}
			if w {
				stopWriter = writer(url, queries, *k, *nprobe)
			}
			m := attack(url+"/v1/indexes/x/search", bodies(per), *clients, *duration)
			qps := m.Throughput * float64(per)
			fmt.Printf("%s: %d requests, %.4f success, %d errors, %.0f QPS (%.0f%% of in process), latency p50 %v p99 %v max %v\n",
				name, m.Requests, m.Success, len(m.Errors), qps, 100*qps/inProcess, m.Latencies.P50, m.Latencies.P99, m.Latencies.Max)
			for _, e := range m.Errors {
				fmt.Println("  error:", e)
			}
			if stopWriter != nil {
				writes, torn, err := stopWriter()
				fmt.Printf("  writer: %d adds and deletes, %d searches saw half a write, error %v\n", writes, torn, err)
			}
		}
	}
	return nil
}

func attack(url string, bodies [][]byte, clients int, d time.Duration) vegeta.Metrics {
	var next atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		i := next.Add(1) - 1
		*t = vegeta.Target{Method: "POST", URL: url, Body: bodies[i%uint64(len(bodies))],
			Header: http.Header{"Content-Type": {"application/json"}}}
		return nil
	}
	atk := vegeta.NewAttacker(vegeta.Workers(uint64(clients)), vegeta.MaxWorkers(uint64(clients)), vegeta.Connections(clients), vegeta.KeepAlive(true))
	var m vegeta.Metrics
	for res := range atk.Attack(targeter, vegeta.Rate{Freq: 0, Per: time.Second}, d, "search") {
		m.Add(res)
	}
	m.Close()
	return m
}

// writer adds pairs of documents (two ids, one vector) in one request and
// deletes them in one request, over and over, while a checker searches
// for the pair's vector: a search must see both or neither (a whole
// snapshot). It returns a function that stops it and reports.
func writer(url string, queries [][]float32, k, nprobe int) func() (int, int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writes, torn atomic.Int64
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	post := func(path string, body any) ([]byte, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, "POST", url+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer load")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(resp.Body)
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %d %s", path, resp.StatusCode, out.Bytes())
		}
		return out.Bytes(), nil
	}
	// The pair's vector: a query moved off its neighbours, so that the
	// pair is its nearest and both come back in the top k.
	v := append([]float32(nil), queries[0]...)
	for j := range v {
		v[j] *= 1.0001
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			a, b := fmt.Sprintf("w%d-a", i), fmt.Sprintf("w%d-b", i)
			if _, err := post("/v1/indexes/x/documents", map[string]any{"documents": []any{map[string]any{"id": a, "vector": v}, map[string]any{"id": b, "vector": v}}}); err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				return
			}
			if _, err := post("/v1/indexes/x/delete", map[string]any{"ids": []string{a, b}}); err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				return
			}
			writes.Add(2)
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			out, err := post("/v1/indexes/x/search", map[string]any{"vector": v, "k": k, "nprobe": nprobe, "payloads": false})
			if err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				return
			}
			var r struct{ Hits []struct{ ID string } }
			json.Unmarshal(out, &r)
			pairs := map[string]int{}
			for _, h := range r.Hits {
				if len(h.ID) > 2 && h.ID[0] == 'w' {
					pairs[h.ID[:len(h.ID)-2]]++
				}
			}
			for _, n := range pairs {
				if n != 2 {
					torn.Add(1)
				}
			}
		}
	}()
	return func() (int, int, error) {
		cancel()
		wg.Wait()
		return int(writes.Load()), int(torn.Load()), firstErr
	}
}

// copyFile copies an index file (not a store with segments).
func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if _, err := os.Stat(from + ".d"); err == nil {
		return fmt.Errorf("%s is a store with segments: give an index file (vlc compact it first)", from)
	}
	return os.WriteFile(to, b, 0o644)
}
