package graph

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
	"github.com/vlc-embed/vlc/vecfile"
)

// halfRows are memRows with a Float16 method, as a type wrapping a
// vecfile.Matrix might have: the build does not take its values in place.
type halfRows struct {
	memRows
	h []uint16
}

func (r halfRows) Float16() ([]uint16, bool) { return r.h, true }

func toHalf(x []float32) []uint16 {
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = f16.FromFloat32(v)
	}
	return h
}

// writeF16 writes h as a .f16 file of dimension d and opens it.
func writeF16(t *testing.T, h []uint16, d int) *vecfile.Matrix {
	t.Helper()
	path := filepath.Join(t.TempDir(), "base.f16")
	raw := make([]byte, 2*len(h))
	for i, v := range h {
		raw[2*i], raw[2*i+1] = byte(v), byte(v>>8)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := vecfile.Open(path, vecfile.Options{Dim: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// A build from a .f16 file's rows in place (d = 32, where the float16
// lane kernels apply) gives the bytes the same rows give as float32, for
// exact, searched and batch-searched candidates, passes, a split code and
// compact lists; at d = 12, and for a wrapper offering Float16, the rows
// are read as float32.
func TestFloat16RowsSameGraph(t *testing.T) {
	ctx := context.Background()
	for _, d := range []int{32, 12} {
		base, _ := clustered(900, 0, d) // float16 values, decoded
		ix := writeIndex(t, base, 8, quant.KindRotated, 4, index.L2)
		h := toHalf(base.x)
		file := writeF16(t, h, d)
		for name, rows := range map[string]index.Rows{"a .f16 file": file, "a wrapper": halfRows{base, h}} {
			r, err := readRows(rows, base.n, d)
			if err != nil {
				t.Fatal(err)
			}
			if inPlace, want := r.h != nil, name == "a .f16 file" && d%8 == 0 && vec.HalfKernels(); inPlace != want {
				t.Errorf("d %d, %s: rows in place %v, want %v", d, name, inPlace, want)
			}
		}
		for _, opt := range []BuildOptions{
			{Degree: 8},
			{NProbe: 4, Degree: 12, Passes: 2},
			{NProbe: 4, Bits: 7, Compact: true},
			{NProbe: 2, Degree: 6, StartsPerList: 3},
			{NProbe: 4, Searcher: ix},
		} {
			ref, err := Build(ctx, ix, base, opt)
			if err != nil {
				t.Fatal(err)
			}
			g, err := Build(ctx, ix, file, opt)
			if err != nil {
				t.Fatal(err)
			}
			if where := sameBytes(ref, g); where != "" {
				t.Errorf("d %d, %+v: the .f16 file's rows: the %s differs from the float32 rows' graph", d, opt, where)
			}
		}
	}
}

// A value that is not finite is refused, in float16 rows in place as in
// float32 rows, naming the lowest such row (of several, in different
// blocks of the check) and its value.
func TestRowsNotFinite(t *testing.T) {
	const n, d = 3200, 16
	base, _ := clustered(n, 0, d)
	ix := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	h := toHalf(base.x)
	h[3000*d+1] = 0x7e00 // NaN
	h[2100*d+3] = 0x7c00 // +Inf
	h[1100*d+9] = 0xfc00 // -Inf: the lowest row
	bad := memRows{make([]float32, n*d), n, d}
	f16.DecodeRow(bad.x, h)
	for name, rows := range map[string]index.Rows{"float16 in place": writeF16(t, h, d), "float32": bad} {
		_, err := Build(context.Background(), ix, rows, BuildOptions{Degree: 8})
		if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), "row 1100, value 9 is -Inf") {
			t.Errorf("%s: Build error %v, want ErrArgument naming row 1100, value 9", name, err)
		}
	}
}

// nearestToAnchors gives each anchor with an empty list the row a loop
// over all rows finds (the lowest on ties: duplicate rows among them),
// the lists being every row's nearest anchor's, from float32 and float16
// rows: an anchor that repeats another (its rows go to the lower), one
// far from every row, one between clusters.
func TestNearestToAnchors(t *testing.T) {
	const d = 12
	base, _ := clustered(9000, 0, d)
	copy(base.x[8500*d:8501*d], base.x[100*d:101*d]) // a duplicate of row 100, in another block
	var anchors []float32
	for _, r := range []int{100, 1, 2, 3, 4000, 7000} {
		anchors = append(anchors, base.x[r*d:(r+1)*d]...)
	}
	anchors = append(anchors, base.x[100*d:101*d]...) // anchor 6 repeats anchor 0: empty, row 100
	far := make([]float32, d)
	for j := range far {
		far[j] = 40
	}
	anchors = append(anchors, far...) // anchor 7: far from every row
	mid := make([]float32, d)
	for j := range mid {
		mid[j] = (base.x[1*d+j] + base.x[4000*d+j]) / 2
	}
	anchors = append(anchors, mid...) // anchor 8: between two rows' clusters
	rng := rand.New(rand.NewPCG(3, 4))
	for k := range 60 { // near rows, off by more and more: some lists empty
		for _, v := range base.x[(k*150+50)*d : (k*150+51)*d] {
			anchors = append(anchors, v+float32(rng.NormFloat64())*float32(k)/10)
		}
	}
	m := len(anchors) / d
	for name, rows := range map[string]*buildRows{
		"float32": {n: base.n, d: d, x: base.x},
		"float16": {n: base.n, d: d, h: toHalf(base.x)},
	} {
		b := &builder{buildRows: rows}
		b.nearestAnchors(anchors, func(int) int { return 0 })
		lists := make([][]uint32, m)
		for i, a := range b.assign {
			lists[a] = append(lists[a], uint32(i))
		}
		got := b.nearestToAnchors(anchors, lists)
		var empty []int
		for a := range m {
			if len(lists[a]) == 0 {
				empty = append(empty, a)
			}
		}
		t.Logf("%s: %d of %d anchors empty", name, len(empty), m)
		if len(empty) < 2 || !slices.Contains(empty, 6) || !slices.Contains(empty, 7) || len(got) != len(empty) {
			t.Fatalf("%s: empty anchors %v, %d answered; want 6 and 7 among them", name, empty, len(got))
		}
		buf := make([]float32, d)
		for _, a := range empty {
			best, bd := uint32(0), float32(math.Inf(1))
			for i := range base.n {
				if dd := vec.L2(anchors[a*d:(a+1)*d], rows.decode(uint32(i), buf)); dd < bd {
					best, bd = uint32(i), dd
				}
			}
			if got[a] != best {
				t.Errorf("%s: anchor %d: row %d, a loop finds %d", name, a, got[a], best)
			}
		}
		if got[6] != 100 {
			t.Errorf("%s: anchor 6 (rows 100 and 8500): row %d, want 100", name, got[6])
		}
	}
}
