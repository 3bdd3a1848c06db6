package cuda

import "github.com/vlc-embed/vlc/internal/par"

// columnMajor returns rows (n x d, row-major) column-major, value j of row
// i at j*n + i: the layout vlc_pp_gather writes for k-means++.
func columnMajor(rows []uint16, d int) []uint16 {
	n := len(rows) / d
	t := make([]uint16, len(rows))
	par.For(d, 16, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			col := t[j*n : (j+1)*n]
			for i := range col {
				col[i] = rows[i*d+j]
			}
		}
	})
	return t
}
