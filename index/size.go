package index

import (
	"fmt"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/quant"
)

// PredictSize returns the exact size in bytes of the index Build writes for
// n vectors of dimension d in m lists with the given code, without
// building it.
func PredictSize(n, d, m int, kind quant.Kind, bits int) (int64, error) {
	code, err := quant.New(kind, d, bits, 0)
	if err != nil {
		return 0, err
	}
	lengths := []int64{
		metaSize,
		int64(m * d * 2),
		int64((m + 1) * 8),
		int64(rowBytes(n, rowBits(n))),
		int64(m * code.ParamBytes()),
		int64(n) * int64(code.CodeBytes()),
	}
	if tr, ok := code.(quant.Trainer); ok {
		lengths = append(lengths, int64(tr.GlobalBytes()))
	}
	return format.FileSize(lengths...), nil
}

// BitsForRatio returns the most bits per dimension of a kind of code whose
// index fits within ratio times the float16 size of the vectors (n*d*2
// bytes), and that index's size.
func BitsForRatio(n, d, m int, kind quant.Kind, ratio float64) (bits int, size int64, err error) {
	budget := ratio * float64(2*n*d)
	var smallest int64
	for _, b := range quant.Bits(kind) {
		size, err := PredictSize(n, d, m, kind, b)
		if err != nil {
			return 0, 0, err
		}
		if float64(size) <= budget {
			return b, size, nil
		}
		smallest = size
	}
	return 0, 0, fmt.Errorf("%w: no %s code fits size ratio %g: the smallest (%d anchors) is %d bytes, ratio %.3f", ErrArgument, kind, ratio, m, smallest, float64(smallest)/float64(2*n*d))
}
