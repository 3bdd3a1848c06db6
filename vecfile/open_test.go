package vecfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/vlc-embed/vlc/internal/f16"
)

func TestRoundTrip(t *testing.T) {
	const n, dim = 257, 37
	rows := randRows(n, dim, 7)
	rows[3][4] = 70000 // beyond float16 range: +Inf after rounding
	rows[5][6] = 1e-9  // float16 underflow to 0
	cases := []struct {
		name    string
		write   func(string) error
		f16     bool // stored as float16
		optDim  int
		zeroCpy bool
	}{
		{"v.f16", func(p string) error { return WriteF16(p, rows) }, true, dim, true},
		{"v.npy", func(p string) error { return WriteNpy(p, rows, "<f2") }, true, 0, true},
		{"v32.npy", func(p string) error { return WriteNpy(p, rows, "<f4") }, false, dim, false},
		{"v64.npy", func(p string) error { return writeNpyF8(p, rows) }, false, 0, false},
		{"v64d.npy", func(p string) error { return writeNpyF8(p, rows) }, false, dim, false},
		{"v.fvecs", func(p string) error { return WriteFvecs(p, rows) }, false, 0, false},
		{"V.FVECS", func(p string) error { return WriteFvecs(p, rows) }, false, dim, false},
		{"V.NpY", func(p string) error { return WriteNpy(p, rows, "<f2") }, true, dim, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), c.name)
			if err := c.write(p); err != nil {
				t.Fatal(err)
			}
			m := mustOpen(t, p, Options{Dim: c.optDim})
			if m.Len() != n || m.Dim() != dim || m.Path() != p {
				t.Fatalf("Len, Dim, Path = %d, %d, %q; want %d, %d, %q", m.Len(), m.Dim(), m.Path(), n, dim, p)
			}
			view, ok := m.Float16()
			if ok != (c.zeroCpy && littleEndian) {
				t.Fatalf("Float16() ok = %v, want %v", ok, c.zeroCpy)
			}
			if ok && len(view) != n*dim {
				t.Fatalf("len(Float16()) = %d, want %d", len(view), n*dim)
			}
			var buf []float32
			var hbuf []uint16
			for i, r := range rows {
				buf = m.Row(i, buf)
				hbuf = m.RowF16(i, hbuf)
				for j, v := range r {
					h := f16.FromFloat32(v)
					want := v
					if c.f16 {
						want = f16.ToFloat32(h)
					}
					if math.Float32bits(buf[j]) != math.Float32bits(want) {
						t.Fatalf("Row(%d)[%d] = %v, want %v", i, j, buf[j], want)
					}
					if hbuf[j] != h {
						t.Fatalf("RowF16(%d)[%d] = %#04x, want %#04x", i, j, hbuf[j], h)
					}
					if ok && view[i*dim+j] != h {
						t.Fatalf("Float16()[%d] = %#04x, want %#04x", i*dim+j, view[i*dim+j], h)
					}
				}
			}
			err := m.CheckFinite()
			if c.f16 {
				// 70000 rounds to +Inf in float16.
				if err == nil || !strings.Contains(err.Error(), "row 3, column 4: value +Inf") {
					t.Fatalf("CheckFinite = %v, want +Inf at row 3, column 4", err)
				}
			} else if err != nil {
				t.Fatalf("CheckFinite: %v", err)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if err := m.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, ok := m.Float16(); ok {
				t.Fatal("Float16() ok after Close")
			}
			if err := m.CheckFinite(); !errors.Is(err, fs.ErrClosed) {
				t.Fatalf("CheckFinite after Close = %v", err)
			}
			func() {
				defer func() {
					if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "after Close") {
						t.Fatalf("Row after Close: recovered %v", r)
					}
				}()
				m.Row(0, nil)
			}()
		})
	}
}

func TestRowDst(t *testing.T) {
	rows := randRows(3, 8, 1)
	p := filepath.Join(t.TempDir(), "a.fvecs")
	if err := WriteFvecs(p, rows); err != nil {
		t.Fatal(err)
	}
	m := mustOpen(t, p, Options{})
	big := make([]float32, 2, 20)
	got := m.Row(1, big)
	if len(got) != 8 || &got[0] != &big[0] {
		t.Fatalf("Row did not reuse dst with enough capacity (len %d)", len(got))
	}
	small := make([]float32, 7)
	got = m.Row(2, small)
	if len(got) != 8 || &got[0] == &small[0] || got[7] != rows[2][7] {
		t.Fatalf("Row with short dst: len %d", len(got))
	}
	h := m.RowF16(0, nil)
	if len(h) != 8 || h[0] != f16.FromFloat32(rows[0][0]) {
		t.Fatalf("RowF16(0, nil) = %v", h)
	}
	for _, i := range []int{-1, 3} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Row(%d) did not panic", i)
				}
			}()
			m.Row(i, nil)
		}()
	}
}

// TestUnalignedNpy covers the byte-decoding fallbacks: an .npy data offset
// that is odd (float16) or not a multiple of 4 (float32).
func TestUnalignedNpy(t *testing.T) {
	vals := []float32{1, -2.5, 3.25, 1e-3, 65504, float32(math.Copysign(0, -1))}
	var vals64 []float64
	for _, v := range vals {
		vals64 = append(vals64, float64(v))
	}
	for _, c := range []struct {
		descr string
		mod   int // wanted data offset modulo 4
		data  []byte
		f16   bool
	}{
		{"<f2", 1, nil, true},
		{"<f4", 2, f32Bytes(vals...), false},
		{"<f4", 1, f32Bytes(vals...), false},
		{"<f8", 0, f64Bytes(vals64...), false},
		{"<f8", 3, f64Bytes(vals64...), false},
	} {
		data := c.data
		if c.f16 {
			for _, v := range vals {
				data = binary.LittleEndian.AppendUint16(data, f16.FromFloat32(v))
			}
		}
		dict := "{'descr': '" + c.descr + "', 'fortran_order': False, 'shape': (3, 2), }"
		for (10+len(dict)+1)%4 != c.mod {
			dict += " "
		}
		b := npyFile(1, dict, data)
		if off := len(b) - len(data); off%4 != c.mod {
			t.Fatalf("test setup: data offset %d", off)
		}
		m := mustOpen(t, writeBytes(t, "u.npy", b), Options{})
		if _, ok := m.Float16(); ok {
			t.Fatalf("%s: Float16() ok with an unaligned data offset", c.descr)
		}
		for i := range 3 {
			r := m.Row(i, nil)
			h := m.RowF16(i, nil)
			for j := range 2 {
				v := vals[2*i+j]
				want := v
				if c.f16 {
					want = f16.ToFloat32(f16.FromFloat32(v))
				}
				if math.Float32bits(r[j]) != math.Float32bits(want) || h[j] != f16.FromFloat32(v) {
					t.Fatalf("%s offset mod 4 = %d: row %d col %d = %v/%#04x, want %v", c.descr, c.mod, i, j, r[j], h[j], want)
				}
			}
		}
		if err := m.CheckFinite(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNpy1D: a 1-D array is one vector of its length, in every dtype and
// header version, with or without a matching -dim.
func TestNpy1D(t *testing.T) {
	vals := []float32{1, -2.5, 0.1, 1e-3, 65504}
	var h []uint16
	var v64 []float64
	for _, v := range vals {
		h = append(h, f16.FromFloat32(v))
		v64 = append(v64, float64(v))
	}
	for _, c := range []struct {
		descr string
		major byte
		dim   int
		data  []byte
	}{
		{"<f2", 1, 0, f16Bytes(h...)},
		{"<f4", 1, 0, f32Bytes(vals...)},
		{"<f4", 2, 5, f32Bytes(vals...)},
		{"<f8", 1, 0, f64Bytes(v64...)},
		{"<f8", 3, 5, f64Bytes(v64...)},
	} {
		name := fmt.Sprintf("%s v%d -dim %d", c.descr, c.major, c.dim)
		p := writeBytes(t, "v.npy", npyFile(c.major, npyDict(c.descr, "False", "(5,)"), c.data))
		m := mustOpen(t, p, Options{Dim: c.dim})
		if m.Len() != 1 || m.Dim() != 5 {
			t.Fatalf("%s: %d x %d, want 1 x 5", name, m.Len(), m.Dim())
		}
		view, ok := m.Float16()
		if ok && (c.descr != "<f2" || len(view) != 5) {
			t.Fatalf("%s: Float16() ok with %d values", name, len(view))
		}
		r, rh := m.Row(0, nil), m.RowF16(0, nil)
		for j, v := range vals {
			want := v
			if c.descr == "<f2" {
				want = f16.ToFloat32(h[j])
			}
			if math.Float32bits(r[j]) != math.Float32bits(want) || rh[j] != h[j] || ok && view[j] != h[j] {
				t.Fatalf("%s: column %d = %v/%#04x, want %v/%#04x", name, j, r[j], rh[j], want, h[j])
			}
		}
		if err := m.CheckFinite(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestNpyFloat64 checks the float64 to float32 conversion: rounded to
// nearest, and ±Inf (not MaxFloat32) beyond the float32 range, as
// CheckFinite reports those values.
func TestNpyFloat64(t *testing.T) {
	above := math.Nextafter(math.MaxFloat32, math.Inf(1))
	inf, ninf := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, c := range []struct {
		in   float64
		want float32
	}{
		{0.1, 0.1},
		{1.0 / 3, 1.0 / 3},
		{-1e-50, float32(math.Copysign(0, -1))},
		{1e-40, float32(1e-40)}, // float32 subnormal
		{math.MaxFloat32, math.MaxFloat32},
		{-math.MaxFloat32, -math.MaxFloat32},
		{above, inf},
		{-above, ninf},
		{1e39, inf},
		{math.Inf(-1), ninf},
		{math.NaN(), float32(math.NaN())},
	} {
		p := writeBytes(t, "d.npy", npyFile(1, npyDict("<f8", "False", "(2,)"), f64Bytes(1, c.in)))
		m := mustOpen(t, p, Options{Dim: 2})
		if _, ok := m.Float16(); ok {
			t.Fatal("Float16() ok for '<f8'")
		}
		got, h := m.Row(0, nil)[1], m.RowF16(0, nil)[1]
		if !sameFloat(got, c.want) || math.Signbit(float64(got)) != math.Signbit(float64(c.want)) {
			t.Errorf("Row for %v = %v, want %v", c.in, got, c.want)
		}
		if h != f16.FromFloat32(got) {
			t.Errorf("RowF16 for %v = %#04x, want %#04x", c.in, h, f16.FromFloat32(got))
		}
		err := m.CheckFinite()
		if finite := !math.IsInf(float64(c.want), 0) && !math.IsNaN(float64(c.want)); finite != (err == nil) {
			t.Errorf("CheckFinite for %v = %v", c.in, err)
		}
	}
}

// Files written by numpy itself (1.24, np.save with its default float64):
//
//	a = np.array([[0.1, -2.5, 1.0/3.0, 1e-3],
//	              [65504.0, -0.0, 123456.789, -1e-8],
//	              [3.0e38, -7.25, 2.0**-20, 42.0]])
//	np.save("numpy_f8_3x4.npy", a)
//	np.save("numpy_f8_1d.npy", np.linspace(-1.0, 1.0, 5))
func TestNumpyWritten(t *testing.T) {
	for _, c := range []struct {
		file      string
		n, dim    int
		optDim    int
		want      []float64
		wantShape string
	}{
		{"numpy_f8_3x4.npy", 3, 4, 0, []float64{
			0.1, -2.5, 1.0 / 3.0, 1e-3,
			65504.0, math.Copysign(0, -1), 123456.789, -1e-8,
			3.0e38, -7.25, 0x1p-20, 42.0}, "(3, 4)"},
		{"numpy_f8_3x4.npy", 3, 4, 4, nil, "(3, 4)"},
		{"numpy_f8_1d.npy", 1, 5, 0, []float64{-1, -0.5, 0, 0.5, 1}, "(5,)"},
		{"numpy_f8_1d.npy", 1, 5, 5, nil, "(5,)"},
	} {
		p := filepath.Join("testdata", c.file)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, []byte("'descr': '<f8'")) || !bytes.Contains(raw, []byte("'shape': "+c.wantShape)) {
			t.Fatalf("%s: not the numpy file expected: %q", p, raw[:min(len(raw), 128)])
		}
		m := mustOpen(t, p, Options{Dim: c.optDim})
		if m.Len() != c.n || m.Dim() != c.dim {
			t.Fatalf("%s: %d x %d, want %d x %d", p, m.Len(), m.Dim(), c.n, c.dim)
		}
		if _, ok := m.Float16(); ok {
			t.Fatalf("%s: Float16() ok for float64", p)
		}
		for i := range c.n {
			r := m.Row(i, nil)
			for j := range c.dim {
				if c.want == nil {
					break
				}
				w := float32(c.want[i*c.dim+j])
				if math.Float32bits(r[j]) != math.Float32bits(w) {
					t.Fatalf("%s: row %d, column %d = %v, want %v", p, i, j, r[j], w)
				}
			}
		}
		if err := m.CheckFinite(); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

// TestNpyHeaderVariants: keys in any order, versions 2 and 3, Python 2
// longs, double quotes, no trailing comma, extra whitespace.
func TestNpyHeaderVariants(t *testing.T) {
	data := f32Bytes(1, 2, 3, 4, 5, 6)
	for _, c := range []struct {
		major byte
		dict  string
	}{
		{1, "{'shape': (3, 2), 'fortran_order': False, 'descr': '<f4'}"},
		{2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"},
		{3, `{"fortran_order": False, "descr": "<f4", "shape": (3L, 2L,)}   `},
		{1, " { 'descr' : '<f4' ,\t'fortran_order':False,'shape':( 3 , 2 ) , } "},
	} {
		m := mustOpen(t, writeBytes(t, "h.npy", npyFile(c.major, c.dict, data)), Options{})
		if m.Len() != 3 || m.Dim() != 2 || m.Row(2, nil)[1] != 6 {
			t.Errorf("v%d %s: got %dx%d", c.major, c.dict, m.Len(), m.Dim())
		}
	}
}

func TestWriteNpyHeader(t *testing.T) {
	p := filepath.Join(t.TempDir(), "w.npy")
	if err := WriteNpy(p, randRows(5, 3, 2), "<f4"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	hlen := int(binary.LittleEndian.Uint16(b[8:]))
	if (10+hlen)%64 != 0 || b[10+hlen-1] != '\n' || len(b) != 10+hlen+5*3*4 {
		t.Fatalf("header length %d, file %d bytes", hlen, len(b))
	}
	if !bytes.HasPrefix(b[10:], []byte("{'descr': '<f4', 'fortran_order': False, 'shape': (5, 3), }")) {
		t.Fatalf("header %q", b[10:10+hlen])
	}
	if err := WriteNpy(p, randRows(1, 1, 1), ">f4"); err == nil {
		t.Fatal("WriteNpy accepted dtype >f4")
	}
}

// TestCheckFiniteLowestRow puts bad values in many blocks and checks that
// the lowest row is reported whatever the scheduling.
func TestCheckFiniteLowestRow(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	const n, dim = 20000, 64 // f16 rows of 128 bytes: 2048 rows per block
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = zeros(dim)
	}
	inf := float32(math.Inf(-1))
	for _, i := range []int{19999, 15000, 9000, 4097, 4096} {
		rows[i][i%dim] = inf
	}
	dir := t.TempDir()
	for _, name := range []string{"a.f16", "a.fvecs", "a.npy", "a8.npy"} {
		p := filepath.Join(dir, name)
		var err error
		switch name {
		case "a.f16":
			err = WriteF16(p, rows)
		case "a.fvecs":
			err = WriteFvecs(p, rows)
		case "a8.npy":
			err = writeNpyF8(p, rows)
		default:
			err = WriteNpy(p, rows, "<f4")
		}
		if err != nil {
			t.Fatal(err)
		}
		m := mustOpen(t, p, Options{Dim: dim})
		for range 20 {
			err := m.CheckFinite()
			if err == nil || !strings.Contains(err.Error(), "row 4096, column 0: value -Inf") {
				t.Fatalf("%s: CheckFinite = %v, want row 4096, column 0: value -Inf", name, err)
			}
		}
	}
}

func TestConcurrentRows(t *testing.T) {
	rows := randRows(500, 16, 3)
	p := filepath.Join(t.TempDir(), "c.f16")
	if err := WriteF16(p, rows); err != nil {
		t.Fatal(err)
	}
	m := mustOpen(t, p, Options{Dim: 16})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var buf []float32
			for i := g; i < m.Len(); i += 3 {
				buf = m.Row(i, buf)
				if buf[5] != f16.ToFloat32(f16.FromFloat32(rows[i][5])) {
					t.Errorf("row %d mismatch", i)
					return
				}
			}
			if err := m.CheckFinite(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestIvecsRoundTrip(t *testing.T) {
	rows := [][]int32{{1, 2, 3}, {-7}, {1 << 30, 0, 5, 6}}
	p := filepath.Join(t.TempDir(), "g.ivecs")
	if err := WriteIvecs(p, rows); err != nil {
		t.Fatal(err)
	}
	got, err := ReadIvecs(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("%d rows, want %d", len(got), len(rows))
	}
	for i := range rows {
		if len(got[i]) != len(rows[i]) || cap(got[i]) != len(rows[i]) {
			t.Fatalf("row %d: len %d cap %d, want %d", i, len(got[i]), cap(got[i]), len(rows[i]))
		}
		for j := range rows[i] {
			if got[i][j] != rows[i][j] {
				t.Fatalf("row %d col %d = %d, want %d", i, j, got[i][j], rows[i][j])
			}
		}
	}
}

// The real Deep1B vectors shipped in testdata/deep2k: its 200 queries
// (.fvecs, unit norm) and their ground truth (.ivecs, 100 ids each among
// the 2,000 base vectors).
const deepDir = "../testdata/deep2k"

// Deep1B queries read as the file's own float32 values, record by record.
func TestDeepQueries(t *testing.T) {
	p := filepath.Join(deepDir, "query.fvecs")
	m := mustOpen(t, p, Options{Dim: 96})
	if m.Len() != 200 || m.Dim() != 96 {
		t.Fatalf("%s: %d x %d, want 200 x 96", p, m.Len(), m.Dim())
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	const stride = 4 + 4*96
	for _, i := range []int{0, 1, 199} {
		rec := raw[i*stride : (i+1)*stride]
		if d := binary.LittleEndian.Uint32(rec); d != 96 {
			t.Fatalf("row %d dim field %d", i, d)
		}
		row := m.Row(i, nil)
		var norm float64
		for j := range 96 {
			want := math.Float32frombits(binary.LittleEndian.Uint32(rec[4+4*j:]))
			if math.Float32bits(row[j]) != math.Float32bits(want) {
				t.Fatalf("row %d col %d = %v, want %v", i, j, row[j], want)
			}
			norm += float64(want) * float64(want)
		}
		if math.Abs(norm-1) > 1e-3 {
			t.Errorf("row %d squared norm %v, want ~1 (Deep1B is unit norm)", i, norm)
		}
	}
	if err := m.CheckFinite(); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Float16(); ok {
		t.Fatal("Float16() ok for .fvecs")
	}
}

func TestDeepGroundTruth(t *testing.T) {
	gt, err := ReadIvecs(filepath.Join(deepDir, "groundtruth.ivecs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(gt) != 200 {
		t.Fatalf("%d rows, want 200", len(gt))
	}
	for i, r := range gt {
		if len(r) != 100 {
			t.Fatalf("row %d has %d ids, want 100", i, len(r))
		}
		for _, id := range r {
			if id < 0 || id >= 2000 {
				t.Fatalf("row %d: id %d out of [0, 2000)", i, id)
			}
		}
	}
}

// TestAnyBadF16Lengths finds one bad float16 value (+Inf, -Inf, a NaN)
// at every position of every length from 1 to 80 values, which covers each
// lane of the 64-, 32- and 8-byte loops and the tails shorter than a word,
// and none in the same data without it.
func TestAnyBadF16Lengths(t *testing.T) {
	for n := 0; n <= 80; n++ {
		vals := make([]uint16, n)
		for k := range vals {
			vals[k] = uint16((0x7bff - k%3<<10) ^ k<<15) // finite, exponents 30, 29, 28
		}
		if anyBadF16(f16Bytes(vals...)) {
			t.Fatalf("anyBadF16 of %d finite values = true", n)
		}
		for pos := range n {
			for _, h := range []uint16{0x7c00, 0xfc00, 0x7e01} {
				keep := vals[pos]
				vals[pos] = h
				if !anyBadF16(f16Bytes(vals...)) {
					t.Fatalf("anyBadF16 of %d values with %#04x at %d = false", n, h, pos)
				}
				vals[pos] = keep
			}
		}
	}
}

// TestAnyBad compares the word-at-a-time scans with a per-value check for
// every float16 bit pattern and many float32 ones, in every lane position.
func TestAnyBad(t *testing.T) {
	for h := range 1 << 16 {
		bad := !f16.IsFinite(uint16(h))
		for lane := range 19 { // 19 values: 32-byte, 8-byte and 2-byte loops
			vals := make([]uint16, 19)
			for k := range vals {
				vals[k] = uint16(0x7bff ^ k<<15) // max finite, both signs
			}
			vals[lane] = uint16(h)
			if got := anyBadF16(f16Bytes(vals...)); got != bad {
				t.Fatalf("anyBadF16 with %#04x in lane %d = %v, want %v", h, lane, got, bad)
			}
		}
	}
	specials := []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffffffff, 0x7f7fffff, 0xff7fffff, 0, 0x80000000, 0x00800000, 0x3f800000}
	for _, u := range specials {
		v := math.Float32frombits(u)
		bad := math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)
		for lane := range 11 {
			vals := make([]float32, 11)
			for k := range vals {
				vals[k] = math.Float32frombits(0x7f7fffff ^ uint32(k)<<31)
			}
			vals[lane] = v
			if got := anyBadF32(f32Bytes(vals...)); got != bad {
				t.Fatalf("anyBadF32 with %#08x in lane %d = %v, want %v", u, lane, got, bad)
			}
		}
	}
	if maxF32Bits != math.Float64bits(math.MaxFloat32) {
		t.Fatalf("maxF32Bits = %#x, want %#x", uint64(maxF32Bits), math.Float64bits(math.MaxFloat32))
	}
	above := math.Nextafter(math.MaxFloat32, math.Inf(1))
	for _, v := range []float64{math.Inf(1), math.Inf(-1), math.NaN(), above, -above, 1e39, -math.MaxFloat64,
		math.MaxFloat32, -math.MaxFloat32, 0, math.Copysign(0, -1), 5e-324, 1, -1e38} {
		bad := math.Abs(v) > math.MaxFloat32 || math.IsNaN(v)
		for pos := range 7 { // 7 values: the 32-byte and 8-byte loops
			vals := make([]float64, 7)
			for k := range vals {
				vals[k] = math.Copysign(math.MaxFloat32, float64(1-2*(k%2)))
			}
			vals[pos] = v
			if got := anyBadF64(f64Bytes(vals...)); got != bad {
				t.Fatalf("anyBadF64 with %v at %d = %v, want %v", v, pos, got, bad)
			}
		}
	}
}
