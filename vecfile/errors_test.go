package vecfile

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func npyDict(descr, fortran, shape string) string {
	return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }"
}

func TestBadInputs(t *testing.T) {
	nan16, inf16 := uint16(0x7e00), uint16(0x7c00)
	nan32, pinf32 := float32(math.NaN()), float32(math.Inf(1))
	f16Grid := func(n, dim int, set map[[2]int]uint16) []byte {
		vals := make([]uint16, n*dim)
		for k, v := range set {
			vals[k[0]*dim+k[1]] = v
		}
		return f16Bytes(vals...)
	}
	f32Grid := func(n, dim int, set map[[2]int]float32) [][]float32 {
		rows := make([][]float32, n)
		for i := range rows {
			rows[i] = zeros(dim)
		}
		for k, v := range set {
			rows[k[0]][k[1]] = v
		}
		return rows
	}
	flat := func(rows [][]float32) []byte {
		var b []byte
		for _, r := range rows {
			b = append(b, f32Bytes(r...)...)
		}
		return b
	}
	// f64Grid is an n x dim '<f8' data section, zero but for set.
	f64Grid := func(n, dim int, set map[[2]int]float64) []byte {
		vals := make([]float64, n*dim)
		for k, v := range set {
			vals[k[0]*dim+k[1]] = v
		}
		return f64Bytes(vals...)
	}
	f8 := func(shape string) string { return npyDict("<f8", "False", shape) }
	aboveF32 := math.Nextafter(math.MaxFloat32, math.Inf(1)) // rounds to MaxFloat32 as a plain float32()
	npy96 := npyFile(1, npyDict("<f4", "False", "(2, 96)"), make([]byte, 2*96*4))
	v2big := []byte("\x93NUMPY\x02\x00")
	v2big = binary.LittleEndian.AppendUint32(v2big, 0xfffffff0)
	v2big = append(v2big, "{'descr': '<f4'"...)
	badDim := fvecsBytes(zeros(4), zeros(4), zeros(4), zeros(4))
	binary.LittleEndian.PutUint32(badDim[3*20:], 5) // row 3 claims 5, same size
	badDimTail := fvecsBytes(zeros(4), zeros(4), zeros(6))

	cases := []struct {
		name    string
		file    string // file name; content written unless content is nil and noFile
		content []byte
		noFile  bool
		dim     int
		check   bool // error comes from CheckFinite, not Open
		want    error
		substr  string
	}{
		{"empty f16", "e.f16", []byte{}, false, 4, false, ErrEmpty, "empty file (0 bytes)"},
		{"empty npy", "e.npy", []byte{}, false, 0, false, ErrEmpty, "empty file"},
		{"empty fvecs", "e.fvecs", []byte{}, false, 0, false, ErrEmpty, "empty file"},
		{"f16 size", "s.f16", make([]byte, 7), false, 2, false, ErrSize,
			"file size 7 bytes is not a multiple of the row size 4 bytes (dim 2 x float16): 3 bytes left over"},
		{"f16 no dim", "d.f16", make([]byte, 8), false, 0, false, ErrDim, "needs its dimension (-dim)"},
		{"dim negative", "d.f16", make([]byte, 8), false, -3, false, ErrDim, "dimension -3 out of range"},
		{"dim too large", "d.f16", make([]byte, 8), false, MaxDim + 1, false, ErrDim, "out of range [1, 65536]"},
		{"npy wrong dim", "w.npy", npy96, false, 128, false, ErrDim, "dimension mismatch: file has 96, -dim says 128"},
		{"fvecs wrong dim", "w.fvecs", fvecsBytes(zeros(96), zeros(96)), false, 128, false, ErrDim,
			"dimension mismatch: file has 96, -dim says 128"},
		{"f16 NaN row 5", "n.f16", f16Grid(8, 3, map[[2]int]uint16{{5, 1}: nan16, {7, 0}: inf16}), false, 3, true,
			ErrNonFinite, "row 5, column 1: value NaN"},
		{"f16 +Inf row 0", "i.f16", f16Grid(8, 3, map[[2]int]uint16{{0, 2}: inf16, {5, 1}: nan16}), false, 3, true,
			ErrNonFinite, "row 0, column 2: value +Inf"},
		{"f16 -Inf", "i.f16", f16Grid(8, 3, map[[2]int]uint16{{6, 0}: inf16 | 0x8000}), false, 3, true,
			ErrNonFinite, "row 6, column 0: value -Inf"},
		{"fvecs NaN row 5", "n.fvecs", fvecsBytes(f32Grid(8, 3, map[[2]int]float32{{5, 1}: nan32, {6, 2}: pinf32})...), false, 0, true,
			ErrNonFinite, "row 5, column 1: value NaN"},
		{"fvecs +Inf row 0", "i.fvecs", fvecsBytes(f32Grid(8, 3, map[[2]int]float32{{0, 0}: pinf32, {5, 1}: nan32})...), false, 0, true,
			ErrNonFinite, "row 0, column 0: value +Inf"},
		{"npy f4 NaN row 5", "n.npy", npyFile(1, npyDict("<f4", "False", "(8, 3)"), flat(f32Grid(8, 3, map[[2]int]float32{{5, 1}: nan32}))), false, 0, true,
			ErrNonFinite, "row 5, column 1: value NaN"},
		{"npy f2 +Inf row 0", "i.npy", npyFile(1, npyDict("<f2", "False", "(8, 3)"), f16Grid(8, 3, map[[2]int]uint16{{0, 1}: inf16})), false, 0, true,
			ErrNonFinite, "row 0, column 1: value +Inf"},
		{"npy f8 NaN row 5", "n.npy", npyFile(1, f8("(8, 3)"), f64Grid(8, 3, map[[2]int]float64{{5, 1}: math.NaN(), {6, 0}: 1e39})), false, 0, true,
			ErrNonFinite, "row 5, column 1: value NaN"},
		{"npy f8 -Inf row 0", "i.npy", npyFile(1, f8("(8, 3)"), f64Grid(8, 3, map[[2]int]float64{{0, 2}: math.Inf(-1)})), false, 0, true,
			ErrNonFinite, "row 0, column 2: value -Inf"},
		{"npy f8 beyond float32", "r.npy", npyFile(1, f8("(8, 3)"), f64Grid(8, 3, map[[2]int]float64{{6, 0}: math.NaN(), {4, 2}: 1e39, {4, 1}: 1})), false, 0, true,
			ErrNonFinite, "row 4, column 2: value 1e+39 is outside the float32 range (|x| <= 3.4028235e+38)"},
		{"npy f8 beyond -float32", "r.npy", npyFile(1, f8("(2, 3)"), f64Grid(2, 3, map[[2]int]float64{{1, 0}: -5e300})), false, 0, true,
			ErrNonFinite, "row 1, column 0: value -5e+300 is outside the float32 range"},
		{"npy f8 just beyond float32", "r.npy", npyFile(1, f8("(2, 3)"), f64Grid(2, 3, map[[2]int]float64{{0, 1}: math.MaxFloat32, {1, 1}: aboveF32})), false, 0, true,
			ErrNonFinite, "row 1, column 1: value " + strconv.FormatFloat(aboveF32, 'g', -1, 64) + " is outside the float32 range"},
		{"npy f8 1-D beyond float32", "r.npy", npyFile(1, f8("(3,)"), f64Bytes(0, 1, -1e39)), false, 0, true,
			ErrNonFinite, "row 0, column 2: value -1e+39 is outside the float32 range"},
		{"fvecs row dim differs", "r.fvecs", badDim, false, 0, false, ErrDim, "row 3 has dimension 5, row 0 has 4"},
		{"fvecs last row dim differs", "r.fvecs", badDimTail, false, 0, false, ErrDim, "row 2 has dimension 6, row 0 has 4"},
		{"fvecs truncated row", "t.fvecs", fvecsBytes(zeros(4), zeros(4))[:30], false, 0, false, ErrSize,
			"file size 30 bytes is not a multiple of the row size 20 bytes (4-byte dimension + 4 x float32): 10 bytes left over"},
		{"fvecs negative dim", "n.fvecs", f32Bytes(math.Float32frombits(0xffffffff), 0), false, 0, false, ErrDim, "row 0: dimension -1 out of range"},
		{"fvecs zero dim", "z.fvecs", make([]byte, 8), false, 0, false, ErrDim, "row 0: dimension 0"},
		{"fvecs tiny", "t.fvecs", []byte{1, 0}, false, 0, false, ErrSize, "file size 2 bytes is smaller"},
		{"npy big-endian", "b.npy", npyFile(1, npyDict(">f4", "False", "(2, 2)"), make([]byte, 16)), false, 0, false,
			ErrFormat, "big-endian dtype '>f4' is not supported (want '<f2', '<f4' or '<f8')"},
		{"npy big-endian f8", "b.npy", npyFile(1, npyDict(">f8", "False", "(2, 2)"), make([]byte, 32)), false, 0, false,
			ErrFormat, "big-endian dtype '>f8' is not supported"},
		{"npy f16 (float128)", "b.npy", npyFile(1, npyDict("<f16", "False", "(2, 2)"), make([]byte, 64)), false, 0, false,
			ErrFormat, "dtype '<f16' is not supported (want '<f2', '<f4' or '<f8')"},
		{"npy |f2", "b.npy", npyFile(1, npyDict("|f2", "False", "(2, 2)"), make([]byte, 8)), false, 0, false,
			ErrFormat, "dtype '|f2' is not supported"},
		{"npy |f8", "b.npy", npyFile(1, npyDict("|f8", "False", "(2, 2)"), make([]byte, 32)), false, 0, false,
			ErrFormat, "dtype '|f8' is not supported"},
		{"npy =f8", "b.npy", npyFile(1, npyDict("=f8", "False", "(2, 2)"), make([]byte, 32)), false, 0, false,
			ErrFormat, "dtype '=f8' is not supported"},
		{"npy f8 short data", "s.npy", npyFile(1, f8("(2, 3)"), make([]byte, 40)), false, 0, false,
			ErrSize, "shape (2, 3) needs 2 rows of 24 bytes but the file holds only 40 bytes of data (1 whole rows)"},
		{"npy f8 extra data", "s.npy", npyFile(1, f8("(2, 3)"), make([]byte, 52)), false, 0, false,
			ErrSize, "4 bytes of data follow the 2 rows of 24 bytes"},
		{"npy f8 wrong dim", "w.npy", npyFile(1, f8("(2, 3)"), make([]byte, 48)), false, 4, false,
			ErrDim, "dimension mismatch: file has 3, -dim says 4"},
		{"npy object", "o.npy", npyFile(1, npyDict("|O", "False", "(2, 2)"), make([]byte, 32)), false, 0, false,
			ErrFormat, "object dtype '|O' is not supported"},
		{"npy structured", "s.npy", npyFile(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 2), }", make([]byte, 16)), false, 0, false,
			ErrFormat, "structured dtype"},
		{"npy fortran", "f.npy", npyFile(1, npyDict("<f4", "True", "(2, 2)"), make([]byte, 16)), false, 0, false,
			ErrFormat, "Fortran-order array is not supported"},
		{"npy 3-D", "3.npy", npyFile(1, npyDict("<f4", "False", "(2, 2, 2)"), make([]byte, 32)), false, 0, false,
			ErrFormat, "shape (2, 2, 2) is 3-D, want 1-D (dim,) or 2-D (rows, dim)"},
		{"npy 0-D", "0.npy", npyFile(1, npyDict("<f4", "False", "()"), make([]byte, 4)), false, 0, false,
			ErrFormat, "shape () is 0-D"},
		{"npy 1-D empty", "1.npy", npyFile(1, npyDict("<f4", "False", "(0,)"), nil), false, 0, false,
			ErrEmpty, "shape (0,) has no values"},
		{"npy 1-D empty with -dim", "1.npy", npyFile(1, npyDict("<f8", "False", "(0,)"), nil), false, 4, false,
			ErrEmpty, "shape (0,) has no values"},
		{"npy 1-D wrong dim", "1.npy", npyFile(1, npyDict("<f4", "False", "(5,)"), make([]byte, 20)), false, 4, false,
			ErrDim, "dimension mismatch: file has 5, -dim says 4"},
		{"npy 1-D f8 wrong dim", "1.npy", npyFile(1, f8("(5,)"), make([]byte, 40)), false, 6, false,
			ErrDim, "dimension mismatch: file has 5, -dim says 6"},
		{"npy 1-D dim too large", "1.npy", npyFile(1, npyDict("<f4", "False", "(65537,)"), nil), false, 0, false,
			ErrDim, "shape (65537,): dimension 65537 out of range"},
		{"npy 1-D short data", "1.npy", npyFile(1, f8("(5,)"), make([]byte, 32)), false, 0, false,
			ErrSize, "shape (5,) needs 1 rows of 40 bytes but the file holds only 32 bytes of data (0 whole rows)"},
		{"npy 1-D extra data", "1.npy", npyFile(1, npyDict("<f2", "False", "(5,)"), make([]byte, 12)), false, 0, false,
			ErrSize, "2 bytes of data follow the 1 rows of 10 bytes"},
		{"npy shape beyond file", "x.npy", npyFile(1, npyDict("<f4", "False", "(1099511627776, 96)"), make([]byte, 2*96*4)), false, 0, false,
			ErrSize, "shape (1099511627776, 96) needs 1099511627776 rows of 384 bytes but the file holds only 768 bytes of data (2 whole rows)"},
		{"npy shape max int64", "x.npy", npyFile(1, npyDict("<f2", "False", "(9223372036854775807, 65536)"), make([]byte, 64)), false, 0, false,
			ErrSize, "needs 9223372036854775807 rows"},
		{"npy shape overflows int64", "x.npy", npyFile(1, npyDict("<f2", "False", "(99999999999999999999, 4)"), make([]byte, 64)), false, 0, false,
			ErrFormat, "too large"},
		{"npy extra data", "x.npy", npyFile(1, npyDict("<f4", "False", "(2, 2)"), make([]byte, 17)), false, 0, false,
			ErrSize, "1 bytes of data follow the 2 rows of 8 bytes"},
		{"npy zero rows", "z.npy", npyFile(1, npyDict("<f4", "False", "(0, 96)"), nil), false, 0, false, ErrEmpty, "shape (0, 96) has no rows"},
		{"npy zero dim", "z.npy", npyFile(1, npyDict("<f4", "False", "(5, 0)"), nil), false, 0, false, ErrDim, "dimension 0 out of range"},
		{"npy dim too large", "z.npy", npyFile(1, npyDict("<f4", "False", "(1, 65537)"), nil), false, 0, false, ErrDim, "dimension 65537 out of range"},
		{"npy truncated header", "t.npy", npyFile(1, npyDict("<f4", "False", "(2, 2)"), nil)[:40], false, 0, false,
			ErrFormat, "truncated header: header length is 60 bytes but only 30 bytes follow the preamble"},
		{"npy truncated preamble", "t.npy", []byte("\x93NUMPY\x01\x00\x10"), false, 0, false, ErrFormat, "truncated header: file has only 9 bytes"},
		{"npy magic only", "t.npy", []byte("\x93NUMPY"), false, 0, false, ErrFormat, "truncated header: file has only 6 bytes"},
		{"npy no newline", "n.npy", npyRaw(1, npyDict("<f4", "False", "(1, 1)")+"   ", f32Bytes(1)), false, 0, false,
			ErrFormat, "header does not end in a newline"},
		{"npy bad magic", "m.npy", []byte("PK\x03\x04 this is a zip file"), false, 0, false, ErrFormat, "not a NumPy .npy file (bad magic)"},
		{"npy version 4", "v.npy", []byte("\x93NUMPY\x04\x00\x00\x00\x00\x00"), false, 0, false, ErrFormat, "unsupported .npy format version 4.0"},
		{"npy huge header", "h.npy", v2big, false, 0, false, ErrFormat, "header length 4294967280 bytes exceeds the 1048576-byte limit"},
		{"npy missing key", "k.npy", npyFile(1, "{'descr': '<f4', 'shape': (1, 1)}", f32Bytes(1)), false, 0, false, ErrFormat, "missing key 'fortran_order'"},
		{"npy unknown key", "k.npy", npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), 'x': 1}", f32Bytes(1)), false, 0, false,
			ErrFormat, "unexpected key 'x'"},
		{"npy duplicate key", "k.npy", npyFile(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1, 1)}", f32Bytes(1)), false, 0, false,
			ErrFormat, "duplicate key 'descr'"},
		{"npy garbage after dict", "k.npy", npyFile(1, npyDict("<f4", "False", "(1, 1)")+" x", f32Bytes(1)), false, 0, false,
			ErrFormat, "unexpected text after '}'"},
		{"unknown extension", "v.txt", []byte("1 2 3\n"), false, 0, false, ErrFormat, `unknown extension ".txt" (want .f16, .npy or .fvecs)`},
		{"no extension", "vectors", []byte("1 2 3\n"), false, 0, false, ErrFormat, `unknown extension ""`},
		{"nonexistent", "missing.fvecs", nil, true, 0, false, fs.ErrNotExist, "open: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), c.file)
			if !c.noFile {
				if err := os.WriteFile(p, c.content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m, err := Open(p, Options{Dim: c.dim})
			if c.check {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer m.Close()
				err = m.CheckFinite()
			} else if err == nil {
				m.Close()
				t.Fatalf("Open succeeded (%d x %d), want error %v", m.Len(), m.Dim(), c.want)
			} else if m != nil {
				t.Fatal("Open returned a Matrix with an error")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("error %q does not wrap %v", err, c.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, p+": ") {
				t.Errorf("error %q does not start with the path", msg)
			}
			if !strings.Contains(msg, c.substr) {
				t.Errorf("error %q does not contain %q", msg, c.substr)
			}
		})
	}
}

func TestOpenDirectory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dir.npy")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Open(p, Options{})
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Open(directory) = %v", err)
	}
}

func TestBadIvecs(t *testing.T) {
	le := func(v ...int32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return b
	}
	for _, c := range []struct {
		name    string
		content []byte
		want    error
		substr  string
	}{
		{"empty", nil, ErrEmpty, "empty file"},
		{"zero length", le(2, 1, 2, 0), ErrDim, "row 1: length 0, want > 0"},
		{"negative length", le(-5, 1), ErrDim, "row 0: length -5"},
		{"huge length", le(1, 7, 1<<30, 1, 2), ErrSize, "row 1: length 1073741824 needs 4294967296 bytes but only 8 are left"},
		{"max length", le(math.MaxInt32), ErrSize, "row 0: length 2147483647"},
		{"short row", le(3, 1, 2), ErrSize, "row 0: length 3 needs 12 bytes but only 8 are left"},
		{"trailing bytes", append(le(1, 9), 0, 0), ErrSize, "row 1: 2 bytes left at offset 8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeBytes(t, "g.ivecs", c.content)
			rows, err := ReadIvecs(p)
			if !errors.Is(err, c.want) || rows != nil {
				t.Fatalf("ReadIvecs = %d rows, %v; want %v", len(rows), err, c.want)
			}
			if !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), c.substr) {
				t.Fatalf("error %q lacks path or %q", err, c.substr)
			}
		})
	}
	_, err := ReadIvecs(filepath.Join(t.TempDir(), "none.ivecs"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadIvecs(missing) = %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "w.fvecs")
	if err := WriteFvecs(p, nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("WriteFvecs(nil) = %v", err)
	}
	if err := WriteF16(p, [][]float32{{1, 2}, {3}}); !errors.Is(err, ErrDim) || !strings.Contains(err.Error(), "row 1 has dimension 1") {
		t.Errorf("WriteF16(ragged) = %v", err)
	}
	if err := WriteIvecs(p, [][]int32{{1}, {}}); !errors.Is(err, ErrDim) {
		t.Errorf("WriteIvecs(empty row) = %v", err)
	}
	if err := WriteNpy(filepath.Join(dir, "no", "such", "dir.npy"), [][]float32{{1}}, "<f4"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteNpy(bad dir) = %v", err)
	}
}
