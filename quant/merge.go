package quant

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/vlc-embed/vlc/internal/f16"
)

// Merger is implemented by codes whose entries, encoded under one list's
// parameters, can be re-expressed under other parameters without the
// original vectors: an index store merges segments whose lists were fitted
// separately. The entries keep their list (and so their anchor); only the
// parameters fitted to the list's residuals change.
//
// Re-expressing is exact up to the code's own rounding of what it stores
// per entry (for the rotated code, float16 scalars): the merged entries
// score as they did, to that rounding.
//
// SQ8 and PQ do not implement it: their per-list parameters are the grids
// their bytes quantise to, per dimension (SQ8's affine range of 256 steps
// for each dimension) or per correction (PQ's two one-byte corrections,
// on grids of 256 levels fitted to the list), so a value on one list's
// grid falls between the steps of another's and cannot be re-expressed
// without a second quantisation error; their segments are encoded again
// from the vectors.
type Merger interface {
	// MergeParams writes to dst (ParamBytes) parameters under which every
	// entry encoded under any of srcs can be expressed.
	MergeParams(dst []byte, srcs ...[]byte)
	// Rescale rewrites code, encoded under params from, to decode the same
	// under params to (as MergeParams gave), in place.
	Rescale(code []byte, from, to []byte)
}

var _ Merger = (*Rotated)(nil)

// MergeParams writes the largest of the srcs' s: what Fit gives for the
// union of their residuals, so that the scalars stay within float16 range
// as Encode keeps them. With no srcs it writes 1, as Fit does for an
// empty list.
func (c *Rotated) MergeParams(dst []byte, srcs ...[]byte) {
	s := float32(1)
	for i, p := range srcs {
		if v := getF32(p, 0); i == 0 || v > s {
			s = v
		}
	}
	putF32(dst, 0, s)
}

// Rescale multiplies the code's first scalar (stored divided by s) by
// s_from/s_to and its second (B, stored divided by sqrt(s)) by
// sqrt(s_from/s_to), in float64, rounding each to float16 as Encode does;
// the levels do not depend on s and stay. In the ip form the first scalar
// holds the ip slot -2<a, r> rather than |r|^2, but Encode divides it by s
// all the same and the scorers multiply it back by s (Decode reads only
// B), so the same rescale applies. Values that s_to makes smaller than
// float16's normal range lose precision as they would had Encode written
// them under s_to. When from and to are the same the code is left as it
// is, byte for byte.
func (c *Rotated) Rescale(code []byte, from, to []byte) {
	sf, st := getF32(from, 0), getF32(to, 0)
	if sf == st || bytes.Equal(from[:4], to[:4]) {
		return
	}
	ratio := float64(sf) / float64(st)
	p := c.packed
	slot := float64(f16.ToFloat32(binary.LittleEndian.Uint16(code[p:])))
	beta := float64(f16.ToFloat32(binary.LittleEndian.Uint16(code[p+2:])))
	binary.LittleEndian.PutUint16(code[p:], f16.FromFloat32(float32(slot*ratio)))
	binary.LittleEndian.PutUint16(code[p+2:], f16.FromFloat32(float32(beta*math.Sqrt(ratio))))
}
