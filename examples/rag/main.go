// Command rag shows vlc as the vector store of a retrieval-augmented
// generation (RAG) service: build from documents in memory, search, add,
// delete, compact, reopen and filter. It checks what it claims and exits
// with status 1, naming the claim, when one does not hold, so CI runs it:
//
//	go run ./examples/rag [-data testdata/deep10k] [-dir DIR]
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

const (
	dim = 96 // of the embeddings (those of the test data)
	// The claims checked: added documents are found about as well as the
	// originals, and compaction does not change how well.
	maxGap    = 0.02 // |recall of added - recall of originals|
	maxChange = 0.01 // |recall after compaction - before|
)

// meta is what a document carries besides its vector. Stored as the
// payload, it comes back with every hit: no second lookup for the text.
type meta struct {
	Title  string `json:"title"`
	Source string `json:"source"`
}

func main() {
	data := flag.String("data", "testdata/deep10k", "folder holding base.f16 and extra.f16 (float16, 96 dimensions)")
	dir := flag.String("dir", "", "folder for the index (default: a temporary folder, removed at exit)")
	flag.Parse()
	if err := run(*data, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "rag: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("all checks passed")
}

func run(data, dir string) error {
	ctx := context.Background()
	if dir == "" {
		tmp, err := os.MkdirTemp("", "vlc-rag-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Build replaces an index left there by an earlier run.
	path := filepath.Join(dir, "docs.vlc")

	// Embeddings would come from a model; here they are Deep1B vectors.
	base, err := load(filepath.Join(data, "base.f16"), "doc-%05d", "Document %d", "deep10k")
	if err != nil {
		return err
	}
	extra, err := load(filepath.Join(data, "extra.f16"), "new-%04d", "New document %d", "new")
	if err != nil {
		return err
	}
	if len(base) != 10000 || len(extra) != 3000 {
		return fmt.Errorf("want 10000 base and 3000 extra vectors, have %d and %d", len(base), len(extra))
	}

	// 1. Build trains the anchors and codes on these documents; a fixed
	// seed makes the file byte-identical from run to run.
	start := time.Now()
	ix, err := vlc.Build(ctx, path, base, vlc.Options{Seed: 1})
	if err != nil {
		return err
	}
	defer func() { ix.Close() }() // the ix of the time: reopened below
	info, err := ix.Info()
	if err != nil {
		return err
	}
	fmt.Printf("1. built %d documents in %v: %d bytes with ids and payloads (float16 vectors alone: %d), %d lists\n",
		info.Rows, time.Since(start).Round(time.Millisecond), info.Bytes, len(base)*dim*2, info.Lists)

	// 2. Questions: vectors never indexed, as a user's would be.
	fmt.Println("2. two questions, top 3:")
	for _, q := range extra[2998:] {
		hits, err := ix.Search(ctx, q.Vector, vlc.SearchOptions{K: 3})
		if err != nil {
			return err
		}
		printHits(hits)
	}

	// 3. The corpus changes: 1,000 documents arrive, 500 are withdrawn.
	start = time.Now()
	if _, err := ix.Add(ctx, extra[:1000]); err != nil {
		return err
	}
	var deleted []string
	gone := map[string]bool{}
	for i := 0; i < len(base); i += 20 {
		deleted = append(deleted, base[i].ID)
		gone[base[i].ID] = true
	}
	if err := ix.Delete(ctx, deleted); err != nil {
		return err
	}
	fmt.Printf("3. added 1000, deleted %d in %v: %d live\n", len(deleted), time.Since(start).Round(time.Millisecond), ix.Len())
	if ix.Len() != 10500 {
		return fmt.Errorf("the index holds %d live documents after the changes, want 10500", ix.Len())
	}
	if _, err := ix.Get("doc-00020"); !errors.Is(err, vlc.ErrNotFound) {
		return fmt.Errorf("Get(doc-00020) after deleting it: want an error wrapping vlc.ErrNotFound, got %v", err)
	}
	if rec, err := ix.Get("new-0007"); err != nil || !strings.Contains(string(rec.Payload), "New document 7") {
		return fmt.Errorf("Get(new-0007) = %q, %v; want its payload", rec.Payload, err)
	}

	// 4. Quality after the changes, against the exact neighbours among the
	// live documents. Added ones were encoded against anchors trained
	// without them: the claim is that they are found as well as the rest.
	live := slices.Concat(slices.DeleteFunc(slices.Clone(base), func(d vlc.Document) bool { return gone[d.ID] }), extra[:1000])
	var queries [][]float32
	for _, d := range extra[1000:] {
		queries = append(queries, d.Vector)
	}
	truth := groundTruth(live, queries, 10)
	opt := vlc.SearchOptions{K: 10, NProbe: vlc.DefaultNProbe}
	before, err := measure(ctx, ix, queries, opt, truth, gone, "4. after add/delete")
	if err != nil {
		return err
	}
	if d := math.Abs(before.added - before.original); d > maxGap {
		return fmt.Errorf("recall of added documents %.4f, of originals %.4f: differ by %.4f > %g", before.added, before.original, d, maxGap)
	}

	// 5. Compact drops the deleted rows and merges the segments into one
	// file; reopen it, as a restarted service would.
	start = time.Now()
	if err := ix.Compact(ctx); err != nil {
		return err
	}
	ix.Close()
	reopened, err := vlc.Open(path)
	if err != nil {
		return err
	}
	ix = reopened // closed by the deferred Close
	if info, err = ix.Info(); err != nil {
		return err
	}
	fmt.Printf("5. compacted and reopened in %v: %d rows, %d deleted, %d segment(s), %d bytes\n",
		time.Since(start).Round(time.Millisecond), info.Rows, info.Deleted, len(info.Segments), info.Bytes)
	after, err := measure(ctx, ix, queries, opt, truth, gone, "   same searches")
	if err != nil {
		return err
	}
	if d := math.Abs(after.all - before.all); d > maxChange {
		return fmt.Errorf("recall@10 %.4f after compaction, %.4f before: differ by %.4f > %g", after.all, before.all, d, maxChange)
	}

	// 6. Filters. Where asks about each candidate, so keep it cheap (a
	// selective one is better as AllowIDs); AllowIDs suits a known set, such
	// as one user's documents. Deleted and unknown ids are never returned.
	allowed := []string{"doc-00020", "doc-00021", "doc-00022", "new-0500", "new-0501", "no-such-id"}
	for _, f := range []struct {
		name   string
		filter vlc.Filter
		ok     func(vlc.Hit) bool // checks a hit independently of the filter
	}{
		{`Where source == "new"`, vlc.Where(func(id string, payload []byte) bool {
			var m meta
			return json.Unmarshal(payload, &m) == nil && m.Source == "new"
		}), func(h vlc.Hit) bool { return strings.Contains(string(h.Payload), `"source":"new"`) }},
		{fmt.Sprintf("AllowIDs%q", allowed), vlc.AllowIDs(allowed...),
			func(h vlc.Hit) bool { return slices.Contains(allowed, h.ID) && !gone[h.ID] }},
	} {
		hits, err := ix.Search(ctx, queries[0], vlc.SearchOptions{K: 5, Filter: f.filter})
		if err != nil {
			return err
		}
		fmt.Printf("6. filter %s:\n", f.name)
		printHits(hits)
		if len(hits) == 0 {
			return fmt.Errorf("filter %s: no hits", f.name)
		}
		for _, h := range hits {
			if !f.ok(h) {
				return fmt.Errorf("filter %s returned %s %s, which it does not allow", f.name, h.ID, h.Payload)
			}
		}
	}
	return nil
}

// load reads a float16 file as documents named by idFmt, with payloads.
// Row gives the float16 values exactly: the ground truth sees what the
// index sees.
func load(file, idFmt, titleFmt, source string) ([]vlc.Document, error) {
	m, err := vecfile.Open(file, vecfile.Options{Dim: dim})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	docs := make([]vlc.Document, m.Len())
	for i := range docs {
		payload, err := json.Marshal(meta{Title: fmt.Sprintf(titleFmt, i), Source: source})
		if err != nil {
			return nil, err
		}
		docs[i] = vlc.Document{ID: fmt.Sprintf(idFmt, i), Vector: m.Row(i, nil), Payload: payload}
	}
	return docs, nil
}

func printHits(hits []vlc.Hit) {
	for _, h := range hits {
		fmt.Printf("   %-10s %7.4f  %s\n", h.ID, h.Distance, h.Payload)
	}
}

// recall is recall@K, overall and split by the true neighbour's origin.
type recall struct{ all, original, added float64 }

// measure runs the queries, checks that no deleted id comes back and that
// added ones do, and prints recall against truth.
func measure(ctx context.Context, ix *vlc.Store, queries [][]float32, opt vlc.SearchOptions, truth [][]string, gone map[string]bool, label string) (recall, error) {
	start := time.Now()
	results, err := ix.SearchBatch(ctx, queries, opt)
	if err != nil {
		return recall{}, err
	}
	elapsed := time.Since(start)
	var found, total [2]int // [0]: original documents, [1]: added ones
	addedHits := 0
	for i, hits := range results {
		got := map[string]bool{}
		for _, h := range hits {
			if gone[h.ID] {
				return recall{}, fmt.Errorf("%s: query %d returned deleted %s", label, i, h.ID)
			}
			got[h.ID] = true
			addedHits += origin(h.ID)
		}
		for _, id := range truth[i] {
			total[origin(id)]++
			if got[id] {
				found[origin(id)]++
			}
		}
	}
	if addedHits == 0 {
		return recall{}, fmt.Errorf("%s: no added document in any hit", label)
	}
	frac := func(a, b int) float64 { return float64(a) / float64(b) }
	r := recall{frac(found[0]+found[1], total[0]+total[1]), frac(found[0], total[0]), frac(found[1], total[1])}
	fmt.Printf("%s: %d queries, K %d, nprobe %d (vlc.DefaultNProbe) in %v; no deleted id returned; %d hits are added documents\n",
		label, len(queries), opt.K, opt.NProbe, elapsed.Round(time.Millisecond), addedHits)
	fmt.Printf("   recall@%d %.4f: of original neighbours %.4f (%d/%d), of added ones %.4f (%d/%d)\n",
		opt.K, r.all, r.original, found[0], total[0], r.added, found[1], total[1])
	return r, nil
}

// origin is 1 for an added document's id, 0 for an original one's.
func origin(id string) int {
	if strings.HasPrefix(id, "new-") {
		return 1
	}
	return 0
}

// groundTruth returns the ids of the k nearest docs to each query, exactly
// (squared L2 in float64), by brute force on all cores.
func groundTruth(docs []vlc.Document, queries [][]float32, k int) [][]string {
	type cand struct {
		d  float64
		id string
	}
	out := make([][]string, len(queries))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for qi := w; qi < len(queries); qi += workers {
				best := make([]cand, 0, k+1) // nearest first
				// The query in an array on the stack: quicker, above all under -race.
				var q [dim]float64
				for j, x := range queries[qi] {
					q[j] = float64(x)
				}
				for _, doc := range docs {
					var d float64
					for j, x := range doc.Vector[:dim] {
						t := float64(x) - q[j]
						d += t * t
					}
					if len(best) < k || d < best[k-1].d {
						i, _ := slices.BinarySearchFunc(best, d, func(c cand, d float64) int { return cmp.Compare(c.d, d) })
						best = slices.Insert(best, i, cand{d, doc.ID})[:min(len(best)+1, k)]
					}
				}
				for _, c := range best {
					out[qi] = append(out[qi], c.id)
				}
			}
		})
	}
	wg.Wait()
	return out
}
