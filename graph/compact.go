package graph

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// compactRows is the rows of a block of the compact adjacency: a row is
// found by skipping at most compactRows-1 rows' headers from its block's
// start.
const compactRows = 8

// gapBits is the width of the field holding a row's gap width.
const gapBits = 5

// compactSlots is an adjacency of neighbour lists sorted by row and
// delta-coded, each row in the fewest bits its gaps allow: row i holds
//
//	count  c (bits.Len(r) bits)
//	if c > 0: width g (5 bits), first neighbour (bits.Len(n) bits),
//	          c-1 gaps v[k]-v[k-1]-1 of g bits each
//
// least significant bit first, rows one after another; offs[i/8] is the
// bit at which row i&^7 starts, so that a row costs at most 7 headers
// skipped. data ends with 8 bytes of zeros so that every field is read
// as one 64-bit word. A row's neighbours come out by row number, not by
// distance: the walk scores them together, so their order only breaks
// ties.
type compactSlots struct {
	data []byte
	offs []uint32
	r    int
	cb   int // bits.Len(r)
	w    int // bits.Len(n)
}

// compact lays s out as compactSlots for n rows, on all cores: blocks of
// compactBlock rows, each coded on its own from bit 0, then put one
// after another. Lists of 2^32 bits (512 MiB) or more are an error,
// their block offsets being uint32.
func compact(s slots, n int) (compactSlots, error) {
	c := compactSlots{r: s.r, cb: bits.Len(uint(s.r)), w: bits.Len(uint(n))}
	rows := len(s.ids) / s.r
	c.offs = make([]uint32, (rows+compactRows-1)/compactRows)
	const compactBlock = 64 * compactRows
	blocks := make([]bitWriter, (rows+compactBlock-1)/compactBlock)
	par.For(rows, compactBlock, func(lo, hi int) {
		var wr bitWriter
		var ids []uint32
		for i := lo; i < hi; i++ {
			if i%compactRows == 0 {
				c.offs[i/compactRows] = uint32(wr.bit) // from the block's start, for now
			}
			ids = s.neighbours(ids[:0], uint32(i))
			slices.Sort(ids)
			wr.put(uint64(len(ids)), c.cb)
			if len(ids) == 0 {
				continue
			}
			var gmax uint32
			for k := 1; k < len(ids); k++ {
				gmax = max(gmax, ids[k]-ids[k-1]-1)
			}
			g := bits.Len32(gmax)
			wr.put(uint64(g), gapBits)
			wr.put(uint64(ids[0]), c.w)
			for k := 1; k < len(ids); k++ {
				wr.put(uint64(ids[k]-ids[k-1]-1), g)
			}
		}
		blocks[lo/compactBlock] = wr
	})
	total := 0
	for _, blk := range blocks {
		total += blk.bit
	}
	if int64(total) >= 1<<32 {
		return compactSlots{}, argErr("a compact adjacency of %d bytes: at most 512 MiB", (total+7)/8)
	}
	wr := bitWriter{data: make([]byte, 0, total/8+16)}
	for k, blk := range blocks {
		start := wr.bit
		for i := k * compactBlock / compactRows; i < min((k+1)*compactBlock/compactRows, len(c.offs)); i++ {
			c.offs[i] += uint32(start)
		}
		wr.appendBits(blk.data, blk.bit)
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

// appendBits appends the first n bits of src (least significant first).
func (w *bitWriter) appendBits(src []byte, n int) {
	for at := 0; at < n; at += 32 {
		k := min(32, n-at)
		var b [4]byte
		copy(b[:], src[at/8:])
		w.put(uint64(binary.LittleEndian.Uint32(b[:]))&(1<<k-1), k)
	}
}

// field reads n <= 32 bits at bit.
func (c *compactSlots) field(bit, n int) uint32 {
	return uint32(binary.LittleEndian.Uint64(c.data[bit>>3:]) >> (bit & 7) & (1<<n - 1))
}

// start returns the bit at which row i starts.
func (c *compactSlots) start(i uint32) int {
	bit := int(c.offs[i/compactRows])
	for range i % compactRows {
		cnt := int(c.field(bit, c.cb))
		bit += c.cb
		if cnt > 0 {
			bit += gapBits + c.w + (cnt-1)*int(c.field(bit, gapBits))
		}
	}
	return bit
}

func (c *compactSlots) neighbours(dst []uint32, i uint32) []uint32 {
	bit := c.start(i)
	cnt := int(c.field(bit, c.cb))
	bit += c.cb
	if cnt == 0 {
		return dst
	}
	g := int(c.field(bit, gapBits))
	bit += gapBits
	v := c.field(bit, c.w)
	bit += c.w
	dst = append(dst, v)
	for range cnt - 1 {
		v += c.field(bit, g) + 1
		bit += g
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
// lists, each row at most r neighbours below n, and the bits after the
// last row zero up to the lists' length (c.data less its 8 zero bytes).
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
		if e := need(i, gapBits+c.w); e != "" {
			return e
		}
		g := int(c.field(bit, gapBits))
		v := uint64(c.field(bit+gapBits, c.w))
		bit += gapBits + c.w
		if e := need(i, (cnt-1)*g); e != "" {
			return e
		}
		for range cnt - 1 {
			v += uint64(c.field(bit, g)) + 1
			bit += g
		}
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
