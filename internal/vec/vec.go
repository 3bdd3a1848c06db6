// Package vec holds the float32 vector arithmetic every package shares: dot
// products and squared distances, written once so the CPU backend, the index
// search and the trainer's maintenance agree to the last bit.
//
// Accumulation order is fixed (four interleaved float32 partial sums over
// j mod 4, added as (s0+s1)+(s2+s3), then the tail in order), so a result
// depends only on its inputs, never on the caller.
package vec

import "math"

// Dot returns sum a[j]*b[j] over j < len(a). b must be at least as long as a.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(a); j += 4 {
		s0 += float32(a[j] * b[j])
		s1 += float32(a[j+1] * b[j+1])
		s2 += float32(a[j+2] * b[j+2])
		s3 += float32(a[j+3] * b[j+3])
	}
	s := (s0 + s1) + (s2 + s3)
	for ; j < len(a); j++ {
		s += float32(a[j] * b[j])
	}
	return s
}

// L2 returns sum (a[j]-b[j])^2 over j < len(a). b must be at least as long as a.
func L2(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(a); j += 4 {
		d0 := a[j] - b[j]
		d1 := a[j+1] - b[j+1]
		d2 := a[j+2] - b[j+2]
		d3 := a[j+3] - b[j+3]
		s0 += float32(d0 * d0)
		s1 += float32(d1 * d1)
		s2 += float32(d2 * d2)
		s3 += float32(d3 * d3)
	}
	s := (s0 + s1) + (s2 + s3)
	for ; j < len(a); j++ {
		d := a[j] - b[j]
		s += float32(d * d)
	}
	return s
}

// L2Below returns L2(a, b) and true when that is below bound, else false
// (and a partial sum) as soon as the partial sums reach bound: each partial
// sum of the non-negative terms is at most the final one, in float32 as in
// exact arithmetic, so nothing below bound is dropped, and what is kept is
// L2's bits. For nearest-neighbour searches where most pairs are far.
func L2Below(a, b []float32, bound float64) (float32, bool) {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	j := 0
	for j+4 <= len(a) {
		for end := min(j+16, len(a)-len(a)%4); j < end; j += 4 {
			d0 := a[j] - b[j]
			d1 := a[j+1] - b[j+1]
			d2 := a[j+2] - b[j+2]
			d3 := a[j+3] - b[j+3]
			s0 += float32(d0 * d0)
			s1 += float32(d1 * d1)
			s2 += float32(d2 * d2)
			s3 += float32(d3 * d3)
		}
		if p := (s0 + s1) + (s2 + s3); float64(p) >= bound {
			return p, false
		}
	}
	s := (s0 + s1) + (s2 + s3)
	for ; j < len(a); j++ {
		d := a[j] - b[j]
		s += float32(d * d)
	}
	return s, float64(s) < bound
}

// Dot4 returns the dot products of x with a0..a3 in one pass over x, each
// with the same accumulation order as Dot.
func Dot4(x, a0, a1, a2, a3 []float32) (r0, r1, r2, r3 float32) {
	n := len(x)
	a0, a1, a2, a3 = a0[:n], a1[:n], a2[:n], a3[:n]
	var p [4][4]float32 // p[anchor][lane]
	j := 0
	for ; j+4 <= n; j += 4 {
		x0, x1, x2, x3 := x[j], x[j+1], x[j+2], x[j+3]
		p[0][0] += float32(x0 * a0[j])
		p[0][1] += float32(x1 * a0[j+1])
		p[0][2] += float32(x2 * a0[j+2])
		p[0][3] += float32(x3 * a0[j+3])
		p[1][0] += float32(x0 * a1[j])
		p[1][1] += float32(x1 * a1[j+1])
		p[1][2] += float32(x2 * a1[j+2])
		p[1][3] += float32(x3 * a1[j+3])
		p[2][0] += float32(x0 * a2[j])
		p[2][1] += float32(x1 * a2[j+1])
		p[2][2] += float32(x2 * a2[j+2])
		p[2][3] += float32(x3 * a2[j+3])
		p[3][0] += float32(x0 * a3[j])
		p[3][1] += float32(x1 * a3[j+1])
		p[3][2] += float32(x2 * a3[j+2])
		p[3][3] += float32(x3 * a3[j+3])
	}
	r0 = (p[0][0] + p[0][1]) + (p[0][2] + p[0][3])
	r1 = (p[1][0] + p[1][1]) + (p[1][2] + p[1][3])
	r2 = (p[2][0] + p[2][1]) + (p[2][2] + p[2][3])
	r3 = (p[3][0] + p[3][1]) + (p[3][2] + p[3][3])
	for ; j < n; j++ {
		r0 += float32(x[j] * a0[j])
		r1 += float32(x[j] * a1[j])
		r2 += float32(x[j] * a2[j])
		r3 += float32(x[j] * a3[j])
	}
	return
}

// Norms writes the squared norm of each dim-long row of a into dst.
func Norms(dst, a []float32, dim int) {
	for i := range dst {
		r := a[i*dim : (i+1)*dim]
		dst[i] = Dot(r, r)
	}
}

// Nearest returns the index of the row of anchors (m rows of len(x)) nearest
// to x in squared L2, computed as |a|^2 - 2 x.a (|x|^2 is the same for every
// row and left out), and that partial distance. norms holds |a|^2 per row.
// Ties go to the lowest index. m must be at least 1.
func Nearest(x, anchors, norms []float32) (int, float32) {
	d := len(x)
	m := len(norms)
	best, bestD := 0, float32(0)
	first := true
	i := 0
	for ; i+4 <= m; i += 4 {
		r0, r1, r2, r3 := Dot4(x, anchors[i*d:], anchors[(i+1)*d:], anchors[(i+2)*d:], anchors[(i+3)*d:])
		for k, r := range [4]float32{r0, r1, r2, r3} {
			v := norms[i+k] - 2*r
			if first || v < bestD {
				best, bestD, first = i+k, v, false
			}
		}
	}
	for ; i < m; i++ {
		v := norms[i] - 2*Dot(x, anchors[i*d:])
		if first || v < bestD {
			best, bestD, first = i, v, false
		}
	}
	return best, bestD
}

// Normalize scales x to unit Euclidean length in place; a zero vector stays
// zero. The scale is 1/sqrt(Dot(x, x)) in float32, or, where |x|^2
// overflows float32 (|x| beyond about 1.8e19) or is so small that its
// float32 sum is subnormal or zero (|x| below about 1e-15), computed in
// float64, where the square of every float32 is a normal number: a finite
// vector never becomes the zero vector, and a tiny one gets its direction.
func Normalize(x []float32) {
	s := Dot(x, x)
	if math.IsInf(float64(s), 1) || s < 0x1p-100 {
		var s64 float64
		for _, v := range x {
			s64 += float64(v) * float64(v)
		}
		if s64 == 0 {
			return
		}
		inv := 1 / math.Sqrt(s64)
		for j, v := range x {
			x[j] = float32(float64(v) * inv)
		}
		return
	}
	inv := float32(1 / math.Sqrt(float64(s)))
	for j := range x {
		x[j] *= inv
	}
}
