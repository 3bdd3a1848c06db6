package index

import (
	"bytes"
	"context"
	"testing"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/spill"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/quant"
)

// f16Rows presents synth's float16 points as Rows.
type f16Rows struct {
	data []uint16
	n, d int
}

func (r f16Rows) Len() int { return r.n }
func (r f16Rows) Dim() int { return r.d }
func (r f16Rows) Row(i int, dst []float32) []float32 {
	dst = dst[:0]
	for _, h := range r.data[i*r.d : (i+1)*r.d] {
		dst = append(dst, f16.ToFloat32(h))
	}
	return dst
}

// An index whose code arrays live in spilled files has the bytes of one
// built on the heap, for a blocked code (rotated) and one that is not (sq8).
func TestSpillSameBytes(t *testing.T) {
	const n, d, m = 3000, 40, 9
	pts := synth.Clusters(n, d, 12, 5)
	rows := f16Rows{pts.Data, n, d}
	anchors := synth.PickAnchors(pts, m, 2)
	assign := make([]int32, n)
	for i := range assign {
		assign[i] = int32((i * 7) % m)
	}
	for _, kind := range []quant.Kind{quant.KindRotated, quant.KindSQ8} {
		p := Plan{Rows: rows, Anchors: anchors, Assign: assign, Meta: Meta{Code: uint32(kind), Bits: 4, Seed: 3}}
		if kind == quant.KindSQ8 {
			p.Meta.Bits = 8
		}
		heap, err := build(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		arena := &spill.Arena{Dir: t.TempDir()}
		spilled, err := build(context.Background(), p, arena)
		if err != nil {
			t.Fatal(err)
		}
		// The entry codes (sq8) or the blocks and low bits (rotated,
		// its entry codes freed once repacked) are in files.
		if want := map[quant.Kind]int{quant.KindRotated: 2, quant.KindSQ8: 1}[kind]; arena.Spilled() != want {
			t.Errorf("%s: %d arrays spilled, want %d", kind, arena.Spilled(), want)
		}
		if len(heap) != len(spilled) {
			t.Fatalf("%s: %d sections against %d", kind, len(heap), len(spilled))
		}
		for i := range heap {
			if heap[i].Kind != spilled[i].Kind || !bytes.Equal(heap[i].Data, spilled[i].Data) {
				t.Errorf("%s: section %s differs when spilled", kind, heap[i].Kind)
			}
		}
		arena.Close()
	}
}
