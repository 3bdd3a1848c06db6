//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	searchtest "github.com/vlc-embed/vlc/index/devicetest"
)

// searchers is devs as device.Searchers.
func searchers(devs []*Device) []device.Searcher {
	s := make([]device.Searcher, len(devs))
	for i, d := range devs {
		s[i] = d
	}
	return s
}

// An index split over 2 and 3 Devices on one GPU (device.SplitSearch)
// passes the conformance suite, and an index of fewer lists than devices.
func TestSplitSearchParity(t *testing.T) {
	devs := sharedDevices(t, 3)
	cases := append(slices.Clone(searchtest.DefaultCases), searchtest.Case{Name: "l2-d32-b4-2lists", N: 300, Dim: 32, Lists: 2, Bits: 4, Metric: index.L2, Queries: 20})
	for _, k := range []int{2, 3} {
		t.Run(fmt.Sprintf("devices=%d", k), func(t *testing.T) {
			searchtest.Parity(t, device.SplitSearch(searchers(devs[:k])...), searchtest.Options{Cases: cases})
		})
	}
}

// Split over 3 Devices on one GPU, every query gets one Device's
// distances to the bit at every rank, and its ids but where two hits'
// distances are equal: every entry's distance is computed alike on any
// share, and the host's merge keeps each share's order.
func TestSplitSearchSameAsOne(t *testing.T) {
	one := gpuDevice(t)
	devs := sharedDevices(t, 3)
	for _, c := range searchtest.DefaultCases[:3] {
		b := searchtest.Build(t, t.TempDir(), c)
		want, err := b.Index.OnDevice(one)
		if err != nil {
			t.Fatal(err)
		}
		defer want.Close()
		got, err := b.Index.OnDevice(device.SplitSearch(searchers(devs)...))
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		for _, nprobe := range []int{1, c.Lists / 3, c.Lists + 1} {
			so := index.SearchOptions{K: 100, NProbe: nprobe}
			wh, err := want.SearchBatch(context.Background(), b.Queries, so)
			if err != nil {
				t.Fatal(err)
			}
			gh, err := got.SearchBatch(context.Background(), b.Queries, so)
			if err != nil {
				t.Fatal(err)
			}
			swapped := 0
			for i := range wh {
				if len(gh[i]) != len(wh[i]) {
					t.Fatalf("%s/nprobe=%d: query %d: %d hits, one device %d", c.Name, nprobe, i, len(gh[i]), len(wh[i]))
				}
				for r, w := range wh[i] {
					g := gh[i][r]
					if math.Float32bits(g.Distance) != math.Float32bits(w.Distance) {
						t.Fatalf("%s/nprobe=%d: query %d rank %d: id %d at %g, one device id %d at %g", c.Name, nprobe, i, r, g.ID, g.Distance, w.ID, w.Distance)
					}
					if g.ID != w.ID {
						swapped++
					}
				}
			}
			t.Logf("%s/nprobe=%d: %d queries, %d hits at a tied distance in another order", c.Name, nprobe, len(wh), swapped)
		}
	}
}

// An index copied to 2 Devices on one GPU, each batch's queries spread
// over them (device.ReplicaSearch), passes the conformance suite.
func TestReplicaSearchParity(t *testing.T) {
	devs := sharedDevices(t, 2)
	searchtest.Parity(t, device.ReplicaSearch(searchers(devs)...), searchtest.Options{Cases: searchtest.DefaultCases})
}
