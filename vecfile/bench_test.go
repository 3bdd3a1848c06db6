package vecfile

import (
	"path/filepath"
	"testing"
)

// benchMatrix writes n x dim random rows in the format of name.
func benchMatrix(b *testing.B, name string, n, dim int) *Matrix {
	b.Helper()
	rows := randRows(n, dim, 9)
	p := filepath.Join(b.TempDir(), name)
	var err error
	switch {
	case filepath.Ext(name) == ".f16":
		err = WriteF16(p, rows)
	case name == "b8.npy":
		err = writeNpyF8(p, rows)
	case filepath.Ext(name) == ".npy":
		err = WriteNpy(p, rows, "<f4")
	default:
		err = WriteFvecs(p, rows)
	}
	if err != nil {
		b.Fatal(err)
	}
	return mustOpen(b, p, Options{Dim: dim})
}

var benchFormats = []struct{ name, file string }{
	{"f16", "b.f16"},
	{"npy-f4", "b.npy"},
	{"npy-f8", "b8.npy"},
	{"fvecs", "b.fvecs"},
}

func BenchmarkCheckFinite(b *testing.B) {
	const n, dim = 100_000, 96
	for _, f := range benchFormats {
		b.Run(f.name, func(b *testing.B) {
			m := benchMatrix(b, f.file, n, dim)
			b.SetBytes(int64(n * dim * m.elem))
			b.ResetTimer()
			for b.Loop() {
				if err := m.CheckFinite(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckRowsNonZero is BenchmarkCheckFinite that also looks for
// zero rows (the cosine metric's check), in the same pass.
func BenchmarkCheckRowsNonZero(b *testing.B) {
	const n, dim = 100_000, 96
	for _, f := range benchFormats {
		b.Run(f.name, func(b *testing.B) {
			m := benchMatrix(b, f.file, n, dim)
			b.SetBytes(int64(n * dim * m.elem))
			b.ResetTimer()
			for b.Loop() {
				if err := m.CheckRows(0, n, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRow(b *testing.B) {
	const n, dim = 10_000, 768
	for _, f := range benchFormats {
		b.Run(f.name, func(b *testing.B) {
			m := benchMatrix(b, f.file, n, dim)
			dst := make([]float32, dim)
			b.SetBytes(int64(dim * m.elem))
			b.ResetTimer()
			i := 0
			for b.Loop() {
				dst = m.Row(i, dst)
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}
