package device_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index/devicetest"
)

// An index on 1, 2 and 3 reference devices with each batch's queries
// spread over them is searched as on one: the conformance suite passes
// (filtered searches, through the masked copies, among its checks).
func TestReplicaSearchParity(t *testing.T) {
	cases := []devicetest.Case{devicetest.DefaultCases[4], devicetest.DefaultCases[8], fewLists}
	for _, k := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("devices=%d", k), func(t *testing.T) {
			devicetest.Parity(t, device.ReplicaSearch(refs(k)...), devicetest.Options{Cases: cases})
		})
	}
}

// Each query is searched whole on one device: the entries and distances
// are one device's to the bit, for batches of fewer queries than devices
// too, masked or not, and on each lane alone (LanedResident); every copy
// holds the whole index.
func TestReplicaSearchSameAsOne(t *testing.T) {
	c := devicetest.DefaultCases[0]
	d, q := indexData(t, c)
	one, err := devicetest.Reference().UploadIndex(d)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	r, err := device.ReplicaSearch(refs(3)...).UploadIndex(d)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes() != 3*one.Bytes() {
		t.Errorf("3 copies hold %d bytes, one %d", r.Bytes(), one.Bytes())
	}
	allow := make([]uint64, (d.N+63)/64)
	for e := 0; e < d.N; e += 3 {
		allow[e/64] |= 1 << (e % 64)
	}
	for _, nq := range []int{1, 2, 3, 24} {
		for _, keep := range []int{1, 10, c.N + 7} {
			what := fmt.Sprintf("nq=%d/keep=%d", nq, keep)
			we, wd := search(t, one, q, nq, 3, keep)
			ge, gd := search(t, r, q, nq, 3, keep)
			sameResults(t, what, we, ge, wd, gd)
			me, md := make([]int32, nq*keep), make([]float32, nq*keep)
			if err := one.(device.MaskedResident).SearchMasked(context.Background(), q, nq, 3, keep, allow, me, md); err != nil {
				t.Fatal(err)
			}
			ge, gd = make([]int32, nq*keep), make([]float32, nq*keep)
			if err := r.(device.MaskedResident).SearchMasked(context.Background(), q, nq, 3, keep, allow, ge, gd); err != nil {
				t.Fatal(err)
			}
			sameResults(t, what+"/masked", me, ge, md, gd)
			lr := r.(device.LanedResident)
			for lane := range lr.Lanes() {
				for _, mask := range [][]uint64{nil, allow} {
					le, ld := make([]int32, nq*keep), make([]float32, nq*keep)
					if err := lr.SearchLane(context.Background(), lane, q, nq, 3, keep, mask, le, ld); err != nil {
						t.Fatal(err)
					}
					if mask == nil {
						sameResults(t, fmt.Sprintf("%s/lane %d", what, lane), we, le, wd, ld)
					} else {
						sameResults(t, fmt.Sprintf("%s/lane %d/masked", what, lane), me, le, md, ld)
					}
				}
			}
		}
	}
	if lanes := r.(device.LanedResident).Lanes(); lanes != 3 {
		t.Errorf("3 copies, %d lanes", lanes)
	}
	for _, lane := range []int{-1, 3} {
		err := r.(device.LanedResident).SearchLane(context.Background(), lane, q, 1, 1, 1, nil, make([]int32, 1), make([]float32, 1))
		if !errors.Is(err, device.ErrArgument) {
			t.Errorf("lane %d of 3: %v, want ErrArgument", lane, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Search(context.Background(), q, 1, 1, 1, make([]int32, 1), make([]float32, 1)); !errors.Is(err, device.ErrClosed) {
		t.Errorf("search after Close: %v", err)
	}
	if err := r.(device.LanedResident).SearchLane(context.Background(), 0, q, 1, 1, 1, nil, make([]int32, 1), make([]float32, 1)); !errors.Is(err, device.ErrClosed) {
		t.Errorf("a lane's search after Close: %v", err)
	}
}

// A failed upload closes the copies made and names the device; a failed
// search names it too; bad sizes and no devices are argument errors.
func TestReplicaSearchErrors(t *testing.T) {
	d, q := indexData(t, devicetest.DefaultCases[0])
	closed := 0
	_, err := device.ReplicaSearch(failing{search: true, closed: &closed}, failing{}, failing{search: true, closed: &closed}).UploadIndex(d)
	if !errors.Is(err, errBroken) || !strings.Contains(err.Error(), "device 1") {
		t.Errorf("upload on a broken device 1: %v", err)
	}
	if closed != 2 {
		t.Errorf("a failed upload closed %d of the copies made, want 2", closed)
	}
	r, err := device.ReplicaSearch(devicetest.Reference(), failing{search: true, closed: &closed}).UploadIndex(d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.(device.MaskedResident); ok {
		t.Error("a copy cannot mask, the replicas say they can")
	}
	err = r.Search(context.Background(), q, 3, 2, 10, make([]int32, 30), make([]float32, 30))
	if !errors.Is(err, errBroken) || !strings.HasPrefix(err.Error(), "device 1: ") {
		t.Errorf("search on a broken device 1: %v", err)
	}
	if err := r.Search(context.Background(), q, 1, 2, 10, make([]int32, 10), make([]float32, 10)); err != nil {
		t.Errorf("one query goes to device 0 alone: %v", err)
	}
	if err := r.Search(context.Background(), q, 3, 2, 10, make([]int32, 29), make([]float32, 30)); !errors.Is(err, device.ErrArgument) {
		t.Errorf("29 entries for 3 queries keeping 10: %v", err)
	}
	if _, err := device.ReplicaSearch().UploadIndex(d); !errors.Is(err, device.ErrArgument) {
		t.Errorf("no devices: %v", err)
	}
}

func TestParseSpread(t *testing.T) {
	for in, want := range map[string]device.Spread{"": device.SpreadLists, "lists": device.SpreadLists, "queries": device.SpreadQueries} {
		if got, err := device.ParseSpread(in); err != nil || got != want {
			t.Errorf("ParseSpread(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := device.ParseSpread("rows"); !errors.Is(err, device.ErrArgument) || !strings.Contains(err.Error(), `"rows"`) {
		t.Errorf("ParseSpread(rows): %v", err)
	}
}
