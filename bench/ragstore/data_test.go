package main

import (
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/vlc-embed/vlc/vecfile"
)

// tinyData writes a random base and queries of dimension 8 and returns
// the meta that generates 2,000 documents from them.
func tinyData(t *testing.T) meta {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	rows := func(n int) [][]float32 {
		out := make([][]float32, n)
		for i := range out {
			out[i] = make([]float32, 8)
			for j := range out[i] {
				out[i][j] = float32(rng.NormFloat64())
			}
		}
		return out
	}
	base, query := filepath.Join(dir, "base.f16"), filepath.Join(dir, "query.fvecs")
	if err := vecfile.WriteF16(base, rows(300)); err != nil {
		t.Fatal(err)
	}
	if err := vecfile.WriteFvecs(query, rows(12)); err != nil {
		t.Fatal(err)
	}
	return meta{Version: metaVersion, N: 2000, Dim: 8, Base: base, Query: query, Seed: 3, Noise: 0.5, Prefixes: prefixes(2000)}
}

func TestGenerateSharesAndTruth(t *testing.T) {
	m := tinyData(t)
	ds, err := generate(m, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Prefixes, []int{1000, 2000}) {
		t.Fatalf("prefixes(2000) = %v, want [1000 2000]", m.Prefixes)
	}
	for _, f := range filters {
		count := 0
		for i := range ds.Docs {
			if f.match(ds.Cats[i], ds.Ns[i]) {
				count++
			}
		}
		if want := int(f.Share * float64(m.N)); count != want {
			t.Errorf("filter %s matches %d of %d documents, want exactly %d", f.Name, count, m.N, want)
		}
	}
	// copies of one base row differ (the noise)
	if slices.Equal(ds.Docs[5], ds.Docs[305]) {
		t.Errorf("documents 5 and 305 (copies of base row 5) are equal: no noise")
	}
	// the ground truth against a plain sort of every distance
	for q, query := range ds.Queries {
		for _, set := range []struct {
			key  string
			keep func(i int) bool
		}{
			{prefixKey(1000), func(i int) bool { return i < 1000 }},
			{prefixKey(2000), func(i int) bool { return true }},
			{filterKey(filters[0]), func(i int) bool { return ds.Cats[i] == "c1" }},
			{filterKey(filters[4]), func(i int) bool { return ds.Ns[i] < 100 }},
		} {
			var rows []int32
			for i := range ds.Docs {
				if set.keep(i) {
					rows = append(rows, int32(i))
				}
			}
			sort.SliceStable(rows, func(a, b int) bool {
				return dist64(query, ds.Docs[rows[a]]) < dist64(query, ds.Docs[rows[b]])
			})
			if got := ds.Truth[set.key][q]; !slices.Equal(got, rows[:10]) {
				t.Errorf("query %d, %s: truth %v, sorted %v", q, set.key, got, rows[:10])
			}
		}
	}
}

func TestCacheRoundTrip(t *testing.T) {
	m := tinyData(t)
	dir := filepath.Join(t.TempDir(), "cache")
	made, cached, err := loadOrMake(dir, m, t.Logf)
	if err != nil || cached {
		t.Fatalf("first loadOrMake: cached %v, err %v; want made", cached, err)
	}
	again, cached, err := loadOrMake(dir, m, t.Logf)
	if err != nil || !cached {
		t.Fatalf("second loadOrMake: cached %v, err %v; want the cache", cached, err)
	}
	if !reflect.DeepEqual(made.Docs, again.Docs) || !reflect.DeepEqual(made.Truth, again.Truth) || !reflect.DeepEqual(made.Ns, again.Ns) || !reflect.DeepEqual(made.Cats, again.Cats) {
		t.Errorf("the cache read back differs from what was made")
	}
	m.Seed++
	if _, cached, err := loadOrMake(dir, m, t.Logf); err != nil || cached {
		t.Errorf("another seed: cached %v, err %v; want made again", cached, err)
	}
}
