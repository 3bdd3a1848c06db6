//go:build cuda

package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/anneal/devicetest"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/quant"
)

// Resident points are encoded as the host does (the conformance suite's
// EncodeGolden); streamed points are not encoded on the device:
// ErrNotResident, nothing written, so the host encodes.
func TestEncodeRotatedNotResident(t *testing.T) {
	dev := gpuDevice(t)
	pts := synth.Clusters(1000, 16, 4, 1)
	dev.batchRows = 256
	ds, err := dev.Load(pts)
	dev.batchRows = 0
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	anchors := synth.AnchorsNear(pts, 4, 0.1, 2)
	if err := ds.SetAnchors(anchors, 4); err != nil {
		t.Fatal(err)
	}
	code, _ := quant.New(quant.Spec{Kind: quant.KindRotated, Dim: 16, Bits: 4, Seed: 1})
	code.SetAnchors(anchors)
	ids := make([]uint32, 1000)
	codes, params := make([]byte, 1000*code.CodeBytes()), make([]byte, 4*code.ParamBytes())
	err = ds.(device.RotatedEncoder).EncodeRotated(code.(*quant.Rotated).Layout(), anchors, ids, []uint64{0, 1000, 1000, 1000, 1000}, codes, params)
	if !errors.Is(err, device.ErrNotResident) || !bytes.Equal(codes, make([]byte, len(codes))) {
		t.Fatalf("batched encode: %v", err)
	}
}

// The device hands its codes over in runs (EncodeRotatedStream): whole
// rounds of its threads, in order, multiples of the block, the last
// ending at the entry count, each after every list parameter, and the
// codes and parameters are the host's (quant.Rotated.EncodeList), at
// 32 threads a SM so that 20,000 entries take several runs and a short
// last one.
func TestEncodeRotatedStream(t *testing.T) {
	dev := gpuDevice(t)
	const n, d, m = 20000, 40, 9
	pts := synth.Clusters(n, d, 12, 3)
	ds, err := dev.Load(pts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	anchors := synth.AnchorsNear(pts, m, 0.1, 4)
	for i, v := range anchors { // as an index stores them
		anchors[i] = f16.ToFloat32(f16.FromFloat32(v))
	}
	assign := devicetest.Assigned(t, ds, anchors, m, n)
	offsets := make([]uint64, m+1)
	for _, a := range assign {
		offsets[a+1]++
	}
	for a := range m {
		offsets[a+1] += offsets[a]
	}
	ids, fill := make([]uint32, n), append([]uint64(nil), offsets[:m]...)
	for i, a := range assign {
		ids[fill[a]] = uint32(i)
		fill[a]++
	}
	code, _ := quant.New(quant.Spec{Kind: quant.KindRotated, Dim: d, Bits: 4, Seed: 1})
	rc := code.(*quant.Rotated)
	rc.SetAnchors(anchors)
	cb, pb := rc.CodeBytes(), rc.ParamBytes()
	want, wantParams := make([]byte, n*cb), make([]byte, m*pb)
	for a := range m {
		list := ids[offsets[a]:offsets[a+1]]
		res := make([]float32, 0, len(list)*d)
		for _, id := range list {
			for j := range d {
				res = append(res, f16.ToFloat32(pts.Data[int(id)*d+j])-anchors[a*d+j])
			}
		}
		rc.EncodeList(want[offsets[a]*uint64(cb):offsets[a+1]*uint64(cb)], wantParams[a*pb:(a+1)*pb], a, res, len(list))
	}

	saved := dev.encodePerSM
	dev.encodePerSM = 32
	defer func() { dev.encodePerSM = saved }()
	codes, params := make([]byte, n*cb), make([]byte, m*pb)
	var runs [][2]int
	err = ds.(device.RotatedStreamEncoder).EncodeRotatedStream(rc.Layout(), anchors, ids, offsets, codes, params, func(lo, hi int) {
		if !bytes.Equal(params, wantParams) {
			t.Errorf("run %d-%d: list parameters not all written", lo, hi)
		}
		runs = append(runs, [2]int{lo, hi})
	})
	if err != nil {
		t.Fatal(err)
	}
	round := 32 * dev.info.SMs
	next := 0
	for i, r := range runs {
		if r[0] != next || r[1] <= r[0] || r[1] < n && (r[1]-r[0])%round != 0 || r[1]%quant.BlockLen != 0 && r[1] != n {
			t.Fatalf("runs %v: run %d does not follow on whole rounds of %d threads", runs, i, round)
		}
		next = r[1]
	}
	if next != n || len(runs) < 3 {
		t.Fatalf("runs %v: want several, covering all %d entries", runs, n)
	}
	if !bytes.Equal(codes, want) {
		for e := range n {
			if !bytes.Equal(codes[e*cb:(e+1)*cb], want[e*cb:(e+1)*cb]) {
				t.Fatalf("entry %d (run of %v): the device's code differs from the host's", e, runs)
			}
		}
	}
}

// Split over 2 and 3 Devices on one GPU, the conformance suite's encode
// cases (every bits setting, both forms, 1 to 5,000 points, empty lists)
// give the host's golden bytes, as one Device does.
func TestMultiDeviceEncodeGolden(t *testing.T) {
	devs := sharedDevices(t, 3)
	for _, k := range []int{2, 3} {
		for _, split := range []func(n, k int) []int{device.EvenSplit, devicetest.Skewed, devicetest.Sizes(1, encodeBlock+1)} {
			t.Run(fmt.Sprintf("devices=%d/split=%v", k, split(5000, k)), func(t *testing.T) {
				devicetest.EncodeGolden(t, multi(devs[:k], split))
			})
		}
	}
}

// Split over 2 and 3 Devices on one GPU, the encode writes one Device's
// codes and list parameters, for 4 and 8 bits in both forms, with shares
// that straddle the kernel's blocks (encodeBlock) and its runs (whole
// rounds of 32 threads a SM here), one list empty; the runs come in order,
// each once every code before its end is one Device's, after every list
// parameter; each share reports its entries.
func TestMultiDeviceEncode(t *testing.T) {
	one := gpuDevice(t)
	devs := sharedDevices(t, 3)
	for _, dv := range append([]*Device{one}, devs...) {
		saved := dv.encodePerSM
		dv.encodePerSM = 32
		t.Cleanup(func() { dv.encodePerSM = saved })
	}
	round := 32 * one.info.SMs
	const n, d, m = 20000, 40, 9
	pts := synth.Clusters(n, d, 12, 3)
	anchors := synth.AnchorsNear(pts, m, 0.1, 4)
	for j := range d { // a list no point is in
		anchors[(m-1)*d+j] = 1000
	}
	for i, v := range anchors { // as an index stores them
		anchors[i] = f16.ToFloat32(f16.FromFloat32(v))
	}
	assigned := func(t *testing.T, ds device.Dataset) []int32 {
		t.Helper()
		return devicetest.Assigned(t, ds, anchors, m, n)
	}
	ds := devicetest.Load(t, one, pts)
	assign := assigned(t, ds)
	ids, offsets := devicetest.Lists(assign, m)
	if offsets[m] != offsets[m-1] {
		t.Fatalf("%d points in the far list", offsets[m]-offsets[m-1])
	}
	type want struct {
		layout        device.RotatedLayout
		codes, params []byte
	}
	var specs []quant.Spec
	var wants []want
	for _, bits := range []int{4, 8} {
		for _, ip := range []bool{false, true} {
			spec := quant.Spec{Kind: quant.KindRotated, Dim: d, Bits: bits, IP: ip, Seed: 1}
			code, err := quant.New(spec)
			if err != nil {
				t.Fatal(err)
			}
			code.SetAnchors(anchors)
			w := want{layout: code.(*quant.Rotated).Layout(), codes: make([]byte, n*code.CodeBytes()), params: make([]byte, m*code.ParamBytes())}
			if err := ds.(device.RotatedEncoder).EncodeRotated(w.layout, anchors, ids, offsets, w.codes, w.params); err != nil {
				t.Fatal(err)
			}
			specs, wants = append(specs, spec), append(wants, w)
		}
	}
	splits := []func(n, k int) []int{device.EvenSplit, devicetest.Skewed, devicetest.Sizes(encodeBlock-1, round+1), devicetest.Sizes(3*round + encodeBlock + 1)}
	for _, k := range []int{2, 3} {
		for _, split := range splits {
			sizes := split(n, k)
			t.Run(fmt.Sprintf("devices=%d/split=%v", k, sizes), func(t *testing.T) {
				mds := devicetest.Load(t, multi(devs[:k], split), pts)
				if !slices.Equal(assigned(t, mds), assign) {
					t.Fatal("the split set's assignments differ from one Device's")
				}
				for si, w := range wants {
					cb := w.layout.CodeBytes()
					codes, params := make([]byte, len(w.codes)), make([]byte, len(w.params))
					next, runs := 0, 0
					err := mds.(device.RotatedStreamEncoder).EncodeRotatedStream(w.layout, anchors, ids, offsets, codes, params, func(lo, hi int) {
						// On a shard's worker: Errorf, not Fatalf.
						switch {
						case lo != next || hi <= lo || hi > n:
							t.Errorf("bits=%d ip=%v: run %d to %d after %d", specs[si].Bits, specs[si].IP, lo, hi, next)
						case !bytes.Equal(params, w.params):
							t.Errorf("bits=%d ip=%v: run %d to %d before every list parameter", specs[si].Bits, specs[si].IP, lo, hi)
						case !bytes.Equal(codes[:hi*cb], w.codes[:hi*cb]):
							t.Errorf("bits=%d ip=%v: run %d to %d: the codes before %d are not all one Device's", specs[si].Bits, specs[si].IP, lo, hi, hi)
						}
						next = hi
						runs++
					})
					if err != nil {
						t.Fatalf("bits=%d ip=%v: %v", specs[si].Bits, specs[si].IP, err)
					}
					if next != n {
						t.Errorf("bits=%d ip=%v: %d runs up to %d of %d entries", specs[si].Bits, specs[si].IP, runs, next, n)
					}
					if !bytes.Equal(params, w.params) {
						t.Errorf("bits=%d ip=%v: list parameters % x, one Device % x", specs[si].Bits, specs[si].IP, params, w.params)
					}
					if !bytes.Equal(codes, w.codes) {
						for e := range n {
							if !bytes.Equal(codes[e*cb:(e+1)*cb], w.codes[e*cb:(e+1)*cb]) {
								t.Fatalf("bits=%d ip=%v: entry %d (point %d) first differs from one Device's", specs[si].Bits, specs[si].IP, e, ids[e])
							}
						}
					}
				}
				shares := mds.(device.ShareTimer).EncodeShares()
				var got []int
				for _, s := range shares {
					got = append(got, s.Entries)
				}
				if !slices.Equal(got, slices.DeleteFunc(slices.Clone(sizes), func(s int) bool { return s == 0 })) {
					t.Errorf("shares encoded %v entries, split %v", got, sizes)
				}
				t.Logf("shares: %+v", shares)
			})
		}
	}
}

// A split set one of whose shares streams its points in batches is not
// encoded on the devices: ErrNotResident, nothing written, nothing handed
// over, so the host encodes.
func TestMultiDeviceEncodeNotResident(t *testing.T) {
	devs := sharedDevices(t, 2)
	const n, d, m = 3000, 16, 4
	pts := synth.Clusters(n, d, 4, 1)
	setBatch(t, []int{0, 256}, devs...)
	ds := devicetest.Load(t, multi(devs, device.EvenSplit), pts)
	anchors := synth.AnchorsNear(pts, m, 0.1, 2)
	assign := devicetest.Assigned(t, ds, anchors, m, n)
	ids, offsets := devicetest.Lists(assign, m)
	code, _ := quant.New(quant.Spec{Kind: quant.KindRotated, Dim: d, Bits: 4, Seed: 1})
	code.SetAnchors(anchors)
	codes, params := make([]byte, n*code.CodeBytes()), make([]byte, m*code.ParamBytes())
	err := ds.(device.RotatedStreamEncoder).EncodeRotatedStream(code.(*quant.Rotated).Layout(), anchors, ids, offsets, codes, params, func(lo, hi int) {
		t.Errorf("run %d to %d handed over", lo, hi)
	})
	if !errors.Is(err, device.ErrNotResident) || !bytes.Equal(codes, make([]byte, len(codes))) || !bytes.Equal(params, make([]byte, len(params))) {
		t.Fatalf("a batched share: %v", err)
	}
}
