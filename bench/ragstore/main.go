// Command ragstore measures vlc's store used the way a RAG service uses
// it (a collection created empty, documents written one at a time or in
// batches of 100, through the library and over HTTP, filtered searches),
// and LanceDB beside it on the same data and cores. It prints one JSON
// line per measurement and writes the tables to docs/bench/ragstore.md.
//
//	taskset -c 0,1 go run ./bench/ragstore -n 100000
//	go run ./bench/ragstore -summarize /tmp/ragstore/results.jsonl
//
// bench/ragstore/README.md describes the data, each part and its rows.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// config is the command line.
type config struct {
	N        int
	Dir      string
	Base     string
	Query    string
	Queries  int
	Seed     uint64
	Noise    float64
	Sample   int
	Passes   int
	Parts    string
	HTTPN    int
	UpsertN  int
	Create   string
	Lance    bool
	LanceN   int
	LanceQ   int
	NPM      string
	Cores    string
	MD       string
	PNG      string
	Command  string
	NodeArgs string
}

func main() {
	var c config
	flag.IntVar(&c.N, "n", 100000, "documents (a multiple of 1000, so that every filter's share is exact)")
	flag.StringVar(&c.Dir, "dir", "/tmp/ragstore", "folder of the cached data, ground truth, stores and results")
	flag.StringVar(&c.Base, "base", "testdata/deep10k/base.f16", "base vectors the documents are made from (float16, -dim 96)")
	flag.StringVar(&c.Query, "query", "testdata/deep10k/query.fvecs", "query vectors")
	flag.IntVar(&c.Queries, "queries", 0, "queries used (0: all of -query)")
	flag.Uint64Var(&c.Seed, "seed", 31, "seed of the noise and the payloads")
	flag.Float64Var(&c.Noise, "noise", 0.5, "norm of each copy's gaussian noise, over the base's median nearest-neighbour distance")
	flag.IntVar(&c.Sample, "sample", 1000, "adds between samples of the segments and bytes")
	flag.IntVar(&c.Passes, "passes", 3, "passes over the queries for each latency (after one warm-up pass)")
	flag.StringVar(&c.Parts, "parts", "single,batch,http", "vlc parts to run: single (one add a call), batch (100 a call), http (one add a POST)")
	flag.IntVar(&c.HTTPN, "http-n", 0, "documents added over HTTP (0: -n)")
	flag.IntVar(&c.UpsertN, "upsert-n", 1000, "documents upserted (single, then in batches of 100) and deleted on the batch store")
	flag.StringVar(&c.Create, "create", "auto", "how a vlc collection starts: create (vlc.Create), build1 (vlc.Build from the first document), auto (create, else build1)")
	flag.BoolVar(&c.Lance, "lance", true, "run LanceDB beside vlc (needs bench/ragstore/install.sh)")
	flag.IntVar(&c.LanceN, "lance-single-n", 5000, "LanceDB single adds measured (0: -n); the rest go in one add, not timed (each add keeps a version: 5,000 took 1 GB of disk)")
	flag.IntVar(&c.LanceQ, "lance-grown-queries", 20, "queries LanceDB's tables answer before optimize (each scans every fragment)")
	flag.StringVar(&c.NPM, "npm", "/tmp/ragstore-npm", "folder LanceDB is installed in (bench/ragstore/install.sh)")
	flag.StringVar(&c.Cores, "cores", "0,1", "cores LanceDB is pinned to (taskset -c); run this command under the same")
	flag.StringVar(&c.MD, "md", "docs/bench/ragstore.md", "tables written here at the end ('' for none)")
	flag.StringVar(&c.PNG, "png", "docs/bench/ragstore-segments.png", "plot of segments and bytes over adds ('' for none)")
	summarize := flag.String("summarize", "", "only write -md, -png and the CSV from this results file")
	flag.Parse()
	c.Command = "go run ./bench/ragstore " + strings.Join(os.Args[1:], " ")
	if err := run(c, *summarize); err != nil {
		fmt.Fprintln(os.Stderr, "ragstore:", err)
		os.Exit(1)
	}
}

func run(c config, summarize string) error {
	if summarize != "" {
		rows, err := readResults(summarize)
		if err != nil {
			return err
		}
		return report(c, rows)
	}
	switch {
	case c.N < 1000 || c.N%1000 != 0:
		return fmt.Errorf("-n %d: want a multiple of 1000 (each value of n is then held by exactly -n/1000 documents)", c.N)
	case c.Sample < 1:
		return fmt.Errorf("-sample %d: want at least 1", c.Sample)
	case c.Passes < 1:
		return fmt.Errorf("-passes %d: want at least 1", c.Passes)
	case c.Create != "auto" && c.Create != "create" && c.Create != "build1":
		return fmt.Errorf("-create %q: want auto, create or build1", c.Create)
	case c.UpsertN < 0 || c.UpsertN > c.N:
		return fmt.Errorf("-upsert-n %d: want 0 to -n (%d)", c.UpsertN, c.N)
	}
	if c.HTTPN == 0 || c.HTTPN > c.N {
		c.HTTPN = c.N
	}
	if !slices.Contains(prefixes(c.N), c.HTTPN) {
		return fmt.Errorf("-http-n %d: want one of %v (the sizes the ground truth is computed at)", c.HTTPN, prefixes(c.N))
	}
	if c.LanceN == 0 || c.LanceN > c.N {
		c.LanceN = c.N
	}
	for _, p := range strings.Split(c.Parts, ",") {
		if p != "single" && p != "batch" && p != "http" && p != "" {
			return fmt.Errorf("-parts: unknown part %q (single, batch, http)", p)
		}
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	resultsPath := filepath.Join(c.Dir, "results.jsonl")
	results, err := os.Create(resultsPath + ".tmp")
	if err != nil {
		return err
	}
	defer results.Close()
	b := &bench{cfg: c, ctx: context.Background(), out: io.MultiWriter(os.Stdout, results)}

	b.emit(row{"kind": "run", "command": c.Command, "machine": machine(), "gomaxprocs": runtime.GOMAXPROCS(0), "go": runtime.Version(), "started": time.Now().UTC().Format(time.RFC3339), "load": loadavg()})
	t0 := time.Now()
	want := meta{Version: metaVersion, N: c.N, Dim: 96, Base: abs(c.Base), Query: abs(c.Query), Seed: c.Seed, Noise: c.Noise, Queries: c.Queries, Prefixes: prefixes(c.N)}
	ds, cached, err := loadOrMake(filepath.Join(c.Dir, fmt.Sprintf("data-n%d", c.N)), want, b.logf)
	if err != nil {
		return err
	}
	b.ds = ds
	b.emit(row{"kind": "data", "n": ds.Meta.N, "dim": ds.Meta.Dim, "queries": len(ds.Queries), "noise": ds.Meta.Noise, "sigma": ds.Meta.Sigma,
		"median_nn": ds.Meta.MedianNN, "seed": ds.Meta.Seed, "cached": cached, "seconds": secs(time.Since(t0)), "folder": filepath.Join(c.Dir, fmt.Sprintf("data-n%d", c.N))})

	for _, p := range strings.Split(c.Parts, ",") {
		var err error
		switch p {
		case "single":
			err = b.library("single", 1)
		case "batch":
			err = b.library("batch100", 100)
		case "http":
			err = b.overHTTP()
		}
		if err != nil {
			return fmt.Errorf("vlc %s: %w", p, err)
		}
	}
	if c.Lance {
		if err := b.lance(); err != nil {
			return fmt.Errorf("lancedb: %w", err)
		}
	}
	b.emit(row{"kind": "done", "seconds": secs(time.Since(t0)), "load": loadavg()})
	if err := results.Close(); err != nil {
		return err
	}
	if err := os.Rename(resultsPath+".tmp", resultsPath); err != nil {
		return err
	}
	b.logf("results in %s", resultsPath)
	return report(c, b.rows)
}

// row is one measurement, printed as a JSON line.
type row map[string]any

type bench struct {
	cfg  config
	ctx  context.Context
	ds   *dataset
	out  io.Writer
	rows []row
}

func (b *bench) emit(r row) {
	line, err := json.Marshal(r)
	if err != nil {
		panic(err) // rows hold only numbers, strings and slices of them
	}
	b.out.Write(append(line, '\n'))
	// keep the row as read back from JSON, as -summarize sees it
	var back row
	json.Unmarshal(line, &back)
	b.rows = append(b.rows, back)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[ragstore] "+format+"\n", args...)
}

// skip records a part not measured, and why.
func (b *bench) skip(system, part string, err error) {
	b.logf("%s %s: skipped: %v", system, part, err)
	b.emit(row{"kind": "skip", "system": system, "part": part, "reason": err.Error()})
}

func readResults(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, line, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no results", path)
	}
	return rows, nil
}

// machine describes this computer: CPU model and count, memory.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB memory", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%d cores (%s)%s, %s/%s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH)
}

// loadavg is the 1, 5 and 15 minute load averages: other work on the
// machine's cores during a run shows in its timings.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func secs(d time.Duration) float64 { return round(d.Seconds(), 3) }

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

var errNoNode = errors.New("LanceDB is not installed")
