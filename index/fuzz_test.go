package index_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/quant"
)

const goldenIndex = "../testdata/golden/v1.vlc"

// memRows is an in-memory index.Rows.
type memRows struct {
	n, d int
	x    []float32
}

func (r memRows) Len() int { return r.n }
func (r memRows) Dim() int { return r.d }
func (r memRows) Row(i int, dst []float32) []float32 {
	if cap(dst) < r.d {
		dst = make([]float32, r.d)
	}
	dst = dst[:r.d]
	copy(dst, r.x[i*r.d:(i+1)*r.d])
	return dst
}

func randRows(n, d int, seed uint64) memRows {
	rng := rand.New(rand.NewPCG(seed, 3))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return memRows{n, d, x}
}

// tinyIndex encodes a small index of every code and metric in memory: the
// fuzz seeds besides the golden file.
func tinyIndex(t testing.TB, n, d, m int, kind quant.Kind, bits int, metric index.Metric) []byte {
	t.Helper()
	rows := randRows(n, d, uint64(n*d+bits))
	anchors := make([]float32, m*d)
	assign := make([]int32, n)
	for i := range assign {
		assign[i] = int32(i % m)
		for j := range d {
			anchors[(i%m)*d+j] += rows.x[i*d+j] / float32((n+m-1-i%m)/m)
		}
	}
	secs, err := index.Build(index.Plan{Rows: rows, Anchors: anchors, Assign: assign,
		Meta: index.Meta{Code: uint32(kind), Bits: uint32(bits), Metric: metric, Seed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := format.Encode(&b, secs); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fixCRCs makes b's container self-consistent wherever its section table
// allows: the file size field, every in-bounds section's CRC, and the
// header CRC (FORMAT.md, "Container"). It reports whether the table fits.
// Damage is then no longer caught by a checksum and reaches the index's
// own checks and the search path.
func fixCRCs(b []byte) bool {
	le := binary.LittleEndian
	if len(b) < 64 || string(b[:8]) != "VLCINDEX" {
		return false
	}
	n := int(le.Uint32(b[12:]))
	if n < 1 || n > 64 || 64+32*n > len(b) {
		return false
	}
	le.PutUint64(b[16:], uint64(len(b)))
	for i := range n {
		e := b[64+32*i:]
		off, length := le.Uint64(e[8:]), le.Uint64(e[16:])
		if off <= uint64(len(b)) && length <= uint64(len(b))-off {
			le.PutUint32(e[24:], crc32.Checksum(b[off:off+length], castagnoli))
		}
	}
	fixHeaderOnly(b)
	return true
}

// fixHeaderOnly recomputes the header CRC of b, whose table must fit.
func fixHeaderOnly(b []byte) {
	n := int(binary.LittleEndian.Uint32(b[12:]))
	var h [64]byte
	copy(h[:], b)
	clear(h[24:28])
	binary.LittleEndian.PutUint32(b[24:], crc32.Update(crc32.Checksum(h[:], castagnoli), castagnoli, b[64:64+32*n]))
}

// FuzzIndex opens fuzzed index files and searches them. With Verify off a
// structurally valid file whose checksums do not match reaches the search
// path, so every input is tried as it is and again with its checksums
// recomputed (fixCRCs), which lets the fuzzer go past the container into
// META, the list offsets, the row ids and the codes. Nothing may panic or
// hang; Open may only fail with one of the documented sentinels, naming the
// file; a search may only fail with ErrCorrupt; hits must be in range,
// sorted, at most k, exactly min(k, n) when every list is scanned, and the
// same on a second run.
func FuzzIndex(f *testing.F) {
	golden, err := os.ReadFile(goldenIndex)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	for _, c := range []struct {
		kind   quant.Kind
		bits   int
		metric index.Metric
	}{
		{quant.KindRotated, 1, index.L2}, {quant.KindRotated, 2, index.IP}, {quant.KindRotated, 4, index.Cosine},
		{quant.KindRotated, 8, index.IP}, {quant.KindSQ8, 8, index.L2}, {quant.KindSQ8, 8, index.Cosine},
		{quant.KindFlat, 32, index.L2},
	} {
		f.Add(tinyIndex(f, 13, 5, 3, c.kind, c.bits, c.metric))
	}
	path := filepath.Join(f.TempDir(), "f.vlc") // one per worker process; its calls are sequential
	f.Fuzz(func(t *testing.T, b []byte) {
		checkIndex(t, path, b)
		b = bytes.Clone(b)
		if fixCRCs(b) {
			checkIndex(t, path, b)
		}
	})
}

func isIndexErr(err error) bool {
	return errors.Is(err, index.ErrCorrupt) || errors.Is(err, index.ErrNotIndex) || errors.Is(err, index.ErrVersion)
}

func checkIndex(t *testing.T, path string, b []byte) {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(path, index.Options{})
	vix, verr := index.Open(path, index.Options{Verify: true})
	if verr == nil {
		defer vix.Close()
	}
	if err != nil {
		if !isIndexErr(err) || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open: %v: wraps no sentinel or does not name the file", err)
		}
		if verr == nil {
			t.Fatalf("Open without Verify failed (%v), with Verify succeeded", err)
		}
		return
	}
	defer ix.Close()
	if verr != nil {
		if lerr := ix.Verify(); !errors.Is(verr, index.ErrCorrupt) || lerr == nil {
			t.Fatalf("Open(Verify) = %v but Verify after a lazy Open = %v", verr, lerr)
		}
	} else if lerr := ix.Verify(); lerr != nil {
		t.Fatalf("Open(Verify) succeeded but Verify after a lazy Open = %v", lerr)
	}

	n, d, m := ix.Len(), ix.Dim(), int(ix.Meta().M)
	if n < 1 || d < 1 || m < 1 || m > n {
		t.Fatalf("opened with n %d, d %d, m %d", n, d, m)
	}
	sizes := ix.ListSizes()
	total := 0
	for _, s := range sizes {
		if s < 0 {
			t.Fatalf("negative list size %d", s)
		}
		total += s
	}
	if len(sizes) != m || total != n {
		t.Fatalf("%d list sizes summing to %d, want %d summing to %d", len(sizes), total, m, n)
	}
	if n*d > 1<<22 {
		return // a valid index too large to search quickly
	}
	rows := randRows(n, d, uint64(len(b)))
	q := make([]float32, d)
	for j := range q {
		q[j] = float32(j%7-3) / 4
	}
	for _, opt := range []index.SearchOptions{
		{K: 1, NProbe: 1},
		{K: 10, NProbe: m},
		{K: n + 5, NProbe: m + 3},
		{K: 3, NProbe: m, Rerank: rows, RerankFactor: 2},
		{K: 2, NProbe: 2, Rerank: rows, RerankFactor: math.MaxInt},
	} {
		for _, query := range [][]float32{q, rows.Row(0, nil)} {
			hits, err := ix.Search(query, opt)
			if err != nil {
				if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), path) {
					t.Fatalf("Search(%+v): %v, want ErrCorrupt naming the file", opt, err)
				}
				continue
			}
			k := min(opt.K, n)
			if len(hits) > k || (opt.NProbe >= m && len(hits) != k) {
				t.Fatalf("Search(K %d, NProbe %d) of %d vectors in %d lists: %d hits", opt.K, opt.NProbe, n, m, len(hits))
			}
			for i, h := range hits {
				if h.ID < 0 || h.ID >= n {
					t.Fatalf("hit %d: id %d of %d", i, h.ID, n)
				}
				// l2 and cosine distances below 0 are clamped to 0 after
				// the sort: hits tied at 0 keep the estimate's order.
				if i > 0 && compareHits(hits[i-1], h) > 0 && !(ix.Meta().Metric != index.IP && h.Distance == 0 && hits[i-1].Distance == 0) {
					t.Fatalf("hits not sorted at %d: %+v then %+v", i, hits[i-1], h)
				}
			}
			again, err := ix.Search(query, opt)
			if err != nil || !slices.EqualFunc(hits, again, sameHit) {
				t.Fatalf("second search differs: %v, %v vs %v", err, hits, again)
			}
		}
	}
}

// compareHits orders hits as Search does: by distance (NaN first, as
// cmp.Compare does), then by ID.
func compareHits(a, b index.Hit) int {
	da, db := float64(a.Distance), float64(b.Distance)
	switch {
	case math.IsNaN(da) && math.IsNaN(db):
	case math.IsNaN(da) || da < db:
		return -1
	case math.IsNaN(db) || da > db:
		return 1
	}
	return a.ID - b.ID
}

// sameHit compares hits bit for bit, so that two NaN distances are equal.
func sameHit(a, b index.Hit) bool {
	return a.ID == b.ID && math.Float32bits(a.Distance) == math.Float32bits(b.Distance)
}
