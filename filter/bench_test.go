package filter_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vlc-embed/vlc/filter"
)

// BenchmarkMatch: a 3-clause filter on a payload of 3 fields (and a text
// field the filter does not read, which Match must still pass over).
func BenchmarkMatch(b *testing.B) {
	payload := []byte(`{"cat": "news", "n": 42, "tags": ["go", "db", "rag"], "text": "a few words of the chunk that the filter never reads, as RAG payloads carry"}`)
	e, err := filter.Parse([]byte(`{"cat": {"$in": ["news", "blog"]}, "n": {"$gte": 10}, "tags": "rag"}`))
	if err != nil {
		b.Fatal(err)
	}
	if !e.Match(payload) {
		b.Fatal("does not match")
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		e.Match(payload)
	}
}

// BenchmarkResolve over 100,000 rows: a keyword field ($eq on one of its
// values, $in on several) and a numeric range, each at 1 %, 10 % and
// 50 % of the rows.
func BenchmarkResolve(b *testing.B) {
	const rows = 100_000
	r := rand.New(rand.NewPCG(1, 2))
	payloads := make([][]byte, rows)
	for i := range payloads {
		// cat: "c0".."c99", each 1 % of rows; n: uniform in [0, 1000).
		payloads[i] = fmt.Appendf(nil, `{"cat": "c%d", "n": %d}`, r.IntN(100), r.IntN(1000))
	}
	c, err := filter.NewColumns(rows, func(row int) ([]byte, error) { return payloads[row], nil }, []string{"cat", "n"})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("Columns over %d rows: %d bytes", rows, c.Bytes())
	in := func(k int) filter.Expr {
		vs := make([]any, k)
		for i := range vs {
			vs[i] = fmt.Sprintf("c%d", i)
		}
		return filter.In("cat", vs...)
	}
	for _, tc := range []struct {
		name string
		e    filter.Expr
	}{
		{"keyword/sel=1%", filter.Eq("cat", "c7")},
		{"keyword/sel=10%", in(10)},
		{"keyword/sel=50%", in(50)},
		{"range/sel=1%", filter.And(filter.Gte("n", 500), filter.Lt("n", 510))},
		{"range/sel=10%", filter.And(filter.Gte("n", 500), filter.Lt("n", 600))},
		{"range/sel=50%", filter.Lt("n", 500)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rows, exact := tc.e.Resolve(c)
			if !exact {
				b.Fatal("not exact")
			}
			b.ReportMetric(float64(rows.GetCardinality())/100_000*100, "%rows")
			b.ReportAllocs()
			for b.Loop() {
				tc.e.Resolve(c)
			}
		})
	}
}

// BenchmarkNewColumns: indexing 100,000 payloads on 2 fields.
func BenchmarkNewColumns(b *testing.B) {
	const rows = 100_000
	payloads := make([][]byte, rows)
	for i := range payloads {
		payloads[i] = fmt.Appendf(nil, `{"cat": "c%d", "n": %d, "text": "some words"}`, i%100, i%1000)
	}
	get := func(row int) ([]byte, error) { return payloads[row], nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := filter.NewColumns(rows, get, []string{"cat", "n"}); err != nil {
			b.Fatal(err)
		}
	}
}
