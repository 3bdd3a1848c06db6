//go:build cuda

package cuda

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vlc-embed/vlc/device"
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
