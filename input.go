package vlc

import (
	"errors"
	"fmt"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// points returns the training set as float16: the file's own bytes when it
// stores float16 and no normalisation is needed, else a converted copy.
// Training runs on float16; a float32 value beyond its range (65504) is an
// input error, reported at the lowest such row.
func points(src source, rows index.Rows, normalise bool) (anneal.Points, error) {
	n, d := rows.Len(), rows.Dim()
	if src.f16 != nil && !normalise {
		return anneal.Points{Data: src.f16, N: n, Dim: d}, nil
	}
	data := make([]uint16, n*d)
	badRow := make([]int, (n+1023)/1024)
	par.For(n, 1024, func(lo, hi int) {
		badRow[lo/1024] = -1
		x := make([]float32, d)
		for i := lo; i < hi; i++ {
			x = rows.Row(i, x)
			for j, v := range x {
				h := f16.FromFloat32(v)
				if !f16.IsFinite(h) && badRow[lo/1024] < 0 {
					badRow[lo/1024] = i
				}
				data[i*d+j] = h
			}
		}
	})
	for _, i := range badRow {
		if i >= 0 {
			x := src.rows.Row(i, nil)
			for j, v := range x {
				if !f16.IsFinite(f16.FromFloat32(v)) {
					return anneal.Points{}, &rangeError{fmt.Sprintf("%s: row %d, column %d: value %g is outside the float16 range (|x| <= 65504) that training uses", src.name, i, j, v)}
				}
			}
		}
	}
	return anneal.Points{Data: data, N: n, Dim: d}, nil
}

// ErrRange is returned for input values beyond the float16 range.
var ErrRange = errors.New("value outside the float16 range")

type rangeError struct{ msg string }

func (e *rangeError) Error() string { return e.msg }
func (e *rangeError) Unwrap() error { return ErrRange }

// normalized presents rows scaled to unit length (cosine metric).
type normalized struct{ index.Rows }

func (r normalized) Row(i int, dst []float32) []float32 {
	x := r.Rows.Row(i, dst)
	vec.Normalize(x)
	return x
}
