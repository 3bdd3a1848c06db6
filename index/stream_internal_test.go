package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/quant"
)

// hostStream is a device.RotatedStreamEncoder that encodes on the host, as a
// device would hand its codes over: in runs of whole blocks. It writes an
// infinite scalar into the first entry of list bad, as a device may
// (reencodeNonFinite encodes that list again on the host), and records
// the runs.
type hostStream struct {
	rows Rows
	code *quant.Rotated // the code the layout is of, to encode on the host
	run  int            // entries a run
	bad  int
	runs [][2]int
}

func (h *hostStream) EncodeRotated(l device.RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte) error {
	return h.EncodeRotatedStream(l, anchors, ids, offsets, codes, params, func(int, int) {})
}

func (h *hostStream) EncodeRotatedStream(l device.RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte, ready func(lo, hi int)) error {
	n := len(ids)
	c := h.code
	encodeLists(context.Background(), h.rows, c, anchors, ids, offsets, codes, params, nil, func(int) {})
	cb := l.CodeBytes()
	e := int(offsets[h.bad])
	binary.LittleEndian.PutUint16(codes[e*cb+cb-4:], 0x7c00) // +Inf
	for lo := 0; lo < n; lo += h.run {
		hi := min(n, lo+h.run)
		h.runs = append(h.runs, [2]int{lo, hi})
		ready(lo, hi)
	}
	return nil
}

// A build whose device hands its codes over in runs, each packed as it
// comes, one list encoded again after packing, has the bytes of a build
// on the host, for runs that split blocks, lists and the last block.
func TestStreamedEncodeSameBytes(t *testing.T) {
	const n, d, m = 3000, 40, 9
	pts := synth.Clusters(n, d, 12, 5)
	rows := f16Rows{pts.Data, n, d}
	anchors := synth.PickAnchors(pts, m, 2)
	assign := make([]int32, n)
	for i := range assign {
		assign[i] = int32((i * 7) % m)
	}
	p := Plan{Rows: rows, Anchors: anchors, Assign: assign, Meta: Meta{Code: uint32(quant.KindRotated), Bits: 4, Seed: 3}}
	host, err := build(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []int{quant.BlockLen, 5 * quant.BlockLen, 1024, n} {
		dev := &hostStream{rows: rows, code: hostCode(t, p, anchors), run: run, bad: 4}
		p.Device = dev
		var calls [][2]int
		p.Progress = func(done, total int) { calls = append(calls, [2]int{done, total}) }
		got, err := build(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(host) {
			t.Fatalf("run %d: %d sections against %d", run, len(got), len(host))
		}
		for i := range host {
			if got[i].Kind != host[i].Kind || !bytes.Equal(got[i].Data, host[i].Data) {
				t.Errorf("run %d: section %s differs from the host's", run, host[i].Kind)
			}
		}
		if want := (n + run - 1) / run; len(dev.runs) != want || len(calls) != want+1 || calls[len(calls)-1] != [2]int{n, n} {
			t.Errorf("run %d: %d runs, progress %v; want %d runs, progress from 0 to %d after each", run, len(dev.runs), calls, want, n)
		}
	}
}

// hostCode is the rotated code p's build encodes with: its spec, at the
// anchors as stored.
func hostCode(t *testing.T, p Plan, anchors []float32) *quant.Rotated {
	spec := p.Meta.CodeSpec()
	spec.Dim = p.Rows.Dim()
	code, err := quant.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	stored := make([]float32, len(anchors))
	for i, v := range anchors {
		stored[i] = f16.ToFloat32(f16.FromFloat32(v))
	}
	code.SetAnchors(stored)
	return code.(*quant.Rotated)
}
