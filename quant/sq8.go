package quant

import (
	"encoding/binary"
	"math"

	"github.com/vlc-embed/vlc/internal/vec"
)

// SQ8 is 8-bit scalar quantization of each residual dimension over a range
// fitted per list: code c in 0..255 stands for lo_j + step_j*c, where lo_j and
// hi_j = lo_j + 255*step_j are the list's smallest and largest residual in
// dimension j. Parameters: lo then step, Dim float32 each, little-endian.
type SQ8 struct {
	dim     int
	anchors []float32
}

// NewSQ8 returns the 8-bit code for dimension dim.
func NewSQ8(dim int) *SQ8 { return &SQ8{dim: dim} }

func (*SQ8) Kind() Kind        { return KindSQ8 }
func (c *SQ8) Spec() Spec      { return Spec{Kind: KindSQ8, Dim: c.dim, Bits: 8} }
func (c *SQ8) Dim() int        { return c.dim }
func (c *SQ8) CodeBytes() int  { return c.dim }
func (c *SQ8) ParamBytes() int { return 8 * c.dim }
func (c *SQ8) NewScorer() Scorer {
	return &sq8Scorer{c: c, d: c.dim, q: make([]float32, c.dim), u: make([]float32, c.dim), s: make([]float32, c.dim)}
}

func (c *SQ8) SetAnchors(anchors []float32) { c.anchors = anchors }

func (c *SQ8) EncodeList(codes, params []byte, a int, residuals []float32, count int) {
	c.Fit(params, residuals, count)
	encodeEach(c, codes, params, a, residuals, count)
}

// Fit sets params from the residuals of one list: each dimension's range.
func (c *SQ8) Fit(params []byte, residuals []float32, count int) {
	d := c.dim
	for j := range d {
		lo, hi := float32(0), float32(0)
		for i := range count {
			v := residuals[i*d+j]
			if i == 0 || v < lo {
				lo = v
			}
			if i == 0 || v > hi {
				hi = v
			}
		}
		putF32(params, j, lo)
		putF32(params, d+j, (hi-lo)/255)
	}
}

func (c *SQ8) Encode(code []byte, _ int, params []byte, residual []float32) {
	d := c.dim
	for j, v := range residual[:d] {
		lo, step := getF32(params, j), getF32(params, d+j)
		q := float32(0)
		if step > 0 {
			q = float32(math.Round(float64((v - lo) / step)))
		}
		code[j] = byte(min(max(q, 0), 255))
	}
}

func (c *SQ8) Decode(dst []float32, params []byte, code []byte) {
	d := c.dim
	for j := range d {
		dst[j] = getF32(params, j) + getF32(params, d+j)*float32(code[j])
	}
}

type sq8Scorer struct {
	c       *SQ8
	d       int
	q, u, s []float32 // the query; per dimension: offset and step, as For* prepared them
	bias    float32
	dot     bool
}

func (sc *sq8Scorer) SetQuery(q []float32) { copy(sc.q, q) }

// ForL2: |q - a - lo - step*c|^2 = sum_j (u_j - s_j*c_j)^2, u = q - a - lo.
func (sc *sq8Scorer) ForL2(a int, params []byte) {
	anchor := sc.c.anchors[a*sc.d : (a+1)*sc.d]
	for j := range sc.d {
		sc.u[j] = sc.q[j] - anchor[j] - getF32(params, j)
		sc.s[j] = getF32(params, sc.d+j)
	}
	sc.dot = false
}

// ForDot: <q, lo + step*c> = <q, lo> + sum_j (q_j*step_j)*c_j.
func (sc *sq8Scorer) ForDot(a int, params []byte) {
	var b float32
	for j := range sc.d {
		b += sc.q[j] * getF32(params, j)
		sc.s[j] = sc.q[j] * getF32(params, sc.d+j)
	}
	sc.bias = b
	sc.dot = true
}

func (sc *sq8Scorer) Score(code []byte) float32 {
	code = code[:sc.d]
	s := sc.s[:sc.d]
	if sc.dot {
		return sc.bias + vec.DotU8(s, code)
	}
	u := sc.u[:sc.d]
	var a0, a1, a2, a3 float32
	j := 0
	for ; j+4 <= len(code); j += 4 {
		t0 := u[j] - s[j]*float32(code[j])
		t1 := u[j+1] - s[j+1]*float32(code[j+1])
		t2 := u[j+2] - s[j+2]*float32(code[j+2])
		t3 := u[j+3] - s[j+3]*float32(code[j+3])
		a0 += t0 * t0
		a1 += t1 * t1
		a2 += t2 * t2
		a3 += t3 * t3
	}
	for ; j < len(code); j++ {
		t := u[j] - s[j]*float32(code[j])
		a0 += t * t
	}
	return (a0 + a1) + (a2 + a3)
}

func putF32(b []byte, i int, v float32) {
	binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
}

func getF32(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}
