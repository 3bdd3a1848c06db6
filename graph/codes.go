package graph

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/internal/vec"
	"github.com/vlc-embed/vlc/quant"
)

// nodeCodes are the rows' rotated codes rearranged for scoring one row at
// a time, in row order. The index scores an entry of list a through the
// query's residual q' = P(q - a) (quant.Rotated):
//
//	|q - x|^2 ~ |q'|^2 + |r|^2 - 2 B <q', u>,  u = l - L/2.
//
// Split by what depends on the row, <q', u> = <Pq, u> - <Pa, u>, so
//
//	|q - x|^2 ~ |q|^2 - 2<q, a> + K - 2 B (<Pq, l> - L/2 sum Pq),
//	K = |a|^2 + |r|^2 + 2 B <Pa, u>,
//
// the same estimate with one constant per row and the query's dot
// products with the anchors, taken once per query. Each row's record is
// its packed levels as the index holds them, then float32 K, float32 B
// and uint32 a. With decoded set, K is |a + P^T B u|^2 instead, which
// makes the score the exact squared distance to the decoded vector.
type nodeCodes struct {
	bits, packed, stride int
	coords               int // levels per record, padded to whole bytes
	rot                  *quant.Rotation
	anchors              []float32
	panels               *vec.Panels
	norms                []float32 // |anchor|^2
	data                 []byte
	// scales, when set (a split code's records, refine.go), holds each
	// anchor's K offset, K step and B step, three float32 an anchor: a
	// record's scalars are then uint16 levels k and b of K = offset +
	// step k and B = step b, then the row's list as uint16 (uint32 where
	// there are more than 65,536 lists: listBytes), 6 bytes in place of
	// 12.
	scales    []float32
	listBytes int
}

// scalars returns the K, B and list of record rec.
func (nc *nodeCodes) scalars(rec []byte) (k, beta float32, a uint32) {
	p := nc.packed
	le := binary.LittleEndian
	if nc.scales == nil {
		return math.Float32frombits(le.Uint32(rec[p:])), math.Float32frombits(le.Uint32(rec[p+4:])), le.Uint32(rec[p+8:])
	}
	if nc.listBytes == 2 {
		a = uint32(le.Uint16(rec[p+4:]))
	} else {
		a = le.Uint32(rec[p+4:])
	}
	s := nc.scales[3*a : 3*a+3 : 3*a+3]
	return s[0] + s[1]*float32(le.Uint16(rec[p:])), s[2] * float32(le.Uint16(rec[p+2:])), a
}

// newNodeCodes reads every row's code from ix.
func newNodeCodes(ix *index.Index, decoded bool) (nodeCodes, error) {
	nc, err := newNodeFrame(ix)
	if err != nil {
		return nodeCodes{}, err
	}
	d, b, m := ix.Dim(), nc.bits, ix.Lists()
	packed := nc.packed
	rotAnchors := make([]float32, len(nc.anchors))
	copy(rotAnchors, nc.anchors)
	for a := range m {
		nc.rot.Apply(rotAnchors[a*d : (a+1)*d])
	}
	params := ix.Params()
	n := ix.Len()
	nc.data = make([]byte, n*nc.stride)
	half := float64(int(1)<<b-1) / 2
	// The codes come list by list, lists on all cores: each record takes
	// its row's levels, its code's two float16 scalars where K goes and its
	// list; K and B are worked out from those on all cores after.
	seen, err := eachCode(ix, func(row, a int, code []byte) {
		rec := nc.data[row*nc.stride : (row+1)*nc.stride]
		copy(rec, code[:packed+4])
		binary.LittleEndian.PutUint32(rec[packed+8:], uint32(a))
	})
	if err != nil {
		return nodeCodes{}, err
	}
	par.For(n, 256, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			if seen[row] == 0 {
				continue
			}
			rec := nc.data[row*nc.stride : (row+1)*nc.stride]
			a := int(binary.LittleEndian.Uint32(rec[packed+8:]))
			s := float64(math.Float32frombits(binary.LittleEndian.Uint32(params[a*4:])))
			sqrtS := float32(math.Sqrt(s))
			norm := float64(f16.ToFloat32(binary.LittleEndian.Uint16(rec[packed:])) * float32(s))
			beta := float64(f16.ToFloat32(binary.LittleEndian.Uint16(rec[packed+2:])) * sqrtS)
			anchor, pa := nc.anchors[a*d:(a+1)*d], rotAnchors[a*d:(a+1)*d]
			var aa, pau, uu float64
			for j := range d {
				aa += float64(anchor[j]) * float64(anchor[j])
				u := float64(level(rec, j, b)) - half
				pau += float64(pa[j]) * u
				uu += u * u
			}
			k := aa + norm + 2*beta*pau
			if decoded {
				k = aa + 2*beta*pau + beta*beta*uu
			}
			binary.LittleEndian.PutUint32(rec[packed:], math.Float32bits(float32(k)))
			binary.LittleEndian.PutUint32(rec[packed+4:], math.Float32bits(float32(beta)))
		}
	})
	return nc, nil
}

// Supported reports whether Build takes ix: nil where it does, else
// ErrUnsupported (a code other than the rotated one, a metric other than
// l2) or ErrEmpty (no rows), saying why. It reads the index's header
// alone.
func Supported(ix *index.Index) error {
	meta := ix.Meta()
	spec := meta.CodeSpec()
	switch {
	case spec.Kind != quant.KindRotated:
		return fmt.Errorf("%w: code %v (only the rotated code)", ErrUnsupported, spec.Kind)
	case meta.Metric != index.L2 || spec.IP:
		return fmt.Errorf("%w: metric %v (only l2)", ErrUnsupported, meta.Metric)
	case ix.Len() == 0:
		return ErrEmpty
	}
	return nil
}

// newNodeFrame checks that ix is one the graph can score and returns its
// node codes less the records: the rotation, the anchors and their
// norms, what a query's scorer needs beside the records.
func newNodeFrame(ix *index.Index) (nodeCodes, error) {
	if err := Supported(ix); err != nil {
		return nodeCodes{}, err
	}
	spec := ix.Meta().CodeSpec()
	d, b := ix.Dim(), spec.Bits
	packed := (d*b + 7) / 8
	nc := nodeCodes{bits: b, packed: packed, stride: packed + 12, coords: packed * 8 / b,
		rot: quant.NewRotation(d, spec.Seed), anchors: ix.Anchors()}
	m := ix.Lists()
	nc.panels = vec.NewPanels(nc.anchors, m, d)
	nc.norms = make([]float32, m)
	vec.Norms(nc.norms, nc.anchors, d)
	return nc, nil
}

// level is dimension j's level in a packed code of b bits.
func level(code []byte, j, b int) int {
	bit := j * b
	return int(code[bit/8]>>(bit%8)) & (1<<b - 1)
}

// scorer is one query's view of the codes.
type scorer struct {
	nc     *nodeCodes
	pq     []float32 // P q, zero past the dimension
	lut    []float32 // for 1- and 2-bit levels: nibble tables (quant.Rotated's)
	dots   []float32 // <q, anchor>
	qq, qs float32   // |q|^2 and L/2 sum Pq
	sum    float32   // sum Pq
	// For 4-bit levels in whole 16-byte steps, scores takes <Pq, l> from
	// integers (vec.DotsU4I8): Pq rounded to int8 steps of delta (the
	// largest |Pq_j| is 127 steps), laid out by vec.U4Weights, and
	// <Pq, l> - qs ~ delta (<w, l> - wqs), wqs = L/2 sum w. The rounding
	// moves an estimate by at most 2B delta/2 sum |l_j - L/2|.
	w, wRaw []int8
	delta   float32
	wqs     float32
	rounded []int32 // Pq / delta, rounded
	ints    []int32 // a batch's integer dot products
}

func (nc *nodeCodes) newScorer() *scorer {
	sc := &scorer{nc: nc, pq: make([]float32, nc.coords), dots: make([]float32, nc.panels.Stride())}
	if nc.bits < 4 {
		sc.lut = make([]float32, 2*nc.packed*16)
	}
	if nc.bits == 4 && nc.packed%16 == 0 {
		sc.w, sc.wRaw = make([]int8, 2*nc.packed), make([]int8, 2*nc.packed)
	}
	return sc
}

// setQuery readies sc for q (dimension checked).
func (sc *scorer) setQuery(q []float32) {
	nc := sc.nc
	d := len(q)
	copy(sc.pq, q)
	clear(sc.pq[d:])
	nc.rot.Apply(sc.pq[:d])
	nc.panels.Dots1(q, sc.dots)
	sc.qq = vec.Dot(q, q)
	var s float32
	for _, v := range sc.pq {
		s += v
	}
	sc.sum = s
	sc.qs = s * float32(int(1)<<nc.bits-1) / 2
	if sc.w != nil {
		sc.roundQuery()
	}
	if sc.lut == nil {
		return
	}
	quant.NibbleTables(sc.lut, sc.pq, nc.bits, nc.packed)
}

// roundQuery sets the int8 weights that scores multiplies 4-bit levels by.
func (sc *scorer) roundQuery() {
	var top float32
	for _, v := range sc.pq {
		top = max(top, abs32(v))
	}
	var inv float32
	if top > 0 {
		inv = min(127/top, math.MaxFloat32) // a query within 1e-37 of 0 rounds to 0s, not NaN
	}
	sc.delta = top / 127
	if cap(sc.rounded) < len(sc.pq) {
		sc.rounded = make([]int32, len(sc.pq))
	}
	k := sc.rounded[:len(sc.pq)]
	vec.Quantize(sc.pq, inv, sc.delta, k) // len(pq) = 2 packed, a multiple of 32
	var sum int32
	for j, v := range k {
		v = max(-127, min(127, v)) // 127/top rounds up at most
		sc.wRaw[j] = int8(v)
		sum += v
	}
	vec.U4Weights(sc.w, sc.wRaw)
	sc.wqs = float32(sum) * 7.5
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// nearestAnchors sets dst to the k anchors nearest the query, nearest
// first (the lower anchor on ties), and returns it.
func (sc *scorer) nearestAnchors(dst []int, k int) []int {
	dst = dst[:0]
	var ds []float32
	for a, n := range sc.nc.norms {
		d := n - 2*sc.dots[a]
		if len(dst) == k && !(d < ds[k-1]) {
			continue
		}
		i := len(dst)
		for i > 0 && d < ds[i-1] {
			i--
		}
		if len(dst) < k {
			dst, ds = append(dst, 0), append(ds, 0)
		}
		copy(dst[i+1:], dst[i:])
		copy(ds[i+1:], ds[i:])
		dst[i], ds[i] = a, d
	}
	return dst
}

// scoreStep is the most rows scores hands vec.DotsU4I8 at once.
const scoreStep = 64

// scores sets out[k] to the estimate for row ids[k], the rows' records
// prefetched first.
func (sc *scorer) scores(ids []uint32, out []float32) {
	nc := sc.nc
	if sc.w == nil {
		for _, i := range ids {
			vec.Prefetch(nc.data[int(i)*nc.stride : int(i+1)*nc.stride])
		}
		for k, i := range ids {
			out[k] = sc.score(i)
		}
		return
	}
	if cap(sc.ints) < len(ids) {
		sc.ints = make([]int32, len(ids), 2*len(ids))
	}
	ints := sc.ints[:len(ids)]
	// A call's records are prefetched before the first is read: a walk's
	// step is a few dozen, a list scan thousands, taken in steps.
	for lo := 0; lo < len(ids); lo += scoreStep {
		hi := min(lo+scoreStep, len(ids))
		vec.DotsU4I8(sc.w, nc.data, nc.stride, ids[lo:hi], ints[lo:hi])
	}
	out = out[:len(ids)]
	if nc.scales == nil || nc.listBytes != 2 {
		for k, i := range ids {
			k4, beta, a := nc.scalars(nc.data[int(i)*nc.stride : int(i+1)*nc.stride])
			out[k] = sc.qq - 2*sc.dots[a] + k4 - 2*beta*sc.delta*(float32(ints[k])-sc.wqs)
		}
		return
	}
	// A split code's records, scalars as nc.scalars reads them, in one
	// loop without calls: the walk's most frequent work after the dots.
	data, stride, scales, dots := nc.data, nc.stride, nc.scales, sc.dots
	qq, delta2, wqs := sc.qq, 2*sc.delta, sc.wqs
	for k, i := range ids {
		o := int(i)*stride + nc.packed
		r := data[o : o+6 : o+6]
		kl := uint16(r[0]) | uint16(r[1])<<8
		bl := uint16(r[2]) | uint16(r[3])<<8
		a := int(uint16(r[4]) | uint16(r[5])<<8)
		sa := scales[3*a : 3*a+3 : 3*a+3]
		out[k] = qq - 2*dots[a] + (sa[0] + sa[1]*float32(kl)) - sa[2]*float32(bl)*delta2*(float32(ints[k])-wqs)
	}
}

// score is the estimate of |q - x|^2 for row i.
func (sc *scorer) score(i uint32) float32 {
	nc := sc.nc
	rec := nc.data[int(i)*nc.stride : int(i+1)*nc.stride]
	p := nc.packed
	var ql float32
	switch nc.bits {
	case 8:
		ql = vec.DotU8(sc.pq, rec[:p])
	case 4:
		ql = vec.DotU4(sc.pq, rec[:p])
	default:
		lut := sc.lut[:32*p]
		var t0, t1 float32
		for k, v := range rec[:p] {
			t0 += lut[32*k+int(v&15)]
			t1 += lut[32*k+16+int(v>>4)]
		}
		ql = t0 + t1
	}
	k, beta, a := nc.scalars(rec)
	return sc.qq - 2*sc.dots[a] + k - 2*beta*(ql-sc.qs)
}

// eachCode calls fn with every row of ix, its list and its entry code
// (reused between calls), the lists on all cores: fn runs for different
// rows at once. It returns which rows were seen (1, else 0); a row listed
// twice or beyond the index is index.ErrCorrupt (which of several such
// rows it names depends on the order the cores met them in).
func eachCode(ix *index.Index, fn func(row, list int, code []byte)) ([]uint32, error) {
	n := ix.Len()
	seen := make([]uint32, n)
	var mu sync.Mutex
	var failed error
	var stop atomic.Bool // a list failed: the others are not read
	par.For(ix.Lists(), 1, func(lo, hi int) {
		for a := lo; a < hi && !stop.Load(); a++ {
			err := ix.ListCodes(a, func(row int, code []byte) error {
				if row < 0 || row >= n || !atomic.CompareAndSwapUint32(&seen[row], 0, 1) {
					return fmt.Errorf("%w: graph: the index lists row %d twice or out of range", index.ErrCorrupt, row)
				}
				fn(row, a, code)
				return nil
			})
			if err != nil {
				stop.Store(true)
				mu.Lock()
				if failed == nil {
					failed = err
				}
				mu.Unlock()
				return
			}
		}
	})
	return seen, failed
}
