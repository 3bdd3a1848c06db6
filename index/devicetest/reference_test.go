package devicetest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/quant"
)

// The plain-Go search of device.IndexData gives the CPU path's hits: the
// description the GPU kernels implement is right. Under -short (make
// test's race pass) a case of each kind of search runs; the full pass
// runs them all.
func TestReferenceParity(t *testing.T) {
	opt := devicetest.Options{}
	if testing.Short() {
		d, c := devicetest.DefaultCases, devicetest.CodeCases
		opt.Cases = []devicetest.Case{d[1], d[7], c[1], c[5]} // rotated 1 bit; ip codes; pq cosine 1 bit; sq8 cosine
	}
	devicetest.Parity(t, devicetest.Reference(), opt)
}

// A device without masked search (WebGPU's kind) gives the CPU's filtered
// hits too: the index asks it for more candidates and drops the masked
// ones itself.
func TestUnmaskedFilteredParity(t *testing.T) {
	dev := devicetest.Unmasked(devicetest.Reference())
	cases := devicetest.DefaultCases[:3]
	if testing.Short() {
		cases = cases[2:]
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			b := devicetest.Build(t, t.TempDir(), c)
			di, err := b.Index.OnDevice(dev)
			if err != nil {
				t.Fatal(err)
			}
			defer di.Close()
			if di.Masked() {
				t.Fatal("Unmasked's resident claims a masked search")
			}
			devicetest.Filtered(t, b, di, c.Lists)
		})
	}
}

var _ index.Filter = (*devicetest.Filter)(nil)

// keeps records the keep of every search its residents run.
type keeps struct {
	dev  device.Searcher
	seen *[]int
}

type keepsResident struct {
	device.Resident
	seen *[]int
}

func (k keeps) UploadIndex(d *device.IndexData) (device.Resident, error) {
	r, err := k.dev.UploadIndex(d)
	if err != nil {
		return nil, err
	}
	return keepsResident{r, k.seen}, nil
}

func (r keepsResident) Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	*r.seen = append(*r.seen, keep)
	return r.Resident.Search(ctx, queries, nq, nprobe, keep, entries, dists)
}

// Where a filter drops more than device.MaxKeep of a query's nearest
// entries, a device without masks cannot return its hits: the query is
// searched on the CPU, with the CPU's hits.
func TestUnmaskedBeyondMaxKeep(t *testing.T) {
	c := devicetest.Case{Name: "wide", N: 6000, Dim: 16, Lists: 3, Bits: 4, Metric: index.L2, Queries: 20}
	b := devicetest.Build(t, t.TempDir(), c)
	var seen []int
	di, err := b.Index.OnDevice(keeps{devicetest.Unmasked(devicetest.Reference()), &seen})
	if err != nil {
		t.Fatal(err)
	}
	defer di.Close()
	so := index.SearchOptions{K: 10, NProbe: 3, Filter: devicetest.NewFilter(c.N, 0.001, false)}
	want, err := b.Index.SearchBatch(context.Background(), b.Queries, so)
	if err != nil {
		t.Fatal(err)
	}
	got, err := di.SearchBatch(context.Background(), b.Queries, so)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(seen, device.MaxKeep) {
		t.Fatalf("the device was asked for %v candidates, never %d: the case does not reach the limit", seen, device.MaxKeep)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("query %d: %v, cpu %v", i, got[i], want[i])
		}
	}
}

// The flat code has no device search: OnDevice says so.
func TestFlatNoSearch(t *testing.T) {
	b := devicetest.Build(t, t.TempDir(), devicetest.Case{Name: "flat", N: 100, Dim: 8, Lists: 2, Bits: 32, Metric: index.L2, Queries: 1, Code: quant.KindFlat})
	_, err := b.Index.OnDevice(devicetest.Reference())
	if !errors.Is(err, device.ErrNoSearch) || !strings.Contains(err.Error(), "flat") {
		t.Fatalf("OnDevice of a flat index: %v, want device.ErrNoSearch naming the code", err)
	}
}
