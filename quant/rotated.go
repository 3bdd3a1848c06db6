package quant

import (
	"encoding/binary"
	"math"
	"math/bits"
	"sync"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
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
	dim, bits  int
	seed       uint64
	ip         bool // Spec.IP: the |r|^2 slot holds -2<a, r>
	rot        *Rotation
	packed     int       // bytes of packed levels
	scratch    sync.Pool // *encodeScratch, for concurrent Encode calls
	rotAnchors []float32 // P anchor, set by SetAnchors
	anchors    []float32 // the anchors as given to SetAnchors
}

// radixHigh32 sorts keys, appended in increasing low 32 bits, by their
// high 32 bits (a stable LSD radix sort, 8 bits a pass: branch-free where a
// comparison sort mispredicts on random magnitudes), using the capacity of
// keys beyond room for the data as its buffer. It returns the sorted keys.
func radixHigh32(keys []uint64, room int) []uint64 {
	n := len(keys)
	if n < 2 {
		return keys
	}
	if cap(keys) < 2*max(room, n) {
		k := make([]uint64, n, 2*max(room, n))
		copy(k, keys)
		keys = k
	}
	src, dst := keys[:n], keys[n:2*n]
	for shift := 32; shift < 64; shift += 8 {
		var count [256]int
		for _, k := range src {
			count[byte(k>>shift)]++
		}
		if count[byte(src[0]>>shift)] == n {
			continue // one digit value: the pass would not move anything
		}
		pos := 0
		for i, c := range count {
			count[i] = pos
			pos += c
		}
		for _, k := range src {
			b := byte(k >> shift)
			dst[count[b]] = k
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys[:n], src)
	}
	return keys[:n]
}

type encodeScratch struct {
	r      []float32
	levels []uint8
	events []uint64 // sort keys of the scale sweep
}

// NewRotated returns the b-bit rotated code for dimension dim, its rotation
// drawn from seed.
func NewRotated(dim, bits int, seed uint64) *Rotated {
	return &Rotated{dim: dim, bits: bits, seed: seed, rot: NewRotation(dim, seed), packed: (dim*bits + 7) / 8}
}

func (*Rotated) Kind() Kind { return KindRotated }
func (c *Rotated) Spec() Spec {
	return Spec{Kind: KindRotated, Dim: c.dim, Bits: c.bits, Seed: c.seed, IP: c.ip}
}
func (c *Rotated) Dim() int        { return c.dim }
func (c *Rotated) CodeBytes() int  { return c.packed + 4 }
func (c *Rotated) ParamBytes() int { return 4 }

// Layout returns what a device needs to write the code itself
// (device.RotatedEncoder); the slices are the code's own.
func (c *Rotated) Layout() device.RotatedLayout {
	l := device.RotatedLayout{Dim: c.dim, Bits: c.bits, Packed: c.packed, IP: c.ip, P: c.rot.p, Scale: float32(1 / math.Sqrt(float64(c.rot.p))), RotAnchors: c.rotAnchors}
	for k := range c.rot.signs {
		l.Signs = append(l.Signs, c.rot.signs[k])
	}
	return l
}

func (c *Rotated) EncodeList(codes, params []byte, a int, residuals []float32, count int) {
	c.fit(params, a, residuals, count)
	encodeEach(c, codes, params, a, residuals, count)
}

// Fit sets params from the residuals of one list: their largest |r|^2
// (see listScale; without the list's anchor, ip slots are not checked).
func (c *Rotated) Fit(params []byte, residuals []float32, count int) {
	c.fit(params, -1, residuals, count)
}

func (c *Rotated) fit(params []byte, a int, residuals []float32, count int) {
	var s, slot float64
	for i := range count {
		r := residuals[i*c.dim : (i+1)*c.dim]
		s = math.Max(s, dot64(r, r))
		if c.ip && a >= 0 && c.anchors != nil {
			slot = math.Max(slot, math.Abs(2*dot64(c.anchors[a*c.dim:(a+1)*c.dim], r)))
		}
	}
	putF32(params, 0, listScale(s, slot))
}

// Where a list's s must be raised above its largest |r|^2.
const (
	// maxSlotRatio bounds the ip slot's |2<a, r>|/s, stored as float16
	// (at most 65504), with a margin for the rotation's rounding.
	maxSlotRatio = 60000
	// minScale is float32's smallest normal number: a smaller s loses
	// its precision, and one that underflows to 0 makes the scalars,
	// stored divided by s, infinite.
	minScale = 0x1p-126
)

// listScale returns a list's s (PARM) from its largest |r|^2 and its
// largest ip slot |2<a, r>|: the largest |r|^2, so that |r|^2/s <= 1 fits
// float16, or 1 for an empty or all-zero list; raised only where that
// would store an infinite scalar: an ip list whose anchor is so much
// longer than its residuals that the slot over s passes float16's range,
// or residuals whose squares underflow float32. Lists needing neither
// keep the s they always had, so their codes are unchanged byte for byte.
func listScale(normMax, slotMax float64) float32 {
	if normMax == 0 {
		normMax = 1
	}
	s := max(normMax, slotMax/maxSlotRatio)
	if float32(s) < minScale {
		return minScale
	}
	return float32(s)
}

// NonFinite reports whether a code's stored scalars are infinite or NaN,
// as a device encoder that takes s as the largest |r|^2 writes them for
// the lists listScale raises; the host encodes those lists again.
func (c *Rotated) NonFinite(code []byte) bool {
	for _, at := range []int{c.packed, c.packed + 2} {
		if !f16.IsFinite(binary.LittleEndian.Uint16(code[at:])) {
			return true
		}
	}
	return false
}

func (c *Rotated) Encode(code []byte, a int, params []byte, residual []float32) {
	d := c.dim
	sc, _ := c.scratch.Get().(*encodeScratch)
	if sc == nil {
		sc = &encodeScratch{r: make([]float32, d), levels: make([]uint8, d)}
	}
	defer c.scratch.Put(sc)
	r, levels := sc.r, sc.levels
	copy(r, residual[:d])
	c.rot.Apply(r)
	ur := c.bestLevels(levels, r, &sc.events)
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
	slot := norm
	if c.ip {
		slot = -2 * dot64(c.rotAnchors[a*d:(a+1)*d], r) // <P a, P r> = <a, r>
	}
	binary.LittleEndian.PutUint16(code[c.packed:], f16.FromFloat32(float32(slot/s)))
	binary.LittleEndian.PutUint16(code[c.packed+2:], f16.FromFloat32(float32(beta)))
}

// Levels sets levels[j] to the level Encode chooses for coordinate j of
// r, a residual already rotated (P r), for any width from 1 to 8 bits,
// and returns <u, r> (u_j = levels[j] - L/2). Encode packs the levels of
// the widths Spec accepts; a caller keeping its own copy of the codes
// (package graph) may pack other widths.
func (c *Rotated) Levels(levels []uint8, r []float32) float64 {
	var events []uint64
	return c.bestLevels(levels, r, &events)
}

// bestLevels sets levels to the code of r (rotated) closest in angle and
// returns <u, r>. One bit is the sign. With more bits the magnitude
// |u_j| = min(floor(t|r_j|) + 1/2, L/2) of every coordinate is a step
// function of the scale t, so the best t is found exactly by sweeping the
// steps (t = k/|r_j|, k = 1 .. (L-1)/2) in increasing order and keeping the
// best cosine (extended RaBitQ's code search).
func (c *Rotated) bestLevels(levels []uint8, r []float32, events *[]uint64) float64 {
	L := 1<<c.bits - 1
	steps := (L - 1) / 2
	// At t -> 0 every |u_j| is 1/2: the sign code.
	var ua, uu float64
	for _, v := range r {
		ua += 0.5 * math.Abs(float64(v))
		uu += 0.25
	}
	bestT, bestCos := 0.0, ua/math.Sqrt(uu)
	if c.bits == 8 {
		// 127 steps per coordinate make the sweep costly, and at this
		// resolution the best scale is where the largest coordinate
		// just reaches the top level.
		var big float64
		for _, v := range r {
			big = math.Max(big, math.Abs(float64(v)))
		}
		if big > 0 {
			bestT = (float64(steps) + 0.5) / big * (1 - 1e-9)
		}
	} else if ua > 0 && steps > 0 { // one bit: the sign code, nothing to sweep
		// The steps of coordinate j come at t = k/|r_j|; with the
		// coordinates in decreasing |r_j| each k gives an increasing
		// sequence, and the sweep merges the (L-1)/2 sequences.
		// Sort keys: |r_j| is a float32, whose bits order like its value,
		// so ^bits<<32 | j sorts by decreasing |r_j|, then increasing j.
		keys := (*events)[:0]
		for j, v := range r {
			if v != 0 {
				keys = append(keys, uint64(^math.Float32bits(float32(math.Abs(float64(v)))))<<32|uint64(j))
			}
		}
		keys = radixHigh32(keys, len(r))
		*events = keys
		mag := func(i int) float64 { return float64(math.Float32frombits(^uint32(keys[i] >> 32))) }
		// The sequences' next steps, kept sorted by (t, k): a step of
		// sequence k moves only k's entry, which re-enters further on.
		type head struct {
			t    float64
			k, i int // sequence, position of its next coordinate in keys
		}
		var heads [64]head // steps <= 7 here
		for k := 1; k <= steps; k++ {
			heads[k-1] = head{t: float64(k) / mag(0), k: k}
		}
		live := steps // heads[:live] are sorted; the smallest t comes first
		for live > 0 {
			h := heads[0]
			k, t := h.k, h.t
			// Coordinate keys[h.i] steps from k-1/2 to k+1/2.
			ua += mag(h.i)
			uu += float64(2 * k)
			if h.i++; h.i < len(keys) {
				h.t = float64(k) / mag(h.i)
				p := 0
				for p+1 < live && (heads[p+1].t < h.t || heads[p+1].t == h.t && heads[p+1].k < k) {
					heads[p] = heads[p+1]
					p++
				}
				heads[p] = h
			} else {
				copy(heads[:live-1], heads[1:live])
				live--
			}
			// ua^2 > bestCos^2 uu (with slack) is needed for a better
			// cosine; the exact test runs only then.
			if ua*ua > bestCos*bestCos*uu*(1-1e-9) {
				if cos := ua / math.Sqrt(uu); cos > bestCos {
					bestCos, bestT = cos, t
				}
			}
		}
	}
	var ur float64
	for j, v := range r {
		m := min(int(math.Floor(bestT*math.Abs(float64(v)))), steps) // |u_j| - 1/2
		l := (L+1)/2 + m                                             // level for u_j = m + 1/2
		if v < 0 {
			l = (L-1)/2 - m // u_j = -(m + 1/2)
		}
		levels[j] = uint8(l)
		ur += (float64(l) - float64(L)/2) * float64(v)
	}
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

func (c *Rotated) SetAnchors(anchors []float32) {
	d := c.dim
	c.anchors = anchors
	c.rotAnchors = make([]float32, len(anchors))
	copy(c.rotAnchors, anchors)
	// Each anchor on its own: the same bits on any number of cores.
	par.For(len(anchors)/d, 16, func(lo, hi int) {
		for a := lo; a < hi; a++ {
			c.rot.Apply(c.rotAnchors[a*d : (a+1)*d])
		}
	})
}

func (c *Rotated) NewScorer() Scorer {
	n := c.packed * 8 / c.bits // coordinates, padded with zeros to whole bytes
	return &rotatedScorer{c: c, pq: make([]float32, n), q: make([]float32, n), lut: make([]float32, 2*c.packed*16)}
}

// rotatedScorer sums <q', c> with a table per half byte of code when
// levels are narrower than 4 bits: lut[h*16+v] is the sum over the levels
// packed in nibble value v at nibble position h of level times the matching
// coordinate of q'. Nibble tables cost 16 entries per 4 bits to build per
// list, so they pay off even for short lists.
type rotatedScorer struct {
	c        *Rotated
	pq       []float32 // P q, zero past dim
	q        []float32 // q' for the current list: P(q - anchor) for L2, P q for dot
	lut      []float32
	qq, qsum float32 // |q'|^2 and L/2 * sum q'
	sqrtS, s float32
	dot      bool
}

func (sc *rotatedScorer) SetQuery(q []float32) { sc.c.rotateQuery(sc.pq, q) }

// rotateQuery sets dst to P q, zero past the dimension: the query as both
// scorers use it.
func (c *Rotated) rotateQuery(dst, q []float32) {
	d := c.dim
	copy(dst, q[:d])
	clear(dst[d:])
	c.rot.Apply(dst[:d])
}

func (sc *rotatedScorer) ForL2(a int, params []byte) {
	d := sc.c.dim
	anchor := sc.c.rotAnchors[a*d : (a+1)*d]
	for j, v := range anchor {
		sc.q[j] = sc.pq[j] - v
	}
	clear(sc.q[d:])
	sc.prepare(params)
	sc.dot = false
}

func (sc *rotatedScorer) ForDot(a int, params []byte) {
	copy(sc.q, sc.pq)
	sc.prepare(params)
	sc.dot = true
}

func (sc *rotatedScorer) prepare(params []byte) {
	c := sc.c
	var qq, qs float32
	for _, x := range sc.q {
		qq += x * x
		qs += x
	}
	sc.qq = qq
	sc.qsum = qs * float32(int(1)<<c.bits-1) / 2
	sc.s = getF32(params, 0)
	sc.sqrtS = float32(math.Sqrt(float64(sc.s)))
	if c.bits >= 4 {
		return // scored by unpacking
	}
	NibbleTables(sc.lut, sc.q, c.bits, c.packed)
}

// NibbleTables fills lut (packed*2 tables of 16) for levels of b < 4 bits
// packed in packed bytes: lut[h*16+v] is the sum over the levels packed in
// nibble value v at nibble position h of level times the matching
// coordinate of q. Entry v is entry v with its lowest set bit cleared plus
// one unit of the level that bit belongs to times its coordinate.
func NibbleTables(lut, q []float32, b, packed int) {
	per := 4 / b
	for h := range 2 * packed {
		t := lut[h*16 : (h+1)*16]
		qh := q[h*per : (h+1)*per]
		t[0] = 0
		for val := 1; val < 16; val++ {
			low := bits.TrailingZeros8(uint8(val))
			t[val] = t[val&(val-1)] + float32(int(1)<<(low%b))*qh[low/b]
		}
	}
}

func (sc *rotatedScorer) Score(code []byte) float32 {
	p := sc.c.packed
	var t0, t1 float32
	switch sc.c.bits {
	case 8:
		t0 = vec.DotU8(sc.q, code[:p])
	case 4:
		t0 = vec.DotU4(sc.q, code[:p])
	default:
		lut := sc.lut[:32*p]
		for k, v := range code[:p] {
			t0 += lut[32*k+int(v&15)]
			t1 += lut[32*k+16+int(v>>4)]
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
