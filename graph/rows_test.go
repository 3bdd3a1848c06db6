package graph

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
	"github.com/vlc-embed/vlc/vecfile"
)

// halfRows are memRows that also offer their float16 bits in place, as
// a mapped .f16 file does (vecfile.Matrix.Float16).
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

// A build from float16 rows in place (the lane kernels over float16 at
// d = 32, the decoded rows at d = 12) gives the bytes the same rows give
// as float32, for exact and searched candidates, passes, a split code and
// compact lists, from a .f16 file opened with vecfile as well.
func TestFloat16RowsSameGraph(t *testing.T) {
	ctx := context.Background()
	for _, d := range []int{32, 12} {
		base, _ := clustered(900, 0, d) // float16 values, decoded
		ix := writeIndex(t, base, 8, quant.KindRotated, 4, index.L2)
		h := toHalf(base.x)
		path := filepath.Join(t.TempDir(), "base.f16")
		raw := make([]byte, 2*len(h))
		for i, v := range h {
			raw[2*i], raw[2*i+1] = byte(v), byte(v>>8)
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := vecfile.Open(path, vecfile.Options{Dim: d})
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		if _, ok := file.Float16(); !ok {
			t.Fatal("the .f16 file offers no float16 view")
		}
		for _, opt := range []BuildOptions{
			{Degree: 8},
			{NProbe: 4, Degree: 12, Passes: 2},
			{NProbe: 4, Bits: 7, Compact: true},
			{NProbe: 2, Degree: 6, StartsPerList: 3},
		} {
			ref, err := Build(ctx, ix, base, opt)
			if err != nil {
				t.Fatal(err)
			}
			for name, rows := range map[string]index.Rows{"in memory": halfRows{base, h}, "from a file": file} {
				g, err := Build(ctx, ix, rows, opt)
				if err != nil {
					t.Fatal(err)
				}
				if where := sameBytes(ref, g); where != "" {
					t.Errorf("d %d, %+v: float16 rows %s: the %s differs from the float32 rows' graph", d, opt, name, where)
				}
			}
		}
	}
}

// A value that is not finite in float16 rows is refused as in float32
// rows, naming the lowest such row and its value.
func TestFloat16RowsNotFinite(t *testing.T) {
	base, _ := clustered(300, 0, 16)
	ix := writeIndex(t, base, 4, quant.KindRotated, 4, index.L2)
	h := toHalf(base.x)
	h[250*16+3] = 0x7e00 // NaN
	h[120*16+9] = 0xfc00 // -Inf
	_, err := Build(context.Background(), ix, halfRows{base, h}, BuildOptions{Degree: 8})
	if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), "row 120, value 9 is -Inf") {
		t.Errorf("Build error %v, want ErrArgument naming row 120, value 9", err)
	}
}

// nearestToAnchors gives each anchor with an empty list the row a loop
// over all rows finds (the lowest on ties: duplicate rows among them),
// across blocks of rows, from float32 and float16 rows.
func TestNearestToAnchors(t *testing.T) {
	base, _ := clustered(9000, 0, 12)
	copy(base.x[8500*12:8501*12], base.x[100*12:101*12]) // a duplicate of row 100, in another block
	anchors := append([]float32(nil), base.x[:5*12]...)
	copy(anchors[4*12:], base.x[100*12:101*12]) // anchor 4 is row 100 (and 8500)
	for i := range anchors[12:24] {
		anchors[12+i] += 3 // anchor 1 on no row
	}
	lists := [][]uint32{{0}, nil, {2}, nil, nil}
	for name, rows := range map[string]*buildRows{
		"float32": {n: base.n, d: 12, x: base.x},
		"float16": {n: base.n, d: 12, h: toHalf(base.x)},
	} {
		b := &builder{buildRows: rows, n: base.n, d: 12}
		got := b.nearestToAnchors(anchors, lists)
		if len(got) != 3 {
			t.Fatalf("%s: %d anchors answered, want 3", name, len(got))
		}
		buf := make([]float32, 12)
		for _, a := range []int{1, 3, 4} {
			best, bd := uint32(0), float32(math.Inf(1))
			for i := range base.n {
				if dd := vec.L2(anchors[a*12:(a+1)*12], rows.decode(uint32(i), buf)); dd < bd {
					best, bd = uint32(i), dd
				}
			}
			if got[a] != best {
				t.Errorf("%s: anchor %d: row %d, a loop finds %d", name, a, got[a], best)
			}
		}
		if got[4] != 100 {
			t.Errorf("%s: anchor 4 (row 100 and 8500): row %d, want 100", name, got[4])
		}
	}
}
