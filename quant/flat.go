package quant

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/vlc-embed/vlc/internal/vec"
)

// Flat stores each residual as it is: Dim float32 values, little-endian,
// 32 bits a dimension and no list parameters. It is exact: Decode gives
// the residual back bit for bit, and the scorer's distances are vec.L2
// and vec.Dot of the query and the stored values, so an index of this
// code searched over all its lists returns what index.Exact does.
//
// It is the code of a store's collection that holds too few vectors to
// train anchors: one anchor at the origin, where the residual is the
// vector itself and every search reads the one list, exactly. The store
// re-encodes such files with a trained code once it has grown.
type Flat struct {
	dim     int
	ip      bool
	anchors []float32
}

// NewFlat returns the exact code for dimension dim; ip gives it the
// inner-product form of Spec.IP (its L2 estimate then holds -2<a, r> in
// place of |r|^2, exactly).
func NewFlat(dim int, ip bool) *Flat { return &Flat{dim: dim, ip: ip} }

var (
	_ Code          = (*Flat)(nil)
	_ Merger        = (*Flat)(nil)
	_ FrozenEncoder = (*Flat)(nil)
)

func (*Flat) Kind() Kind { return KindFlat }
func (c *Flat) Spec() Spec {
	return Spec{Kind: KindFlat, Dim: c.dim, Bits: flatBits, IP: c.ip}
}
func (c *Flat) Dim() int        { return c.dim }
func (c *Flat) CodeBytes() int  { return 4 * c.dim }
func (c *Flat) ParamBytes() int { return 0 }

// flatBits is the flat code's bits per dimension: a float32 each.
const flatBits = 32

func (c *Flat) SetAnchors(anchors []float32) { c.anchors = anchors }

// EncodeList writes each residual's values; there is nothing to fit.
func (c *Flat) EncodeList(codes, _ []byte, _ int, residuals []float32, count int) {
	for i, v := range residuals[:count*c.dim] {
		binary.LittleEndian.PutUint32(codes[4*i:], math.Float32bits(v))
	}
}

// EncodeFrozen is EncodeList: the code has no parameters to hold anything.
func (c *Flat) EncodeFrozen(codes, params []byte, a int, residuals []float32, count int) bool {
	c.EncodeList(codes, params, a, residuals, count)
	return true
}

func (c *Flat) Decode(dst []float32, _ []byte, code []byte) {
	for j := range dst[:c.dim] {
		dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(code[4*j:]))
	}
}

// MergeParams writes nothing: there are no parameters.
func (*Flat) MergeParams([]byte, ...[]byte) {}

// Rescale leaves the code as it is: it depends on no parameters.
func (*Flat) Rescale([]byte, []byte, []byte) {}

func (c *Flat) NewScorer() Scorer {
	return &flatScorer{c: c, q: make([]float32, c.dim), u: make([]float32, c.dim), x: make([]float32, c.dim)}
}

// Forms of the flat scorer's estimate, as the last For* set it.
const (
	flatL2   = iota // |u - r|^2, u = q - anchor
	flatDot         // <q, r>
	flatIPL2        // |q - anchor|^2 - 2<q, r>: the L2 estimate of the ip form
)

type flatScorer struct {
	c       *Flat
	q, u, x []float32 // the query; q less the list's anchor; a code copied out when it cannot be read in place
	form    int
	bias    float32 // flatIPL2: |q - anchor|^2
}

func (sc *flatScorer) SetQuery(q []float32) { copy(sc.q, q) }

// ForL2 takes u = q - anchor once per list, so that |q - x|^2 = |u - r|^2
// for each entry; with the anchor at the origin u is q, bit for bit. In
// the ip form it prepares |q - a|^2 + (-2<a, r>) - 2<q - a, r>, which is
// |q - a|^2 - 2<q, r>.
func (sc *flatScorer) ForL2(a int, _ []byte) {
	d := sc.c.dim
	anchor := sc.c.anchors[a*d : (a+1)*d]
	if sc.c.ip {
		sc.form, sc.bias = flatIPL2, vec.L2(sc.q, anchor)
		return
	}
	for j := range sc.u {
		sc.u[j] = sc.q[j] - anchor[j]
	}
	sc.form = flatL2
}

// ForDot prepares <q, r> = <q, x - anchor>.
func (sc *flatScorer) ForDot(int, []byte) { sc.form = flatDot }

func (sc *flatScorer) Score(code []byte) float32 {
	r := sc.view(code)
	switch sc.form {
	case flatL2:
		return vec.L2(sc.u, r)
	case flatDot:
		return vec.Dot(sc.q, r)
	}
	return sc.bias - 2*vec.Dot(sc.q, r)
}

// view returns code's values: the bytes themselves where they can be
// read as float32s in place (a little-endian host and a 4-byte aligned
// code, as the index's sections and arrays are), else a copy in sc.x.
func (sc *flatScorer) view(code []byte) []float32 {
	d := sc.c.dim
	code = code[:4*d]
	if hostLittleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(code)))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(code))), d)
	}
	sc.c.Decode(sc.x, nil, code)
	return sc.x
}

// hostLittleEndian reports whether float32s in memory are laid out as the
// flat code stores them.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
