package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/quant"
)

// rotatedPlan is a 4-bit rotated code's plan of n clustered float16 rows
// of 40 dimensions over 9 lists (row i in list i*7 % 9).
func rotatedPlan(n int) (Plan, Rows, []float32) {
	const d, m = 40, 9
	pts := synth.Clusters(n, d, 12, 5)
	rows := f16Rows{pts.Data, n, d}
	anchors := synth.PickAnchors(pts, m, 2)
	assign := make([]int32, n)
	for i := range assign {
		assign[i] = int32((i * 7) % m)
	}
	return Plan{Rows: rows, Anchors: anchors, Assign: assign, Meta: Meta{Code: uint32(quant.KindRotated), Bits: 4, Seed: 3}}, rows, anchors
}

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
	const n = 3000
	p, rows, anchors := rotatedPlan(n)
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

// streamPlan is a small plan of code kind for the streamed-write tests,
// with ids and payloads.
func streamPlan(kind quant.Kind) Plan {
	const d, m = 40, 9
	n := 3000
	if kind != quant.KindRotated {
		n = 700 // slower to encode
	}
	pts := synth.Clusters(n, d, 12, 5)
	rows := f16Rows{pts.Data, n, d}
	anchors := synth.PickAnchors(pts, m, 2)
	assign := make([]int32, n)
	keys, payloads := make([]string, n), make([][]byte, n)
	for i := range assign {
		assign[i] = int32((i * 7) % m)
		keys[i] = fmt.Sprintf("doc-%d", i)
		if i%3 == 0 {
			payloads[i] = []byte(keys[i])
		}
	}
	bits := map[quant.Kind]int{quant.KindRotated: 4, quant.KindSQ8: 8, quant.KindPQ: 4}[kind]
	return Plan{Rows: rows, Anchors: anchors, Assign: assign, Keys: keys, Payloads: payloads,
		Meta: Meta{Code: uint32(kind), Bits: uint32(bits), Seed: 3}}
}

// WriteContext, which writes the file while encoding, writes the bytes of
// the built sections written at once: for a blocked code (rotated), one
// that is not (sq8) and one with shared parameters (pq); on the heap and
// spilled; packed in one chunk and in chunks that split lists; the
// rotated code also from a device that hands its codes over in runs, one
// list encoded again on the host.
func TestWriteStreamSameBytes(t *testing.T) {
	defer func(c int) { writeChunk = c }(writeChunk)
	dir := t.TempDir()
	for _, kind := range []quant.Kind{quant.KindRotated, quant.KindSQ8, quant.KindPQ} {
		p := streamPlan(kind)
		secs, err := build(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secs {
			if s.Kind == secGlobal {
				p.Global = s.Data // trained once
			}
		}
		var want bytes.Buffer
		if err := format.Encode(&want, secs); err != nil {
			t.Fatal(err)
		}
		devices := []device.RotatedEncoder{nil}
		if kind == quant.KindRotated {
			for _, run := range []int{5 * quant.BlockLen, 1000} {
				devices = append(devices, &hostStream{rows: p.Rows, code: hostCode(t, p, p.Anchors), run: run, bad: 4})
			}
		}
		chunks, spillDirs := []int{1 << 16, 3 * quant.BlockLen}, []string{"", t.TempDir()}
		if kind != quant.KindRotated { // slower to encode; the same code path
			chunks, spillDirs = chunks[1:], spillDirs[1:]
		}
		for _, chunk := range chunks {
			for _, spillDir := range spillDirs {
				for i, dev := range devices {
					writeChunk = chunk
					p.Device, p.SpillDir = dev, spillDir
					var times WriteTimes
					p.Times = &times
					path := filepath.Join(dir, "x.vlc")
					if err := WriteContext(context.Background(), path, p); err != nil {
						t.Fatal(err)
					}
					got, _ := os.ReadFile(path)
					if !bytes.Equal(got, want.Bytes()) {
						t.Errorf("%s, chunk %d, spill %q, device %d: the streamed file differs from the built sections", kind, chunk, spillDir, i)
					}
					if times.Build <= 0 || times.Write <= 0 {
						t.Errorf("%s: times %+v, want both parts", kind, times)
					}
				}
			}
		}
	}
	if n := names(t, dir); len(n) != 1 {
		t.Errorf("the folder holds %v, want the index alone", n)
	}
}

// failingStream hands over its first run of codes, then fails.
type failingStream struct{ hostStream }

var errDeviceLost = errors.New("device lost")

func (f *failingStream) EncodeRotatedStream(l device.RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte, ready func(lo, hi int)) error {
	f.hostStream.EncodeRotatedStream(l, anchors, ids, offsets, codes, params, func(lo, hi int) {
		if lo == 0 {
			ready(lo, hi)
		}
	})
	return errDeviceLost
}

// A streamed write canceled while encoding, or whose device fails after
// handing codes over, returns that error, leaves the old file as it was
// and no temporary file.
func TestWriteStreamFails(t *testing.T) {
	defer func(c int) { writeChunk = c }(writeChunk)
	writeChunk = quant.BlockLen
	dir := t.TempDir()
	path := filepath.Join(dir, "x.vlc")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		plan func(p *Plan, cancel context.CancelFunc)
		is   error
	}{
		{"canceled while encoding", func(p *Plan, cancel context.CancelFunc) {
			p.Progress = func(done, total int) {
				if done > total/2 {
					cancel()
				}
			}
		}, context.Canceled},
		{"canceled while the device encodes", func(p *Plan, cancel context.CancelFunc) {
			p.Device = &hostStream{rows: p.Rows, code: hostCode(t, *p, p.Anchors), run: 1000, bad: 4}
			p.Progress = func(done, total int) {
				if done > 0 {
					cancel()
				}
			}
		}, context.Canceled},
		{"device lost", func(p *Plan, cancel context.CancelFunc) {
			p.Device = &failingStream{hostStream{rows: p.Rows, code: hostCode(t, *p, p.Anchors), run: 1000, bad: 4}}
		}, errDeviceLost},
	} {
		p := streamPlan(quant.KindRotated)
		ctx, cancel := context.WithCancel(context.Background())
		c.plan(&p, cancel)
		err := WriteContext(ctx, path, p)
		cancel()
		if !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want %v", c.name, err, c.is)
		}
		if got, _ := os.ReadFile(path); string(got) != "old" {
			t.Errorf("%s: the old file changed", c.name)
		}
		if n := names(t, dir); len(n) != 1 {
			t.Errorf("%s: the folder holds %v", c.name, n)
		}
	}
}

// names lists the files in dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

// A panic while encoding (vlc.Compress turns a fault reading a truncated
// input into one, for its caller to recover) stops the sink before the
// write returns: the codes, mapped rather than on the heap here, are
// unmapped only once the sink is done with them, and no file is left.
// Without that the sink packs from unmapped memory and the process dies.
func TestWritePanicStopsSink(t *testing.T) {
	const n = 20000
	p, rows, anchors := rotatedPlan(n)
	defer func(h, c int) { arenaHuge, writeChunk = h, c }(arenaHuge, writeChunk)
	arenaHuge, writeChunk = 4096, 4096
	dir := t.TempDir()
	path := filepath.Join(dir, "p.vlc")
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	for i := range rounds {
		// Every code handed over at once, then the panic: the sink
		// has hundreds of chunks to pack as the write unwinds.
		p.Device = &panicStream{hostStream{rows: rows, code: hostCode(t, p, anchors), run: n, bad: 4}}
		func() {
			defer func() {
				if r := recover(); r != "input gone" {
					t.Fatalf("round %d: recovered %v, want the encoder's panic", i, r)
				}
			}()
			WriteContext(context.Background(), path, p)
		}()
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files left after the panics: %v", ents)
	}
}

// panicStream hands its codes over as hostStream does, then panics.
type panicStream struct{ hostStream }

func (s *panicStream) EncodeRotatedStream(l device.RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte, ready func(lo, hi int)) error {
	return s.hostStream.EncodeRotatedStream(l, anchors, ids, offsets, codes, params, func(lo, hi int) {
		ready(lo, hi)
		panic("input gone")
	})
}
