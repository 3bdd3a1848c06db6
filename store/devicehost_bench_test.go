package store_test

import (
	"context"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/store"
)

// instant is a device that answers at once with each query's first keep
// allowed entries: what a store's device search costs the host.
type instant struct{}

type instantRes struct{}

func (instant) UploadIndex(d *device.IndexData) (device.Resident, error) { return instantRes{}, nil }

func (instantRes) Search(ctx context.Context, q []float32, nq, nprobe, keep int, e []int32, d []float32) error {
	return instantRes{}.SearchMasked(ctx, q, nq, nprobe, keep, nil, e, d)
}

func (instantRes) SearchMasked(ctx context.Context, q []float32, nq, nprobe, keep int, allow []uint64, e []int32, d []float32) error {
	for i := range nq {
		j := 0
		for x := 0; j < keep && (allow == nil || x < 64*len(allow)); x++ {
			if allow == nil || allow[x/64]>>(x%64)&1 != 0 {
				e[i*keep+j], d[i*keep+j] = int32(x), float32(x)
				j++
			}
		}
		for ; j < keep; j++ {
			e[i*keep+j], d[i*keep+j] = -1, float32(1e38)
		}
	}
	return nil
}
func (instantRes) Bytes() int64 { return 0 }
func (instantRes) Close() error { return nil }

// BenchmarkStoreDeviceHost is the host's share of a batch of 1,000
// queries searched on a device through a store of 10 segments with 5 %
// of its rows deleted (an instant device: no kernel time).
func BenchmarkStoreDeviceHost(b *testing.B) {
	path, queries := segmentedStore(b)
	st, err := store.OpenWith(path, store.OpenOptions{Manual: true, Device: instant{}})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	rows := make(queryRows, 1000)
	for i := range rows {
		rows[i] = queries[i%len(queries)]
	}
	opt := store.SearchOptions{K: 10, NProbe: 8}
	for b.Loop() {
		if _, err := st.SearchRows(context.Background(), rows, opt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(rows))/b.Elapsed().Seconds(), "queries/s")
}
