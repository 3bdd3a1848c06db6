package graph

import (
	"math"
	"sync"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/vecfile"
)

// buildRows are the vectors a build measures, row after row: float16 in
// place where the input is a vecfile.Matrix that holds them so (a mapped
// .f16 file, a '<f2' .npy: Matrix.Float16) and the float16 kernels apply
// (vec.HalfKernels, the dimension a multiple of 8), else float32 in
// memory. Float16 rows take half the memory and half the bytes a distance
// reads, and give the same distances (the float32 values are theirs,
// exactly). Only the Matrix itself is taken so: a type that wraps one
// (and its Float16) may change what Row gives.
type buildRows struct {
	n, d int
	x    []float32 // float32 rows, or nil
	h    []uint16  // float16 rows, or nil
}

// readRows returns rows for the build, on all cores: float16 in place
// where buildRows says, else decoded to float32; an error names the first
// row (the lowest) holding a value that is not finite. Rows in place are
// read from the mapping through the build: the file must not shrink
// meanwhile (as for every reader of a vecfile.Matrix's Float16).
func readRows(rows index.Rows, n, d int) (*buildRows, error) {
	r := &buildRows{n: n, d: d}
	if m, ok := rows.(*vecfile.Matrix); ok && d%8 == 0 && vec.HalfKernels() {
		if h, ok := m.Float16(); ok && len(h) == n*d {
			r.h = h
		}
	}
	if r.h == nil {
		r.x = make([]float32, n*d)
	}
	var mu sync.Mutex
	bad, badCol := n, 0
	par.For(n, 1024, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			col := -1
			if r.h != nil {
				for j, v := range r.h[i*d : (i+1)*d] {
					if !f16.IsFinite(v) {
						col = j
						break
					}
				}
			} else {
				dst := r.x[i*d : (i+1)*d]
				row := rows.Row(i, dst)
				if &row[0] != &dst[0] {
					copy(dst, row)
				}
				for j, v := range dst {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						col = j
						break
					}
				}
			}
			if col >= 0 {
				mu.Lock()
				if i < bad {
					bad, badCol = i, col
				}
				mu.Unlock()
				return
			}
		}
	})
	if bad < n {
		v := make([]float32, d)
		return nil, argErr("vector row %d, value %d is %v", bad, badCol, r.decode(uint32(bad), v)[badCol])
	}
	return r, nil
}

// row is row i as float32, in place: float32 rows only.
func (r *buildRows) row(i uint32) []float32 { return r.x[int(i)*r.d : int(i+1)*r.d] }

// half is row i as float16, in place: float16 rows only.
func (r *buildRows) half(i uint32) []uint16 { return r.h[int(i)*r.d : int(i+1)*r.d] }

// decode returns row i as float32: in place, or decoded into dst (at
// least d long).
func (r *buildRows) decode(i uint32, dst []float32) []float32 {
	if r.h == nil {
		return r.row(i)
	}
	dst = dst[:r.d]
	f16.DecodeRow(dst, r.half(i))
	return dst
}

// decodeRange returns values lo to hi of row i as float32, as decode.
func (r *buildRows) decodeRange(i uint32, lo, hi int, dst []float32) []float32 {
	if r.h == nil {
		return r.row(i)[lo:hi]
	}
	dst = dst[:hi-lo]
	f16.DecodeRow(dst, r.half(i)[lo:hi])
	return dst
}

// span returns rows lo to hi as index.Rows, for a batched search.
func (r *buildRows) span(lo, hi int) index.Rows { return rowSpan{r, lo, hi} }

type rowSpan struct {
	r      *buildRows
	lo, hi int
}

func (s rowSpan) Len() int { return s.hi - s.lo }
func (s rowSpan) Dim() int { return s.r.d }
func (s rowSpan) Row(i int, dst []float32) []float32 {
	if cap(dst) < s.r.d {
		dst = make([]float32, s.r.d)
	}
	dst = dst[:s.r.d]
	if v := s.r.decode(uint32(s.lo+i), dst); &v[0] != &dst[0] {
		copy(dst, v)
	}
	return dst
}
