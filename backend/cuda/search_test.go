//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	searchtest "github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/internal/f16"
)

// The device search gives the CPU path's hits (index/devicetest's suite:
// every bits setting and metric, entry counts and lists that straddle the
// 32-entry tiles and the 256-thread blocks, nprobe 1 to all lists).
func TestSearchParity(t *testing.T) {
	searchtest.Parity(t, gpuDevice(t), searchtest.Options{Cases: searchtest.DefaultCases}) // the codes' cases: TestCodesParity
}

// A batch larger than one pass is split into passes with the same hits.
func TestSearchSplit(t *testing.T) {
	dev := gpuDevice(t)
	t.Setenv("VLC_CUDA_SEARCH_BATCH", "7")
	searchtest.Parity(t, dev, searchtest.Options{Cases: searchtest.DefaultCases[:1]})
}

// Dimensions whose scan needs more than 48 KiB of shared memory (the
// opt-in), and one that is a power of two (one Walsh-Hadamard block).
func TestSearchWide(t *testing.T) {
	searchtest.Parity(t, gpuDevice(t), searchtest.Options{Cases: []searchtest.Case{
		{Name: "l2-d1536-b4", N: 400, Dim: 1536, Lists: 5, Bits: 4, Metric: index.L2, Queries: 20},
		{Name: "cos-d1024-b8", N: 400, Dim: 1024, Lists: 6, Bits: 8, Metric: index.Cosine, Queries: 20},
	}})
}

// 100 uploads, searches and closes leave the device's free memory as
// it was.
func TestSearchNoLeak(t *testing.T) {
	dev := gpuDevice(t)
	b := searchtest.Build(t, t.TempDir(), searchtest.DefaultCases[0])
	cycle := func() {
		di, err := b.Index.OnDevice(dev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := di.SearchBatch(context.Background(), b.Queries, index.SearchOptions{K: 10, NProbe: 5}); err != nil {
			t.Fatal(err)
		}
		if di.DeviceBytes() <= 0 {
			t.Errorf("DeviceBytes %d", di.DeviceBytes())
		}
		if err := di.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // the module and the staging buffer stay loaded
	var before int64
	dev.run(func() (err error) { before, _, err = dev.memInfo(); return err })
	for range 100 {
		cycle()
	}
	var after int64
	dev.run(func() (err error) { after, _, err = dev.memInfo(); return err })
	if after != before {
		t.Errorf("free device memory %d before 100 cycles, %d after", before, after)
	}
}

// A batch whose one query cannot fit is a clear out-of-memory error.
func TestSearchOutOfMemory(t *testing.T) {
	dev := gpuDevice(t)
	r := &resident{d: dev, data: &device.IndexData{Dim: 8, Lists: 1 << 40}}
	_, err := r.batchSize(1, 1, 1)
	if !errors.Is(err, errOutOfMemory) {
		t.Fatalf("batchSize: %v, want errOutOfMemory", err)
	}
	t.Log(err)
}

// Each scan and each anchor product, forced, passes the suite: the
// tensor-core scan (tiles of 32 queries of a list; lists of 1 to a few
// hundred pairs; wide dimensions) and the FMA scan at every batch size;
// the float32 dots and the tensor-core ones past 8 queries.
func TestSearchScans(t *testing.T) {
	dev := gpuDevice(t)
	cases := append(append([]searchtest.Case(nil), searchtest.DefaultCases...),
		searchtest.Case{Name: "l2-d1536-b4", N: 400, Dim: 1536, Lists: 5, Bits: 4, Metric: index.L2, Queries: 20},
		searchtest.Case{Name: "cos-d1024-b8", N: 400, Dim: 1024, Lists: 6, Bits: 8, Metric: index.Cosine, Queries: 20})
	for _, scan := range []string{"fma", "mma"} {
		t.Run(scan, func(t *testing.T) {
			t.Setenv("VLC_CUDA_SEARCH_SCAN", scan)
			t.Setenv("VLC_CUDA_SEARCH_DOTS", scan)
			searchtest.Parity(t, dev, searchtest.Options{Cases: cases})
		})
	}
}

// The kernels a setting switches give the CPU's hits too: the
// block-a-query rotation (VLC_CUDA_SEARCH_ROTATE=block, against the
// warp-a-query one every other test takes), 4 threads an entry in the
// scan of a few pairs (VLC_CUDA_SEARCH_LANES=4, against 8), and the
// tensor-core scan's tiles of 16 and of 32 queries, and a top-k that
// holds at most 64 candidates in shared memory (most queries select
// from memory). The cases add the rotation's block lengths of 128 and
// 256.
func TestSearchVariants(t *testing.T) {
	dev := gpuDevice(t)
	cases := append(append([]searchtest.Case(nil), searchtest.DefaultCases...),
		searchtest.Case{Name: "l2-d130-b4", N: 500, Dim: 130, Lists: 6, Bits: 4, Metric: index.L2, Queries: 20},
		searchtest.Case{Name: "ip-d300-b2", N: 500, Dim: 300, Lists: 7, Bits: 2, Metric: index.IP, Queries: 20},
		searchtest.Case{Name: "l2-d1536-b4", N: 400, Dim: 1536, Lists: 5, Bits: 4, Metric: index.L2, Queries: 20})
	for _, env := range [][]string{
		{"VLC_CUDA_SEARCH_ROTATE", "block"},
		{"VLC_CUDA_SEARCH_LANES", "4"},
		{"VLC_CUDA_SEARCH_SCAN", "mma", "VLC_CUDA_SEARCH_TILE", "16"},
		{"VLC_CUDA_SEARCH_SCAN", "mma", "VLC_CUDA_SEARCH_TILE", "32"},
		{"VLC_CUDA_SEARCH_CACHED", "64"},
	} {
		t.Run(strings.Join(env, ","), func(t *testing.T) {
			for i := 0; i < len(env); i += 2 {
				t.Setenv(env[i], env[i+1])
			}
			searchtest.Parity(t, dev, searchtest.Options{Cases: cases})
		})
	}
}

// Many lists and a few probed: the probe takes its sampled selection
// (at least 512 lists, nprobe at most an eighth of them), one query at
// a time and in batches. (Lists at equal distance, which it breaks to the
// lower list, are not among these queries'.)
func TestSearchManyLists(t *testing.T) {
	dev := gpuDevice(t)
	c := searchtest.Case{Name: "l2-d64-b4-many", N: 6000, Dim: 64, Lists: 700, Bits: 4, Metric: index.L2, Queries: 40}
	b := searchtest.Build(t, t.TempDir(), c)
	di, err := b.Index.OnDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer di.Close()
	scale := 0.0
	for i := range b.Base.Len() {
		var s float64
		for _, v := range b.Base.Row(i, nil) {
			s += float64(v) * float64(v)
		}
		scale = max(scale, math.Sqrt(s))
	}
	for _, nprobe := range []int{1, 3, 20, 64, 87} {
		so := index.SearchOptions{K: 10, NProbe: nprobe}
		want, err := b.Index.SearchBatch(context.Background(), b.Queries, so)
		if err != nil {
			t.Fatal(err)
		}
		got, err := di.SearchBatch(context.Background(), b.Queries, so)
		if err != nil {
			t.Fatal(err)
		}
		searchtest.Compare(t, fmt.Sprintf("nprobe %d", nprobe), b.Queries, scale, want, got)
		for i := range 3 {
			q := b.Queries.Row(i, nil)
			one, err := di.Search(q, so)
			if err != nil {
				t.Fatal(err)
			}
			searchtest.Compare(t, fmt.Sprintf("nprobe %d, query %d alone", nprobe, i), queryRow(q), scale, want[i:i+1], [][]index.Hit{one})
		}
	}
}

// queryRow is one query as index.Rows.
type queryRow []float32

func (q queryRow) Len() int                           { return 1 }
func (q queryRow) Dim() int                           { return len(q) }
func (q queryRow) Row(i int, dst []float32) []float32 { return q }

// synthetic is an index of random codes (the search's arithmetic does
// not need them to come from vectors): n entries of dim levels of bits
// each, in lists of random sizes.
func synthetic(rng *rand.Rand, n, dim, lists, bits int) *device.IndexData {
	words := dim * bits / 32
	d := &device.IndexData{N: n, Dim: dim, Lists: lists, Bits: bits, Words: words, RotP: dim, RotScale: float32(1 / math.Sqrt(float64(dim))),
		RotAnchors: make([]float32, lists*dim), Norms: make([]float32, lists), Offsets: make([]uint64, lists+1),
		Scale: make([]float32, lists), SqrtScale: make([]float32, lists)}
	for range 3 {
		s := make([]float32, dim)
		for j := range s {
			s[j] = float32(1 - 2*rng.IntN(2))
		}
		d.Signs = append(d.Signs, s)
	}
	for a := range lists {
		for j := range dim {
			v := float32(rng.NormFloat64())
			d.RotAnchors[a*dim+j] = v
			d.Norms[a] += v * v
		}
		d.Scale[a] = 0.01 + rng.Float32()
		d.SqrtScale[a] = float32(math.Sqrt(float64(d.Scale[a])))
	}
	cuts := make([]int, lists-1)
	for i := range cuts {
		cuts[i] = rng.IntN(n + 1)
	}
	slices.Sort(cuts)
	for a, c := range cuts {
		d.Offsets[a+1] = uint64(c)
	}
	d.Offsets[lists] = uint64(n)
	code := make([]uint32, d.Tiles()*words*device.Tile)
	scal := make([]uint32, d.Tiles()*device.Tile)
	for i := range code {
		code[i] = rng.Uint32()
	}
	for e := range scal {
		if e < n {
			scal[e] = uint32(f16.FromFloat32(0.5+rng.Float32())) | uint32(f16.FromFloat32(0.5+rng.Float32()))<<16
		}
	}
	d.Fill = func(t0, t1 int, w, s []uint32) error {
		copy(w, code[t0*words*device.Tile:t1*words*device.Tile])
		copy(s, scal[t0*device.Tile:t1*device.Tile])
		return nil
	}
	return d
}

// A masked search gives what an unmasked one gives with the masked
// entries left out, on both scans; a mask that leaves fewer than keep
// pads with -1.
func TestSearchMasked(t *testing.T) {
	dev := gpuDevice(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, scan := range []string{"fma", "mma"} {
		t.Run(scan, func(t *testing.T) {
			t.Setenv("VLC_CUDA_SEARCH_SCAN", scan)
			data := synthetic(rng, 3001, 64, 12, 4)
			res, err := dev.UploadIndex(data)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			nq, nprobe, keep := 200, 5, 10
			q := make([]float32, nq*data.Dim)
			for i := range q {
				q[i] = float32(rng.NormFloat64())
			}
			all := data.MaxCandidates(nprobe)
			wantE, wantD := make([]int32, nq*all), make([]float32, nq*all)
			if err := res.Search(context.Background(), q, nq, nprobe, all, wantE, wantD); err != nil {
				t.Fatal(err)
			}
			for _, share := range []float64{0.5, 0.01, 0} {
				allow := make([]uint64, (data.N+63)/64)
				for e := range data.N {
					if rng.Float64() < share {
						allow[e/64] |= 1 << (e % 64)
					}
				}
				e, d := make([]int32, nq*keep), make([]float32, nq*keep)
				if err := res.(device.MaskedResident).SearchMasked(context.Background(), q, nq, nprobe, keep, allow, e, d); err != nil {
					t.Fatal(err)
				}
				for i := range nq {
					j := 0
					for _, x := range wantE[i*all : (i+1)*all] {
						if x < 0 || j == keep {
							break
						}
						if allow[x/64]>>(x%64)&1 == 0 {
							continue
						}
						if e[i*keep+j] != x {
							t.Fatalf("share %v, query %d, hit %d: entry %d, want %d", share, i, j, e[i*keep+j], x)
						}
						j++
					}
					for ; j < keep; j++ {
						if e[i*keep+j] != -1 || !math.IsInf(float64(d[i*keep+j]), 1) {
							t.Fatalf("share %v, query %d, hit %d: entry %d at %v, want -1 at +Inf", share, i, j, e[i*keep+j], d[i*keep+j])
						}
					}
				}
			}
		})
	}
}
