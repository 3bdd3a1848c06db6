package quant

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/vlc-embed/vlc/internal/f16"
)

// Rotated is the extended-RaBitQ family of codes: the residual r is rotated
// (r' = P r, a seeded random orthogonal P), scaled per vector, and rounded to
// a grid of 2^b levels per dimension; two per-vector scalars make the
// inner-product estimate unbiased.
//
// With L = 2^b - 1, code c_j in 0..L stands for u_j = c_j - L/2 (a grid of
// half-integers symmetric about 0). The code of r' is the u closest in
// angle to r' over all scales t (u_j = nearest grid point to t*r'_j). For a
// query residual q' = P(q - anchor),
//
//	<q', r'> ~ B <q', u>,  B = |r|^2 / <u, r'>
//
// (the RaBitQ estimator <o,q>/<o,o-bar> in unnormalised form), so
//
//	|q - x|^2 ~ |q'|^2 + |r|^2 - 2 B <q', u>.
//
// Layout of one code: ceil(D*b/8) bytes of c (dimension j at bits j*b..,
// least significant first), then float16 |r|^2/s and float16 B/sqrt(s), s
// being the list's largest |r|^2 (PARM: s as float32), which keeps both
// scalars within float16 range whatever the data's scale.
type Rotated struct {
	dim, bits int
	rot       *Rotation
	packed    int // bytes of packed levels
}

// NewRotated returns the b-bit rotated code for dimension dim, its rotation
// drawn from seed.
func NewRotated(dim, bits int, seed uint64) *Rotated {
	return &Rotated{dim: dim, bits: bits, rot: NewRotation(dim, seed), packed: (dim*bits + 7) / 8}
}

func (*Rotated) Kind() Kind        { return KindRotated }
func (c *Rotated) Bits() int       { return c.bits }
func (c *Rotated) Dim() int        { return c.dim }
func (c *Rotated) CodeBytes() int  { return c.packed + 4 }
func (c *Rotated) ParamBytes() int { return 4 }

func (c *Rotated) Fit(params []byte, residuals []float32, count int) {
	var s float64
	for i := range count {
		r := residuals[i*c.dim : (i+1)*c.dim]
		var n float64
		for _, v := range r {
			n += float64(v) * float64(v)
		}
		s = math.Max(s, n)
	}
	if s == 0 {
		s = 1
	}
	putF32(params, 0, float32(s))
}

func (c *Rotated) Encode(code []byte, params []byte, residual []float32) {
	d := c.dim
	r := make([]float32, d)
	copy(r, residual[:d])
	c.rot.Apply(r)
	levels := make([]uint8, d)
	ur := c.bestLevels(levels, r)
	clear(code[:c.packed])
	for j, l := range levels {
		bit := j * c.bits
		code[bit/8] |= l << (bit % 8)
	}
	var norm float64
	for _, v := range r {
		norm += float64(v) * float64(v)
	}
	s := float64(getF32(params, 0))
	var beta float64
	if ur > 0 {
		beta = norm / ur / math.Sqrt(s)
	}
	binary.LittleEndian.PutUint16(code[c.packed:], f16.FromFloat32(float32(norm/s)))
	binary.LittleEndian.PutUint16(code[c.packed+2:], f16.FromFloat32(float32(beta)))
}

// bestLevels sets levels to the code of r (rotated) closest in angle and
// returns <u, r>. One bit is the sign; more bits search the scale t on a
// geometric grid around the scale at which the largest coordinate just
// fits, then refine around the best.
func (c *Rotated) bestLevels(levels []uint8, r []float32) float64 {
	L := 1<<c.bits - 1
	half := float64(L) / 2
	var big float64
	for _, v := range r {
		big = math.Max(big, math.Abs(float64(v)))
	}
	if big == 0 {
		for j := range levels {
			levels[j] = uint8(L / 2)
		}
		return 0
	}
	level := func(t, v float64) int {
		return min(max(int(math.Floor(t*v))+(L+1)/2, 0), L)
	}
	score := func(t float64) (cos, ur float64) {
		var uu float64
		for _, v := range r {
			u := float64(level(t, float64(v))) - half
			ur += u * float64(v)
			uu += u * u
		}
		return ur / math.Sqrt(uu), ur
	}
	best := half / big
	if c.bits > 1 {
		t0 := best
		bestCos, _ := score(t0)
		try := func(t float64) {
			if cos, _ := score(t); cos > bestCos {
				bestCos, best = cos, t
			}
		}
		for i := range 40 {
			try(t0 * math.Pow(4, float64(i)/39-0.5)) // t0/2 .. 2*t0
		}
		centre := best
		for i := range 17 {
			try(centre * (0.96 + 0.08*float64(i)/16))
		}
	}
	for j, v := range r {
		levels[j] = uint8(level(best, float64(v)))
	}
	_, ur := score(best)
	return ur
}

func (c *Rotated) Decode(dst []float32, params []byte, code []byte) {
	d := c.dim
	L := 1<<c.bits - 1
	s := float64(getF32(params, 0))
	beta := float64(f16.ToFloat32(binary.LittleEndian.Uint16(code[c.packed+2:]))) * math.Sqrt(s)
	// x-hat = B u makes <q, x-hat> the estimator; rotate back.
	for j := range d {
		bit := j * c.bits
		l := int(code[bit/8]>>(bit%8)) & L
		dst[j] = float32(beta * (float64(l) - float64(L)/2))
	}
	c.rot.Invert(dst[:d])
}

func (c *Rotated) NewScorer() Scorer {
	sc := &rotatedScorer{c: c, q: make([]float32, c.packed*8/c.bits)}
	if c.bits < 4 {
		sc.lut = make([]float32, c.packed*256)
	}
	return sc
}

// rotatedScorer sums <c, q'> from a table per code byte: lut[k*256+v] is
// the sum over the levels packed in byte value v at byte position k of
// level times the matching coordinate of q'.
type rotatedScorer struct {
	c        *Rotated
	q        []float32 // rotated query (residual), zero past dim
	lut      []float32
	qq, qsum float32 // |q'|^2 and sum of q' * L/2
	sqrtS, s float32
	dot      bool
}

func (sc *rotatedScorer) prepare(params []byte, v []float32) {
	c := sc.c
	d := c.dim
	copy(sc.q, v[:d])
	clear(sc.q[d:])
	c.rot.Apply(sc.q[:d])
	var qq, qs float32
	for _, x := range sc.q[:d] {
		qq += x * x
		qs += x
	}
	sc.qq = qq
	sc.qsum = qs * float32(int(1)<<c.bits-1) / 2
	sc.s = getF32(params, 0)
	sc.sqrtS = float32(math.Sqrt(float64(sc.s)))
	if c.bits >= 4 {
		return // scored by unpacking: a table per byte would cost more than it saves
	}
	// Tables: entry v equals entry v-1 with its lowest set bit cleared, plus
	// one unit of the level that bit belongs to times its coordinate.
	b := c.bits
	per := 8 / b
	for k := range c.packed {
		t := sc.lut[k*256 : (k+1)*256]
		q := sc.q[k*per : (k+1)*per]
		t[0] = 0
		for val := 1; val < 256; val++ {
			low := bits.TrailingZeros8(uint8(val))
			t[val] = t[val&(val-1)] + float32(int(1)<<(low%b))*q[low/b]
		}
	}
}

func (sc *rotatedScorer) ForL2(params []byte, v []float32) {
	sc.prepare(params, v)
	sc.dot = false
}

func (sc *rotatedScorer) ForDot(params []byte, v []float32) {
	sc.prepare(params, v)
	sc.dot = true
}

func (sc *rotatedScorer) Score(code []byte) float32 {
	p := sc.c.packed
	var t0, t1 float32
	switch sc.c.bits {
	case 8:
		q := sc.q[:p]
		for k, v := range code[:p] {
			t0 += q[k] * float32(v)
		}
	case 4:
		q := sc.q[:2*p]
		for k, v := range code[:p] {
			t0 += q[2*k] * float32(v&15)
			t1 += q[2*k+1] * float32(v>>4)
		}
	default:
		k := 0
		for ; k+2 <= p; k += 2 {
			t0 += sc.lut[k*256+int(code[k])]
			t1 += sc.lut[(k+1)*256+int(code[k+1])]
		}
		if k < p {
			t0 += sc.lut[k*256+int(code[k])]
		}
	}
	qu := t0 + t1 - sc.qsum // <q', u>
	beta := f16.ToFloat32(binary.LittleEndian.Uint16(code[p+2:])) * sc.sqrtS
	if sc.dot {
		return beta * qu
	}
	norm := f16.ToFloat32(binary.LittleEndian.Uint16(code[p:])) * sc.s
	return sc.qq + norm - 2*beta*qu
}
