package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/vecfile"
)

// dataset is the generated collection, its queries and its exact ground
// truth, as cached under the data folder.
type dataset struct {
	Meta     meta
	Docs     [][]float32 // row i is document "i", float16-rounded as stored
	Payloads [][]byte    // JSON {"cat": ..., "n": ...} of each document
	Cats     []string
	Ns       []int
	Queries  [][]float32
	// Truth holds the exact top-10 row numbers of each query, by set:
	// "prefix-1000" (the first 1,000 documents) ... and "filter-cat-c1" ...
	Truth map[string][][]int32
}

// meta is what the cache was made with; a cache made otherwise is rebuilt.
type meta struct {
	Version  int     `json:"version"`
	N        int     `json:"n"`
	Dim      int     `json:"dim"`
	Base     string  `json:"base"`
	Query    string  `json:"query"`
	Seed     uint64  `json:"seed"`
	Noise    float64 `json:"noise"`     // noise norm over the median nearest-neighbour distance
	Sigma    float64 `json:"sigma"`     // per-value standard deviation of the noise
	MedianNN float64 `json:"median_nn"` // of the base, over a sample of its rows
	Queries  int     `json:"queries"`
	Prefixes []int   `json:"prefixes"`
}

const metaVersion = 1

// filterSpec is one filter of the benchmark in each system's syntax,
// and the predicate the ground truth is computed with.
type filterSpec struct {
	Name  string // "cat=c1", "n<10"
	Field string
	Share float64 // the fraction of documents it matches, exactly
	JSON  string  // vlc.ParseFilter's syntax
	SQL   string  // LanceDB's where
	match func(cat string, n int) bool
}

var filters = []filterSpec{
	{"cat=c1", "cat", 0.01, `{"cat": "c1"}`, `cat = 'c1'`, func(c string, _ int) bool { return c == "c1" }},
	{"cat=c10", "cat", 0.10, `{"cat": "c10"}`, `cat = 'c10'`, func(c string, _ int) bool { return c == "c10" }},
	{"cat=c50", "cat", 0.50, `{"cat": "c50"}`, `cat = 'c50'`, func(c string, _ int) bool { return c == "c50" }},
	{"n<10", "n", 0.01, `{"n": {"$lt": 10}}`, `n < 10`, func(_ string, n int) bool { return n < 10 }},
	{"n<100", "n", 0.10, `{"n": {"$lt": 100}}`, `n < 100`, func(_ string, n int) bool { return n < 100 }},
	{"n<500", "n", 0.50, `{"n": {"$lt": 500}}`, `n < 500`, func(_ string, n int) bool { return n < 500 }},
}

func prefixKey(p int) string        { return fmt.Sprintf("prefix-%d", p) }
func filterKey(f filterSpec) string { return "filter-" + safeName(f.Name) }

// safeName turns a filter's name into a file name part.
func safeName(s string) string {
	out := []byte(s)
	for i, c := range out {
		switch c {
		case '=':
			out[i] = '-'
		case '<':
			out[i] = 'l'
		}
	}
	return string(out)
}

// prefixes are the collection sizes recall is measured at as it grows:
// 1K, 10K, 100K (those below n) and n.
func prefixes(n int) []int {
	var ps []int
	for _, p := range []int{1000, 10000, 100000} {
		if p < n {
			ps = append(ps, p)
		}
	}
	return append(ps, n)
}

// loadOrMake returns the dataset cached in dir, or makes it there.
func loadOrMake(dir string, want meta, logf func(string, ...any)) (*dataset, bool, error) {
	if ds, err := load(dir, want); err == nil {
		return ds, true, nil
	} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, errStale) {
		logf("cache in %s unreadable (%v): making it again", dir, err)
	}
	ds, err := generate(want, logf)
	if err != nil {
		return nil, false, err
	}
	if err := ds.save(dir); err != nil {
		return nil, false, err
	}
	return ds, false, nil
}

var errStale = errors.New("cache made with other settings")

// generate makes the documents: the base's rows, Copies times over, each
// copy with its own seeded gaussian noise; payloads with exact shares;
// and the exact ground truth.
func generate(m meta, logf func(string, ...any)) (*dataset, error) {
	base, err := readRows(m.Base, m.Dim)
	if err != nil {
		return nil, err
	}
	queries, err := readRows(m.Query, m.Dim)
	if err != nil {
		return nil, err
	}
	if m.Queries > 0 && m.Queries < len(queries) {
		queries = queries[:m.Queries]
	}
	m.Queries = len(queries)
	m.MedianNN = medianNN(base, 200)
	m.Sigma = m.Noise * m.MedianNN / math.Sqrt(float64(m.Dim))
	logf("base %s: %d rows; median nearest-neighbour distance %.4f; noise sigma %.5f per value", m.Base, len(base), m.MedianNN, m.Sigma)

	rng := rand.New(rand.NewPCG(m.Seed, 1))
	docs := make([][]float32, m.N)
	for i := range docs {
		src := base[i%len(base)]
		v := make([]float32, m.Dim)
		for j := range v {
			v[j] = src[j] + float32(m.Sigma*rng.NormFloat64())
		}
		docs[i] = v
	}
	roundF16(docs)

	// Exact shares: a seeded permutation of the rows gives the first 1 %
	// "c1", the next 10 % "c10", the next 50 % "c50" and the rest "rest"
	// (disjoint); another gives n = its position mod 1000, so that each
	// value of n is held by exactly N/1000 rows.
	cats := make([]string, m.N)
	for k, i := range rng.Perm(m.N) {
		switch {
		case k < m.N/100:
			cats[i] = "c1"
		case k < m.N/100+m.N/10:
			cats[i] = "c10"
		case k < m.N/100+m.N/10+m.N/2:
			cats[i] = "c50"
		default:
			cats[i] = "rest"
		}
	}
	ns := make([]int, m.N)
	for k, i := range rng.Perm(m.N) {
		ns[i] = k % 1000
	}
	payloads := make([][]byte, m.N)
	for i := range payloads {
		payloads[i] = fmt.Appendf(nil, `{"cat":%q,"n":%d}`, cats[i], ns[i])
	}
	ds := &dataset{Meta: m, Docs: docs, Payloads: payloads, Cats: cats, Ns: ns, Queries: queries}
	ds.Truth = groundTruth(ds)
	return ds, nil
}

// roundF16 rounds every value to float16, as the .f16 cache holds it, so
// that the ground truth is over the vectors every system is given.
func roundF16(rows [][]float32) {
	for _, r := range rows {
		for j, v := range r {
			r[j] = f16Round(v)
		}
	}
}

// readRows reads a vector file (.f16 needs dim) into memory.
func readRows(path string, dim int) ([][]float32, error) {
	mx, err := vecfile.Open(path, vecfile.Options{Dim: dim})
	if err != nil {
		return nil, err
	}
	defer mx.Close()
	if mx.Dim() != dim {
		return nil, fmt.Errorf("%s: dimension %d, want %d", path, mx.Dim(), dim)
	}
	rows := make([][]float32, mx.Len())
	for i := range rows {
		rows[i] = mx.Row(i, make([]float32, dim))
	}
	return rows, nil
}

// readF16 reads raw float16 rows of dim values. vecfile.Open would
// also check the dimension by the columns' statistics, which a cache of
// few base rows repeated can fool; this file's dimension is meta.json's.
func readF16(path string, dim int) ([][]float32, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(raw)%(2*dim) != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of %d-value float16 rows", path, len(raw), dim)
	}
	rows := make([][]float32, len(raw)/(2*dim))
	for i := range rows {
		r := make([]float32, dim)
		for j := range r {
			r[j] = f16.ToFloat32(binary.LittleEndian.Uint16(raw[2*(i*dim+j):]))
		}
		rows[i] = r
	}
	return rows, nil
}

// medianNN is the median distance from each of the first sample rows to
// its nearest other row of base.
func medianNN(base [][]float32, sample int) float64 {
	sample = min(sample, len(base))
	nn := make([]float64, sample)
	for i := range nn {
		best := math.Inf(1)
		for j, r := range base {
			if j != i {
				best = min(best, dist64(base[i], r))
			}
		}
		nn[i] = math.Sqrt(best)
	}
	sort.Float64s(nn)
	return nn[len(nn)/2]
}

// dist64 is the squared l2 distance, accumulated in float64.
func dist64(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return s
}

// top10 keeps the 10 nearest rows seen, nearest first (ties: lower row).
type top10 struct {
	n    int
	dist [10]float64
	row  [10]int32
}

func (t *top10) push(d float64, row int32) {
	if t.n == 10 && d >= t.dist[9] {
		return
	}
	i := min(t.n, 9)
	if t.n < 10 {
		t.n++
	}
	for i > 0 && t.dist[i-1] > d {
		t.dist[i], t.row[i] = t.dist[i-1], t.row[i-1]
		i--
	}
	t.dist[i], t.row[i] = d, row
}

// groundTruth is the exact top-10 of every query over each prefix of the
// documents and over each filter's matching rows, by brute force in
// float64.
func groundTruth(ds *dataset) map[string][][]int32 {
	keys := []string{}
	for _, p := range ds.Meta.Prefixes {
		keys = append(keys, prefixKey(p))
	}
	for _, f := range filters {
		keys = append(keys, filterKey(f))
	}
	truth := make(map[string][][]int32, len(keys))
	for _, k := range keys {
		truth[k] = make([][]int32, len(ds.Queries))
	}
	match := make([][]bool, len(filters))
	for fi, f := range filters {
		match[fi] = make([]bool, len(ds.Docs))
		for i := range ds.Docs {
			match[fi][i] = f.match(ds.Cats[i], ds.Ns[i])
		}
	}
	var wg sync.WaitGroup
	next := make(chan int)
	var mu sync.Mutex
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			dist := make([]float64, len(ds.Docs))
			for q := range next {
				for i, d := range ds.Docs {
					dist[i] = dist64(ds.Queries[q], d)
				}
				res := map[string][]int32{}
				for _, p := range ds.Meta.Prefixes {
					var t top10
					for i := range p {
						t.push(dist[i], int32(i))
					}
					res[prefixKey(p)] = append([]int32(nil), t.row[:t.n]...)
				}
				for fi, f := range filters {
					var t top10
					for i, ok := range match[fi] {
						if ok {
							t.push(dist[i], int32(i))
						}
					}
					res[filterKey(f)] = append([]int32(nil), t.row[:t.n]...)
				}
				mu.Lock()
				for k, v := range res {
					truth[k][q] = v
				}
				mu.Unlock()
			}
		})
	}
	for q := range ds.Queries {
		next <- q
	}
	close(next)
	wg.Wait()
	return truth
}

// The cache: base.f16 (the documents, float16), payloads.jsonl (one JSON
// object a line, row order), query.fvecs, one gt-KEY.ivecs per set, and
// meta.json (written last: a cache without it is incomplete).
func (ds *dataset) save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	os.Remove(filepath.Join(dir, "meta.json"))
	if err := vecfile.WriteF16(filepath.Join(dir, "base.f16"), ds.Docs); err != nil {
		return err
	}
	var jl []byte
	for _, p := range ds.Payloads {
		jl = append(append(jl, p...), '\n')
	}
	if err := writeAtomic(filepath.Join(dir, "payloads.jsonl"), jl); err != nil {
		return err
	}
	if err := vecfile.WriteFvecs(filepath.Join(dir, "query.fvecs"), ds.Queries); err != nil {
		return err
	}
	for k, rows := range ds.Truth {
		if err := vecfile.WriteIvecs(filepath.Join(dir, "gt-"+k+".ivecs"), rows); err != nil {
			return err
		}
	}
	mb, err := json.MarshalIndent(ds.Meta, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, "meta.json"), append(mb, '\n'))
}

func load(dir string, want meta) (*dataset, error) {
	mb, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	var m meta
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "meta.json"), err)
	}
	if m.Version != want.Version || m.N != want.N || m.Dim != want.Dim || m.Base != want.Base || m.Query != want.Query ||
		m.Seed != want.Seed || m.Noise != want.Noise || m.Queries != want.Queries && want.Queries != 0 || fmt.Sprint(m.Prefixes) != fmt.Sprint(want.Prefixes) {
		return nil, errStale
	}
	ds := &dataset{Meta: m, Truth: map[string][][]int32{}}
	if ds.Docs, err = readF16(filepath.Join(dir, "base.f16"), m.Dim); err != nil {
		return nil, err
	}
	if ds.Queries, err = readRows(filepath.Join(dir, "query.fvecs"), m.Dim); err != nil {
		return nil, err
	}
	jl, err := os.ReadFile(filepath.Join(dir, "payloads.jsonl"))
	if err != nil {
		return nil, err
	}
	for line := range bytes.Lines(jl) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		var p struct {
			Cat string `json:"cat"`
			N   int    `json:"n"`
		}
		if err := json.Unmarshal(line, &p); err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", filepath.Join(dir, "payloads.jsonl"), len(ds.Payloads), err)
		}
		ds.Payloads = append(ds.Payloads, line)
		ds.Cats = append(ds.Cats, p.Cat)
		ds.Ns = append(ds.Ns, p.N)
	}
	if len(ds.Docs) != m.N || len(ds.Payloads) != m.N || len(ds.Queries) != m.Queries {
		return nil, fmt.Errorf("%s: %d documents, %d payloads, %d queries; meta.json says %d, %d, %d", dir, len(ds.Docs), len(ds.Payloads), len(ds.Queries), m.N, m.N, m.Queries)
	}
	keys := []string{}
	for _, p := range m.Prefixes {
		keys = append(keys, prefixKey(p))
	}
	for _, f := range filters {
		keys = append(keys, filterKey(f))
	}
	for _, k := range keys {
		rows, err := vecfile.ReadIvecs(filepath.Join(dir, "gt-"+k+".ivecs"))
		if err != nil {
			return nil, err
		}
		if len(rows) != m.Queries {
			return nil, fmt.Errorf("%s: %d rows, want %d (one per query)", filepath.Join(dir, "gt-"+k+".ivecs"), len(rows), m.Queries)
		}
		ds.Truth[k] = rows
	}
	return ds, nil
}

// writeAtomic writes data to a temporary file beside path and renames
// it over path, so that a reader never sees half a file.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644) // CreateTemp's 0600 is for secrets; these are results
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// f16Round is v rounded to the nearest float16 (ties to even).
func f16Round(v float32) float32 { return f16.ToFloat32(f16.FromFloat32(v)) }
