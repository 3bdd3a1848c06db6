package graph

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/vlc-embed/vlc/internal/vec"
)

// compactRows is the rows of a block of the compact adjacency: a row is
// found by skipping at most compactRows-1 rows from its block's start.
const compactRows = 8

// riceBits is the width of the field holding a row's Rice parameter.
const riceBits = 5

// maxQuotient is the longest unary quotient a row's parameter allows,
// so that a quotient and its stop bit are read from one 64-bit word.
const maxQuotient = 32

// compactSlots is an adjacency of neighbour lists sorted by row and
// delta-coded, each row's gaps v[k]-v[k-1]-1 Rice-coded with the
// parameter that makes the row shortest: row i holds
//
//	count  c (bits.Len(r) bits)
//	if c > 0: parameter p (5 bits), first neighbour (bits.Len(n) bits)
//	if c > 1: the c-1 gaps' low p bits, p bits each, then their
//	          quotients gap >> p in unary (that many 0 bits, then a 1),
//	          each at most 32
//
// least significant bit first, rows one after another; offs[i/8] is the
// bit at which row i&^7 starts. A row is skipped without decoding it:
// its low bits have a known length, and its quotients end at its
// (c-1)-th 1 bit, counted a word at a time. data ends with 8 bytes of
// zeros so that every field is read as one 64-bit word. A row's
// neighbours come out by row number, not by distance: the walk scores
// them together, so their order only breaks ties.
type compactSlots struct {
	data []byte
	offs []uint32
	r    int
	cb   int // bits.Len(r)
	w    int // bits.Len(n)
}

// riceParam is the parameter that codes gaps in the fewest bits with
// no quotient above maxQuotient.
func riceParam(gaps []uint32) int {
	var gmax uint32
	for _, g := range gaps {
		gmax = max(gmax, g)
	}
	best, bestBits := 0, -1
	for p := 0; p <= bits.Len32(gmax); p++ {
		if gmax>>p > maxQuotient {
			continue
		}
		n := 0
		for _, g := range gaps {
			n += int(g>>p) + 1 + p
		}
		if bestBits < 0 || n < bestBits {
			best, bestBits = p, n
		}
	}
	return best
}

// compact lays s out as compactSlots for n rows; lists of 2^32 bits
// (512 MiB) or more are an error, their block offsets being uint32.
func compact(s slots, n int) (compactSlots, error) {
	c := compactSlots{r: s.r, cb: bits.Len(uint(s.r)), w: bits.Len(uint(n))}
	rows := len(s.ids) / s.r
	c.offs = make([]uint32, (rows+compactRows-1)/compactRows)
	var wr bitWriter
	var ids, gaps []uint32
	for i := range rows {
		if i%compactRows == 0 {
			c.offs[i/compactRows] = uint32(wr.bit) // checked below
		}
		ids = s.neighbours(ids[:0], uint32(i))
		slices.Sort(ids)
		wr.put(uint64(len(ids)), c.cb)
		if len(ids) == 0 {
			continue
		}
		gaps = gaps[:0]
		for k := 1; k < len(ids); k++ {
			gaps = append(gaps, ids[k]-ids[k-1]-1)
		}
		p := riceParam(gaps)
		wr.put(uint64(p), riceBits)
		wr.put(uint64(ids[0]), c.w)
		for _, g := range gaps {
			wr.put(uint64(g)&(1<<p-1), p)
		}
		for _, g := range gaps {
			wr.put(1<<(g>>p), int(g>>p)+1)
		}
	}
	if int64(wr.bit) >= 1<<32 {
		return compactSlots{}, argErr("a compact adjacency of %d bytes: at most 512 MiB", (wr.bit+7)/8)
	}
	c.data = append(wr.data[:(wr.bit+7)/8], make([]byte, 8)...)
	return c, nil
}

// bitWriter appends fields of up to 32 bits, least significant first.
type bitWriter struct {
	data []byte
	bit  int
}

func (w *bitWriter) put(v uint64, n int) {
	for len(w.data) < w.bit/8+9 {
		w.data = append(w.data, 0)
	}
	at := w.bit / 8
	word := binary.LittleEndian.Uint64(w.data[at:])
	binary.LittleEndian.PutUint64(w.data[at:], word|v<<(w.bit%8))
	w.bit += n
}

// field reads n <= 32 bits at bit.
func (c *compactSlots) field(bit, n int) uint32 {
	return uint32(binary.LittleEndian.Uint64(c.data[bit>>3:]) >> (bit & 7) & (1<<n - 1))
}

// window is the 56 bits from bit.
func (c *compactSlots) window(bit int) uint64 {
	return binary.LittleEndian.Uint64(c.data[bit>>3:]) >> (bit & 7) & (1<<56 - 1)
}

// pastOnes returns the bit after the k-th 1 bit from bit (k >= 1).
func (c *compactSlots) pastOnes(bit, k int) int {
	for {
		w := c.window(bit)
		if n := bits.OnesCount64(w); n < k {
			k -= n
			bit += 56
			continue
		}
		return bit + selectBit(w, k) + 1
	}
}

// inByte[x][k] is the position of the (k+1)-th 1 bit of byte x.
var inByte = func() (t [256][8]uint8) {
	for x := range 256 {
		k := 0
		for b := range 8 {
			if x>>b&1 != 0 {
				t[x][k] = uint8(b)
				k++
			}
		}
	}
	return t
}()

// selectBit is the position of the k-th 1 bit of w (1 <= k <= the 1
// bits of w): the bytes' counts summed by broadword steps, the byte
// where they reach k, then a table.
func selectBit(w uint64, k int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	s := w - w>>1&0x5555555555555555
	s = s&0x3333333333333333 + s>>2&0x3333333333333333
	s = (s + s>>4) & 0x0f0f0f0f0f0f0f0f
	s *= ones // byte i: the 1 bits of bytes 0..i
	at := bits.TrailingZeros64(((s|highs)-uint64(k)*ones)&highs) &^ 7
	before := int(s<<8>>at) & 0xff
	return at + int(inByte[w>>at&0xff][k-before-1])
}

// start returns the bit at which row i starts.
func (c *compactSlots) start(i uint32) int {
	bit := int(c.offs[i/compactRows])
	for range i % compactRows {
		h := c.window(bit) // count and parameter
		cnt := int(h & (1<<c.cb - 1))
		bit += c.cb
		if cnt == 0 {
			continue
		}
		p := int(h >> c.cb & (1<<riceBits - 1))
		bit += riceBits + c.w
		if cnt > 1 {
			bit = c.pastOnes(bit+(cnt-1)*p, cnt-1)
		}
	}
	return bit
}

func (c *compactSlots) neighbours(dst []uint32, i uint32) []uint32 {
	bit := c.start(i)
	h := c.window(bit) // count, parameter and first neighbour: at most 4+5+32 bits
	cnt := int(h & (1<<c.cb - 1))
	if cnt == 0 {
		return dst
	}
	p := int(h >> c.cb & (1<<riceBits - 1))
	v := uint32(h >> (c.cb + riceBits) & (1<<c.w - 1))
	bit += c.cb + riceBits + c.w
	dst = append(dst, v)
	// The quotients from q and the low bits from bit, each read 56
	// bits at a time.
	q := bit + (cnt-1)*p
	var qw, rw uint64
	qn, rn := 0, 0
	mask := uint64(1)<<p - 1
	for range cnt - 1 {
		if qn <= maxQuotient {
			qw, qn = c.window(q), 56
		}
		z := bits.TrailingZeros64(qw)
		qw >>= z + 1
		qn -= z + 1
		q += z + 1
		if rn < p {
			rw, rn = c.window(bit), 56
		}
		v += uint32(z)<<p | uint32(rw&mask) + 1
		rw >>= p
		rn -= p
		bit += p
		dst = append(dst, v)
	}
	return dst
}

func (c *compactSlots) prefetch(i uint32) {
	from := int(c.offs[i/compactRows]) / 8
	vec.Prefetch(c.data[from:min(len(c.data), from+c.r*c.w/8*2)])
}

// check reads every row of an adjacency of n rows read from a file, as
// neighbours would, and returns what is wrong ("" for nothing): each
// block offset must be where its row starts, each field within the
// lists, each quotient at most maxQuotient, each row at most r
// neighbours below n, and the bits after the last row zero up to the
// lists' length (c.data less its 8 zero bytes).
func (c *compactSlots) check(n int) string {
	limit := (len(c.data) - 8) * 8
	if len(c.offs) != (n+compactRows-1)/compactRows {
		return fmt.Sprintf("%d block offsets for %d rows", len(c.offs), n)
	}
	bit := 0
	need := func(i, bits int) string {
		if bit+bits > limit {
			return fmt.Sprintf("row %d runs past the lists' %d bytes", i, limit/8)
		}
		return ""
	}
	for i := range n {
		if i%compactRows == 0 && int(c.offs[i/compactRows]) != bit {
			return fmt.Sprintf("block %d starts at bit %d, its first row at %d", i/compactRows, c.offs[i/compactRows], bit)
		}
		if e := need(i, c.cb); e != "" {
			return e
		}
		cnt := int(c.field(bit, c.cb))
		bit += c.cb
		if cnt == 0 {
			continue
		}
		if cnt > c.r {
			return fmt.Sprintf("row %d holds %d neighbours, the degree is %d", i, cnt, c.r)
		}
		if e := need(i, riceBits+c.w); e != "" {
			return e
		}
		p := int(c.field(bit, riceBits))
		v := uint64(c.field(bit+riceBits, c.w))
		bit += riceBits + c.w
		if e := need(i, (cnt-1)*p); e != "" {
			return e
		}
		q := bit + (cnt-1)*p
		for range cnt - 1 {
			z := bits.TrailingZeros64(c.window(q))
			if z > maxQuotient {
				return fmt.Sprintf("row %d has a quotient above %d", i, maxQuotient)
			}
			if q+z+1 > limit {
				return fmt.Sprintf("row %d runs past the lists' %d bytes", i, limit/8)
			}
			q += z + 1
			v += uint64(z)<<p | uint64(c.field(bit, p)) + 1
			bit += p
		}
		bit = q
		if v >= uint64(n) {
			return fmt.Sprintf("row %d holds row %d of %d", i, v, n)
		}
	}
	if (bit+7)/8 != limit/8 {
		return fmt.Sprintf("the rows end at byte %d of the lists' %d", (bit+7)/8, limit/8)
	}
	if bit%8 != 0 && c.data[bit/8]>>(bit%8) != 0 {
		return "the bits after the last row are not zero"
	}
	return ""
}

// bytes is the adjacency's size: the rows and the block offsets.
func (c *compactSlots) bytes() int64 { return int64(len(c.data)) + 4*int64(len(c.offs)) }
