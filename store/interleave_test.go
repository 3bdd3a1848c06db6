package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/store"
	"github.com/vlc-embed/vlc/vecfile"
)

// The tests of this file hold each of the defects that two handles of
// one store (in two processes, or two vlc.Open in one: each has its own
// version and takes the lock file per write) could cause when their
// writes interleave, named after what they protect.

// segmentFiles lists the names in the store's segment folder.
func segmentFiles(t *testing.T, path string) []string {
	t.Helper()
	ents, err := os.ReadDir(path + ".d")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// checkLive checks, through a fresh Open, that the store holds exactly the
// ids want.
func checkLive(t *testing.T, path string, want []string) {
	t.Helper()
	ix, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	checkHandle(t, "a fresh open", ix, want)
}

// checkHandle checks that ix's version holds exactly the ids want: its
// length, Get of each, and a search over every list that returns them
// all.
func checkHandle(t *testing.T, who string, ix *vlc.Store, want []string) {
	t.Helper()
	if n := ix.Len(); n != len(want) {
		t.Errorf("%s: Len %d, want %d", who, n, len(want))
	}
	for _, id := range want {
		if _, err := ix.Get(id); err != nil {
			t.Errorf("%s: Get(%q): %v", who, id, err)
		}
	}
	hits, err := ix.Search(context.Background(), make([]float32, ix.Dim()), vlc.SearchOptions{K: len(want) + 10, NProbe: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(hits))
	for i, h := range hits {
		got[i] = h.ID
	}
	slices.Sort(got)
	w := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, w) {
		t.Errorf("%s: a search over every list returns %d ids, want %d (%v missing or extra)", who, len(got), len(w), symDiff(got, w))
	}
}

func symDiff(a, b []string) []string {
	in := map[string]int{}
	for _, x := range a {
		in[x]++
	}
	for _, x := range b {
		in[x]--
	}
	var out []string
	for x, n := range in {
		if n != 0 {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), 10)]
}

func docIDs(docs []vlc.Document) []string {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	return ids
}

// TestStaleHandleSeesNewFiles: a handle that read the store before
// another compacted it and wrote again never takes the new segment files
// for the ones it mapped, whatever their names: its Refresh sees the new
// version, and its writes apply to the newest version, deleting the
// right row and refusing an id already live. Segment names never repeat
// over the life of the store.
func TestStaleHandleSeesNewFiles(t *testing.T) {
	ctx := context.Background()
	all := deepDocs(t, "../testdata/deep2k/base.f16", 0, 400)
	path := filepath.Join(t.TempDir(), "s.vlc")
	first, err := vlc.Build(ctx, path, all[:300], vlc.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	live := docIDs(all[:300])
	a, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	stale, err := vlc.Open(path) // never refreshed: it writes from its old version
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	b, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A name once gone from the folder never comes back.
	ever, prev := map[string]bool{}, map[string]bool{}
	seen := func() {
		t.Helper()
		now := map[string]bool{}
		for _, n := range segmentFiles(t, path) {
			if ever[n] && !prev[n] {
				t.Fatalf("segment file %s was removed and written again", n)
			}
			ever[n], now[n] = true, true
		}
		prev = now
	}
	if _, err := b.Add(ctx, all[300:310]); err != nil {
		t.Fatal(err)
	}
	live = append(live, docIDs(all[300:310])...)
	seen()
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	checkHandle(t, "a after b's add", a, live)
	for round := range 3 {
		// b deletes, compacts and adds again: the old code named the new
		// segments as a had mapped the old ones.
		del := all[20*round].ID
		if err := b.Delete(ctx, []string{del}); err != nil {
			t.Fatal(err)
		}
		live = slices.DeleteFunc(live, func(id string) bool { return id == del })
		seen()
		if err := b.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		seen()
		add := all[310+10*round : 320+10*round]
		if _, err := b.Add(ctx, add); err != nil {
			t.Fatal(err)
		}
		live = append(live, docIDs(add)...)
		seen()
		if err := a.Refresh(); err != nil {
			t.Fatal(err)
		}
		checkHandle(t, fmt.Sprintf("round %d: a after b's compact and add", round), a, live)
	}
	// The stale handle deletes a row by id and adds an id already live:
	// both are decided on the newest version.
	victim := all[7].ID
	if err := stale.Delete(ctx, []string{victim}); err != nil {
		t.Fatal(err)
	}
	live = slices.DeleteFunc(live, func(id string) bool { return id == victim })
	if _, err := stale.Add(ctx, []vlc.Document{all[315]}); !errors.Is(err, vlc.ErrDuplicateID) {
		t.Fatalf("the stale handle adds %s, live since its version: %v, want ErrDuplicateID", all[315].ID, err)
	}
	checkHandle(t, "the stale handle after its writes", stale, live)
	checkLive(t, path, live)
	if err := b.Compact(ctx); err != nil {
		t.Fatalf("compact after the stale writes: %v", err)
	}
	checkLive(t, path, live)
}

// TestRerankFromFileSkipsIDsAddedAgain: re-ranking from the input file
// (RowOriginals) scores from the file only the rows that still hold
// their row of it: an id deleted and added again with another vector
// keeps its code's estimate, not the distance to the file's old row.
func TestRerankFromFileSkipsIDsAddedAgain(t *testing.T) {
	ctx := context.Background()
	base := "../testdata/deep2k/base.f16"
	path := filepath.Join(t.TempDir(), "s.vlc")
	if _, err := vlc.Compress(ctx, base, path, vlc.Options{Dim: 96, End: 1000, Seed: 1, Backend: "cpu"}); err != nil {
		t.Fatal(err)
	}
	file, err := vecfile.Open(base, vecfile.Options{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	ix, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if in, _ := ix.Info(); in.FromInput != 1000 {
		t.Fatalf("a lone index of the file: FromInput %d, want 1000", in.FromInput)
	}
	// Id 5 now holds row 1500 of the file, not row 5.
	fresh := file.Row(1500, nil)
	if err := ix.Delete(ctx, []string{"5"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Add(ctx, []vlc.Document{{ID: "5", Vector: fresh}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(ctx); err != nil { // the origin survives a compaction
		t.Fatal(err)
	}
	if in, _ := ix.Info(); in.FromInput != 999 || in.Rows != 1000 {
		t.Fatalf("FromInput %d of %d rows, want 999 of 1000", in.FromInput, in.Rows)
	}
	opt := vlc.SearchOptions{K: 5, NProbe: 64, Rerank: vlc.RowOriginals(firstRows{file, 1000})}
	hits, err := ix.Search(ctx, fresh, opt)
	if err != nil {
		t.Fatal(err)
	}
	if hits[0].ID != "5" {
		t.Fatalf("searching for id 5's new vector: first hit %s", hits[0].ID)
	}
	old := vec.L2(fresh, file.Row(5, nil))
	if hits[0].Distance > old/10 {
		t.Fatalf("id 5 scored %g, the distance to the file's row 5 (%g) or near it: re-ranked from a row it no longer holds", hits[0].Distance, old)
	}
	// A store of an index compressed from a range of the file numbers its
	// rows from 0: the whole file is not its input, and is refused.
	shard := filepath.Join(t.TempDir(), "shard.vlc")
	if _, err := vlc.Compress(ctx, base, shard, vlc.Options{Dim: 96, Start: 300, End: 400, Seed: 1, Backend: "cpu", Anchors: 4}); err != nil {
		t.Fatal(err)
	}
	sh, err := vlc.Open(shard)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if _, err := sh.Add(ctx, []vlc.Document{{ID: "x", Vector: fresh}}); err != nil {
		t.Fatal(err)
	}
	if in, _ := sh.Info(); in.InputRows != 100 {
		t.Errorf("a store of 100 rows compressed from a range: InputRows %d, want 100", in.InputRows)
	}
	whole := vlc.SearchOptions{K: 5, NProbe: 64, Rerank: vlc.RowOriginals(file)}
	if _, err := sh.Search(ctx, file.Row(305, nil), whole); !errors.Is(err, index.ErrArgument) || !strings.Contains(err.Error(), "2000 rows, the input the index was built from 100") {
		t.Errorf("re-rank of a range's store from the whole file: %v, want ErrArgument naming 2000 and 100 rows", err)
	}
	// A row still of the file is scored from it, exactly.
	hits, err = ix.Search(ctx, file.Row(9, nil), opt)
	if err != nil {
		t.Fatal(err)
	}
	if hits[0].ID != "9" || hits[0].Distance != 0 {
		t.Fatalf("row 9 of the file: first hit %s at %g, want 9 at 0", hits[0].ID, hits[0].Distance)
	}
}

// firstRows is the first n rows of a matrix: the input of an index
// compressed from them.
type firstRows struct {
	vlc.Rows
	n int
}

func (r firstRows) Len() int { return r.n }

// TestOpenWhileAnotherWrites: Open, Info, Verify, Get and Refresh never
// fail while another handle turns the index into a store, adds, deletes,
// compacts, and Compress replaces the store with an index file again.
func TestOpenWhileAnotherWrites(t *testing.T) {
	ctx := context.Background()
	base := "../testdata/deep2k/base.f16"
	all := deepDocs(t, base, 0, 400)
	path := filepath.Join(t.TempDir(), "s.vlc")
	opt := vlc.Options{Dim: 96, End: 300, Anchors: 8, Bits: 4, Code: "rotated", Seed: 1, Backend: "cpu", MaxIter: 3}
	if _, err := vlc.Compress(ctx, base, path, opt); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var reads atomic.Int64
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := vlc.Open(path)
			if err != nil {
				errs <- err
				return
			}
			defer held.Close()
			for !stop.Load() {
				ix, err := vlc.Open(path)
				if err == nil {
					var in vlc.Info
					if in, err = ix.Info(); err == nil && in.Rows < 280 {
						err = fmt.Errorf("%d live rows", in.Rows)
					}
					if err == nil {
						err = ix.Verify()
					}
					if err == nil {
						_, err = ix.Get(strconv.Itoa(100 + g))
					}
					ix.Close()
				}
				if err == nil {
					err = held.Refresh()
				}
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", g, err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(3 * time.Second)
	writes := 0
	for round := 0; time.Now().Before(deadline) || round < 3; round++ {
		w, err := vlc.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		add := all[300+round%100 : 301+round%100]
		if _, err := w.Add(ctx, []vlc.Document{{ID: fmt.Sprintf("r%d", round), Vector: add[0].Vector}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Delete(ctx, []string{"150"}); err != nil { // a row of the first segment
			t.Fatal(err)
		}
		before, _ := w.Info()
		if err := w.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		if after, _ := w.Info(); len(after.Segments) != 1 || after.Segments[0].File == before.Segments[0].File {
			t.Fatalf("round %d: the compaction rewrote nothing", round)
		}
		w.Close()
		replace := opt
		replace.Replace = true
		if _, err := vlc.Compress(ctx, base, path, replace); err != nil {
			t.Fatal(err)
		}
		writes += 4
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() == 0 {
		t.Fatal("no read completed beside the writes")
	}
	t.Logf("%d reads beside %d writes", reads.Load(), writes)
}

// TestForeignFilesInSegmentFolderKept: files in PATH.d that vlc did not
// write survive every write, compaction and a replacing compress; vlc's
// own leftovers go.
func TestForeignFilesInSegmentFolderKept(t *testing.T) {
	ctx := context.Background()
	base := "../testdata/deep2k/base.f16"
	all := deepDocs(t, base, 0, 400)
	path := filepath.Join(t.TempDir(), "s.vlc")
	opt := vlc.Options{Dim: 96, End: 300, Anchors: 8, Seed: 1, Backend: "cpu"}
	if _, err := vlc.Compress(ctx, base, path, opt); err != nil {
		t.Fatal(err)
	}
	dir := path + ".d"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	foreign := []string{"notes.txt", "seg-backup.vlc", ".hidden", "seg-000001.vlc.orig"}
	for _, n := range foreign {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A leftover of vlc's own: a segment no manifest names.
	if err := os.WriteFile(filepath.Join(dir, "seg-000009-00000000000000aa.vlc"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Add(ctx, all[300:310]); err != nil {
		t.Fatal(err)
	}
	if err := ix.Delete(ctx, []string{"3"}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Retrain(ctx, vlc.Options{Backend: "cpu", MaxIter: 3}); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	check := func(stage string, segs int) {
		t.Helper()
		names := segmentFiles(t, path)
		for _, n := range foreign {
			if !slices.Contains(names, n) {
				t.Errorf("%s: %s, a file vlc did not write, is gone (folder: %v)", stage, n, names)
			}
		}
		if got := len(names) - len(foreign); got != segs {
			t.Errorf("%s: %d of vlc's files in the folder, want %d: %v", stage, got, segs, names)
		}
	}
	check("after add, delete, compact and retrain", 1)
	replace := opt
	replace.Replace = true
	if _, err := vlc.Compress(ctx, base, path, replace); err != nil {
		t.Fatal(err)
	}
	check("after compress -replace", 0)
}

// TestHandedOutIDsNeverRepeat: ids the store picks for vectors added
// without one are never picked again, across deletions, compactions and
// retraining.
func TestHandedOutIDsNeverRepeat(t *testing.T) {
	ctx := context.Background()
	all := deepDocs(t, "../testdata/deep2k/base.f16", 0, 400)
	path := filepath.Join(t.TempDir(), "s.vlc")
	ix, err := vlc.Build(ctx, path, all[:300], vlc.Options{Seed: 1, Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	handed := map[string]bool{}
	for round := range 4 {
		docs := make([]vlc.Document, 5)
		for i := range docs {
			docs[i] = vlc.Document{Vector: all[300+5*round+i].Vector}
		}
		ids, err := ix.Add(ctx, docs)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if handed[id] {
				t.Fatalf("round %d: id %s handed out again", round, id)
			}
			handed[id] = true
		}
		// With a row of the first segment: the compaction rewrites it.
		if err := ix.Delete(ctx, append(ids, all[round].ID)); err != nil {
			t.Fatal(err)
		}
		switch round % 2 {
		case 0:
			err = ix.Compact(ctx)
		case 1:
			_, err = ix.Retrain(ctx, vlc.Options{Backend: "cpu", MaxIter: 3})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// storeAndShard compresses rows 0-299 of deep2k into dir/s.vlc (4-bit
// rotated, 8 anchors, no ids) and the next n rows under its model into
// dir/shard.vlc (no ids either), for Merge.
func storeAndShard(t *testing.T, dir string, n int) (store, shard string) {
	t.Helper()
	ctx := context.Background()
	base := "../testdata/deep2k/base.f16"
	store, shard = filepath.Join(dir, "s.vlc"), filepath.Join(dir, "shard.vlc")
	opt := vlc.Options{Dim: 96, End: 300, Anchors: 8, Bits: 4, Code: "rotated", Seed: 1, Backend: "cpu"}
	if _, err := vlc.Compress(ctx, base, store, opt); err != nil {
		t.Fatal(err)
	}
	if _, err := vlc.Compress(ctx, base, shard, vlc.Options{Dim: 96, Start: 300, End: 300 + n, AnchorsFrom: store}); err != nil {
		t.Fatal(err)
	}
	return store, shard
}

// TestMergeRefusesItsOwnInputs: the same index twice (by another name
// too), an output that is a segment of an input store or lies in its
// folder, and a store at the output are refused; a store with deletions
// merges with an index without ids, whose rows are numbered past the
// store's ids.
func TestMergeRefusesItsOwnInputs(t *testing.T) {
	ctx := context.Background()
	base := "../testdata/deep2k/base.f16"
	dir := t.TempDir()
	s, shard := storeAndShard(t, dir, 100)
	ix, err := vlc.Open(s)
	if err != nil {
		t.Fatal(err)
	}
	all := deepDocs(t, base, 400, 410)
	if _, err := ix.Add(ctx, all); err != nil {
		t.Fatal(err)
	}
	if err := ix.Delete(ctx, []string{"299", "7"}); err != nil {
		t.Fatal(err)
	}
	in, _ := ix.Info()
	ix.Close()
	link := filepath.Join(dir, "link.vlc")
	if err := os.Link(shard, link); err != nil {
		t.Fatal(err)
	}
	before := segmentFiles(t, s)
	for _, c := range []struct {
		name, out string
		inputs    []string
	}{
		{"an input twice", filepath.Join(dir, "m1.vlc"), []string{s, shard, s}},
		{"an input under two names", filepath.Join(dir, "m2.vlc"), []string{shard, link}},
		{"output a segment of an input", in.Segments[0].File, []string{s, shard}},
		{"output in an input's segment folder", filepath.Join(s+".d", "merged.vlc"), []string{s, shard}},
		{"output the input store", s, []string{shard}},
		{"a store and one of its segments", filepath.Join(dir, "m3.vlc"), []string{s, in.Segments[0].File}},
	} {
		if _, err := vlc.Merge(ctx, c.out, c.inputs); !errors.Is(err, index.ErrArgument) {
			t.Errorf("%s: %v, want ErrArgument", c.name, err)
		}
	}
	if after := segmentFiles(t, s); !slices.Equal(before, after) {
		t.Errorf("refused merges changed the store's folder: %v, then %v", before, after)
	}
	out := filepath.Join(dir, "merged.vlc")
	sum, err := vlc.Merge(ctx, out, []string{s, shard})
	if err != nil {
		t.Fatalf("a store with deletions and an index without ids: %v", err)
	}
	if sum.Rows != 308+100 {
		t.Fatalf("merged %d rows, want 408", sum.Rows)
	}
	var want []string
	for i := range 300 {
		if i != 7 && i != 299 {
			want = append(want, strconv.Itoa(i))
		}
	}
	want = append(want, docIDs(all)...)
	for i := range 100 {
		// Numbered on past the store's 308 live rows (and so past its
		// largest id, 298, and its next id, 300).
		want = append(want, strconv.Itoa(308+i))
	}
	checkLive(t, out, want)
}

// TestBuildOverStoreRefused: Build and Compress refuse to write over a
// store (an index that took writes) unless asked to replace it, and then
// replace it whole, its segment files removed; an index file is replaced
// as before.
func TestBuildOverStoreRefused(t *testing.T) {
	ctx := context.Background()
	base := "../testdata/deep2k/base.f16"
	all := deepDocs(t, base, 0, 320)
	dir := t.TempDir()
	path := filepath.Join(dir, "s.vlc")
	opt := vlc.Options{Seed: 1, Backend: "cpu", Anchors: 8}
	ix, err := vlc.Build(ctx, path, all[:300], opt)
	if err != nil {
		t.Fatal(err)
	}
	again, err := vlc.Build(ctx, path, all[:200], opt) // an index file: replaced
	if err != nil {
		t.Fatalf("Build over an index file: %v", err)
	}
	again.Close()
	if err := ix.Refresh(); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Add(ctx, all[300:]); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	manifest, _ := os.ReadFile(path)
	segs := segmentFiles(t, path)
	if _, err := vlc.Build(ctx, path, all[:100], opt); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "220 live vectors") {
		t.Fatalf("Build over a store: %v, want fs.ErrExist naming its 220 live vectors", err)
	}
	copt := vlc.Options{Dim: 96, End: 100, Anchors: 8, Backend: "cpu"}
	if _, err := vlc.Compress(ctx, base, path, copt); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Compress over a store: %v, want fs.ErrExist", err)
	}
	if now, _ := os.ReadFile(path); string(now) != string(manifest) || !slices.Equal(segs, segmentFiles(t, path)) {
		t.Fatal("a refused Build or Compress changed the store")
	}
	checkLive(t, path, append(docIDs(all[:200]), docIDs(all[300:])...))
	copt.Replace = true
	if _, err := vlc.Compress(ctx, base, path, copt); err != nil {
		t.Fatalf("Compress with Replace: %v", err)
	}
	var want []string
	for i := range 100 {
		want = append(want, strconv.Itoa(i))
	}
	checkLive(t, path, want)
	if _, err := os.Stat(path + ".d"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the replaced store's folder is still there: %v", segmentFiles(t, path))
	}
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an index file keeps a lock file beside it: %v", err)
	}
}

// TestStoreVersion1Upgraded: a store written by vlc before manifest
// version 2 (testdata/golden/store-v1: small.f16 compressed with 8
// anchors, 8-bit rotated codes and seed 7, rows 200-209 added as
// added-200..added-209, ids 5 and added-203 deleted) opens and searches,
// and its first write upgrades it: manifest version 2, new segments under
// names of the new form, the old segments kept while named.
func TestStoreVersion1Upgraded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.vlc")
	copyTree(t, "../testdata/golden/store-v1", dir)
	var want []string
	for i := range 256 {
		if i != 5 {
			want = append(want, strconv.Itoa(i))
		}
	}
	for i := 200; i < 210; i++ {
		if i != 203 {
			want = append(want, fmt.Sprintf("added-%d", i))
		}
	}
	checkLive(t, path, want)
	small, err := vecfile.Open("../testdata/golden/small.f16", vecfile.Options{Dim: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	ix, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if in, _ := ix.Info(); in.FromInput != 255 {
		t.Errorf("version 1 store: FromInput %d, want 255 (the first segment's rows but 5)", in.FromInput)
	}
	if _, err := ix.Add(ctx, []vlc.Document{{ID: "new", Vector: small.Row(3, nil)}}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "new")
	checkLive(t, path, want)
	f, err := format.Open(path, format.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Section(format.KindOf("STOR"))
	var m struct {
		Version  int `json:"version"`
		Segments []struct {
			File string `json:"file"`
		} `json:"segments"`
	}
	if err := json.Unmarshal(st, &m); err != nil {
		t.Fatal(err)
	}
	names := []string{m.Segments[0].File, m.Segments[1].File, m.Segments[2].File}
	if m.Version != 2 || names[0] != "seg-000000.vlc" || names[1] != "seg-000001.vlc" || !strings.HasPrefix(names[2], "seg-000002-") {
		t.Errorf("after the first write: version %d, segments %v", m.Version, names)
	}
	if err := ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	checkLive(t, path, want)
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStoreLongName: a store whose file name is 255 bytes takes writes:
// its lock file and segment folder get shortened names beside it.
func TestStoreLongName(t *testing.T) {
	ctx := context.Background()
	all := deepDocs(t, "../testdata/deep2k/base.f16", 0, 320)
	path := filepath.Join(t.TempDir(), strings.Repeat("a", 251)+".vlc")
	ix, err := vlc.Build(ctx, path, all[:300], vlc.Options{Seed: 1, Backend: "cpu", Anchors: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Add(ctx, all[300:]); err != nil {
		t.Fatal(err)
	}
	if err := ix.Delete(ctx, []string{"doc-3"}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	checkLive(t, path, slices.DeleteFunc(docIDs(all), func(id string) bool { return id == "doc-3" }))
}

// TestMergeNumbersPastHandedOutIDs: a store without ids whose next id is
// past its rows (an id it picked, then deleted), merged with an index
// without ids: that index's rows are numbered past the store's next id,
// not by their position, so no id the store handed out names another
// vector.
func TestMergeNumbersPastHandedOutIDs(t *testing.T) {
	ctx := context.Background()
	base := "../testdata/deep2k/base.f16"
	dir := t.TempDir()
	s, shard := storeAndShard(t, dir, 10)
	ix, err := vlc.Open(s)
	if err != nil {
		t.Fatal(err)
	}
	extra := deepDocs(t, base, 500, 501)
	ids, err := ix.Add(ctx, []vlc.Document{{Vector: extra[0].Vector}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Delete(ctx, ids); err != nil { // the store is one segment again, no deletions
		t.Fatal(err)
	}
	ix.Close()
	out := filepath.Join(dir, "m.vlc")
	if _, err := vlc.Merge(ctx, out, []string{s, shard}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 300 {
		want = append(want, strconv.Itoa(i))
	}
	for i := range 10 {
		want = append(want, strconv.Itoa(301+i)) // past id 300, which the store handed out
	}
	checkLive(t, out, want)
}

// TestRefreshBesideWriteNeverGoesBack: a handle's Refresh that read a
// version while the same handle's write ran (as vlc serve's -refresh
// ticker beside its handlers) never installs it over the write's newer
// one: the add stays visible to the handle that made it, and the write
// was computed from the newest version.
func TestRefreshBesideWriteNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	all := deepDocs(t, "../testdata/deep2k/base.f16", 0, 310)
	path := filepath.Join(t.TempDir(), "s.vlc")
	first, err := vlc.Build(ctx, path, all[:300], vlc.Options{Seed: 1, Backend: "cpu", Anchors: 8})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	a, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Add(ctx, all[300:301]); err != nil { // a's Refresh has a version to read
		t.Fatal(err)
	}
	loaded, proceed := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	defer store.SetRefreshLoaded(func() {
		if held.CompareAndSwap(false, true) {
			close(loaded)
			<-proceed // hold the version read until a's add has had its chance
		}
	})()
	refreshed := make(chan error)
	go func() { refreshed <- a.Refresh() }()
	<-loaded
	added := make(chan error)
	go func() {
		_, err := a.Add(ctx, all[301:302])
		added <- err
	}()
	select {
	case err := <-added: // before the fix: the add ran in the window
		close(proceed)
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(200 * time.Millisecond): // it waits for the Refresh
		close(proceed)
		if err := <-added; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(all[301].ID); err != nil {
		t.Fatalf("%s acknowledged by Add, then Get on the same handle: %v (a Refresh installed an older version over the add's)", all[301].ID, err)
	}
	checkHandle(t, "a", a, docIDs(all[:302]))
	checkLive(t, path, docIDs(all[:302]))
}

// TestRefreshSeesFileCopiedInPlace: an index file copied over in place
// (cp keeps the file's identity) is read again by Refresh, told apart by
// its size and time.
func TestRefreshSeesFileCopiedInPlace(t *testing.T) {
	ctx := context.Background()
	base := "../testdata/deep2k/base.f16"
	dir := t.TempDir()
	path, other := filepath.Join(dir, "s.vlc"), filepath.Join(dir, "o.vlc")
	if _, err := vlc.Compress(ctx, base, path, vlc.Options{Dim: 96, End: 300, Anchors: 8, Seed: 1, Backend: "cpu"}); err != nil {
		t.Fatal(err)
	}
	if _, err := vlc.Compress(ctx, base, other, vlc.Options{Dim: 96, End: 400, Anchors: 8, Seed: 1, Backend: "cpu"}); err != nil {
		t.Fatal(err)
	}
	ix, err := vlc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	b, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil { // in place, as cp does
		t.Fatal(err)
	}
	if err := ix.Refresh(); err != nil {
		t.Fatal(err)
	}
	if n := ix.Len(); n != 400 {
		t.Fatalf("after the copy and Refresh: Len %d, want 400", n)
	}
}

// TestCompressHoldsItsOutput: a compress to a path that did not exist
// holds the path's lock from the start, so that nothing can make a store
// there meanwhile (which the compress would then replace unasked): a
// Build and a write to that path during its training wait, then give up
// with ErrLocked.
func TestCompressHoldsItsOutput(t *testing.T) {
	ctx := context.Background()
	base := "../testdata/deep2k/base.f16"
	docs := deepDocs(t, base, 0, 300)
	path := filepath.Join(t.TempDir(), "s.vlc")
	defer store.SetLockWait(50 * time.Millisecond)()
	var during []error
	opt := vlc.Options{Dim: 96, End: 1000, Anchors: 8, Seed: 1, Backend: "cpu", MaxIter: 3}
	opt.Progress = func(anneal.Iteration) {
		if len(during) > 0 {
			return
		}
		_, err := vlc.Build(ctx, path, docs, vlc.Options{Seed: 1, Backend: "cpu", Anchors: 8})
		during = append(during, err)
	}
	if _, err := vlc.Compress(ctx, base, path, opt); err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || !errors.Is(during[0], vlc.ErrLocked) {
		t.Fatalf("a Build to the output during the compress: %v, want ErrLocked", during)
	}
	checkLive(t, path, func() []string {
		var ids []string
		for i := range 1000 {
			ids = append(ids, strconv.Itoa(i))
		}
		return ids
	}())
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the compress left its lock file: %v", err)
	}
}
