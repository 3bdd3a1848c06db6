package graph

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
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
// K4. Each record here is the low levels as s bit planes (plane k holds
// bit k of every dimension's low level, dimension j at bit j, (D+7)/8
// bytes a plane), then K - K4 and B 2^s / B4 - 1 as float16: both small,
// float16 keeps them to about 2^-11 of their size. A plane is scored with
// nibble tables (quant.NibbleTables at 1 bit), built once per query.
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
	rc := &refineCodes{bits: b, s: s, packed: s * ((d + 7) / 8), hiPacked: nc.packed, nodeStride: nc.stride,
		halfL: float32(int(1)<<b-1) / 2, scale: float32(int(1) << s)}
	rc.stride = rc.packed + 4
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
	halfL := float64(int(1)<<b-1) / 2
	par.For(n, 64, func(from, to int) {
		r := make([]float32, d)
		levels := make([]uint8, d)
		for i := from; i < to; i++ {
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
				for k := range s {
					lo[k*rc.packed/s+j/8] |= (l >> k & 1) << (j % 8)
				}
			}
			var beta, beta4 float64
			if ur > 0 {
				beta = rr / ur
			}
			if u4r > 0 {
				beta4 = rr / u4r
			}
			k4, b4 := float32(aa+rr+2*beta4*pau4), float32(beta4)
			binary.LittleEndian.PutUint32(rec[nc.packed:], math.Float32bits(k4))
			binary.LittleEndian.PutUint32(rec[nc.packed+4:], math.Float32bits(b4))
			binary.LittleEndian.PutUint32(rec[nc.packed+8:], uint32(a))
			var ratio float64
			if b4 != 0 {
				ratio = beta*float64(rc.scale)/float64(b4) - 1
			}
			binary.LittleEndian.PutUint16(lo[rc.packed:], f16.FromFloat32(float32(aa+rr+2*beta*pau-float64(k4))))
			binary.LittleEndian.PutUint16(lo[rc.packed+2:], f16.FromFloat32(float32(ratio)))
		}
	})
	return nc, rc, nil
}

// tables sets lut to the nibble tables of the query (sc set), for the
// planes, and returns it.
func (rc *refineCodes) tables(sc *scorer, lut, pq []float32) ([]float32, []float32) {
	plane := rc.packed / rc.s
	pq = append(pq[:0], sc.pq...)
	for len(pq) < 8*plane {
		pq = append(pq, 0)
	}
	if cap(lut) < 32*plane {
		lut = make([]float32, 32*plane)
	}
	lut = lut[:32*plane]
	quant.NibbleTables(lut, pq, 1, plane)
	return lut, pq
}

// score is the b-bit estimate of |q - x|^2 for row i, sc set for the
// query (its 4-bit node records are rc's high levels) and lut its
// tables.
func (rc *refineCodes) score(sc *scorer, lut []float32, i uint32) float32 {
	nc := sc.nc
	hi := nc.data[int(i)*nc.stride : int(i+1)*nc.stride]
	lo := rc.data[int(i)*rc.stride : int(i+1)*rc.stride]
	qh := vec.DotU4(sc.pq, hi[:nc.packed])
	plane := rc.packed / rc.s
	var ql float32
	for k := range rc.s {
		var t0, t1 float32
		for x, v := range lo[k*plane : (k+1)*plane] {
			t0 += lut[32*x+int(v&15)]
			t1 += lut[32*x+16+int(v>>4)]
		}
		ql += float32(int(1)<<k) * (t0 + t1)
	}
	p := rc.packed
	k4 := math.Float32frombits(binary.LittleEndian.Uint32(hi[nc.packed:]))
	b4 := math.Float32frombits(binary.LittleEndian.Uint32(hi[nc.packed+4:]))
	a := binary.LittleEndian.Uint32(hi[nc.packed+8:])
	k := k4 + f16.ToFloat32(binary.LittleEndian.Uint16(lo[p:]))
	beta := b4 / rc.scale * (1 + f16.ToFloat32(binary.LittleEndian.Uint16(lo[p+2:])))
	return sc.qq - 2*sc.dots[a] + k - 2*beta*(rc.scale*qh+ql-rc.halfL*sc.sum)
}
