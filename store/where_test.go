package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/filter"
)

// TestWhereFilters: JSON filters on a keyword field and a numeric range,
// indexed and not, at about 1 %, 10 % and 50 % selectivity: every hit
// matches, and recall@10 against exact search over the matching rows is
// at least 0.9; Count agrees with the model.
func TestWhereFilters(t *testing.T) {
	ctx := context.Background()
	docs := deepDocs(t, "../testdata/deep10k/base.f16", 0, 3000)
	for i := range docs {
		cat := "c99"
		switch {
		case i%100 == 0:
			cat = "c1"
		case i%10 == 1:
			cat = "c10"
		case i%2 == 1:
			cat = "c50"
		}
		docs[i].Payload = fmt.Appendf(nil, `{"cat":%q,"n":%d}`, cat, (i*7919)%1000)
	}
	for _, indexed := range []bool{true, false} {
		schema := vlc.Schema{Dim: 96, Policy: vlc.Policy{TrainAt: 1000}}
		if indexed {
			schema.Indexed = []string{"cat", "n"}
		}
		ix, err := vlc.Create(ctx, filepath.Join(t.TempDir(), "c.vlc"), schema)
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		for lo := 0; lo < len(docs); lo += 500 {
			if _, err := ix.Add(ctx, docs[lo:lo+500]); err != nil {
				t.Fatal(err)
			}
		}
		if err := ix.Maintain(ctx); err != nil {
			t.Fatal(err)
		}
		filters := []string{
			`{"cat":"c1"}`, `{"cat":{"$in":["c1","c10"]}}`, `{"cat":{"$ne":"c99"}}`,
			`{"n":{"$lt":10}}`, `{"n":{"$gte":100,"$lt":200}}`, `{"n":{"$lt":500}}`,
			`{"$or":[{"cat":"c1"},{"n":{"$lt":5}}]}`, `{"$not":{"cat":"c99"}}`,
		}
		for _, text := range filters {
			e, err := filter.Parse([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			var match []vlc.Document
			for _, d := range docs {
				if e.Match(d.Payload) {
					match = append(match, d)
				}
			}
			f, err := vlc.ParseFilter([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := ix.Count(f); err != nil || n != len(match) {
				t.Fatalf("indexed %v, %s: Count %d (%v), want %d", indexed, text, n, err, len(match))
			}
			found, total := 0, 0
			for qi := 0; qi < 30; qi++ {
				q := docs[(qi*97)%len(docs)].Vector
				want := exactTop(match, q, 10)
				hits, err := ix.Search(ctx, q, vlc.SearchOptions{K: 10, Filter: f})
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range hits {
					if !e.Match(h.Payload) {
						t.Fatalf("%s: hit %s with payload %s", text, h.ID, h.Payload)
					}
					if slices.Contains(want, h.ID) {
						found++
					}
				}
				total += len(want)
			}
			if r := float64(found) / float64(total); r < 0.9 {
				t.Errorf("indexed %v, %s (%d rows): recall@10 %.3f", indexed, text, len(match), r)
			}
		}
	}
	if _, err := vlc.ParseFilter([]byte(`{"n":{"$gtx":1}}`)); err == nil {
		t.Fatal("an unknown operator parsed")
	}
}
