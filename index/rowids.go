package index

import (
	"encoding/binary"
	"math/bits"
)

// Row ids are bit-packed at the width of n-1 (14 bits for 10,000 vectors,
// 27 for 100 million): at low bit rates the ids are a large share of an
// entry, and a fixed 32 bits would waste most of it. Entry e's id is bits
// [e*w, e*w+w) of the section, least significant bit first; the section
// ends with rowSlack zero bytes so any id is read with one 8-byte load.

const rowSlack = 8

// rowBits is the width of the ids of an index of n vectors.
func rowBits(n int) int { return max(1, bits.Len64(uint64(n-1))) }

// rowBytes is the length of the ROWS section.
func rowBytes(n, w int) int { return (n*w+7)/8 + rowSlack }

func packRows(ids []uint32, w int) []byte {
	b := make([]byte, rowBytes(len(ids), w))
	for e, id := range ids {
		at := e * w
		v := binary.LittleEndian.Uint64(b[at/8:]) | uint64(id)<<(at%8)
		binary.LittleEndian.PutUint64(b[at/8:], v)
	}
	return b
}

type rowIDs struct {
	b    []byte
	w    int
	mask uint64
}

func newRowIDs(b []byte, w int) rowIDs { return rowIDs{b, w, 1<<w - 1} }

// at returns entry e's row id; e must be below n.
func (r rowIDs) at(e int) int {
	bit := e * r.w
	return int(binary.LittleEndian.Uint64(r.b[bit/8:]) >> (bit % 8) & r.mask)
}
