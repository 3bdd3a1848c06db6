package cuda

import "testing"

// columnMajor puts value j of row i at j*n + i, for shapes around par's
// grain.
func TestColumnMajor(t *testing.T) {
	for _, c := range []struct{ n, d int }{{1, 1}, {3, 1}, {1, 5}, {7, 33}, {300, 17}} {
		rows := make([]uint16, c.n*c.d)
		for i := range rows {
			rows[i] = uint16(i*7 + 3)
		}
		got := columnMajor(rows, c.d)
		for i := range c.n {
			for j := range c.d {
				if got[j*c.n+i] != rows[i*c.d+j] {
					t.Fatalf("%d x %d: value %d of row %d is at %d as %d, want %d", c.n, c.d, j, i, j*c.n+i, got[j*c.n+i], rows[i*c.d+j])
				}
			}
		}
	}
}
