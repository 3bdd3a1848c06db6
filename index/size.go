package index

import (
	"fmt"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/quant"
)

// SizeRatio is size bytes over n vectors of dimension d stored as float16
// (n*d*2 bytes): the measure of compression every figure of vlc uses.
func SizeRatio(size int64, n, d int) float64 { return float64(size) / float64(float16Bytes(n, d)) }

func float16Bytes(n, d int) int64 { return 2 * int64(n) * int64(d) }

// BytesPerVector is the index file's size over its vectors, everything
// (anchors, lists, ids, parameters, headers) included.
func (ix *Index) BytesPerVector() float64 { return float64(ix.Size()) / float64(ix.n) }

// SizeRatio is the index file's size over its vectors' float16 size.
func (ix *Index) SizeRatio() float64 { return SizeRatio(ix.Size(), ix.n, ix.d) }

// PredictSize returns the exact size in bytes of the index Build writes for
// n vectors in m lists with the given code (its Dim the vectors'), without
// building it.
func PredictSize(n, m int, spec quant.Spec) (int64, error) {
	code, err := quant.New(spec)
	if err != nil {
		return 0, err
	}
	d := spec.Dim
	lengths := []int64{
		metaSize,
		int64(m * d * 2),
		int64((m + 1) * 8),
		int64(rowBytes(n, rowBits(n))),
		int64(m * code.ParamBytes()),
		int64(n) * int64(code.CodeBytes()),
	}
	if b, ok := code.(quant.Blocked); ok {
		lengths[5] = int64(n)*int64(b.LowBytes()) + quant.LowPad
		lengths = append(lengths, int64((n+quant.BlockLen-1)/quant.BlockLen)*int64(b.BlockBytes()))
	}
	if tr, ok := code.(quant.Trainer); ok {
		lengths = append(lengths, int64(tr.GlobalBytes()))
	}
	return format.FileSize(lengths...), nil
}

// SpecForRatio returns the largest code of a kind whose index for n
// vectors of dimension d in m lists fits within ratio times the float16
// size of the vectors (n*d*2 bytes), and that index's size: the most bits
// per dimension (8, 4, 2, 1) for the rotated and sq8 codes, the most
// subspaces (d down to 1) for the product code, whose size grows by n
// bytes a subspace.
func SpecForRatio(n, d, m int, kind quant.Kind, ratio float64, seed uint64) (quant.Spec, int64, error) {
	budget := ratio * float64(float16Bytes(n, d))
	var tries []quant.Spec
	if kind == quant.KindPQ {
		// Size is increasing in subspaces: find the last that fits.
		lo, hi := 1, d
		for lo < hi {
			mid := (lo + hi + 1) / 2
			size, err := PredictSize(n, m, quant.Spec{Kind: kind, Dim: d, Subspaces: mid})
			if err != nil {
				return quant.Spec{}, 0, err
			}
			if float64(size) <= budget {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		tries = []quant.Spec{{Kind: kind, Dim: d, Subspaces: lo, Seed: seed}}
	} else {
		for _, b := range quant.Bits(kind) {
			tries = append(tries, quant.Spec{Kind: kind, Dim: d, Bits: b, Seed: seed})
		}
	}
	var smallest int64
	for _, s := range tries {
		size, err := PredictSize(n, m, s)
		if err != nil {
			return quant.Spec{}, 0, err
		}
		if float64(size) <= budget {
			return s, size, nil
		}
		smallest = size
	}
	return quant.Spec{}, 0, fmt.Errorf("%w: no %s code fits size ratio %g: the smallest (%d anchors) is %d bytes, ratio %.3f", ErrArgument, kind, ratio, m, smallest, SizeRatio(smallest, n, d))
}
