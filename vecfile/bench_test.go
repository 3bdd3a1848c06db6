package vecfile

import (
	"fmt"
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

// BenchmarkAnyBadF16: anyBadF16 over finite float16 values, 256 KiB (a
// CheckRows block, in cache) and 64 MiB (from memory).
func BenchmarkAnyBadF16(b *testing.B) {
	for _, size := range []int{256 << 10, 64 << 20} {
		buf := make([]byte, size)
		for i := 0; i < size; i += 2 {
			buf[i], buf[i+1] = byte(i*7), byte(i*13)&0xbb // exponent < 31
		}
		if anyBadF16(buf) {
			b.Fatal("bad value in the benchmark's data")
		}
		b.Run(fmt.Sprintf("bytes=%dK", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if anyBadF16(buf) {
					b.Fatal("bad")
				}
			}
		})
	}
}

// BenchmarkCheckFiniteFresh is BenchmarkCheckFinite on a new mapping each
// time, as a command's one pass over its input meets it: the page faults
// count. 64 MiB of float16, in the page cache.
func BenchmarkCheckFiniteFresh(b *testing.B) {
	const n, dim = 43690, 768
	p := filepath.Join(b.TempDir(), "b.f16")
	if err := WriteF16(p, randRows(n, dim, 9)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n * dim * 2))
	for b.Loop() {
		m, err := Open(p, Options{Dim: dim})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.CheckFinite(); err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}
