package graph

import (
	"bytes"
	"context"
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
	"github.com/vlc-embed/vlc/quant"
	"github.com/vlc-embed/vlc/vecfile"
)

// goldenV2 is the project's version-2 golden index (256 x 16, 8 anchors,
// 8-bit rotated codes) and goldenRows the vectors it was built from.
const (
	goldenV2   = "../testdata/golden/v2.vlc"
	goldenRows = "../testdata/golden/small.f16"
)

// writeWithGraph builds a graph over ix, writes ix's file with it to a
// new path and opens that file and its graph.
func writeWithGraph(t *testing.T, ix *index.Index, rows index.Rows, opt BuildOptions) (built, read *Graph, withGraph *index.Index) {
	t.Helper()
	g, err := Build(context.Background(), ix, rows, opt)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "graph.vlc")
	if err := WriteFile(context.Background(), path, ix, g); err != nil {
		t.Fatal(err)
	}
	ix2, err := index.Open(path, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix2.Close() })
	g2, err := Open(ix2)
	if err != nil {
		t.Fatal(err)
	}
	return g, g2, ix2
}

// A graph read from the file searches exactly as the one built: the same
// rows and the same distances, bit for bit, by code and re-ranked, at
// several widths; the file is version 3 and every other section keeps
// its bytes.
func TestFileRoundTrip(t *testing.T) {
	base, queries := clustered(600, 40, 16)
	ix := writeIndex(t, base, 8, quant.KindRotated, 4, index.L2)
	g, g2, ix2 := writeWithGraph(t, ix, base, BuildOptions{Degree: 12, Alpha: 1.2, NProbe: 3})
	if g2.Options() != g.Options() || g2.Entry() != g.Entry() || g2.Degree() != 12 {
		t.Fatalf("read options %+v entry %d, built %+v entry %d", g2.Options(), g2.Entry(), g.Options(), g.Entry())
	}
	a1, c1 := g.Size()
	a2, c2 := g2.Size()
	if a1 != a2 || c1 != c2 {
		t.Errorf("sizes read %d + %d, built %d + %d", a2, c2, a1, c1)
	}
	q := make([]float32, queries.d)
	for i := range queries.n {
		queries.Row(i, q)
		for _, opt := range []SearchOptions{{K: 10, Ef: 10}, {K: 10, Ef: 48}, {K: 5, Ef: 32, Rerank: base}} {
			want, err := g.Search(q, opt)
			if err != nil {
				t.Fatal(err)
			}
			got, err := g2.Search(q, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("query %d, ef %d: read graph %v, built %v", i, opt.Ef, got, want)
			}
		}
	}
	f, err := format.Open(ix2.Path(), format.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version() != 3 {
		t.Errorf("file with a graph is version %d, want 3", f.Version())
	}
	for _, s := range ix.Sections() {
		old, _ := ix.Section(s.Kind)
		if now, ok := f.Section(s.Kind); !ok || !bytes.Equal(now, old) {
			t.Errorf("section %v changed", s.Kind)
		}
	}
}

// The golden version-2 file opens as before and holds no graph; a graph
// written into a copy leaves its sections' bytes as they were, and
// rewriting the copy with another graph replaces the first.
func TestGoldenV2(t *testing.T) {
	ix, err := index.Open(goldenV2, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := Open(ix); !errors.Is(err, ErrNoGraph) {
		t.Fatalf("Open of the golden file: %v, want ErrNoGraph", err)
	}
	rows, err := vecfile.Open(goldenRows, vecfile.Options{Dim: ix.Dim()})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	_, g2, ix2 := writeWithGraph(t, ix, rows, BuildOptions{Degree: 8})
	if len(ix2.Sections()) != len(ix.Sections())+1 {
		t.Fatalf("%d sections, want the golden's %d and GRPH", len(ix2.Sections()), len(ix.Sections()))
	}
	g3, err := Build(context.Background(), ix2, rows, BuildOptions{Degree: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(context.Background(), ix2.Path(), ix2, g3); err != nil {
		t.Fatal(err)
	}
	if g2.Degree() != 8 { // the old mapping stays as it was
		t.Fatalf("degree %d", g2.Degree())
	}
	ix3, err := index.Open(ix2.Path(), index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix3.Close()
	g4, err := Open(ix3)
	if err != nil {
		t.Fatal(err)
	}
	if g4.Degree() != 16 || len(ix3.Sections()) != len(ix2.Sections()) {
		t.Fatalf("after the rewrite: degree %d, %d sections", g4.Degree(), len(ix3.Sections()))
	}
}

// A damaged GRPH section (its checksum right, so that the container takes
// it) gives an error wrapping index.ErrCorrupt that names the field.
func TestFileCorrupt(t *testing.T) {
	base, _ := clustered(300, 0, 16)
	ix := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	g, err := Build(context.Background(), ix, base, BuildOptions{Degree: 8})
	if err != nil {
		t.Fatal(err)
	}
	good := g.appendSection(nil)
	le := binary.LittleEndian
	m := int64(ix.Lists())
	p := sectionParts(int64(g.n), m, int64(g.perList), (int64(g.n*g.r*g.adj.w)+7)/8, int64(g.nodes.stride), 0)
	adjAt, startsAt, nodesAt := p.adj, p.starts, p.nodes
	put := func(at int64, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint32(b[at:], v); return b }
	}
	cases := []struct {
		name string
		edit func([]byte) []byte
		msg  string
	}{
		{"short header", func(b []byte) []byte { return b[:40] }, "shorter than its 64-byte header"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, "want"},
		{"rows", put(hRows, 301), "field rows is 301, the index's 300"},
		{"dim", put(hDim, 8), "field dim is 8"},
		{"anchors", put(hAnchors, 5), "field anchors is 5"},
		{"bits", put(hBits, 8), "field bits is 8"},
		{"slot bits", put(hSlotBits, 32), "field slot bits is 32"},
		{"degree 0", put(hDegree, 0), "field degree is 0"},
		{"degree other", put(hDegree, 9), "bytes, want"},
		{"entry", put(hEntry, 300), "field entry is row 300 of 300"},
		{"starts per list", put(hPerList, 2000), "field starts per list is 2000"},
		{"flags", put(hFlags, 8), "field flags is 0x8"},
		{"flags compact", put(hFlags, flagCompact), "compact adjacency"},
		{"flags split", put(hFlags, flagSplit), "field bits is 4, a split code's 5 to 8"},
		{"alpha", put(hAlpha, math.Float32bits(0.5)), "field alpha is 0.5"},
		{"alpha NaN", put(hAlpha, math.Float32bits(float32(math.NaN()))), "field alpha is NaN"},
		{"build ef", put(hBuildEf, 0), "build ef 0"},
		{"reserved", put(hReserved+4, 1), "reserved header bytes"},
		{"adjacency slot", func(b []byte) []byte { b[adjAt] = 0xff; b[adjAt+1] |= 0x3f; return b }, "adjacency: row 0, slot 0 holds row"},
		{"adjacency padding", func(b []byte) []byte { b[startsAt-1] = 1; return b }, "adjacency padding is not zero"},
		{"starting row", put(startsAt+4, 300), "starting rows: list 0, start 1 is row 300 of 300"},
		{"node list", put(nodesAt+int64(g.nodes.packed)+8, 4), "node record 0: list 4 of 4"},
		{"node scalar", put(nodesAt+int64(g.nodes.stride)+int64(g.nodes.packed), math.Float32bits(float32(math.Inf(1)))), "node record 1: scalars +Inf"},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var secs []format.Section
			for _, s := range ix.Sections() {
				d, _ := ix.Section(s.Kind)
				secs = append(secs, format.Section{Kind: s.Kind, Data: d})
			}
			secs = append(secs, format.Section{Kind: SectionKind, Data: tc.edit(bytes.Clone(good))})
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".vlc")
			if err := format.WriteFile(path, secs); err != nil {
				t.Fatal(err)
			}
			ix2, err := index.Open(path, index.Options{Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ix2.Close()
			_, err = Open(ix2)
			if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), `"GRPH"`) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open: %v, want ErrCorrupt naming the file, GRPH and %q", err, tc.msg)
			}
		})
	}
}

// WriteFile refuses a graph built over another index.
func TestWriteFileOtherIndex(t *testing.T) {
	base, _ := clustered(200, 0, 16)
	ix := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	other := writeIndex(t, memRows{base.x[:100*16], 100, 16}, 4, quant.KindRotated, 4, index.L2)
	g, err := Build(context.Background(), ix, base, BuildOptions{Degree: 8})
	if err != nil {
		t.Fatal(err)
	}
	err = WriteFile(context.Background(), filepath.Join(t.TempDir(), "x.vlc"), other, g)
	if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), "build the graph over this index") {
		t.Fatalf("WriteFile over another index: %v", err)
	}
}

// goldenV3 is goldenV2 with a graph of degree 8 (BuildOptions{Degree: 8}
// over goldenRows) written into it: the version-3 golden; goldenV4 the
// same with a 7-bit split code and compact lists.
const (
	goldenV3 = "../testdata/golden/v3-graph.vlc"
	goldenV4 = "../testdata/golden/v4-graph.vlc"
)

var updateGolden = flag.Bool("update", false, "rewrite "+goldenV3+" and "+goldenV4)

// The graph built over the version-2 golden and written into it gives the
// version-3 golden's bytes, which open under version 3 and search as the
// graph just built does.
func TestGoldenV3(t *testing.T) { checkGolden(t, goldenV3, BuildOptions{Degree: 8}, 3) }

// The same for version 4: a 7-bit split code and compact lists.
func TestGoldenV4(t *testing.T) {
	checkGolden(t, goldenV4, BuildOptions{Degree: 8, Bits: 7, Compact: true}, 4)
}

func checkGolden(t *testing.T, golden string, opt BuildOptions, version int) {
	t.Helper()
	ix, err := index.Open(goldenV2, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	rows, err := vecfile.Open(goldenRows, vecfile.Options{Dim: ix.Dim()})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	g, _, ix2 := writeWithGraph(t, ix, rows, opt)
	got, err := os.ReadFile(ix2.Path())
	if err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the file written differs from %s at offset %d (%d bytes, want %d)", golden, i, len(got), len(want))
	}
	f, err := format.Open(golden, format.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version() != version {
		t.Fatalf("%s is version %d, want %d", golden, f.Version(), version)
	}
	ix3, err := index.Open(golden, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix3.Close()
	g3, err := Open(ix3)
	if err != nil {
		t.Fatal(err)
	}
	if g3.Options() != g.Options() {
		t.Fatalf("the golden's graph has options %+v, the graph built %+v", g3.Options(), g.Options())
	}
	q := make([]float32, ix.Dim())
	for i := 0; i < rows.Len(); i += 37 {
		rows.Row(i, q)
		want, err := g.Search(q, SearchOptions{K: 5, Ef: 16})
		if err != nil {
			t.Fatal(err)
		}
		got, err := g3.Search(q, SearchOptions{K: 5, Ef: 16})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("row %d: the golden's graph finds %v, the graph built %v", i, got, want)
		}
	}
}
