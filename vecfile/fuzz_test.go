package vecfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/internal/f16"
)

// exercise writes data to path (whose extension picks the parser), opens
// it and reads everything; it must never panic. Errors from Open must wrap
// a sentinel and name the file. What Open accepts must agree with the
// bytes: Row and RowF16 agree with each other and, for .f16 and .fvecs,
// with a plain decoding of the file; CheckFinite reports exactly the first
// non-finite value in row order.
func exercise(t *testing.T, path string, data []byte, dim int) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(path, Options{Dim: dim})
	if err != nil {
		if !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrSize) && !errors.Is(err, ErrDim) && !errors.Is(err, ErrFormat) {
			t.Fatalf("Open: error without a sentinel: %v", err)
		}
		if !strings.HasPrefix(err.Error(), path+": ") {
			t.Fatalf("Open: error does not start with the path: %v", err)
		}
		return
	}
	defer m.Close()
	n, d := m.Len(), m.Dim()
	if n <= 0 || d <= 0 || d > MaxDim || (dim != 0 && d != dim) {
		t.Fatalf("Open: %d x %d (dim option %d)", n, d, dim)
	}
	if view, ok := m.Float16(); ok && (len(view) != n*d || m.elem != 2) {
		t.Fatalf("Float16: %d values for %d x %d of %d-byte values", len(view), n, d, m.elem)
	}
	// ref(i, j) is the value as a plain reader of the format sees it.
	var ref func(i, j int) float32
	switch filepath.Ext(path) {
	case ".f16":
		if len(data) != n*d*2 {
			t.Fatalf(".f16: %d x %d accepted from %d bytes", n, d, len(data))
		}
		ref = func(i, j int) float32 { return f16.ToFloat32(binary.LittleEndian.Uint16(data[(i*d+j)*2:])) }
	case ".fvecs":
		if len(data) != n*(4+4*d) {
			t.Fatalf(".fvecs: %d x %d accepted from %d bytes", n, d, len(data))
		}
		ref = func(i, j int) float32 {
			return math.Float32frombits(binary.LittleEndian.Uint32(data[i*(4+4*d)+4+4*j:]))
		}
	}
	var buf []float32
	var hbuf []uint16
	bad := ""
	for i := range n {
		buf = m.Row(i, buf)
		hbuf = m.RowF16(i, hbuf)
		for j, v := range buf {
			if ref != nil && !sameFloat(v, ref(i, j)) {
				t.Fatalf("row %d, column %d: Row %v, the bytes say %v", i, j, v, ref(i, j))
			}
			if m.elem == 2 && !sameFloat(f16.ToFloat32(hbuf[j]), v) || m.elem != 2 && hbuf[j] != f16.FromFloat32(v) {
				t.Fatalf("row %d, column %d: Row %v, RowF16 %#04x", i, j, v, hbuf[j])
			}
			if bad == "" && (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
				bad = fmt.Sprintf(": row %d, column %d: value ", i, j)
			}
		}
	}
	err = m.CheckFinite()
	switch {
	case bad == "" && err != nil:
		t.Fatalf("CheckFinite: %v, but every value is finite", err)
	case bad != "" && (!errors.Is(err, ErrNonFinite) || !strings.Contains(fmt.Sprint(err), bad)):
		t.Fatalf("CheckFinite: %v, want ErrNonFinite at %q", err, bad)
	}
}

// sameFloat is == with NaN equal to NaN.
func sameFloat(a, b float32) bool {
	return a == b || a != a && b != b
}

func fuzzSeeds(f *testing.F, write func(p string, rows [][]float32) error, name string) {
	for _, shape := range [][2]int{{1, 1}, {3, 2}, {2, 5}} {
		rows := randRows(shape[0], shape[1], uint64(shape[1]))
		p := filepath.Join(f.TempDir(), name)
		if err := write(p, rows); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, 0)
		f.Add(b, shape[1])
	}
}

// Each target writes its inputs to one path per worker process (calls
// within a worker are sequential): a temporary folder per input would cost
// more than the parsing.

func FuzzOpenNpy(f *testing.F) {
	fuzzSeeds(f, func(p string, rows [][]float32) error { return WriteNpy(p, rows, "<f4") }, "s.npy")
	fuzzSeeds(f, func(p string, rows [][]float32) error { return WriteNpy(p, rows, "<f2") }, "s.npy")
	f.Add(npyFile(3, `{"shape": (2L, 1), "fortran_order": False, "descr": "<f2"}`, f16Bytes(0x7c00, 0x7e00)), 0)
	f.Add(npyFile(2, npyDict("<f4", "False", "(1, 2)"), f32Bytes(1, 2)), 2)
	f.Add(npyFile(1, npyDict(">f4", "True", "(1, 2, 3)"), nil), 0)
	fuzzSeeds(f, writeNpyF8, "s.npy")
	f.Add(npyFile(1, npyDict("<f8", "False", "(2, 2)"), f64Bytes(1, math.NaN(), 1e39, math.Nextafter(math.MaxFloat32, 0))), 0)
	f.Add(npyFile(1, npyDict("<f8", "False", "(3,)"), f64Bytes(-1e300, 2, 3)), 3)
	f.Add(npyFile(2, npyDict("<f4", "False", "(2,)"), f32Bytes(1, 2)), 0)
	f.Add(npyFile(1, npyDict("<f2", "False", "(0,)"), nil), 0)
	f.Add([]byte("\x93NUMPY\x01\x00"), 0)
	path := filepath.Join(f.TempDir(), "f.npy")
	f.Fuzz(func(t *testing.T, data []byte, dim int) {
		exercise(t, path, data, dim)
	})
}

func FuzzOpenFvecs(f *testing.F) {
	fuzzSeeds(f, WriteFvecs, "s.fvecs")
	f.Add(fvecsBytes(zeros(2), zeros(3)), 0)
	f.Add(f32Bytes(0, 0), 0)
	f.Add(fvecsBytes([]float32{1, float32(math.NaN())}, []float32{float32(math.Inf(-1)), 0}), 2)
	path := filepath.Join(f.TempDir(), "f.fvecs")
	f.Fuzz(func(t *testing.T, data []byte, dim int) {
		exercise(t, path, data, dim)
	})
}

// FuzzOpenF16 covers the raw float16 reader, whose only structure is the
// size against the -dim option, and the float16 NaN/Inf scan (a SWAR bit
// trick, checked here against a plain decoding).
func FuzzOpenF16(f *testing.F) {
	fuzzSeeds(f, WriteF16, "s.f16")
	f.Add(f16Bytes(0x7c00, 0x3c00, 0xfc00, 0x7e00), 2)
	f.Add(f16Bytes(0x7bff, 0xfbff, 0x0001, 0x8000, 0x7c01, 0x3c00), 3)
	f.Add([]byte{1, 2, 3}, 1)
	f.Add([]byte{}, 1)
	path := filepath.Join(f.TempDir(), "f.f16")
	f.Fuzz(func(t *testing.T, data []byte, dim int) {
		exercise(t, path, data, dim)
	})
}

// FuzzReadIvecs covers the ground-truth reader: lengths are checked
// against the bytes left before anything is allocated.
func FuzzReadIvecs(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint32(nil, 0))
	f.Add(append(binary.LittleEndian.AppendUint32(nil, 2), 1, 0, 0, 0, 2, 0, 0, 0))
	f.Add(binary.LittleEndian.AppendUint32(nil, math.MaxInt32))
	path := filepath.Join(f.TempDir(), "f.ivecs")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rows, err := ReadIvecs(path)
		if err != nil {
			if !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrSize) && !errors.Is(err, ErrDim) {
				t.Fatalf("ReadIvecs: error without a sentinel: %v", err)
			}
			return
		}
		size := 0
		for _, r := range rows {
			if len(r) == 0 {
				t.Fatal("empty row accepted")
			}
			size += 4 + 4*len(r)
		}
		if size != len(data) {
			t.Fatalf("%d rows covering %d bytes of %d", len(rows), size, len(data))
		}
	})
}
