package quant

import (
	"encoding/binary"
	"math"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// Blocked is implemented by codes that an index stores in a layout made
// for scanning many entries at once (the rotated code): entries in blocks
// of BlockLen, each block holding what a first, cheap estimate reads, and
// per entry the rest of its code, read only for entries the estimate
// cannot rule out. Encoders still write entry codes (CodeBytes each, the
// layout Scorer reads); Pack re-lays them.
type Blocked interface {
	// BlockBytes is the size of one block.
	BlockBytes() int
	// LowBytes is the size of one entry's code outside its block.
	LowBytes() int
	// Pack re-lays n entry codes (CodeBytes each, in index order) into
	// blocks (ceil(n/BlockLen) blocks, entry e in slot e%BlockLen of block
	// e/BlockLen) and low (n*LowBytes, then LowPad bytes), both zeroed
	// beforehand. The result depends only on the entry codes.
	Pack(codes []byte, n int, blocks, low []byte)
	// Unpack writes entry e's code (CodeBytes, all of it overwritten) from
	// blocks and low as Pack laid them out: the exact inverse of Pack, so
	// that Pack then Unpack gives back every entry code Encode wrote, byte
	// for byte (what Pack derives from a code for the first estimate is
	// not part of it: packing again recomputes it). An index store keeps only the packed layout, and
	// needs the entry codes back to move entries between files without
	// the original vectors: to drop deleted entries, or to merge segments
	// (see Merger), before packing again.
	Unpack(blocks, low []byte, e int, code []byte)
	NewBlockScorer() BlockScorer
}

// BlockLen is the number of entries a block interleaves.
const BlockLen = vec.ScanBlock

// LowPad is the zero bytes after the last entry's low bits, which the
// refinement's kernel may read past an entry's end.
const LowPad = 8

// BlockScorer is a Scorer for the blocked layout. Not safe for concurrent
// use.
type BlockScorer interface {
	// SetQuery, ForL2 and ForDot are as Scorer's.
	SetQuery(q []float32)
	// SetQueryFrom sets the query to other's, a scorer of the same code
	// whose SetQuery was called, without redoing SetQuery's work (a
	// rotation): so that workers scanning different lists for one query
	// each have a scorer of their own.
	SetQueryFrom(other BlockScorer)
	ForL2(a int, params []byte)
	ForDot(a int, params []byte)
	// Estimate sets est[v] to a first estimate of Score for entry v of
	// block and bound[v] to a bound on est[v]'s error, |Score - est[v]|
	// <= bound[v], that fails rarely (see Rotated's blocked layout), for
	// lo <= v < hi.
	Estimate(block []byte, lo, hi int, est, bound *[BlockLen]float32)
	// Refine returns Score for entry v of block, whose low bits start at
	// low (followed by LowPad bytes, or by the next entry's): the estimate
	// Scorer.Score gives for the entry code it came from, up to the order
	// of float32 additions.
	Refine(block []byte, v int, low []byte) float32
}

// EstimateSigmas is how many standard deviations of its error the first
// estimate's bound allows. The error of the sign-only estimate behaves as
// a normal variable (see Rotated's blocked layout), so an entry whose
// exact estimate would enter the results is missed with probability about
// 3e-5 at 4 deviations.
const EstimateSigmas = 4

// The blocked layout of the rotated code of b bits. Level l of dimension j
// splits into its top bit (the sign of u_j = l - L/2) and its w = b-1 low
// bits, l = msb<<w | low, so
//
//	<q', l> = 2^w <q', msb> + <q', low>.
//
// A block of 32 entries holds, for each chunk of 8 dimensions (dimension
// count padded to whole chunks with zeros), 32 bytes of sign bits, byte v
// being entry v's (vec.FastScan's layout); then per entry, in arrays of 32,
// the entry code's two float16 scalars (|r|^2/s or the ip slot, and B/
// sqrt(s)), and two bytes kappa and eps. An entry's low bits, w a
// dimension packed 8 dimensions to w bytes, lie outside the block.
//
// The first estimate reads only the block. With s_j = +-1 the signs,
// u = kappa s + e where kappa = |u|^2/<u, s> (the scale that makes e
// orthogonal to u, the direction of the residual), so
//
//	<q', u> = kappa <q', s> + <q', e>.
//
// The rotation makes <q', e> behave as a normal variable of deviation at
// most |q'| |e|/sqrt(D). kappa is stored as a byte, k*(L/2)/255, and
// |e|/sqrt(D), computed with that rounded kappa, as a byte rounded up, in
// the same unit. <q', s> is summed by vec.FastScan from the query
// quantised per list to integers of at most 63 in magnitude, q' = delta k
// + r; the estimate takes <r, s> as 0, and since the rotation makes the
// signs of an entry behave as independent coin flips, kappa <r, s> is a
// second normal error, of deviation kappa |r|, independent of the first.
// The bound is EstimateSigmas deviations of their sum,
//
//	EstimateSigmas * sqrt((kappa |r|)^2 + (|q'| eps)^2).
//
// Entries the estimate cannot rule out are refined: their exact <q', l>
// (vec.DotLevels) gives the entry code's estimate.

func (c *Rotated) chunks() int  { return (c.dim + 7) / 8 }
func (c *Rotated) lowBits() int { return c.bits - 1 }

// BlockBytes is 32 bytes of signs per 8 dimensions and 6 bytes of
// scalars per entry.
func (c *Rotated) BlockBytes() int { return BlockLen*c.chunks() + 6*BlockLen }

// LowBytes is b-1 bytes per 8 dimensions.
func (c *Rotated) LowBytes() int { return c.lowBits() * c.chunks() }

// unit is the step of the stored kappa and eps bytes: (L/2)/255.
func (c *Rotated) unit() float32 { return float32(float64(int(1)<<c.bits-1) / 2 / 255) }

func (c *Rotated) Pack(codes []byte, n int, blocks, low []byte) {
	cb, bb, lb := c.CodeBytes(), c.BlockBytes(), c.LowBytes()
	chunks, b := c.chunks(), c.bits
	L := 1<<b - 1
	half := float64(L) / 2
	unit := c.unit()
	sc := 32 * chunks // start of the scalars in a block
	t := packTables(b)
	per := 8 / b // levels a byte
	// The zero levels that pad the last byte past the dimension, which
	// the tables count as levels 0.
	pad := c.packed*per - c.dim
	nb := (n + BlockLen - 1) / BlockLen
	par.For(nb, 64, func(lo, hi int) {
		var dev []float64 // |l - L/2| - kappa, by level
		for e := lo * BlockLen; e < min(hi*BlockLen, n); e++ {
			entry := codes[e*cb : (e+1)*cb]
			blk := blocks[(e/BlockLen)*bb : (e/BlockLen+1)*bb]
			v := e % BlockLen
			packLevels(entry[:c.packed], b, chunks, blk[v:], low[e*lb:(e+1)*lb])
			// Twice |u| and its square, summed as integers: the float64
			// sums of |u| = |2l - L|/2 and u^2 are exact in any order.
			s1, s2 := t.sums(entry[:c.packed])
			s1, s2 = s1-pad*L, s2-pad*L*L
			su, su2 := float64(s1)/2, float64(s2)/4
			kb := min(max(math.Round(su2/su/half*255), 1), 255)
			kappa := float64(float32(kb) * unit) // as the scorer computes it
			eb, ok := packEps(su, su2, kappa, c.dim, unit)
			if !ok {
				if dev == nil {
					dev = make([]float64, L+1)
				}
				for l := range dev {
					dev[l] = math.Abs(float64(l)-half) - kappa
				}
				// In dimension order, as the error's definition sums it.
				var e2 float64
				for j := range c.dim {
					bit := j * b
					d := dev[int(entry[bit/8]>>(bit%8))&L]
					e2 += d * d
				}
				eb = epsByte(e2, c.dim, unit)
			}
			copy(blk[sc+2*v:], entry[c.packed:c.packed+2])
			copy(blk[sc+64+2*v:], entry[c.packed+2:c.packed+4])
			blk[sc+128+v] = byte(kb)
			blk[sc+160+v] = byte(eb)
		}
	})
}

// packLevels lays out one entry's packed b-bit levels: the sign byte of
// chunk p ORed into signs[32*p], its b-1 bytes of low bits written at
// low[(b-1)*p:]. It reads the levels a 64-bit word (8/b chunks) at a
// time, splits each word with the split function of its width and
// stores a word's low bits with one 8-byte store while one fits in low
// (the bytes past the word's are the next word's, written after); the
// rest goes through packTail.
func packLevels(levels []byte, b, chunks int, signs, low []byte) {
	if b == 1 { // the levels are the signs
		for p, x := range levels {
			signs[32*p] |= x
		}
		return
	}
	w, cw := b-1, 8/b
	p := 0
	for ; len(levels) >= 8 && w*p+8 <= len(low); p += cw {
		x := binary.LittleEndian.Uint64(levels)
		levels = levels[8:]
		var lo uint64
		switch b {
		case 2:
			var sg uint64
			sg, lo = split2(x)
			signs[32*p] |= byte(sg)
			signs[32*p+32] |= byte(sg >> 8)
			signs[32*p+64] |= byte(sg >> 16)
			signs[32*p+96] |= byte(sg >> 24)
		case 4:
			var sg uint64
			sg, lo = split4(x)
			signs[32*p] |= byte(sg)
			signs[32*p+32] |= byte(sg >> 8)
		default:
			var sg uint64
			sg, lo = split8(x)
			signs[32*p] |= byte(sg)
		}
		binary.LittleEndian.PutUint64(low[w*p:], lo)
	}
	packTail(levels, b, chunks-p, signs[32*p:], low[w*p:])
}

// packTail is packLevels for the last few words, the last one read padded
// with zeros, and the low bits stored a byte at a time.
func packTail(levels []byte, b, chunks int, signs, low []byte) {
	w, cw := b-1, 8/b
	for p := 0; p < chunks; p += cw {
		var buf [8]byte
		levels = levels[copy(buf[:], levels):]
		sg, lo := splitLevels(binary.LittleEndian.Uint64(buf[:]), b)
		k := min(cw, chunks-p) // chunks in this word
		for i := range k {
			signs[32*(p+i)] |= byte(sg >> (8 * i))
		}
		for i := range w * k {
			low[w*p+i] = byte(lo >> (8 * i))
		}
	}
}

// splitLevels splits a word of packed b-bit levels, 8/b chunks of 8,
// into their top bits (a byte a chunk, bit i level i's, in chunk order)
// and their b-1 low bits (b-1 bytes a chunk, level i's at bits
// (b-1)*i.., in chunk order).
func splitLevels(x uint64, b int) (signs, low uint64) {
	switch b {
	case 1:
		return x, 0
	case 2:
		return split2(x)
	case 4:
		return split4(x)
	}
	return split8(x)
}

// split2 is splitLevels for 2 bits: the even bits (low) go to the lower
// half, the odd ones (signs) to the upper, by delta swaps.
func split2(x uint64) (signs, low uint64) {
	t := (x ^ x>>1) & 0x2222222222222222
	x ^= t ^ t<<1
	t = (x ^ x>>2) & 0x0c0c0c0c0c0c0c0c
	x ^= t ^ t<<2
	t = (x ^ x>>4) & 0x00f000f000f000f0
	x ^= t ^ t<<4
	t = (x ^ x>>8) & 0x0000ff000000ff00
	x ^= t ^ t<<8
	t = (x ^ x>>16) & 0x00000000ffff0000
	x ^= t ^ t<<16
	return x >> 32, x & 0xffffffff
}

// split4 is splitLevels for 4 bits, a chunk a half word. The product
// moves the top bits of the four levels of each 16 bits, at 4i, to 9+i:
// its partial products 4i+3j (j < 4) meet nowhere, within 16 bits or
// across. The low bits are moved together in halving steps.
func split4(x uint64) (signs, low uint64) {
	s := (x >> 3 & 0x1111111111111111) * 0x249 >> 9 & 0x000f000f000f000f
	s = (s | s>>12) & 0x000000ff000000ff
	l := x&0x0707070707070707 | x>>1&0x3838383838383838
	l = l&0x003f003f003f003f | l>>2&0x0fc00fc00fc00fc0
	l = l&0x00000fff00000fff | l>>4&0x00fff00000fff000
	return s | s>>24, l&0xffffff | l>>8&0xffffff000000
}

// split8 is splitLevels for 8 bits, one chunk. The product moves the top
// bit of byte i, at 8i, to 56+i; no two of its partial products meet at
// or carry into the top byte.
func split8(x uint64) (signs, low uint64) {
	s := (x & 0x8080808080808080 >> 7) * 0x0102040810204080 >> 56
	l := x & 0x7f7f7f7f7f7f7f7f
	l = l&0x007f007f007f007f | l>>1&0x3f803f803f803f80
	l = l&0x00003fff00003fff | l>>2&0x0fffc0000fffc000
	l = l&0x000000000fffffff | l>>4&0x00fffffff0000000
	return s, l
}

// epsByte is the eps byte of an entry whose |u - kappa s|^2 is e2: its
// root mean square in units, rounded up (a bound).
func epsByte(e2 float64, dim int, unit float32) float64 {
	return min(math.Ceil(math.Sqrt(e2/float64(dim))/float64(unit)*(1+1e-6)), 255)
}

// packEps is epsByte from e2 = su2 - 2 kappa su + dim kappa^2, the
// expansion of the sum of (|u_j| - kappa)^2, without a pass over the
// levels; false when that could give another byte than the sum in
// dimension order. The two differ by a few float64 roundings of the
// largest term (about 1e-15 of it) and of the terms of the ordered sum,
// so the byte is the same unless e2 is under packCancel of the largest
// term (a cancellation) or the scaled root lies within packSlack of a
// whole number, where ceil could part them; then Pack sums in order.
func packEps(su, su2, kappa float64, dim int, unit float32) (float64, bool) {
	a, b := 2*kappa*su, float64(dim)*kappa*kappa
	e2 := su2 - a + b
	if e2 <= packCancel*max(su2, a, b) {
		return 0, false
	}
	x := math.Sqrt(e2/float64(dim)) / float64(unit) * (1 + 1e-6)
	if math.Abs(x-math.Round(x)) <= packSlack*x {
		return 0, false
	}
	return min(math.Ceil(x), 255), true
}

// packCancel and packSlack: past the cancellation check, the root's
// relative error is under 1e-15/packCancel (and the ordered sum's under
// 1e-11 up to 65,535 dimensions), well inside packSlack, which is far
// below the gap to a whole number that almost every entry has.
const (
	packCancel = 1e-6
	packSlack  = 1e-9
)

// packTable holds, for every byte of packed b-bit levels, the sums over
// its levels of |2l - L| (low 32 bits) and (2l - L)^2 (high 32 bits), so
// that one addition a byte sums both.
type packTable struct {
	sum [256]uint64
}

// sums returns the sums of |2l - L| and (2l - L)^2 over the levels packed
// in levels (all of each byte's), exactly.
func (t *packTable) sums(levels []byte) (s1, s2 int) {
	// A byte's levels sum to at most 255^2 in (2l - L)^2 (and less in
	// |2l - L|): 4,096 bytes' sums stay under 2^32 in each half.
	for len(levels) > 0 {
		m := min(len(levels), 4096)
		var s uint64
		for _, x := range levels[:m] {
			s += t.sum[x]
		}
		s1 += int(s & 0xffffffff)
		s2 += int(s >> 32)
		levels = levels[m:]
	}
	return s1, s2
}

var packTableOf = map[int]*packTable{}

func init() {
	for _, b := range []int{1, 2, 4, 8} {
		t := new(packTable)
		L := 1<<b - 1
		for x := range 256 {
			for i := range 8 / b {
				l := x >> (b * i) & L
				d := 2*l - L
				t.sum[x] += uint64(max(d, -d)) | uint64(d*d)<<32
			}
		}
		packTableOf[b] = t
	}
}

// packTables is packTable for b bits a level (1, 2, 4 or 8).
func packTables(b int) *packTable { return packTableOf[b] }

// Unpack reads entry e's levels back from its sign bits in the block and
// its low bits, l = msb<<w | low, and its two scalars from the block's
// arrays; the kappa and eps bytes are Pack's own and not part of the code.
// The packing's padding bits (past the last dimension) are zero, as Encode
// leaves them.
func (c *Rotated) Unpack(blocks, low []byte, e int, code []byte) {
	bb, lb := c.BlockBytes(), c.LowBytes()
	chunks, w := c.chunks(), c.lowBits()
	blk := blocks[(e/BlockLen)*bb : (e/BlockLen+1)*bb]
	v := e % BlockLen
	lowE := low[e*lb : (e+1)*lb]
	code = code[:c.CodeBytes()]
	clear(code[:c.packed])
	for p := range chunks {
		var lw uint64
		for k := range w {
			lw |= uint64(lowE[w*p+k]) << (8 * k)
		}
		signs := blk[32*p+v]
		for i := range min(8, c.dim-8*p) {
			msb := int(signs>>i) & 1
			lo := int(lw>>(w*i)) & (1<<w - 1)
			l := msb<<w | lo
			bit := (8*p + i) * c.bits
			code[bit/8] |= byte(l << (bit % 8))
		}
	}
	sc := 32 * chunks // start of the scalars in a block
	copy(code[c.packed:c.packed+2], blk[sc+2*v:])
	copy(code[c.packed+2:c.packed+4], blk[sc+64+2*v:])
}

func (c *Rotated) NewBlockScorer() BlockScorer {
	n := 8 * c.chunks()
	own := make([]float32, n)
	return &rotatedBlockScorer{c: c, own: own, pq: own, q: make([]float32, n), anchor: make([]float32, n), zero: make([]float32, n),
		k: make([]int32, n), lut: make([]byte, 4*n)}
}

// rotatedBlockScorer scores the blocked layout: q' as rotatedScorer keeps
// it, and per list its quantisation k (q' ~ delta*k), the tables of
// vec.FastScan (vec.Tables) and the constants of vec.BlockEstimate.
type rotatedBlockScorer struct {
	c            *Rotated
	pq, q        []float32 // P q, and q' for the current list; zero past dim
	own          []float32 // pq's storage, unless shared (SetQueryFrom)
	anchor, zero []float32 // the list's rotated anchor, zero past dim; zeros
	k            []int32
	lut          []byte
	qq, qsum     float32 // |q'|^2, L/2 * sum q'
	s, sqrtS     float32
	dot          bool
	consts       [8]float32 // vec.BlockEstimate's c for the current list
	sums         [BlockLen]uint32
}

func (sc *rotatedBlockScorer) SetQuery(q []float32) {
	sc.pq = sc.own
	sc.c.rotateQuery(sc.pq, q)
}

// SetQueryFrom shares other's P q, which stays unchanged while other's
// query is being searched.
func (sc *rotatedBlockScorer) SetQueryFrom(other BlockScorer) {
	sc.pq = other.(*rotatedBlockScorer).pq
}

func (sc *rotatedBlockScorer) ForL2(a int, params []byte) {
	d := sc.c.dim
	sc.prepare(sc.c.rotAnchors[a*d:(a+1)*d], params, false)
}

func (sc *rotatedBlockScorer) ForDot(a int, params []byte) {
	sc.prepare(nil, params, true)
}

// prepare sets q' = P q - anchor (P q for a nil anchor), the list's tables
// and the constants that turn a block's sums into estimates and bounds.
func (sc *rotatedBlockScorer) prepare(anchor []float32, params []byte, dot bool) {
	c := sc.c
	q := sc.q
	switch {
	case anchor == nil:
		anchor = sc.zero
	case len(anchor) < len(q):
		copy(sc.anchor, anchor) // padded with zeros to whole chunks
		anchor = sc.anchor
	}
	qq, sumQ, big := vec.DiffStats(q, sc.pq, anchor)
	sc.qq = qq
	sc.qsum = sumQ * float32(int(1)<<c.bits-1) / 2
	sc.s = getF32(params, 0)
	sc.sqrtS = float32(math.Sqrt(float64(sc.s)))
	sc.dot = dot
	// A q' too small for 63/big to be finite is quantised to zeros: the
	// rounding error, all of q', is then in the bound.
	var inv, delta float32
	if big > 1e-30 {
		inv, delta = 63/big, big/63
	}
	sumErr, sqErr := vec.Quantize(q, inv, delta, sc.k)
	off := vec.Tables(sc.k, sc.lut)
	// <q', s> = 2<q', msb> - sum q' and <q', msb> = delta (sums + off) +
	// <q' - delta k, msb>, the last taken as its mean, half the rounding
	// errors' sum: <q', s> ~ 2 delta sums + 2 delta off + sumErr - sum q'.
	unit := c.unit()
	sigma := float32(EstimateSigmas)
	sc.consts = [8]float32{
		2 * delta * unit,
		(2*delta*float32(off) + sumErr - sumQ) * unit,
		sigma * float32(math.Sqrt(float64(sqErr))) * unit,
		sigma * float32(math.Sqrt(float64(qq))) * unit,
	}
	if dot {
		sc.consts[6], sc.consts[7] = sc.sqrtS, sc.sqrtS // beta*eu
	} else {
		sc.consts[4], sc.consts[5], sc.consts[6], sc.consts[7] = qq, sc.s, -2*sc.sqrtS, 2*sc.sqrtS // |q'|^2 + norm - 2 beta eu
	}
}

// Estimate computes all 32 entries of the block; lo and hi only bound
// what the caller reads.
func (sc *rotatedBlockScorer) Estimate(block []byte, lo, hi int, est, bound *[BlockLen]float32) {
	n := 32 * sc.c.chunks()
	vec.FastScan(sc.lut, block[:n], &sc.sums)
	vec.BlockEstimate(&sc.sums, block[n:n+6*BlockLen], &sc.consts, est, bound)
}

func (sc *rotatedBlockScorer) Refine(block []byte, v int, low []byte) float32 {
	c := sc.c
	n := 32 * c.chunks()
	qu := vec.DotLevels(sc.q, block[v:n], low, c.lowBits()) - sc.qsum
	norm, beta := sc.scalars(block[n:n+6*BlockLen], v)
	if sc.dot {
		return beta * qu
	}
	return sc.qq + norm - 2*beta*qu
}

// scalars returns entry v's |r|^2 (or ip slot) and B, from a block's
// scalars scal and the list's s.
func (sc *rotatedBlockScorer) scalars(scal []byte, v int) (norm, beta float32) {
	norm = f16.ToFloat32(binary.LittleEndian.Uint16(scal[2*v:])) * sc.s
	beta = f16.ToFloat32(binary.LittleEndian.Uint16(scal[64+2*v:])) * sc.sqrtS
	return norm, beta
}
