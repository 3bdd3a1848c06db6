package index_test

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// FuzzSearchQuery searches small indexes of every metric with fuzzed
// queries: any float32 bits (NaN, infinities, subnormals, 1e38), any k and
// nprobe. Nothing may panic; a search either fails with ErrArgument or
// ErrDim (ErrZeroVector for a zero query under cosine), or returns at most k hits in range, sorted, none with a NaN
// distance, the same on a second search.
func FuzzSearchQuery(f *testing.F) {
	const n, d, m = 300, 8, 5
	dir := f.TempDir()
	var ixs []*index.Index
	for i, c := range []struct {
		kind   quant.Kind
		bits   int
		metric index.Metric
	}{
		{quant.KindRotated, 4, index.L2}, {quant.KindRotated, 8, index.IP}, {quant.KindRotated, 1, index.Cosine}, {quant.KindSQ8, 8, index.IP},
	} {
		p := filepath.Join(dir, string(rune('a'+i))+".vlc")
		if err := os.WriteFile(p, tinyIndex(f, n, d, m, c.kind, c.bits, c.metric), 0o644); err != nil {
			f.Fatal(err)
		}
		ix, err := index.Open(p, index.Options{Verify: true})
		if err != nil {
			f.Fatal(err)
		}
		defer ix.Close()
		ixs = append(ixs, ix)
	}
	query := func(vals ...float32) []byte {
		b := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	f.Add(query(1, 2, 3, 4, 5, 6, 7, 8), 10, 5)
	f.Add(query(1e-30, 0, 0, 0, 0, 0, 0, -1e-30), 3, 1)
	f.Add(query(1e-45, 1e-45, 0, 0, 0, 0, 0, 0), 300, 5)
	f.Add(query(3e38, -3e38, 0, 0, 0, 0, 0, 1), 1, 2)
	f.Add(query(1e19, 1e19, 1e19, 1e19, 1e19, 1e19, 1e19, 1e19), 7, 3)
	f.Add(query(0, 0, 0, 0, 0, 0, 0, 0), 2, 5)
	f.Fuzz(func(t *testing.T, b []byte, k, nprobe int) {
		q := make([]float32, len(b)/4)
		for i := range q {
			q[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		opt := index.SearchOptions{K: k % 400, NProbe: nprobe % 8}
		for _, ix := range ixs {
			hits, err := ix.Search(q, opt)
			if err != nil {
				zero := errors.Is(err, index.ErrZeroVector) && ix.Meta().Metric == index.Cosine
				if !errors.Is(err, index.ErrArgument) && !errors.Is(err, index.ErrDim) && !zero {
					t.Fatalf("%v: error %v", ix.Meta().Metric, err)
				}
				continue
			}
			if len(hits) > opt.K {
				t.Fatalf("%d hits for k %d", len(hits), opt.K)
			}
			for i, h := range hits {
				if h.ID < 0 || h.ID >= n || h.Distance != h.Distance {
					t.Fatalf("%v: hit %d: %+v (query %v)", ix.Meta().Metric, i, h, q)
				}
				if i > 0 && h.Distance < hits[i-1].Distance {
					t.Fatalf("hits not sorted: %v", hits)
				}
			}
			again, _ := ix.Search(q, opt)
			if !slices.Equal(hits, again) {
				t.Fatalf("a second search differs: %v then %v", hits, again)
			}
		}
	})
}
