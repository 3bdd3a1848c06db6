package pipeline

import (
	"testing"

	"github.com/vlc-embed/vlc/quant"
)

// pickKind follows the measurements its comment lists: each case is a
// dataset's shape and a size asked for, with the code that measured better.
func TestPickKind(t *testing.T) {
	for _, c := range []struct {
		name    string
		opt     Options
		n, d, m int
		want    quant.Kind
	}{
		{"deep10k -bits 4", Options{Bits: 4}, 10000, 96, 100, quant.KindPQ},
		{"deep10k -bits 1", Options{Bits: 1}, 10000, 96, 100, quant.KindPQ},
		{"deep10k default 8 bits", Options{}, 10000, 96, 100, quant.KindRotated},
		{"deep10k -ratio 0.32", Options{Ratio: 0.32}, 10000, 96, 100, quant.KindPQ},
		{"deep10k -ratio 0.12", Options{Ratio: 0.12}, 10000, 96, 100, quant.KindPQ},
		{"sift5k -bits 4", Options{Bits: 4}, 4500, 128, 67, quant.KindPQ},
		{"sift5k -ratio 0.12", Options{Ratio: 0.12}, 4500, 128, 67, quant.KindPQ},
		{"deep2k -bits 4 (codebooks a quarter of the index)", Options{Bits: 4}, 2000, 96, 45, quant.KindRotated},
		{"deep2k -ratio 0.32", Options{Ratio: 0.32}, 2000, 96, 45, quant.KindRotated},
		{"fashion-mnist -bits 4", Options{Bits: 4}, 60000, 784, 245, quant.KindRotated},
		{"fashion-mnist -ratio 0.32", Options{Ratio: 0.32}, 60000, 784, 245, quant.KindRotated},
		{"fashion-mnist -ratio 0.2", Options{Ratio: 0.2}, 60000, 784, 245, quant.KindPQ},
		{"fashion-mnist -ratio 0.12", Options{Ratio: 0.12}, 60000, 784, 245, quant.KindPQ},
		{"fashion-mnist -ratio 0.6", Options{Ratio: 0.6}, 60000, 784, 245, quant.KindRotated},
		{"-subspaces", Options{Subspaces: 8}, 60000, 784, 245, quant.KindPQ},
	} {
		if got := pickKind(c.opt, c.n, c.d, c.m); got != c.want {
			t.Errorf("%s: %v; want %v", c.name, got, c.want)
		}
	}
}
