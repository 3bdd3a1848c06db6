package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/store"
	"github.com/vlc-embed/vlc/vecfile"
)

// counting is a Searcher that counts the residents it holds open.
type counting struct {
	dev  device.Searcher
	live *atomic.Int64
}

type countingResident struct {
	device.MaskedResident
	live *atomic.Int64
	done atomic.Bool
}

func (c counting) UploadIndex(d *device.IndexData) (device.Resident, error) {
	r, err := c.dev.UploadIndex(d)
	if err != nil {
		return nil, err
	}
	c.live.Add(1)
	return &countingResident{MaskedResident: r.(device.MaskedResident), live: c.live}, nil
}

func (r *countingResident) Close() error {
	if !r.done.Swap(true) {
		r.live.Add(-1)
	}
	return r.MaskedResident.Close()
}

// segmentedStore builds a store of 10 segments (a trained file of 1,000
// rows of deep2k, 9 adds of 90) with 5 % of its rows deleted, and
// returns its path, the ids left and 50 queries.
func segmentedStore(t testing.TB) (string, [][]float32) {
	t.Helper()
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, 1810)
	path := filepath.Join(t.TempDir(), "s.vlc")
	ix, err := vlc.Build(ctx, path, docs[:1000], vlc.Options{Seed: 1, Code: "rotated", Bits: 4})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	ix, err = store.OpenWith(path, store.OpenOptions{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for lo := 1000; lo < 1810; lo += 90 {
		if _, err := ix.Add(ctx, docs[lo:lo+90]); err != nil {
			t.Fatal(err)
		}
	}
	var gone []string
	for i := 0; i < len(docs); i += 20 {
		gone = append(gone, docs[i].ID)
	}
	if err := ix.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	info, err := ix.Info()
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Segments) != 10 || info.Deleted != len(gone) {
		t.Fatalf("%d segments, %d deleted: want 10 and %d", len(info.Segments), info.Deleted, len(gone))
	}
	q, err := vecfile.Open("../testdata/deep2k/query.fvecs", vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	queries := make([][]float32, 50)
	for i := range queries {
		queries[i] = q.Row(i, nil)
	}
	return path, queries
}

// rowHits turns a store's hits (ids doc-<row>) into rows, for
// devicetest.Compare.
func rowHits(t *testing.T, hits [][]store.Hit) [][]index.Hit {
	out := make([][]index.Hit, len(hits))
	for i, hs := range hits {
		for _, h := range hs {
			r, err := strconv.Atoi(strings.TrimPrefix(h.ID, "doc-"))
			if err != nil {
				t.Fatal(err)
			}
			out[i] = append(out[i], index.Hit{ID: r, Distance: h.Distance})
		}
	}
	return out
}

type queryRows [][]float32

func (m queryRows) Len() int                           { return len(m) }
func (m queryRows) Dim() int                           { return len(m[0]) }
func (m queryRows) Row(i int, dst []float32) []float32 { return append(dst[:0], m[i]...) }

// A store of 10 segments with 5 % of its rows deleted, searched on a
// device (the reference), gives the CPU's hits: unfiltered, with an
// allow-list and with a predicate, one query and a batch.
func TestStoreOnDevice(t *testing.T) {
	ctx := context.Background()
	path, queries := segmentedStore(t)
	cpu, err := store.OpenWith(path, store.OpenOptions{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	var live atomic.Int64
	dev, err := store.OpenWith(path, store.OpenOptions{Manual: true, Device: counting{devicetest.Reference(), &live}})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	in, err := dev.DeviceInfo()
	if err != nil {
		t.Fatal(err)
	}
	if in.Segments != 10 || in.OnDevice != 10 || in.Bytes <= 0 || live.Load() != 10 {
		t.Fatalf("device info %+v, %d residents: want 10 segments on the device", in, live.Load())
	}
	var allow []string
	for r := 0; r < 1810; r += 7 {
		allow = append(allow, fmt.Sprintf("doc-%d", r))
	}
	even := func(id string, _ []byte) bool { return strings.HasSuffix(id, "0") || strings.HasSuffix(id, "4") }
	for _, c := range []struct {
		name string
		opt  store.SearchOptions
	}{
		{"deletions", store.SearchOptions{K: 10, NProbe: 4}},
		{"k 50", store.SearchOptions{K: 50, NProbe: 2}},
		{"allow 1/7", store.SearchOptions{K: 10, NProbe: 4, Filter: store.AllowIDs(allow...)}},
		{"where 1/5", store.SearchOptions{K: 10, NProbe: 1, Filter: store.Where(even)}},
	} {
		want, err := cpu.SearchBatch(ctx, queries, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dev.SearchBatch(ctx, queries, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		devicetest.Compare(t, c.name, queryRows(queries), 0, rowHits(t, want), rowHits(t, got))
		one, err := dev.Search(ctx, queries[0], c.opt)
		if err != nil {
			t.Fatal(err)
		}
		devicetest.Compare(t, c.name+", one query", queryRows(queries[:1]), 0, rowHits(t, want[:1]), rowHits(t, [][]store.Hit{one}))
	}
}

// Writes upload their new segments and a compaction frees the copies of
// the segments it replaced: the device holds one copy per segment of the
// current version, and none once the store is closed.
func TestStoreDeviceFollowsVersions(t *testing.T) {
	ctx := context.Background()
	path, _ := segmentedStore(t)
	var live atomic.Int64
	ix, err := store.OpenWith(path, store.OpenOptions{Manual: true, Device: counting{devicetest.Reference(), &live}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, segments int) {
		t.Helper()
		in, err := ix.DeviceInfo()
		if err != nil {
			t.Fatal(err)
		}
		if in.Segments != segments || in.OnDevice != segments || live.Load() != int64(segments) {
			t.Fatalf("%s: device info %+v, %d residents: want %d segments, each on the device", what, in, live.Load(), segments)
		}
	}
	check("open", 10)
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 1810, 1900)
	if _, err := ix.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	check("add", 11)
	if err := ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check("compact", 1)
	// The compacted store searches on the device: the added rows are found.
	hits, err := ix.Search(ctx, docs[0].Vector, store.SearchOptions{K: 1, NProbe: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].ID != docs[0].ID {
		t.Errorf("search for %s after compacting: %v", docs[0].ID, hits)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if n := live.Load(); n != 0 {
		t.Errorf("%d device copies left after Close", n)
	}
}

// A code the device cannot search (flat: a collection not yet trained)
// leaves its segments on the CPU, saying why, and searches still answer.
func TestStoreDeviceNoSearch(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, 600)
	path := filepath.Join(t.TempDir(), "s.vlc")
	c, err := store.Create(ctx, path, store.Schema{Dim: 96})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var live atomic.Int64
	st, err := store.OpenWith(path, store.OpenOptions{Device: counting{devicetest.Reference(), &live}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	in, err := st.DeviceInfo()
	if err != nil {
		t.Fatal(err)
	}
	if in.Segments == 0 || in.OnDevice != 0 || !strings.Contains(in.CPU, "flat") {
		t.Fatalf("device info %+v: want every segment on the CPU, for its flat code", in)
	}
	if _, err := st.Search(ctx, docs[0].Vector, store.SearchOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = store.OpenSearchDevice("no-such-backend", "", device.SpreadLists)
	if !errors.Is(err, device.ErrNoBackend) {
		t.Errorf("OpenSearchDevice of an unknown backend: %v, want ErrNoBackend", err)
	}
}
