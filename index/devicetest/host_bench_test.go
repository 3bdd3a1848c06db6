package devicetest_test

import (
	"context"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
)

// instant is a device that answers at once: entry j of every query's
// results is entry j (the host side's cost alone).
type instant struct{}

func (instant) UploadIndex(d *device.IndexData) (device.Resident, error) { return instantRes{}, nil }

type instantRes struct{}

func (instantRes) Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	for i := range nq {
		for j := range keep {
			entries[i*keep+j], dists[i*keep+j] = int32(j), float32(j)
		}
	}
	return nil
}
func (instantRes) Bytes() int64 { return 0 }
func (instantRes) Close() error { return nil }

// lending is instant lending the memory queries are prepared in, as a
// GPU lends page-locked memory (device.HostBuffers): one buffer, reused.
type lending struct{}

func (lending) UploadIndex(d *device.IndexData) (device.Resident, error) {
	return &lendingRes{}, nil
}

type lendingRes struct {
	instantRes
	buf []float32
}

func (r *lendingRes) HostBuffer(n int) ([]float32, func(), error) {
	if cap(r.buf) < n {
		r.buf = make([]float32, n)
	}
	return r.buf[:n], func() {}, nil
}

// BenchmarkHostSide is what a device search costs the host (checking
// and preparing the queries, turning entries into hits) for a batch of
// 1,000 queries of dimension 768.
func BenchmarkHostSide(b *testing.B) { benchHostSide(b, instant{}) }

// BenchmarkHostSideLent is BenchmarkHostSide with the queries prepared in
// memory the device lends, as on a GPU.
func BenchmarkHostSideLent(b *testing.B) { benchHostSide(b, lending{}) }

func benchHostSide(b *testing.B, dev device.Searcher) {
	built := devicetest.Build(b, b.TempDir(), devicetest.Case{Name: "host", N: 3000, Dim: 768, Lists: 16, Bits: 4, Metric: index.L2, Queries: 1000})
	di, err := built.Index.OnDevice(dev)
	if err != nil {
		b.Fatal(err)
	}
	defer di.Close()
	opt := index.SearchOptions{K: 10, NProbe: 8}
	for b.Loop() {
		if _, err := di.SearchBatch(context.Background(), built.Queries, opt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "queries/s")
}

// BenchmarkHostSideOne is BenchmarkHostSide for one query at a time
// (DeviceIndex.Search), cycling through the 1,000.
func BenchmarkHostSideOne(b *testing.B) {
	built := devicetest.Build(b, b.TempDir(), devicetest.Case{Name: "host", N: 3000, Dim: 768, Lists: 16, Bits: 4, Metric: index.L2, Queries: 1000})
	di, err := built.Index.OnDevice(instant{})
	if err != nil {
		b.Fatal(err)
	}
	defer di.Close()
	opt := index.SearchOptions{K: 10, NProbe: 8}
	n := built.Queries.Len()
	qs := make([][]float32, n)
	for i := range qs {
		qs[i] = built.Queries.Row(i, nil)
	}
	i := 0
	for b.Loop() {
		if _, err := di.Search(qs[i%n], opt); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}
