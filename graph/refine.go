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
// K4, kept in the node records as uint16 levels of their list's range
// (nodeCodes.scales: K4 = offset + step k, B4 = step b, the steps a
// list's range over 65,535), with the list as uint16: 6 bytes a row
// where the index's codes take 12. Each record here is the low levels
// as s bit planes (plane k holds bit k of every dimension's low level,
// dimension j at bit j, (D+7)/8 bytes a plane), then K - K4 and B 2^s /
// B4 - 1 as float16, of K4 and B4 as stored: both small, float16 keeps
// them to about 2^-11 of their size, so that the re-rank's K and B do
// not carry the levels' rounding. A plane is scored with nibble tables
// (quant.NibbleTables at 1 bit), built once per query.
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
func newSplitCodes(ix *index.Index, rows *buildRows, b int) (nodeCodes, *refineCodes, error) {
	nc, err := newNodeFrame(ix)
	if err != nil {
		return nodeCodes{}, nil, err
	}
	if b < 5 || b > 8 {
		return nodeCodes{}, nil, argErr("split code of %d bits, want 5 to 8", b)
	}
	d, m, n := ix.Dim(), ix.Lists(), ix.Len()
	rc := splitFrame(&nc, d, m, b)
	s := rc.s
	list := make([]int, n)
	_, err = eachCode(ix, func(row, a int, _ []byte) { list[row] = a })
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
	rc.data = make([]byte, n*rc.stride)
	halfL := float64(int(1)<<b-1) / 2
	// The b-bit code's K and B and the 4-bit code's, each row's; the
	// 4-bit ones are stored as levels of each list's range (scales).
	type consts struct{ k, beta, k4, b4 float64 }
	cs := make([]consts, n)
	par.For(n, 64, func(from, to int) {
		r := make([]float32, d)
		xbuf := make([]float32, d)
		levels := make([]uint8, d)
		for i := from; i < to; i++ {
			a := list[i]
			anchor, pa := nc.anchors[a*d:(a+1)*d], rotAnchors[a*d:(a+1)*d]
			x := rows.decode(uint32(i), xbuf)
			for j := range d {
				r[j] = x[j] - anchor[j]
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
			cs[i] = consts{k: aa + rr + 2*beta*pau, beta: beta, k4: aa + rr + 2*beta4*pau4, b4: beta4}
		}
	})
	kMin, kMax, bMax := make([]float64, m), make([]float64, m), make([]float64, m)
	for a := range m {
		kMin[a], kMax[a] = math.Inf(1), math.Inf(-1)
	}
	for i, c := range cs {
		a := list[i]
		kMin[a], kMax[a], bMax[a] = min(kMin[a], c.k4), max(kMax[a], c.k4), max(bMax[a], c.b4)
	}
	nc.scales = make([]float32, 3*m)
	for a := range m {
		if kMin[a] <= kMax[a] {
			nc.scales[3*a], nc.scales[3*a+1] = float32(kMin[a]), float32((kMax[a]-kMin[a])/65535)
		}
		nc.scales[3*a+2] = float32(bMax[a] / 65535)
	}
	le := binary.LittleEndian
	par.For(n, 256, func(from, to int) {
		for i := from; i < to; i++ {
			c, a := cs[i], list[i]
			rec := nc.data[i*nc.stride : (i+1)*nc.stride]
			lo := rc.data[i*rc.stride : (i+1)*rc.stride]
			sc := nc.scales[3*a : 3*a+3]
			le.PutUint16(rec[nc.packed:], level16(c.k4-float64(sc[0]), sc[1], false))
			le.PutUint16(rec[nc.packed+2:], level16(c.b4, sc[2], c.b4 > 0))
			if nc.listBytes == 2 {
				le.PutUint16(rec[nc.packed+4:], uint16(a))
			} else {
				le.PutUint32(rec[nc.packed+4:], uint32(a))
			}
			k4, b4, _ := nc.scalars(rec)
			var ratio float64
			if b4 != 0 {
				ratio = c.beta*float64(rc.scale)/float64(b4) - 1
			}
			le.PutUint16(lo[rc.packed:], f16.FromFloat32(float32(c.k-float64(k4))))
			le.PutUint16(lo[rc.packed+2:], f16.FromFloat32(float32(max(-65504, min(65504, ratio)))))
		}
	})
	return nc, rc, nil
}

// level16 is v in steps of step, rounded, within 0..65535; at least 1
// where positive is set.
func level16(v float64, step float32, positive bool) uint16 {
	var l float64
	if step > 0 {
		l = math.Round(v / float64(step))
	}
	if positive {
		l = max(l, 1)
	}
	return uint16(max(0, min(65535, l)))
}

// splitFrame sets nc's records to a 4-bit code's (the top 4 bits of a
// split code of b bits over d dimensions) and returns the low levels'
// layout, less their data.
func splitFrame(nc *nodeCodes, d, m, b int) *refineCodes {
	s := b - 4
	nc.listBytes = 2
	if m > 1<<16 {
		nc.listBytes = 4
	}
	nc.bits, nc.packed = 4, (d*4+7)/8
	nc.stride, nc.coords = nc.packed+4+nc.listBytes, nc.packed*2
	rc := &refineCodes{bits: b, s: s, packed: s * ((d + 7) / 8), hiPacked: nc.packed, nodeStride: nc.stride,
		halfL: float32(int(1)<<b-1) / 2, scale: float32(int(1) << s)}
	rc.stride = rc.packed + 4
	return rc
}

// check reads the low levels of n rows of d dimensions read from a file
// and returns what is wrong ("" for nothing): a scalar that is not a
// finite float16, a bit set past the last dimension of a plane.
func (rc *refineCodes) check(n, d int) string {
	plane := rc.packed / rc.s
	var pad byte
	if d%8 != 0 {
		pad = 0xff << (d % 8)
	}
	for i := range n {
		lo := rc.data[i*rc.stride : (i+1)*rc.stride]
		for k := range rc.s {
			if lo[(k+1)*plane-1]&pad != 0 {
				return fmt.Sprintf("row %d: plane %d has bits past dimension %d", i, k, d)
			}
		}
		dk, ratio := binary.LittleEndian.Uint16(lo[rc.packed:]), binary.LittleEndian.Uint16(lo[rc.packed+2:])
		if !f16.IsFinite(dk) || !f16.IsFinite(ratio) {
			return fmt.Sprintf("row %d: scalars %v and %v are not finite", i, f16.ToFloat32(dk), f16.ToFloat32(ratio))
		}
	}
	return ""
}

// query returns sc's rotated query padded with zeros to the planes' bits
// (8 a byte), in pq's room.
func (rc *refineCodes) query(sc *scorer, pq []float32) []float32 {
	plane := rc.packed / rc.s
	pq = append(pq[:0], sc.pq...)
	for len(pq) < 8*plane {
		pq = append(pq, 0)
	}
	return pq
}

// score is the b-bit estimate of |q - x|^2 for row i, sc set for the
// query (its 4-bit node records are rc's high levels) and pq its query
// padded to the planes.
func (rc *refineCodes) score(sc *scorer, pq []float32, i uint32) float32 {
	nc := sc.nc
	hi := nc.data[int(i)*nc.stride : int(i+1)*nc.stride]
	lo := rc.data[int(i)*rc.stride : int(i+1)*rc.stride]
	qh := vec.DotU4(sc.pq, hi[:nc.packed])
	plane := rc.packed / rc.s
	var ql float32
	for k := range rc.s {
		ql += float32(int(1)<<k) * vec.DotBits(pq, lo[k*plane:(k+1)*plane])
	}
	p := rc.packed
	k4, b4, a := nc.scalars(hi)
	k := k4 + f16.ToFloat32(binary.LittleEndian.Uint16(lo[p:]))
	beta := b4 / rc.scale * (1 + f16.ToFloat32(binary.LittleEndian.Uint16(lo[p+2:])))
	return sc.qq - 2*sc.dots[a] + k - 2*beta*(rc.scale*qh+ql-rc.halfL*sc.sum)
}
