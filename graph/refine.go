package graph

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
)

// refineCodes is the second half of a split code (BuildOptions.Bits from
// 5 to 8): every row is coded by the graph itself at b bits (quant.Rotated's
// levels l of the residual from the row's list anchor), the walk scores
// the top 4 bits h = l >> s (s = b-4) as a 4-bit code (nodeCodes), and the
// best candidates are scored again with the low s bits added:
//
//	|q - x|^2 ~ |q|^2 - 2<q, a> + K - 2 B (2^s <Pq, h> + <Pq, lo> - L/2 sum Pq)
//
// with L = 2^b - 1 and K, B the b-bit code's (nodeCodes' comment). The
// walk's 4-bit code is u4 = h - 15/2 with its own B4 = |r|^2/<u4, Pr> and
// K4. Each record here is the low levels, s bits each packed, then float32
// K and float32 B.
type refineCodes struct {
	bits, s      int
	packed       int // bytes of low levels
	stride       int
	data         []byte
	hiPacked     int // bytes of the 4-bit levels in the node records
	nodeStride   int
	halfL, scale float32 // L/2, 2^s
}

// newSplitCodes codes every row of rows at b bits against ix's anchors
// and rotation: the walk's 4-bit records and the re-rank's low levels.
func newSplitCodes(ix *index.Index, rows []float32, b int) (nodeCodes, *refineCodes, error) {
	nc, err := newNodeFrame(ix)
	if err != nil {
		return nodeCodes{}, nil, err
	}
	if b < 5 || b > 8 {
		return nodeCodes{}, nil, argErr("split code of %d bits, want 5 to 8", b)
	}
	d, m, n := ix.Dim(), ix.Lists(), ix.Len()
	s := b - 4
	// The node records as a 4-bit code's.
	nc.bits, nc.packed = 4, (d*4+7)/8
	nc.stride, nc.coords = nc.packed+12, nc.packed*2
	rc := &refineCodes{bits: b, s: s, packed: (d*s + 7) / 8, hiPacked: nc.packed, nodeStride: nc.stride,
		halfL: float32(int(1)<<b-1) / 2, scale: float32(int(1) << s)}
	rc.stride = rc.packed + 8
	list := make([]int, n)
	seen := make([]bool, n)
	err = ix.Codes(func(row, a int, _ []byte) error {
		if row < 0 || row >= n || seen[row] {
			return fmt.Errorf("%w: graph: the index lists row %d twice or out of range", index.ErrCorrupt, row)
		}
		seen[row], list[row] = true, a
		return nil
	})
	if err != nil {
		return nodeCodes{}, nil, err
	}
	code := quant.NewRotated(d, b, ix.Meta().CodeSpec().Seed)
	rotAnchors := make([]float32, len(nc.anchors))
	copy(rotAnchors, nc.anchors)
	for a := range m {
		nc.rot.Apply(rotAnchors[a*d : (a+1)*d])
	}
	nc.data = make([]byte, n*nc.stride)
	rc.data = make([]byte, n*rc.stride+8)
	r := make([]float32, d)
	levels := make([]uint8, d)
	halfL := float64(int(1)<<b-1) / 2
	for i := range n {
		a := list[i]
		anchor, pa := nc.anchors[a*d:(a+1)*d], rotAnchors[a*d:(a+1)*d]
		for j := range d {
			r[j] = rows[i*d+j] - anchor[j]
		}
		nc.rot.Apply(r)
		ur := code.Levels(levels, r)
		var rr, aa, pau, u4r, pau4 float64
		rec := nc.data[i*nc.stride : (i+1)*nc.stride]
		lo := rc.data[i*rc.stride : (i+1)*rc.stride]
		for j, l := range levels {
			v, pj := float64(r[j]), float64(pa[j])
			rr += v * v
			aa += float64(anchor[j]) * float64(anchor[j])
			u := float64(l) - halfL
			pau += pj * u
			h := l >> s
			u4 := float64(h) - 7.5
			u4r += u4 * v
			pau4 += pj * u4
			rec[j/2] |= h << (4 * (j % 2))
			bit := j * s
			w := binary.LittleEndian.Uint16(lo[bit/8:])
			binary.LittleEndian.PutUint16(lo[bit/8:], w|uint16(l&(1<<s-1))<<(bit%8))
		}
		var beta, beta4 float64
		if ur > 0 {
			beta = rr / ur
		}
		if u4r > 0 {
			beta4 = rr / u4r
		}
		binary.LittleEndian.PutUint32(rec[nc.packed:], math.Float32bits(float32(aa+rr+2*beta4*pau4)))
		binary.LittleEndian.PutUint32(rec[nc.packed+4:], math.Float32bits(float32(beta4)))
		binary.LittleEndian.PutUint32(rec[nc.packed+8:], uint32(a))
		binary.LittleEndian.PutUint32(lo[rc.packed:], math.Float32bits(float32(aa+rr+2*beta*pau)))
		binary.LittleEndian.PutUint32(lo[rc.packed+4:], math.Float32bits(float32(beta)))
	}
	return nc, rc, nil
}

// score is the b-bit estimate of |q - x|^2 for row i, sc set for the
// query (its 4-bit node records are rc's high levels).
func (rc *refineCodes) score(sc *scorer, i uint32) float32 {
	nc := sc.nc
	hi := nc.data[int(i)*nc.stride : int(i+1)*nc.stride]
	lo := rc.data[int(i)*rc.stride : int(i+1)*rc.stride+8]
	qh := vec.DotU4(sc.pq, hi[:nc.packed])
	var ql float32
	if rc.s == 4 {
		ql = vec.DotU4(sc.pq, lo[:rc.packed])
	} else {
		mask := uint64(1)<<rc.s - 1
		pq := sc.pq
		bit := 0
		for j := range pq {
			v := binary.LittleEndian.Uint64(lo[bit>>3:]) >> (bit & 7) & mask
			ql += pq[j] * float32(v)
			bit += rc.s
		}
	}
	p := rc.packed
	k := math.Float32frombits(binary.LittleEndian.Uint32(lo[p:]))
	beta := math.Float32frombits(binary.LittleEndian.Uint32(lo[p+4:]))
	a := binary.LittleEndian.Uint32(hi[nc.packed+8:])
	return sc.qq - 2*sc.dots[a] + k - 2*beta*(rc.scale*qh+ql-rc.halfL*sc.sum)
}
