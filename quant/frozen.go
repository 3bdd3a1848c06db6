package quant

import "math"

// FrozenEncoder is implemented by codes that can encode a list under
// parameters fitted elsewhere: a frozen model's (vlc compress
// -anchors-from). Rows encoded apart under one model then carry exactly
// the codes they would have had encoded together, so their indexes merge
// by concatenation, without re-expressing anything.
type FrozenEncoder interface {
	// EncodeFrozen writes the codes of list a's count residuals under
	// params, unchanged. It reports false, with codes undefined, when
	// params cannot hold some residual at all (the caller then fits the
	// list with EncodeList). Codes with grids (sq8, pq) put a value
	// beyond a grid at its end.
	EncodeFrozen(codes, params []byte, a int, residuals []float32, count int) bool
}

var (
	_ FrozenEncoder = (*Rotated)(nil)
	_ FrozenEncoder = (*SQ8)(nil)
	_ FrozenEncoder = (*PQ)(nil)
)

// EncodeFrozen encodes under the given s. The levels do not depend on s;
// the two scalars are stored divided by s (or its root) in float16, which
// keeps its relative precision for any s until a scalar overflows: then,
// and for a zero or non-finite s, it reports false.
func (c *Rotated) EncodeFrozen(codes, params []byte, a int, residuals []float32, count int) bool {
	if s := getF32(params, 0); !(s > 0) || math.IsInf(float64(s), 0) {
		return false
	}
	encodeEach(c, codes, params, a, residuals, count)
	cb := c.CodeBytes()
	for i := range count {
		if c.NonFinite(codes[i*cb : (i+1)*cb]) {
			return false
		}
	}
	return true
}

// EncodeFrozen encodes on the given per-dimension grids, a value beyond a
// grid taking its end (the model's rows set the grids).
func (c *SQ8) EncodeFrozen(codes, params []byte, a int, residuals []float32, count int) bool {
	encodeEach(c, codes, params, a, residuals, count)
	return true
}

// EncodeFrozen codes every residual and puts its two corrections on the
// given grids, a correction beyond a grid taking its end (the model's
// rows set the grids).
func (c *PQ) EncodeFrozen(codes, params []byte, a int, residuals []float32, count int) bool {
	cb, d := c.CodeBytes(), c.dim
	b0, bStep, c0, cStep := getF32(params, 0), getF32(params, 1), getF32(params, 2), getF32(params, 3)
	for i := range count {
		r := c.encode(codes[i*cb:i*cb+c.nsub], a, residuals[i*d:(i+1)*d])
		k := onGrid(r.beta, b0, bStep)
		codes[i*cb+c.nsub+1] = k
		cc := r.rr + 2*(float64(b0)+float64(k)*float64(bStep))*r.ax
		codes[i*cb+c.nsub] = onGrid(cc, c0, cStep)
	}
	return true
}
