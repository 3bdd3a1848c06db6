package vecfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// exercise opens data written to a file called name and reads everything;
// it must never panic. Errors from Open must wrap a sentinel.
func exercise(t *testing.T, name string, data []byte, dim int) {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(p, Options{Dim: dim})
	if err != nil {
		if !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrSize) && !errors.Is(err, ErrDim) && !errors.Is(err, ErrFormat) {
			t.Fatalf("Open: error without a sentinel: %v", err)
		}
		return
	}
	defer m.Close()
	if m.Len() <= 0 || m.Dim() <= 0 || m.Dim() > MaxDim {
		t.Fatalf("Open: %d x %d", m.Len(), m.Dim())
	}
	if view, ok := m.Float16(); ok && len(view) != m.Len()*m.Dim() {
		t.Fatalf("Float16: %d values for %d x %d", len(view), m.Len(), m.Dim())
	}
	var buf []float32
	var hbuf []uint16
	for i := range m.Len() {
		buf = m.Row(i, buf)
		hbuf = m.RowF16(i, hbuf)
	}
	if err := m.CheckFinite(); err != nil && !errors.Is(err, ErrNonFinite) {
		t.Fatalf("CheckFinite: %v", err)
	}
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

func FuzzOpenNpy(f *testing.F) {
	fuzzSeeds(f, func(p string, rows [][]float32) error { return WriteNpy(p, rows, "<f4") }, "s.npy")
	fuzzSeeds(f, func(p string, rows [][]float32) error { return WriteNpy(p, rows, "<f2") }, "s.npy")
	f.Add(npyFile(3, `{"shape": (2L, 1), "fortran_order": False, "descr": "<f2"}`, f16Bytes(0x7c00, 0x7e00)), 0)
	f.Add(npyFile(2, npyDict("<f4", "False", "(1, 2)"), f32Bytes(1, 2)), 2)
	f.Add(npyFile(1, npyDict(">f4", "True", "(1, 2, 3)"), nil), 0)
	f.Add([]byte("\x93NUMPY\x01\x00"), 0)
	f.Fuzz(func(t *testing.T, data []byte, dim int) {
		exercise(t, "f.npy", data, dim)
	})
}

func FuzzOpenFvecs(f *testing.F) {
	fuzzSeeds(f, WriteFvecs, "s.fvecs")
	f.Add(fvecsBytes(zeros(2), zeros(3)), 0)
	f.Add(f32Bytes(0, 0), 0)
	f.Fuzz(func(t *testing.T, data []byte, dim int) {
		exercise(t, "f.fvecs", data, dim)
	})
}
