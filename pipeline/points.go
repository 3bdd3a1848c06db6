package pipeline

import (
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// points returns the training set as float16: the file's own bytes when it
// stores float16 and no normalisation is needed, else a converted copy.
// Training runs on float16; a float32 value beyond its range (65504) is an
// input error, reported at the lowest such row, and so, for rows not
// normalised (l2, ip), is a row too small for float32 distances
// (checkScale), and, for rows normalised (cosine), a zero row
// (ErrZeroVector). A float16 row is never that small.
//
// rows may be a selection of src.Rows (a sample): orig(i) is then the
// number in src.Rows of rows' row i (nil: the same), for its f16 bytes and
// its errors.
func points(src Source, rows index.Rows, normalise bool, orig func(int) int) (device.Points, error) {
	n, d := rows.Len(), rows.Dim()
	if orig == nil {
		if src.F16 != nil && !normalise {
			return device.Points{Data: src.F16, N: n, Dim: d}, nil
		}
		orig = func(i int) int { return i }
	}
	if src.F16 != nil && !normalise {
		data := make([]uint16, n*d)
		par.For(n, 1024, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				r := orig(i)
				copy(data[i*d:(i+1)*d], src.F16[r*d:(r+1)*d])
			}
		})
		return device.Points{Data: data, N: n, Dim: d}, nil
	}
	data := make([]uint16, n*d)
	badRow := make([]int, (n+1023)/1024)
	par.For(n, 1024, func(lo, hi int) {
		badRow[lo/1024] = -1
		x := make([]float32, d)
		for i := lo; i < hi; i++ {
			x = rows.Row(i, x)
			bad := !normalise && checkScale(x) != "" || normalise && isZeroVector(x)
			for j, v := range x {
				h := f16.FromFloat32(v)
				bad = bad || !f16.IsFinite(h)
				data[i*d+j] = h
			}
			if bad && badRow[lo/1024] < 0 {
				badRow[lo/1024] = i
			}
		}
	})
	for _, i := range badRow {
		if i < 0 {
			continue
		}
		r := orig(i)
		x := src.Rows.Row(r, nil)
		if normalise && isZeroVector(x) {
			return device.Points{}, &rangeError{fmt.Sprintf("%s: row %d: every value is 0: %s", src.Name, src.First+r, zeroWhy), ErrZeroVector}
		}
		for j, v := range x {
			if !f16.IsFinite(f16.FromFloat32(v)) {
				return device.Points{}, &rangeError{fmt.Sprintf("%s: row %d, column %d: value %g is outside the float16 range (|x| <= 65504) that training uses", src.Name, src.First+r, j, v), ErrRange}
			}
		}
		return device.Points{}, &rangeError{fmt.Sprintf("%s: row %d: %s", src.Name, src.First+r, checkScale(x)), ErrUnderflow}
	}
	return device.Points{Data: data, N: n, Dim: d}, nil
}

// ErrRange is returned for input values beyond the float16 range.
var ErrRange = errs.New(errs.ErrArgument, "value outside the float16 range")

// ErrUnderflow is returned, under the l2 and ip metrics, for a row that is
// not zero but whose squared length is below float32's normal range: its
// distances, computed in float32, would be zero or imprecise, and every
// query would find the same hits. Cosine normalises rows first and takes
// any finite row.
var ErrUnderflow = errs.New(errs.ErrArgument, "vector too small for float32 distances")

// ErrZeroVector is returned, under the cosine metric, for a vector (a
// row of Compress's input, a document of Build or Add, a query) whose
// every value is 0: cosine compares directions, and a zero vector has
// none (it stayed zero when normalised, at distance 0.5 from every query,
// above any real neighbour less similar than that). l2 and ip take it. A
// vector that is not zero, however small, is normalised.
var ErrZeroVector = index.ErrZeroVector

// zeroFix and zeroWhy end the message of a zero vector refused under
// cosine, after the sentinel's text or in place of it.
const (
	zeroFix = "drop the vector or use the l2 or ip metric"
	zeroWhy = "a zero vector has no direction under the cosine metric; " + zeroFix
)

// isZeroVector reports whether every value of x is 0 (either sign).
func isZeroVector(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// checkScale describes why x is too small for float32 distances (l2, ip),
// or returns "": a row is zero or its squared length, computed in float64,
// is at least float32's smallest normal number (2^-126, about 1.2e-38).
func checkScale(x []float32) string {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	if s == 0 || s >= 0x1p-126 {
		return ""
	}
	return fmt.Sprintf("squared length %.3g is below float32's normal range (1.2e-38): its l2 and ip distances would underflow; scale the vectors up, make the row zero, or use -metric cosine", s)
}

type rangeError struct {
	msg string
	err error
}

func (e *rangeError) Error() string { return e.msg }
func (e *rangeError) Unwrap() error { return e.err }

// normalized presents rows scaled to unit length (cosine metric).
type normalized struct{ index.Rows }

func (r normalized) Row(i int, dst []float32) []float32 {
	x := r.Rows.Row(i, dst)
	vec.Normalize(x)
	return x
}
