package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/quant"
	"github.com/vlc-embed/vlc/serve"
)

const system = "vlc"

func (b *bench) schema() vlc.Schema {
	return vlc.Schema{Dim: b.ds.Meta.Dim, Metric: "l2", Indexed: []string{"cat", "n"}}
}

func (b *bench) doc(i int) vlc.Document {
	return vlc.Document{ID: strconv.Itoa(i), Vector: b.ds.Docs[i], Payload: b.ds.Payloads[i]}
}

// open makes an empty collection in its own folder under -dir. With
// -create build1 (or auto, while vlc.Create is unavailable) it builds the
// store from the first document instead, the way a collection started
// before Create existed, and returns 1 (the documents it holds).
func (b *bench) open(mode string) (st *vlc.Store, how string, held int, err error) {
	dir := filepath.Join(b.cfg.Dir, "stores", mode)
	if err := os.RemoveAll(dir); err != nil {
		return nil, "", 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", 0, err
	}
	path := filepath.Join(dir, "store.vlc")
	if b.cfg.Create != "build1" {
		st, err := vlc.Create(b.ctx, path, b.schema())
		if err == nil {
			return st, "create", 0, nil
		}
		if b.cfg.Create == "create" || !errors.Is(err, vlc.ErrUnavailable) {
			return nil, "", 0, err
		}
		b.skip(system, mode+": vlc.Create", fmt.Errorf("%w; the store is built from its first document instead (-create build1)", err))
	}
	st, err = vlc.Build(b.ctx, path, []vlc.Document{b.doc(0)}, vlc.Options{Metric: "l2"})
	return st, "build1", 1, err
}

// sampleInfo is Info's figures at one point of the growth.
type sampleInfo struct {
	segments int
	bytes    int64
	disk     int64
	lists    int
	rows     int
	code     string // the first segment's code: "flat" until trained
}

// trained reports whether the collection has trained its anchors: its
// first segment holds codes, not flat vectors, in more than one list.
func (si sampleInfo) trained() bool { return si.code != quant.KindFlat.String() }

func (b *bench) info(st *vlc.Store) (sampleInfo, error) {
	in, err := st.Info()
	if err != nil {
		return sampleInfo{}, err
	}
	return sampleInfo{segments: len(in.Segments), bytes: in.Bytes, disk: diskBytes(filepath.Dir(st.Path())), lists: in.Lists, rows: in.Rows, code: quant.Kind(in.Meta.Code).String()}, nil
}

// diskBytes is the size of the files under dir (the store, its segments
// and manifest), as a user's du would count them.
func diskBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// grow adds documents [held, total) with add, per calls of batch
// documents; it samples Info every -sample adds and, at each prefix of
// the ground truth, measures recall (not counted in the adds' time).
func (b *bench) grow(mode, how string, st *vlc.Store, held, total, batch int, add func([]vlc.Document) error) error {
	base := row{"system": system, "mode": mode, "start": how}
	emit := func(kind string, r row) {
		out := row{"kind": kind}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range r {
			out[k] = v
		}
		b.emit(out)
	}
	var spent time.Duration
	trainedAt := -1
	sample := func(adds int) error {
		si, err := b.info(st)
		if err != nil {
			return err
		}
		emit("sample", row{"adds": adds, "segments": si.segments, "bytes": si.bytes, "disk_bytes": si.disk, "lists": si.lists, "code": si.code, "rows": si.rows, "add_seconds": secs(spent)})
		if si.trained() && trainedAt < 0 {
			trainedAt = adds
			emit("train", row{"trained_by": adds, "lists": si.lists, "code": si.code, "note": fmt.Sprintf("first sample (every %d adds) whose first segment is trained (code not flat)", b.cfg.Sample)})
		}
		return nil
	}
	checkpoints := b.ds.Meta.Prefixes
	docs := make([]vlc.Document, 0, batch)
	for i := held; i < total; {
		docs = docs[:0]
		for j := i; j < min(i+batch, total); j++ {
			docs = append(docs, b.doc(j))
		}
		t := time.Now()
		if err := add(docs); err != nil {
			return fmt.Errorf("adding documents %d to %d: %w", i, i+len(docs)-1, err)
		}
		spent += time.Since(t)
		prev := i
		i += len(docs)
		if i/b.cfg.Sample != prev/b.cfg.Sample || i == total {
			if err := sample(i); err != nil {
				return err
			}
		}
		if slices.Contains(checkpoints, i) && mode != "http" {
			si, _ := b.info(st)
			res, err := b.searchLib(st, nil, prefixKey(i), 1)
			if err != nil {
				return err
			}
			emit("recall", row{"docs": i, "recall@10": round(res.recall, 4), "queries": len(b.ds.Queries), "lists": si.lists, "code": si.code, "trained": si.trained(), "segments": si.segments})
		}
	}
	if trainedAt < 0 {
		emit("train", row{"trained_by": nil, "note": fmt.Sprintf("no sample up to %d adds had a trained first segment (code not flat)", total)})
	}
	n := total - held
	emit("write", row{"op": "add", "unit": unitName(batch, mode), "count": n, "seconds": secs(spent), "per_s": round(float64(n)/spent.Seconds(), 1)})
	return nil
}

func unitName(batch int, mode string) string {
	switch {
	case mode == "http":
		return "1 per POST"
	case batch == 1:
		return "1 per call"
	}
	return fmt.Sprintf("%d per call", batch)
}

// searchResult is one set of passes over the queries.
type searchResult struct {
	p50, p99, mean time.Duration
	recall         float64
}

// searchAll runs one warm-up pass and then passes over the queries with
// search, one query at a time, and scores the last pass's hits against
// the ground truth truthKey.
func (b *bench) searchAll(passes int, search func(q []float32) ([]string, error), truthKey string) (searchResult, error) {
	truth := b.ds.Truth[truthKey]
	if truth == nil {
		return searchResult{}, fmt.Errorf("no ground truth %q", truthKey)
	}
	var lat []time.Duration
	var hit, want int
	for pass := 0; pass <= passes; pass++ {
		for qi, q := range b.ds.Queries {
			t := time.Now()
			ids, err := search(q)
			d := time.Since(t)
			if err != nil {
				return searchResult{}, fmt.Errorf("query %d: %w", qi, err)
			}
			if pass == 0 {
				continue
			}
			lat = append(lat, d)
			if pass == passes {
				hit += overlap(ids, truth[qi])
				want += len(truth[qi])
			}
		}
	}
	return summarizeLatency(lat, hit, want), nil
}

func summarizeLatency(lat []time.Duration, hit, want int) searchResult {
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	r := searchResult{p50: lat[len(lat)/2], p99: lat[min(len(lat)-1, len(lat)*99/100)], mean: sum / time.Duration(len(lat))}
	if want > 0 {
		r.recall = float64(hit) / float64(want)
	}
	return r
}

// overlap counts the ids (row numbers in decimal) among truth.
func overlap(ids []string, truth []int32) int {
	n := 0
	for _, id := range ids {
		v, err := strconv.Atoi(id)
		if err == nil && slices.Contains(truth, int32(v)) {
			n++
		}
	}
	return n
}

func (b *bench) searchLib(st *vlc.Store, f vlc.Filter, truthKey string, passes int) (searchResult, error) {
	return b.searchAll(passes, func(q []float32) ([]string, error) {
		hits, err := st.Search(b.ctx, q, vlc.SearchOptions{K: 10, Filter: f})
		ids := make([]string, len(hits))
		for i, h := range hits {
			ids[i] = h.ID
		}
		return ids, err
	}, truthKey)
}

func ms(d time.Duration) float64 { return round(float64(d.Nanoseconds())/1e6, 4) }

// measureSearch records the store's search latency and recall over all
// documents, unfiltered and (withFilters) under each filter.
func (b *bench) measureSearch(mode, how, state string, st *vlc.Store, withFilters bool) error {
	si, err := b.info(st)
	if err != nil {
		return err
	}
	b.emit(row{"kind": "size", "system": system, "mode": mode, "start": how, "state": state, "segments": si.segments, "bytes": si.bytes, "disk_bytes": si.disk,
		"rows": si.rows, "lists": si.lists, "code": si.code, "bytes_per_vector": round(float64(si.bytes)/float64(max(si.rows, 1)), 1)})
	res, err := b.searchLib(st, nil, prefixKey(b.ds.Meta.N), b.cfg.Passes)
	if err != nil {
		return err
	}
	b.emitSearch(mode, how, state, "none", 1, "", res)
	if !withFilters {
		return nil
	}
	for _, f := range filters {
		flt, impl, err := b.filter(f)
		if err != nil {
			return err
		}
		res, err := b.searchLib(st, flt, filterKey(f), b.cfg.Passes)
		if err != nil {
			b.skip(system, fmt.Sprintf("%s %s filter %s", mode, state, f.Name), err)
			continue
		}
		b.emitSearch(mode, how, state, f.Name, f.Share, impl, res)
	}
	return nil
}

func (b *bench) emitSearch(mode, how, state, filter string, share float64, impl string, res searchResult) {
	r := row{"kind": "search", "system": system, "mode": mode, "start": how, "state": state, "filter": filter, "share": share,
		"p50_ms": ms(res.p50), "p99_ms": ms(res.p99), "mean_ms": ms(res.mean), "recall@10": round(res.recall, 4), "queries": len(b.ds.Queries), "passes": b.cfg.Passes}
	if impl != "" {
		r["filter_impl"] = impl
	}
	b.emit(r)
}

var filterNoted = false

// filter is f through vlc.ParseFilter; while that is unavailable, a
// vlc.Where predicate that decodes each payload (and says so once).
func (b *bench) filter(f filterSpec) (vlc.Filter, string, error) {
	flt, err := vlc.ParseFilter([]byte(f.JSON))
	if err == nil {
		return flt, "ParseFilter", nil
	}
	if !errors.Is(err, vlc.ErrUnavailable) {
		return nil, "", fmt.Errorf("filter %s: %w", f.JSON, err)
	}
	if !filterNoted {
		filterNoted = true
		b.skip(system, "vlc.ParseFilter", fmt.Errorf("%w; filters are vlc.Where predicates decoding each payload instead", err))
	}
	return vlc.Where(func(_ string, payload []byte) bool {
		var p struct {
			Cat string `json:"cat"`
			N   int    `json:"n"`
		}
		return json.Unmarshal(payload, &p) == nil && f.match(p.Cat, p.N)
	}), "Where", nil
}

// library measures a collection grown through the library, batch
// documents a call: the adds, its size and search as grown (at once
// after the last add), after Maintain and after Compact,
// recall as it grows, filters, and (for batches) upserts and deletes.
func (b *bench) library(mode string, batch int) error {
	st, how, held, err := b.open(mode)
	if err != nil {
		b.skip(system, mode, err)
		return nil
	}
	defer st.Close()
	err = b.grow(mode, how, st, held, b.ds.Meta.N, batch, func(docs []vlc.Document) error {
		_, err := st.Add(b.ctx, docs)
		return err
	})
	if err != nil {
		return err
	}
	if err := b.measureSearch(mode, how, "grown", st, true); err != nil {
		return err
	}
	if batch > 1 && b.cfg.UpsertN > 0 {
		if err := b.upserts(mode, how, st); err != nil {
			return err
		}
	}
	// what the background work reaches when let finish: Maintain runs
	// what is due (merges, training) and returns when none is left
	t := time.Now()
	if err := st.Maintain(b.ctx); err != nil {
		b.skip(system, mode+" maintain", err)
	} else {
		b.emit(row{"kind": "write", "system": system, "mode": mode, "start": how, "op": "maintain", "unit": "store", "count": 1, "seconds": secs(time.Since(t))})
		if err := b.measureSearch(mode, how, "maintained", st, true); err != nil {
			return err
		}
	}
	t = time.Now()
	if err := st.Compact(b.ctx); err != nil {
		b.skip(system, mode+" compact", err)
		return nil
	}
	b.emit(row{"kind": "write", "system": system, "mode": mode, "start": how, "op": "compact", "unit": "store", "count": 1, "seconds": secs(time.Since(t))})
	if err := b.measureSearch(mode, how, "compacted", st, true); err != nil {
		return err
	}
	if batch > 1 && b.cfg.UpsertN > 0 {
		return b.deletes(mode, how, st)
	}
	return nil
}

// upserts replaces -upsert-n live documents by themselves, one a call and
// then 100 a call: the ground truth stays true.
func (b *bench) upserts(mode, how string, st *vlc.Store) error {
	n := b.cfg.UpsertN
	for _, batch := range []int{1, 100} {
		t := time.Now()
		for i := 0; i < n; i += batch {
			docs := make([]vlc.Document, 0, batch)
			for j := i; j < min(i+batch, n); j++ {
				docs = append(docs, b.doc(j*(b.ds.Meta.N/n)))
			}
			if _, err := st.Upsert(b.ctx, docs); err != nil {
				b.skip(system, fmt.Sprintf("%s upsert %d per call", mode, batch), err)
				return nil
			}
		}
		d := time.Since(t)
		b.emit(row{"kind": "write", "system": system, "mode": mode, "start": how, "op": "upsert", "unit": unitName(batch, mode), "count": n, "seconds": secs(d), "per_s": round(float64(n)/d.Seconds(), 1)})
	}
	return nil
}

// deletes removes -upsert-n documents one a call.
func (b *bench) deletes(mode, how string, st *vlc.Store) error {
	n := b.cfg.UpsertN
	t := time.Now()
	for i := range n {
		if err := st.Delete(b.ctx, []string{strconv.Itoa(i * (b.ds.Meta.N / n))}); err != nil {
			b.skip(system, mode+" delete", err)
			return nil
		}
	}
	d := time.Since(t)
	b.emit(row{"kind": "write", "system": system, "mode": mode, "start": how, "op": "delete", "unit": "1 per call", "count": n, "seconds": secs(d), "per_s": round(float64(n)/d.Seconds(), 1)})
	return nil
}

// overHTTP grows a collection through serve.New's handler on a real TCP
// listener (loopback), one document a POST, and searches it one query a
// POST.
func (b *bench) overHTTP() error {
	const mode, name = "http", "docs"
	st, how, held, err := b.open(mode)
	if err != nil {
		b.skip(system, mode, err)
		return nil
	}
	defer st.Close()
	srv, err := serve.New(map[string]*vlc.Store{name: st}, serve.Config{})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/v1/indexes/" + name
	client := &http.Client{Timeout: time.Minute}
	post := func(path string, body any, out any) error {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		resp, err := client.Post(url+path, "application/json", bytes.NewReader(data))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		reply, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(reply))
		}
		return json.Unmarshal(reply, out)
	}
	type docBody struct {
		ID      string          `json:"id"`
		Vector  []float32       `json:"vector"`
		Payload json.RawMessage `json:"payload"`
	}
	err = b.grow(mode, how, st, held, b.cfg.HTTPN, 1, func(docs []vlc.Document) error {
		body := struct {
			Documents []docBody `json:"documents"`
		}{}
		for _, d := range docs {
			body.Documents = append(body.Documents, docBody{d.ID, d.Vector, d.Payload})
		}
		var reply serve.AddResponse
		return post("/documents", body, &reply)
	})
	if err != nil {
		return err
	}
	truthKey := prefixKey(b.cfg.HTTPN)
	if b.ds.Truth[truthKey] == nil {
		return fmt.Errorf("-http-n %d: no ground truth over that many documents (have %v)", b.cfg.HTTPN, b.ds.Meta.Prefixes)
	}
	no := false
	k := 10
	res, err := b.searchAll(b.cfg.Passes, func(q []float32) ([]string, error) {
		var reply serve.SearchResponse
		if err := post("/search", map[string]any{"vector": q, "k": &k, "payloads": &no}, &reply); err != nil {
			return nil, err
		}
		ids := make([]string, len(reply.Hits))
		for i, h := range reply.Hits {
			ids[i] = h.ID
		}
		return ids, nil
	}, truthKey)
	if err != nil {
		return err
	}
	si, err := b.info(st)
	if err != nil {
		return err
	}
	b.emit(row{"kind": "size", "system": system, "mode": mode, "start": how, "state": "grown", "segments": si.segments, "bytes": si.bytes, "disk_bytes": si.disk,
		"rows": si.rows, "lists": si.lists, "code": si.code, "bytes_per_vector": round(float64(si.bytes)/float64(max(si.rows, 1)), 1)})
	b.emitSearch(mode, how, "grown", "none", 1, "", res)
	return nil
}
