package index_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/quant"
)

var update = flag.Bool("update", false, "rewrite testdata/v2.model from the golden index")

const (
	goldenV2    = "../testdata/golden/v2.vlc"
	goldenModel = "testdata/v2.model" // the model of goldenV2, as WriteModel writes it
)

// The model file of the shipped golden index is byte for byte the one in
// testdata, and reads back as the model of the index.
func TestGoldenModel(t *testing.T) {
	m, err := index.ReadModel(goldenV2)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := index.WriteModel(goldenModel, m); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "v2.model")
	if err := index.WriteModel(out, m); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(goldenModel)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the model file differs from %s (sizes %d and %d): a format change needs a new golden (-update) and docs/FORMAT.md", goldenModel, len(got), len(want))
	}
	back, err := index.ReadModel(goldenModel)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Errorf("%s reads as %+v, want the index's model %+v", goldenModel, back.Meta, m.Meta)
	}
	// 8 anchors of 16 dimensions, 8-bit rotated codes, seed 7
	// (docs/FORMAT.md, "Versions"): one float32 scale per list.
	if back.Lists() != 8 || back.Dim() != 16 || len(back.Params) != 8*4 || back.Global != nil ||
		back.Meta.Code != uint32(quant.KindRotated) || back.Meta.Bits != 8 || back.Meta.Seed != 7 {
		t.Errorf("golden model: %d lists of %d, %d param bytes, %d global bytes, META %+v", back.Lists(), back.Dim(), len(back.Params), len(back.Global), back.Meta)
	}
}

// writeIndex writes an index of n rows to a file and returns its path.
func writeIndex(t *testing.T, kind quant.Kind, bits int, metric index.Metric, flags uint32) (string, memRows) {
	t.Helper()
	const n, d, m = 300, 16, 4
	rows := randRows(n, d, 11)
	anchors := make([]float32, m*d)
	copy(anchors, rows.x[:m*d])
	path := filepath.Join(t.TempDir(), "x.vlc")
	meta := index.Meta{Code: uint32(kind), Bits: uint32(bits), Metric: metric, Seed: 5, Flags: flags, Iterations: 3, Energy: 1.5}
	if err := index.Write(path, index.Plan{Rows: rows, Anchors: anchors, Assign: nearestAll(rows, anchors), Meta: meta}); err != nil {
		t.Fatal(err)
	}
	return path, rows
}

// nearestAll assigns every row to its nearest anchor (squared L2, the
// first on ties).
func nearestAll(rows memRows, anchors []float32) []int32 {
	d := rows.d
	assign := make([]int32, rows.n)
	for i := range rows.n {
		best := math.Inf(1)
		for a := range len(anchors) / d {
			var s float64
			for j := range d {
				e := float64(rows.x[i*d+j] - anchors[a*d+j])
				s += e * e
			}
			if s < best {
				best, assign[i] = s, int32(a)
			}
		}
	}
	return assign
}

// encodeUnder encodes rows under a model given as its parts, returning
// the index file's bytes.
func encodeUnder(t *testing.T, rows memRows, meta index.Meta, anchors []float32, params, global []byte) []byte {
	t.Helper()
	secs, err := index.Build(index.Plan{Rows: rows, Anchors: anchors, Assign: nearestAll(rows, anchors), Meta: meta, Params: params, Global: global})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := format.Encode(&b, secs); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A model goes from an index to a file and back unchanged, for every
// code, and rows encoded under the model read from the file get the bytes
// they get under the index itself.
func TestModelRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name   string
		kind   quant.Kind
		bits   int
		metric index.Metric
		flags  uint32
	}{
		{"rotated", quant.KindRotated, 4, index.L2, 0},
		{"rotated-ip", quant.KindRotated, 2, index.IP, index.FlagIPCodes},
		{"pq", quant.KindPQ, 4, index.L2, 0},
		{"pq-cosine", quant.KindPQ, 2, index.Cosine, 0},
		{"sq8", quant.KindSQ8, 8, index.L2, 0},
		{"flat-ip", quant.KindFlat, 32, index.IP, index.FlagIPCodes},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, _ := writeIndex(t, c.kind, c.bits, c.metric, c.flags)
			ix := open(t, path)
			fromIndex, err := index.ModelOf(ix)
			if err != nil {
				t.Fatal(err)
			}
			if read, err := index.ReadModel(path); err != nil || !reflect.DeepEqual(read, fromIndex) {
				t.Fatalf("ReadModel of the index: %v, differs from ModelOf: %v", err, !reflect.DeepEqual(read, fromIndex))
			}
			file := filepath.Join(t.TempDir(), "x.model")
			if err := index.WriteModel(file, fromIndex); err != nil {
				t.Fatal(err)
			}
			fromFile, err := index.ReadModel(file)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fromFile, fromIndex) {
				t.Fatalf("model file reads as %+v, want %+v", fromFile.Meta, fromIndex.Meta)
			}
			if (fromFile.Global != nil) != (c.kind == quant.KindPQ) {
				t.Errorf("%d bytes of shared parameters for the %s code", len(fromFile.Global), c.kind)
			}
			if st, _ := os.Stat(file); st.Size() >= ix.Size() {
				t.Errorf("the model file (%d bytes) is not smaller than the index (%d)", st.Size(), ix.Size())
			}
			rows := randRows(120, 16, 99) // rows the index never saw
			want := encodeUnder(t, rows, ix.Meta(), ix.Anchors(), ix.Params(), bytes.Clone(ix.Global()))
			got := encodeUnder(t, rows, fromFile.Meta, fromFile.Anchors, fromFile.Params, fromFile.Global)
			if !bytes.Equal(got, want) {
				t.Error("rows encoded under the model file differ from rows encoded under the index")
			}
		})
	}
}

// A closed index has no model; FlagSegment is not part of one.
func TestModelOf(t *testing.T) {
	path, rows := writeIndex(t, quant.KindRotated, 8, index.L2, 0)
	ix, err := index.Open(path, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	if _, err := index.ModelOf(ix); !errors.Is(err, index.ErrClosed) {
		t.Errorf("ModelOf a closed index: %v, want ErrClosed", err)
	}
	seg := filepath.Join(t.TempDir(), "seg.vlc")
	m, err := index.ReadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	part := memRows{2, rows.d, rows.x[:2*rows.d]} // fewer rows than lists
	meta := m.Meta
	meta.Flags |= index.FlagSegment
	if err := index.Write(seg, index.Plan{Rows: part, Anchors: m.Anchors, Assign: nearestAll(part, m.Anchors), Meta: meta, Params: m.Params}); err != nil {
		t.Fatal(err)
	}
	sm, err := index.ReadModel(seg)
	if err != nil {
		t.Fatal(err)
	}
	if sm.Meta.Flags != 0 || !reflect.DeepEqual(sm.Anchors, m.Anchors) {
		t.Errorf("model of a segment: flags %#x, anchors equal %v", sm.Meta.Flags, reflect.DeepEqual(sm.Anchors, m.Anchors))
	}
}

// modelSections is the golden model file's sections, for tests to damage.
func modelSections(t *testing.T, kind quant.Kind) (*index.Model, []format.Section) {
	t.Helper()
	path, _ := writeIndex(t, kind, 4, index.L2, 0)
	m, err := index.ReadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "m.model")
	if err := index.WriteModel(file, m); err != nil {
		t.Fatal(err)
	}
	f, err := format.Open(file, format.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var secs []format.Section
	for _, s := range f.Sections() {
		b, _ := f.Section(s.Kind)
		secs = append(secs, format.Section{Kind: s.Kind, Data: bytes.Clone(b)})
	}
	return m, secs
}

// A damaged model file, its checksums intact, is refused as corrupt with
// a message naming the problem; an index and a model are never taken
// for each other.
func TestModelFileErrors(t *testing.T) {
	_, rot := modelSections(t, quant.KindRotated)
	_, pq := modelSections(t, quant.KindPQ)
	kind := func(s string) format.Kind { return format.KindOf(s) }
	edit := func(secs []format.Section, f func([]format.Section) []format.Section) []format.Section {
		c := make([]format.Section, len(secs))
		for i, s := range secs {
			c[i] = format.Section{Kind: s.Kind, Data: bytes.Clone(s.Data)}
		}
		return f(c)
	}
	drop := func(secs []format.Section, k string) []format.Section {
		var out []format.Section
		for _, s := range secs {
			if s.Kind != kind(k) {
				out = append(out, s)
			}
		}
		return out
	}
	putU32 := func(at int, v uint32) func([]format.Section) []format.Section {
		return func(s []format.Section) []format.Section {
			binary.LittleEndian.PutUint32(s[0].Data[at:], v)
			return s
		}
	}
	// META layout offsets: N 0, Dim 8, M 12, Code 16, Bits 20, Metric 24, Flags 28.
	for _, c := range []struct {
		name string
		secs []format.Section
		want string
	}{
		{"MODL short", edit(rot, func(s []format.Section) []format.Section { s[0].Data = s[0].Data[:100]; return s }), "MODL section is 100 bytes, want 128"},
		{"ANCH missing", drop(rot, "ANCH"), `section "ANCH" missing`},
		{"PARM missing", drop(rot, "PARM"), `section "PARM" missing`},
		{"META too", edit(rot, func(s []format.Section) []format.Section {
			return append(s, format.Section{Kind: kind("META"), Data: s[0].Data})
		}), `both "MODL" and "META"`},
		{"segment", edit(rot, putU32(28, index.FlagSegment)), "MODL marks a segment"},
		{"unknown flag", edit(rot, putU32(28, 8)), "MODL has unknown flags"},
		{"ip codes for l2", edit(rot, putU32(28, index.FlagIPCodes)), "MODL marks inner-product codes for metric l2"},
		{"metric", edit(rot, putU32(24, 9)), "unknown metric 9"},
		{"dimension 0", edit(rot, putU32(8, 0)), "dimension 0"},
		{"no anchors", edit(rot, putU32(12, 0)), "0 anchors"},
		{"anchors", edit(rot, putU32(12, 5)), `section "ANCH" is 128 bytes, want 160 (5 anchors of dimension 16)`},
		{"huge M", edit(rot, putU32(12, math.MaxUint32)), `section "ANCH" is 128 bytes, want 137438953440`},
		{"retired code", edit(rot, putU32(16, 3)), "model file"},
		{"bits", edit(rot, putU32(20, 3)), "model file"},
		{"PARM size", edit(rot, func(s []format.Section) []format.Section { s[2].Data = s[2].Data[:5]; return s }), `section "PARM" is 5 bytes, want 16`},
		{"anchor NaN", edit(rot, func(s []format.Section) []format.Section {
			binary.LittleEndian.PutUint16(s[1].Data[2*16*2:], 0x7e00)
			return s
		}), "anchor 2 is not finite"},
		{"QGLB for rotated", edit(rot, func(s []format.Section) []format.Section {
			return append(s, format.Section{Kind: kind("QGLB"), Data: []byte{1}})
		}), `section "QGLB" for the rotated code`},
		{"QGLB missing", drop(pq, "QGLB"), `section "QGLB" is missing or 0 bytes`},
		{"QGLB short", edit(pq, func(s []format.Section) []format.Section { s[3].Data = s[3].Data[:9]; return s }), `section "QGLB" is missing or 9 bytes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.model")
			if err := format.WriteFile(path, c.secs); err != nil {
				t.Fatal(err)
			}
			_, err := index.ReadModel(path)
			if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want ErrCorrupt naming the file and %q", err, c.want)
			}
		})
	}

	dir := t.TempDir()
	model, index1 := filepath.Join(dir, "m.model"), filepath.Join(dir, "x.vlc")
	if err := format.WriteFile(model, rot); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Open(model, index.Options{}); !errors.Is(err, index.ErrNotIndex) || !strings.Contains(err.Error(), "it is a model file") {
		t.Errorf("Open of a model file: %v, want ErrNotIndex saying it is a model file", err)
	}
	stor := filepath.Join(dir, "store.vlc")
	if err := format.WriteFile(stor, []format.Section{{Kind: kind("STOR"), Data: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := index.ReadModel(stor); !errors.Is(err, index.ErrNotIndex) || !strings.Contains(err.Error(), "store manifest") {
		t.Errorf("ReadModel of a store manifest: %v, want ErrNotIndex naming a store", err)
	}
	if err := os.WriteFile(index1, []byte("not a model at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := index.ReadModel(index1); !errors.Is(err, index.ErrNotIndex) {
		t.Errorf("ReadModel of text: %v, want ErrNotIndex", err)
	}
	if _, err := index.ReadModel(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadModel of a missing file: %v, want ErrNotExist", err)
	}
}

// Every byte of a model file is checked: any flip is refused, and a
// truncated file too.
func TestModelFileFlips(t *testing.T) {
	b, err := os.ReadFile(goldenModel)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flip.model")
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if err := os.WriteFile(path, c, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := index.ReadModel(path); !isIndexErr(err) {
			t.Fatalf("byte %d flipped: %v, want an error wrapping a sentinel", i, err)
		}
	}
	if err := os.WriteFile(path, b[:len(b)-64], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := index.ReadModel(path); !errors.Is(err, index.ErrCorrupt) {
		t.Errorf("truncated: %v, want ErrCorrupt", err)
	}
}

// In an index only the model's sections are checked: damage to the row
// ids or the codes leaves the model readable, damage to the anchors does
// not.
func TestReadModelOfDamagedIndex(t *testing.T) {
	path, _ := writeIndex(t, quant.KindRotated, 4, index.L2, 0)
	f, err := format.Open(path, format.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infos := f.Sections()
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range infos {
		if s.Length == 0 {
			continue
		}
		c := bytes.Clone(b)
		c[s.Offset] ^= 1
		bad := filepath.Join(t.TempDir(), "bad.vlc")
		if err := os.WriteFile(bad, c, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := index.ReadModel(bad)
		switch s.Kind.String() {
		case "META", "ANCH", "PARM":
			if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), s.Kind.String()) {
				t.Errorf("%s damaged: %v, want ErrCorrupt naming it", s.Kind, err)
			}
		case "ROWS", "CODE", "SCAN":
			if err != nil {
				t.Errorf("%s damaged: %v, want the model", s.Kind, err)
			}
		}
	}
}

// WriteModel refuses a model it could not read back, and writes nothing.
func TestWriteModelErrors(t *testing.T) {
	good, _ := modelSections(t, quant.KindPQ)
	rot, _ := modelSections(t, quant.KindRotated)
	for _, c := range []struct {
		name string
		edit func(m *index.Model)
		want string
	}{
		{"segment", func(m *index.Model) { m.Meta.Flags = index.FlagSegment }, "flags 0x2"},
		{"dimension", func(m *index.Model) { m.Meta.Dim = 1<<16 + 1 }, "dimension 65537"},
		{"anchors", func(m *index.Model) { m.Anchors = m.Anchors[1:] }, "63 anchor values for 4 anchors of dimension 16"},
		{"anchor beyond float16", func(m *index.Model) { m.Anchors[17] = 1e6 }, "anchor 1 holds 1e+06, beyond float16"},
		{"params", func(m *index.Model) { m.Params = nil }, "0 bytes of list parameters for 4 lists of 16"},
		{"global", func(m *index.Model) { m.Global = m.Global[:10] }, "10 bytes of shared parameters"},
		{"global value", func(m *index.Model) { binary.LittleEndian.PutUint32(m.Global, math.Float32bits(-1)) }, "invalid argument"},
		{"code", func(m *index.Model) { m.Meta.Code = 3 }, "invalid argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := *good
			m.Anchors, m.Params, m.Global = append([]float32(nil), good.Anchors...), bytes.Clone(good.Params), bytes.Clone(good.Global)
			c.edit(&m)
			path := filepath.Join(t.TempDir(), "m.model")
			err := index.WriteModel(path, &m)
			if !errors.Is(err, index.ErrArgument) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("got %v, want ErrArgument naming the file and %q", err, c.want)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a file was written: %v", err)
			}
		})
	}
	rot.Global = []byte{1}
	if err := index.WriteModel(filepath.Join(t.TempDir(), "m"), rot); !errors.Is(err, index.ErrArgument) || !strings.Contains(err.Error(), "shared parameters for the rotated code") {
		t.Errorf("shared parameters for rotated: %v", err)
	}
}

// Anchors are written as float16: a model of float32 anchors reads back
// rounded, as an index stores them.
func TestWriteModelRoundsAnchors(t *testing.T) {
	m, _ := modelSections(t, quant.KindRotated)
	m.Anchors[0] = 1.0001
	path := filepath.Join(t.TempDir(), "m.model")
	if err := index.WriteModel(path, m); err != nil {
		t.Fatal(err)
	}
	back, err := index.ReadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := f16.ToFloat32(f16.FromFloat32(1.0001)); back.Anchors[0] != want {
		t.Errorf("anchor 0 reads %v, want %v", back.Anchors[0], want)
	}
}

// writeModelBytes writes m to path and returns the file's bytes.
func writeModelBytes(t *testing.T, path string, m *index.Model) []byte {
	t.Helper()
	if err := index.WriteModel(path, m); err != nil {
		t.Fatalf("a model read cannot be written: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzModel reads fuzzed model files, as they are and with their
// checksums made consistent. Nothing may panic; an error wraps a
// sentinel and names the file; a model read writes and reads back equal.
func FuzzModel(f *testing.F) {
	golden, err := os.ReadFile(goldenModel)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	dir := f.TempDir()
	path, again := filepath.Join(dir, "f.model"), filepath.Join(dir, "again.model")
	f.Fuzz(func(t *testing.T, b []byte) {
		for range 2 {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := index.ReadModel(path)
			if err != nil {
				if !isIndexErr(err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("ReadModel: %v: wraps no sentinel or does not name the file", err)
				}
			} else {
				// Compared as bytes: META's statistics may be NaN.
				first := writeModelBytes(t, again, m)
				back, err := index.ReadModel(again)
				if err != nil {
					t.Fatalf("a model read does not read back: %v", err)
				}
				if !bytes.Equal(writeModelBytes(t, again, back), first) {
					t.Fatal("a model read back writes other bytes")
				}
			}
			b = bytes.Clone(b)
			if !fixCRCs(b) {
				return
			}
		}
	})
}
