//go:build cuda

package cuda

import (
	"bytes"
	"errors"
	"testing"

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
	if err := ds.SetAnchors(anchors, m); err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Assign(); err != nil {
		t.Fatal(err)
	}
	assign := make([]int32, n)
	if err := ds.Assignments(assign); err != nil {
		t.Fatal(err)
	}
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
