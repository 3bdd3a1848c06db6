package graph

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
)

// adjacency lists each row's neighbours for a walk.
type adjacency interface {
	// neighbours appends row i's neighbours to dst, nearest first.
	neighbours(dst []uint32, i uint32) []uint32
	// prefetch asks for row i's list, about to be read.
	prefetch(i uint32)
}

// slots is the adjacency being built: r uint32 slots a row, noEdge past
// the last neighbour.
type slots struct {
	ids []uint32
	r   int
}

func (s slots) neighbours(dst []uint32, i uint32) []uint32 {
	for _, v := range s.ids[int(i)*s.r : int(i+1)*s.r] {
		if v == noEdge {
			break
		}
		dst = append(dst, v)
	}
	return dst
}

func (s slots) prefetch(i uint32) {
	vec.Prefetch(unsafe.Slice((*byte)(unsafe.Pointer(&s.ids[int(i)*s.r])), 4*s.r))
}

// packedSlots is the adjacency a search reads: r slots a row of w =
// bits.Len(n) bits each (row numbers, n past the last neighbour), slot k
// of row i at bits (i*r + k)*w.., least significant first, then 8 bytes
// of zeros so that a slot is read as one 64-bit word.
type packedSlots struct {
	data []byte
	r, w int
	none uint32 // n
}

// pack lays s out as packedSlots for n rows, on all cores: blocks of
// packBlock rows, each written in a buffer of its own (a slot is written
// as a 64-bit word, which may reach past the block's last byte) and
// copied in place, every block starting and ending on a byte.
func pack(s slots, n int) packedSlots {
	w := bits.Len(uint(n))
	p := packedSlots{r: s.r, w: w, none: uint32(n), data: make([]byte, (len(s.ids)*w+7)/8+8)}
	const packBlock = 512 // a multiple of 8 rows: r*w*8 bits are whole bytes
	par.For(len(s.ids)/s.r, packBlock, func(lo, hi int) {
		ids := s.ids[lo*s.r : hi*s.r]
		size := (len(ids)*w + 7) / 8
		buf := make([]byte, size+8)
		for k, v := range ids {
			if v == noEdge {
				v = p.none
			}
			bit := k * w
			word := binary.LittleEndian.Uint64(buf[bit/8:])
			binary.LittleEndian.PutUint64(buf[bit/8:], word|uint64(v)<<(bit%8))
		}
		copy(p.data[lo*s.r*w/8:], buf[:size])
	})
	return p
}

func (p packedSlots) neighbours(dst []uint32, i uint32) []uint32 {
	mask := uint64(1)<<p.w - 1
	bit := int(i) * p.r * p.w
	for range p.r {
		v := uint32(binary.LittleEndian.Uint64(p.data[bit/8:]) >> (bit % 8) & mask)
		if v == p.none {
			break
		}
		dst = append(dst, v)
		bit += p.w
	}
	return dst
}

func (p packedSlots) prefetch(i uint32) {
	from := int(i) * p.r * p.w / 8
	vec.Prefetch(p.data[from : from+(p.r*p.w+7)/8+1])
}
