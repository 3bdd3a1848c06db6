package vecfile

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRowsRefusesZeroRows: CheckRows with nonZero finds the lowest
// row whose every value is 0 (either sign; in float64, values that read
// as 0 in float32) in every format and at dimensions with a partial last
// word, reports the lower of a zero and a non-finite row, and takes rows
// that are not zero however tiny (a float16 or float32 subnormal in the
// last column only). Without nonZero a zero row is fine.
func TestCheckRowsRefusesZeroRows(t *testing.T) {
	const n = 3000
	dir := t.TempDir()
	for _, dim := range []int{1, 3, 8, 13} {
		for _, format := range []string{"f16", "fvecs", "npy-f4", "npy-f8"} {
			write := func(name string, rows [][]float32) *Matrix {
				t.Helper()
				p := filepath.Join(dir, name)
				var err error
				switch format {
				case "f16":
					p += ".f16"
					err = WriteF16(p, rows)
				case "fvecs":
					p += ".fvecs"
					err = WriteFvecs(p, rows)
				case "npy-f4":
					p += ".npy"
					err = WriteNpy(p, rows, "<f4")
				case "npy-f8":
					p += ".npy"
					err = writeNpyF8(p, rows)
				}
				if err != nil {
					t.Fatal(err)
				}
				return mustOpen(t, p, Options{Dim: dim})
			}
			name := fmt.Sprintf("%s-d%d", format, dim)
			rows := randRows(n, dim, uint64(dim))
			rows[1700] = zeros(dim)
			rows[1700][0] = float32(math.Copysign(0, -1)) // -0 is 0 too
			tiny := float32(1e-45)                        // float32's least subnormal
			if format == "f16" {
				tiny = 6e-8 // float16's least subnormal
			}
			rows[900] = zeros(dim)
			rows[900][dim-1] = tiny
			m := write(name, rows)
			if err := m.CheckRows(0, n, false); err != nil {
				t.Errorf("%s: without nonZero: %v", name, err)
			}
			err := m.CheckRows(0, n, true)
			if want := "row 1700: every value is 0"; !errors.Is(err, ErrZero) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), m.path) {
				t.Errorf("%s: %v, want ErrZero naming the file and %q", name, err, want)
			}
			if err := m.CheckRows(0, 1700, true); err != nil {
				t.Errorf("%s: rows 0 to 1699 (row 900 is tiny, not zero): %v", name, err)
			}
			if err := m.CheckRows(1701, n, true); err != nil {
				t.Errorf("%s: rows 1701 on: %v", name, err)
			}
			// The lower of a zero and a non-finite row is reported.
			rows[2500][0] = float32(math.NaN())
			rows[1000][dim-1] = float32(math.Inf(1))
			m = write(name+"-nan", rows)
			if err := m.CheckRows(0, n, true); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "row 1000") {
				t.Errorf("%s: Inf at row 1000, zero at 1700: %v", name, err)
			}
			if err := m.CheckRows(1001, n, true); !errors.Is(err, ErrZero) || !strings.Contains(err.Error(), "row 1700") {
				t.Errorf("%s: zero at 1700, NaN at 2500: %v", name, err)
			}
		}
	}
	// float64 values that float32 reads as 0 make a zero row; 1e-45,
	// which reads as float32's least subnormal, does not.
	data := f64Bytes(1, 2, 7e-46, -7e-46, 1e-45, 0)
	m := mustOpen(t, writeBytes(t, "tiny.npy", npyFile(1, npyDict("<f8", "False", "(3, 2)"), data)), Options{})
	err := m.CheckRows(0, 3, true)
	if want := "row 1: every value is 0 as float32"; !errors.Is(err, ErrZero) || !strings.Contains(err.Error(), want) {
		t.Errorf("float64 row of 7e-46: %v, want %q", err, want)
	}
	if err := m.CheckRows(2, 3, true); err != nil {
		t.Errorf("float64 row of 1e-45: %v", err)
	}
}
