package index_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
)

// flatMeta is the META of an exact index: the flat code, nothing trained.
func flatMeta(metric index.Metric) index.Meta {
	return index.Meta{Code: uint32(quant.KindFlat), Metric: metric, Seed: 1}
}

// writeFlat writes rows lo..hi-1 of rows as an exact index at path: one
// anchor at the origin, every row in its list, the flat code, and keys
// "k<row>" and payloads "p<row>" (numbered from lo) when named.
func writeFlat(t testing.TB, path string, rows memRows, lo, hi int, metric index.Metric, named bool) {
	t.Helper()
	d := rows.d
	part := memRows{hi - lo, d, rows.x[lo*d : hi*d]}
	plan := index.Plan{Rows: part, Anchors: make([]float32, d), Assign: make([]int32, hi-lo), Meta: flatMeta(metric)}
	if named {
		for r := lo; r < hi; r++ {
			plan.Keys = append(plan.Keys, fmt.Sprintf("k%d", r))
			plan.Payloads = append(plan.Payloads, fmt.Appendf(nil, "p%d", r))
		}
	}
	if err := index.WriteContext(context.Background(), path, plan); err != nil {
		t.Fatal(err)
	}
}

// flatRows are n seeded random rows of dimension d, normalised for cosine
// (as a store hands its rows to the index).
func flatRows(n, d int, metric index.Metric) memRows {
	rows := randRows(n, d, 31)
	if metric == index.Cosine {
		for i := range n {
			vec.Normalize(rows.x[i*d : (i+1)*d])
		}
	}
	return rows
}

// bruteForce is the k nearest of rows to q allowed by keep (nil: all) as
// the index defines distances, computed row by row with vec: the hits an
// exact index must return, bit for bit.
func bruteForce(rows memRows, q []float32, k int, metric index.Metric, keep func(int) bool) []index.Hit {
	q = slices.Clone(q)
	if metric == index.Cosine {
		vec.Normalize(q)
	}
	var hits []index.Hit
	for i := range rows.n {
		if keep != nil && !keep(i) {
			continue
		}
		x := rows.x[i*rows.d : (i+1)*rows.d]
		var dist float32
		switch metric {
		case index.L2:
			dist = vec.L2(q, x)
		case index.IP:
			dist = -vec.Dot(q, x)
		case index.Cosine:
			dist = vec.L2(q, x) / 2
		}
		hits = append(hits, index.Hit{ID: i, Distance: dist})
	}
	slices.SortFunc(hits, func(a, b index.Hit) int { return cmp.Or(cmp.Compare(a.Distance, b.Distance), cmp.Compare(a.ID, b.ID)) })
	return hits[:min(k, len(hits))]
}

// reference64 is the distance of x to q under metric in float64.
func reference64(q, x []float32, metric index.Metric) float64 {
	var qq, xx, qx, l2 float64
	for j := range q {
		a, b := float64(q[j]), float64(x[j])
		qq, xx, qx, l2 = qq+a*a, xx+b*b, qx+a*b, l2+(a-b)*(a-b)
	}
	switch metric {
	case index.IP:
		return -qx
	case index.Cosine:
		return 1 - qx/math.Sqrt(qq*xx)
	}
	return l2
}

func sameHits(t *testing.T, what string, got, want []index.Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || math.Float32bits(got[i].Distance) != math.Float32bits(want[i].Distance) {
			t.Fatalf("%s: hit %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// rowBits is an index.RowSet.
type rowBits []bool

func (s rowBits) Allows(row int) bool { return row >= 0 && row < len(s) && s[row] }
func (s rowBits) Count() int {
	c := 0
	for _, b := range s {
		if b {
			c++
		}
	}
	return c
}
func (s rowBits) Each(yield func(int) bool) {
	for r, b := range s {
		if b && !yield(r) {
			return
		}
	}
}

func everyNth(n, step int) rowBits {
	s := make(rowBits, n)
	for r := 0; r < n; r += step {
		s[r] = true
	}
	return s
}

// An index of the flat code under one anchor at the origin is exact: for
// every metric, Search and SearchBatch with NProbe 1 return the
// brute-force hits, ids and distances bit for bit (every row ranked, with
// K the whole index), those distances are the float64 ones within float32
// rounding, and so are searches filtered by a small RowSet (scored row by
// row) and by a large one (filtered during the scan); Reconstruct gives
// the rows back bit for bit; the file is the size PredictSize says.
func TestFlatIndexExact(t *testing.T) {
	const n, d, nq, k = 1000, 96, 12, 10
	for _, metric := range []index.Metric{index.L2, index.IP, index.Cosine} {
		t.Run(metric.String(), func(t *testing.T) {
			rows := flatRows(n, d, metric)
			path := filepath.Join(t.TempDir(), "flat.vlc")
			writeFlat(t, path, rows, 0, n, metric, true)
			ix := open(t, path)
			if got := ix.Meta().CodeSpec(); got != (quant.Spec{Kind: quant.KindFlat, Dim: d, Bits: 32, Seed: 1}) {
				t.Errorf("spec %+v", got)
			}
			bare := filepath.Join(t.TempDir(), "bare.vlc") // no keys or payloads: what PredictSize counts
			writeFlat(t, bare, rows, 0, n, metric, false)
			st, err := os.Stat(bare)
			if err != nil {
				t.Fatal(err)
			}
			if want, err := index.PredictSize(n, 1, quant.Spec{Kind: quant.KindFlat, Dim: d}); err != nil || want != st.Size() {
				t.Errorf("file %d bytes, PredictSize %d, %v", st.Size(), want, err)
			}
			queries := randRows(nq, d, 32)
			copy(queries.x[:d], rows.x[5*d:6*d]) // a stored row: distance 0 under l2 and cosine
			batch, err := ix.SearchBatch(context.Background(), queries, index.SearchOptions{K: k, NProbe: 1})
			if err != nil {
				t.Fatal(err)
			}
			small, large := everyNth(n, 7), everyNth(n, 2) // 143 rows: scored one by one; 500: filtered in the scan
			for i := range nq {
				q := queries.x[i*d : (i+1)*d]
				want := bruteForce(rows, q, k, metric, nil)
				hits, err := ix.Search(q, index.SearchOptions{K: k, NProbe: 1})
				if err != nil {
					t.Fatal(err)
				}
				sameHits(t, fmt.Sprintf("query %d", i), hits, want)
				sameHits(t, fmt.Sprintf("query %d, batch", i), batch[i], want)
				nq := slices.Clone(q)
				if metric == index.Cosine {
					vec.Normalize(nq)
				}
				for _, h := range hits {
					ref := reference64(q, rows.x[h.ID*d:(h.ID+1)*d], metric)
					if math.Abs(float64(h.Distance)-ref) > 1e-5*(1+math.Abs(ref)) {
						t.Errorf("query %d row %d: distance %g, float64 %g", i, h.ID, h.Distance, ref)
					}
				}
				for _, f := range []rowBits{small, large} {
					hits, err := ix.Search(q, index.SearchOptions{K: k, NProbe: 1, Filter: f})
					if err != nil {
						t.Fatal(err)
					}
					sameHits(t, fmt.Sprintf("query %d, %d rows allowed", i, f.Count()), hits, bruteForce(rows, q, k, metric, f.Allows))
				}
			}
			all, err := ix.Search(queries.x[d:2*d], index.SearchOptions{K: n})
			if err != nil {
				t.Fatal(err)
			}
			sameHits(t, "every row", all, bruteForce(rows, queries.x[d:2*d], n, metric, nil))
			seen := 0
			err = ix.Reconstruct(func(row int, x []float32) error {
				seen++
				for j, v := range x {
					if want := rows.x[row*d+j]; math.Float32bits(v) != math.Float32bits(want) {
						return fmt.Errorf("row %d value %d: %v, stored %v", row, j, v, want)
					}
				}
				return nil
			})
			if err != nil || seen != n {
				t.Errorf("Reconstruct: %d rows, %v", seen, err)
			}
			if r, ok := ix.Find("k417"); !ok || r != 417 {
				t.Errorf("Find(k417) = %d, %v", r, ok)
			}
			if p, err := ix.Payload(417); err != nil || string(p) != "p417" {
				t.Errorf("Payload(417) = %q, %v", p, err)
			}
		})
	}
}

// Two flat files searched as a Group return what one file of all their
// rows does, filtered or not; Merge of the two writes that one file, byte
// for byte.
func TestFlatGroupAndMerge(t *testing.T) {
	const n, d, cut, k = 600, 48, 250, 10
	for _, metric := range []index.Metric{index.L2, index.IP, index.Cosine} {
		t.Run(metric.String(), func(t *testing.T) {
			rows := flatRows(n, d, metric)
			dir := t.TempDir()
			p0, p1, whole := filepath.Join(dir, "a.vlc"), filepath.Join(dir, "b.vlc"), filepath.Join(dir, "whole.vlc")
			writeFlat(t, p0, rows, 0, cut, metric, true)
			writeFlat(t, p1, rows, cut, n, metric, true)
			writeFlat(t, whole, rows, 0, n, metric, true)
			a, b, w := open(t, p0), open(t, p1), open(t, whole)
			g, err := index.NewGroup(a, b)
			if err != nil {
				t.Fatal(err)
			}
			queries := randRows(5, d, 33)
			for i := range queries.n {
				q := queries.x[i*d : (i+1)*d]
				for _, f := range []index.Filter{nil, everyNth(n, 5), everyNth(n, 2)} {
					opt := index.SearchOptions{K: k, NProbe: 1, Filter: f}
					got, err := g.Search(context.Background(), q, opt)
					if err != nil {
						t.Fatal(err)
					}
					want, err := w.Search(q, opt)
					if err != nil {
						t.Fatal(err)
					}
					sameHits(t, fmt.Sprintf("query %d, filter %v", i, f != nil), got, want)
				}
			}
			merged := filepath.Join(dir, "merged.vlc")
			parts := []index.MergePart{{Index: a}, {Index: b}}
			if got, err := index.Merge(context.Background(), merged, parts, flatMeta(metric), index.MergeOptions{}); err != nil || got != n {
				t.Fatalf("Merge: %d rows, %v", got, err)
			}
			mb, err := os.ReadFile(merged)
			if err != nil {
				t.Fatal(err)
			}
			wb, err := os.ReadFile(whole)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mb, wb) {
				m := open(t, merged)
				for i, s := range m.Sections() {
					ws := w.Sections()[i]
					if !bytes.Equal(mb[s.Offset:s.Offset+s.Length], wb[ws.Offset:ws.Offset+ws.Length]) {
						t.Errorf("section %v of the merged file differs from the file of all rows", s.Kind)
					}
				}
				t.Errorf("merged file (%d bytes) differs from the file of all rows (%d bytes)", len(mb), len(wb))
			}
			if !a.CanMerge() {
				t.Error("CanMerge: false for the flat code")
			}
		})
	}
}

// BenchmarkFlatSearch is one query against an exact index of 5,000 rows
// of 384 dimensions (a store's collection before training): SetBytes is
// the codes read, so MB/s compares with the memory bandwidth, and with
// read-floor, which only reads as many bytes (eight words at a time).
func BenchmarkFlatSearch(b *testing.B) {
	const n, d = 5000, 384
	b.Run(fmt.Sprintf("n=%d/d=%d/read-floor", n, d), func(b *testing.B) {
		words := make([]uint64, n*d/2)
		for i := range words {
			words[i] = uint64(i)
		}
		b.SetBytes(int64(n * d * 4))
		var sink uint64
		for b.Loop() {
			var s [8]uint64
			for i := 0; i+8 <= len(words); i += 8 {
				w := words[i : i+8 : i+8]
				s[0] ^= w[0]
				s[1] ^= w[1]
				s[2] ^= w[2]
				s[3] ^= w[3]
				s[4] ^= w[4]
				s[5] ^= w[5]
				s[6] ^= w[6]
				s[7] ^= w[7]
			}
			sink += s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]
		}
		_ = sink
	})
	for _, metric := range []index.Metric{index.L2, index.IP, index.Cosine} {
		b.Run(fmt.Sprintf("n=%d/d=%d/%s", n, d, metric), func(b *testing.B) {
			rows := flatRows(n, d, metric)
			path := filepath.Join(b.TempDir(), "flat.vlc")
			writeFlat(b, path, rows, 0, n, metric, false)
			ix := open(b, path)
			q := randRows(1, d, 34).x
			var dst []index.Hit
			b.SetBytes(int64(n * d * 4))
			for b.Loop() {
				var err error
				if dst, err = ix.SearchAppend(dst[:0], q, index.SearchOptions{K: 10, NProbe: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The flat code under several anchors, in the inner-product form
// (FlagIPCodes, whose L2 estimate the search takes for lists whose anchor
// is nearer the query than the origin) and the plain form, scanning every
// list: the hits are the float64 brute force's, their distances within
// float32 rounding of the float64 ones.
func TestFlatIPCodes(t *testing.T) {
	const n, d, m, k = 400, 32, 6, 10
	rows := randRows(n, d, 35)
	anchors := make([]float32, m*d)
	assign := make([]int32, n)
	for i := range n {
		assign[i] = int32(i % m)
		for j := range d {
			anchors[(i%m)*d+j] += 3 * rows.x[i*d+j] / float32(n/m) // far from the origin
		}
	}
	for _, flags := range []uint32{0, index.FlagIPCodes} {
		path := filepath.Join(t.TempDir(), "ip.vlc")
		meta := flatMeta(index.IP)
		meta.Flags = flags
		if err := index.Write(path, index.Plan{Rows: rows, Anchors: anchors, Assign: assign, Meta: meta}); err != nil {
			t.Fatal(err)
		}
		ix := open(t, path)
		queries := randRows(8, d, 36)
		for i := range queries.n {
			q := queries.x[i*d : (i+1)*d]
			hits, err := ix.Search(q, index.SearchOptions{K: k, NProbe: m})
			if err != nil {
				t.Fatal(err)
			}
			want := make([]index.Hit, n)
			for r := range n {
				want[r] = index.Hit{ID: r, Distance: float32(reference64(q, rows.x[r*d:(r+1)*d], index.IP))}
			}
			slices.SortFunc(want, func(a, b index.Hit) int { return cmp.Or(cmp.Compare(a.Distance, b.Distance), cmp.Compare(a.ID, b.ID)) })
			for h := range k {
				if hits[h].ID != want[h].ID || math.Abs(float64(hits[h].Distance-want[h].Distance)) > 1e-4*(1+math.Abs(float64(want[h].Distance))) {
					t.Fatalf("flags %d query %d: hit %d is %+v, want %+v", flags, i, h, hits[h], want[h])
				}
			}
		}
	}
}
