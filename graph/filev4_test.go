package graph

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/quant"
)

// A compact adjacency, a split code and both are written under format
// version 4 and read back searching exactly as the graph built: the same
// rows and distances at several widths, by the split code's re-rank, by
// fewer re-ranked rows and from the vectors; the other sections keep
// their bytes. 20 dimensions: a plane's last byte is half padding.
func TestFileRoundTripV4(t *testing.T) {
	base, queries := clustered(500, 20, 20)
	ix := writeIndex(t, base, 8, quant.KindRotated, 4, index.L2)
	for _, opt := range []BuildOptions{{Compact: true}, {Bits: 7}, {Bits: 5, Compact: true}, {Bits: 8, Compact: true, Degree: 12}} {
		opt.NProbe = 3
		g, g2, ix2 := writeWithGraph(t, ix, base, opt)
		if g2.Options() != g.Options() || g2.Entry() != g.Entry() {
			t.Fatalf("%+v: read options %+v entry %d, built %+v entry %d", opt, g2.Options(), g2.Entry(), g.Options(), g.Entry())
		}
		a1, c1 := g.Size()
		a2, c2 := g2.Size()
		if a1 != a2 || c1 != c2 {
			t.Errorf("%+v: sizes read %d + %d, built %d + %d", opt, a2, c2, a1, c1)
		}
		q := make([]float32, queries.d)
		for i := range queries.n {
			queries.Row(i, q)
			for _, so := range []SearchOptions{{K: 10, Ef: 10}, {K: 10, Ef: 48}, {K: 5, Ef: 32, RerankCount: 8}, {K: 5, Ef: 32, Rerank: base}} {
				want, err := g.Search(q, so)
				if err != nil {
					t.Fatal(err)
				}
				got, err := g2.Search(q, so)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%+v, query %d, ef %d: read graph %v, built %v", opt, i, so.Ef, got, want)
				}
			}
		}
		f, err := format.Open(ix2.Path(), format.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if f.Version() != 4 {
			t.Errorf("%+v: file version %d, want 4", opt, f.Version())
		}
		for _, s := range ix.Sections() {
			old, _ := ix.Section(s.Kind)
			if now, ok := f.Section(s.Kind); !ok || !bytes.Equal(now, old) {
				t.Errorf("%+v: section %v changed", opt, s.Kind)
			}
		}
		f.Close()
	}
}

// v4Section builds a compact graph of a 6-bit split code over 300 rows
// of 20 dimensions and returns its index, graph and section.
func v4Section(t testing.TB) (*index.Index, *Graph, []byte) {
	t.Helper()
	base, _ := clustered(300, 0, 20)
	ix := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	g, err := Build(context.Background(), ix, base, BuildOptions{Degree: 8, Bits: 6, Compact: true, NProbe: 2})
	if err != nil {
		t.Fatal(err)
	}
	return ix, g, g.appendSection(nil)
}

// A damaged version-4 section gives an error wrapping index.ErrCorrupt
// that names the section and what is wrong.
func TestFileCorruptV4(t *testing.T) {
	ix, g, good := v4Section(t)
	if _, err := openSection(ix, good); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	n := int64(g.n)
	c, rc := g.compact, g.refine
	lists := int64(len(c.data) - 8)
	p := sectionParts(n, int64(ix.Lists()), int64(g.perList), compactHead(n)+lists, int64(g.nodes.stride), int64(rc.stride))
	stream := p.adj + compactHead(n)
	put32 := func(at int64, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint32(b[at:], v); return b }
	}
	// Row 1's count (row 0 starts at bit 0: count 4 bits, gap width 5,
	// first neighbour 9 bits, gaps).
	row1 := int64(c.start(1))
	setBits := func(bit int64, width int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte {
			at := stream + bit/8
			w := le.Uint64(b[at:])
			mask := (uint64(1)<<width - 1) << (bit % 8)
			le.PutUint64(b[at:], w&^mask|v<<(bit%8))
			return b
		}
	}
	cb := c.cb
	cases := []struct {
		name string
		edit func([]byte) []byte
		msg  string
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, "want"},
		{"truncated to the header", func(b []byte) []byte { return b[:headerBytes+4] }, "too short for a compact adjacency"},
		{"flags", put32(hFlags, 16|flagCompact|flagSplit), "field flags is 0x16"},
		{"split decoded", put32(hFlags, flagCompact|flagSplit|flagDecoded), "a split code (bit 2) is not decoded"},
		{"split bits 4", put32(hBits, 4), "field bits is 4, a split code's 5 to 8"},
		{"split bits 9", put32(hBits, 9), "field bits is 9"},
		{"split bits 7", put32(hBits, 7), "bytes, want"},
		{"no split", put32(hFlags, flagCompact), "field bits is 6, the index's 4"},
		{"lists huge", func(b []byte) []byte { le.PutUint64(b[p.adj:], 1<<62); return b }, "compact adjacency: lists of 4611686018427387904 bytes"},
		{"lists longer", func(b []byte) []byte { le.PutUint64(b[p.adj:], uint64(lists+1)); return b }, "compact adjacency:"},
		{"block offset", put32(p.adj+8+4, uint32(c.offs[1]+1)), "compact adjacency: block 1 starts at bit"},
		{"count past degree", setBits(row1, cb, 9), "compact adjacency: row 1 holds 9 neighbours, the degree is 8"},
		{"count shorter", setBits(row1, cb, 1), "compact adjacency:"},
		{"first neighbour", setBits(row1+int64(cb)+gapBits, c.w, 300), "compact adjacency: row 1 holds row"},
		{"gap width", setBits(row1+int64(cb), gapBits, 31), "compact adjacency:"},
		{"trailing bits", func(b []byte) []byte { b[stream+lists-1] |= 0x80; return b }, "compact adjacency:"},
		{"adjacency padding", func(b []byte) []byte { b[p.adjEnd] = 1; return b }, "adjacency padding is not zero"},
		{"starting row", put32(p.starts, 300), "starting rows: list 0, start 0 is row 300 of 300"},
		{"node list", func(b []byte) []byte { le.PutUint16(b[p.nodes+int64(g.nodes.packed)+4:], 4); return b }, "node record 0: list 4 of 4"},
		{"scale NaN", put32(p.scales, math.Float32bits(float32(math.NaN()))), "scales: list 0 has K offset NaN"},
		{"scale negative", put32(p.scales+4*4, math.Float32bits(-1)), "scales: list 1 has K offset"},
		{"scale too large", put32(p.scales+2*4, math.Float32bits(1e36)), "scales: list 0 has K offset"},
		{"scales padding", func(b []byte) []byte { b[p.nodes-1] = 1; return b }, "scales padding is not zero"},
		{"split scalar", func(b []byte) []byte {
			le.PutUint16(b[p.lows+int64(rc.stride)*7+int64(rc.packed):], 0x7c00)
			return b
		}, "split code: row 7: scalars +Inf"},
		{"plane padding", func(b []byte) []byte { b[p.lows+int64(rc.stride)+2] |= 0x40; return b }, "split code: row 1: plane 0 has bits past dimension 20"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openSection(ix, tc.edit(bytes.Clone(good)))
			if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), `"GRPH"`) || !strings.Contains(err.Error(), ix.Path()) {
				t.Fatalf("Open: %v, want ErrCorrupt naming the file, GRPH and %q", err, tc.msg)
			}
		})
	}
}

// checkDamaged opens a damaged section: an error must wrap
// index.ErrCorrupt; a section that opens must search without error.
func checkDamaged(t *testing.T, ix *index.Index, b []byte, q []float32) {
	t.Helper()
	g, err := openSection(ix, b)
	if err != nil {
		if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), `"GRPH"`) {
			t.Fatalf("Open: %v, want ErrCorrupt naming GRPH", err)
		}
		return
	}
	if _, err := g.Search(q, SearchOptions{K: 5, Ef: 16}); err != nil {
		t.Fatalf("search of a section that opened: %v", err)
	}
}

// Random damage to a default and a version-4 section (bytes changed,
// words overwritten, the section cut short) never panics: Open says
// ErrCorrupt, or the graph opens and searches.
func TestFileDamageRandom(t *testing.T) {
	ix4, _, v4 := v4Section(t)
	base, _ := clustered(300, 0, 16)
	ix3 := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	g3, err := Build(context.Background(), ix3, base, BuildOptions{Degree: 8, NProbe: 2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		ix   *index.Index
		good []byte
	}{{ix4, v4}, {ix3, g3.appendSection(nil)}} {
		q := make([]float32, c.ix.Dim())
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		opened := 0
		for range 1500 {
			b := bytes.Clone(c.good)
			switch rng.IntN(4) {
			case 0: // a few bytes, more often in the header and the adjacency
				for range 1 + rng.IntN(3) {
					at := rng.IntN(len(b))
					if rng.IntN(2) == 0 {
						at = rng.IntN(min(len(b), 512))
					}
					b[at] ^= byte(1 + rng.IntN(255))
				}
			case 1: // a word, little or large
				at := rng.IntN(len(b) - 4)
				v := rng.Uint32()
				if rng.IntN(2) == 0 {
					v &= 0xff
				}
				binary.LittleEndian.PutUint32(b[at:], v)
			case 2: // cut short
				b = b[:rng.IntN(len(b))]
			case 3: // one bit
				at := rng.IntN(len(b))
				b[at] ^= 1 << rng.IntN(8)
			}
			if _, err := openSection(c.ix, b); err == nil {
				opened++
			}
			checkDamaged(t, c.ix, b, q)
		}
		t.Logf("%d of 1500 damaged sections opened", opened)
	}
}

// FuzzOpenSection: any bytes as the section of a version-4 graph's
// index either open and search or give ErrCorrupt (go test -fuzz
// FuzzOpenSection ./graph/).
func FuzzOpenSection(f *testing.F) {
	ix, _, good := v4Section(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	b := bytes.Clone(good)
	binary.LittleEndian.PutUint32(b[hFlags:], flagSplit)
	f.Add(b)
	q := make([]float32, ix.Dim())
	for j := range q {
		q[j] = f16.ToFloat32(f16.FromFloat32(float32(j) / 7))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDamaged(t, ix, b, q) })
}
