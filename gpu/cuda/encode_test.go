//go:build cuda

package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/quant"
)

// The device writes the rotated code byte for byte as the host does, for
// every bits setting and both forms, at sizes that straddle the encode
// grid (128-thread blocks) and the Walsh-Hadamard blocks (d not a power of
// two), with empty lists among them.
func TestEncodeRotatedParity(t *testing.T) {
	dev := device(t)
	for _, c := range []struct{ n, d, m int }{
		{1, 1, 1}, {129, 7, 3}, {1000, 96, 64}, {5000, 130, 7}, {3000, 768, 40},
	} {
		pts := synth.Clusters(c.n, c.d, max(1, c.m/2), 11)
		anchors := anchorsNear(pts, c.m, 0.05, 5)
		ds, err := dev.Load(pts)
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.SetAnchors(anchors, c.m); err != nil {
			t.Fatal(err)
		}
		if _, err := ds.Assign(); err != nil {
			t.Fatal(err)
		}
		assign := make([]int32, c.n)
		if err := ds.Assignments(assign); err != nil {
			t.Fatal(err)
		}
		// Lists as the index groups them: by anchor, rows ascending.
		offsets := make([]uint64, c.m+1)
		for _, a := range assign {
			offsets[a+1]++
		}
		for a := range c.m {
			offsets[a+1] += offsets[a]
		}
		ids := make([]uint32, c.n)
		fill := append([]uint64(nil), offsets[:c.m]...)
		for i, a := range assign {
			ids[fill[a]] = uint32(i)
			fill[a]++
		}
		stored := make([]float32, len(anchors)) // anchors as the index stores them
		for i, v := range anchors {
			stored[i] = f16.ToFloat32(f16.FromFloat32(v))
		}
		for _, bits := range []int{1, 2, 4, 8} {
			for _, ip := range []bool{false, true} {
				name := fmt.Sprintf("n=%d/d=%d/m=%d/b=%d/ip=%v", c.n, c.d, c.m, bits, ip)
				code, err := quant.New(quant.Spec{Kind: quant.KindRotated, Dim: c.d, Bits: bits, Seed: 3, IP: ip})
				if err != nil {
					t.Fatal(err)
				}
				code.SetAnchors(stored)
				cb, pb := code.CodeBytes(), code.ParamBytes()
				want, wantP := make([]byte, c.n*cb), make([]byte, c.m*pb)
				res := make([]float32, c.n*c.d)
				for a := range c.m {
					lo, hi := int(offsets[a]), int(offsets[a+1])
					for e := lo; e < hi; e++ {
						r := res[e*c.d : (e+1)*c.d]
						f16.DecodeRow(r, pts.Data[int(ids[e])*c.d:(int(ids[e])+1)*c.d])
						for j := range r {
							r[j] -= stored[a*c.d+j]
						}
					}
					code.EncodeList(want[lo*cb:hi*cb], wantP[a*pb:(a+1)*pb], a, res[lo*c.d:hi*c.d], hi-lo)
				}
				got, gotP := make([]byte, c.n*cb), make([]byte, c.m*pb)
				if err := ds.(quant.DeviceEncoder).EncodeRotated(code.(*quant.Rotated), stored, ids, offsets, got, gotP); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !bytes.Equal(gotP, wantP) {
					t.Errorf("%s: list parameters differ: device % x, host % x", name, gotP[:min(16, len(gotP))], wantP[:min(16, len(wantP))])
				}
				diff := 0
				for e := range c.n {
					if !bytes.Equal(got[e*cb:(e+1)*cb], want[e*cb:(e+1)*cb]) {
						if diff == 0 {
							lv := cb - 4
							t.Errorf("%s: entry %d: levels equal %v; corrections device % x, host % x", name, e,
								bytes.Equal(got[e*cb:e*cb+lv], want[e*cb:e*cb+lv]), got[e*cb+lv:(e+1)*cb], want[e*cb+lv:(e+1)*cb])
						}
						diff++
					}
				}
				if diff > 0 {
					t.Errorf("%s: %d of %d codes differ", name, diff, c.n)
				}
			}
		}
		ds.Close()
	}
}

// Streamed points are not encoded on the device: ErrNotResident, nothing
// written, so the host encodes.
func TestEncodeRotatedNotResident(t *testing.T) {
	dev := device(t)
	pts := synth.Clusters(1000, 16, 4, 1)
	dev.batchRows = 256
	ds, err := dev.Load(pts)
	dev.batchRows = 0
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	anchors := anchorsNear(pts, 4, 0.1, 2)
	if err := ds.SetAnchors(anchors, 4); err != nil {
		t.Fatal(err)
	}
	code, _ := quant.New(quant.Spec{Kind: quant.KindRotated, Dim: 16, Bits: 4, Seed: 1})
	code.SetAnchors(anchors)
	ids := make([]uint32, 1000)
	codes, params := make([]byte, 1000*code.CodeBytes()), make([]byte, 4*code.ParamBytes())
	err = ds.(quant.DeviceEncoder).EncodeRotated(code.(*quant.Rotated), anchors, ids, []uint64{0, 1000, 1000, 1000, 1000}, codes, params)
	if !errors.Is(err, quant.ErrNotResident) || !bytes.Equal(codes, make([]byte, len(codes))) {
		t.Fatalf("batched encode: %v", err)
	}
}
