package pipeline

import (
	"path/filepath"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/sysmem"
)

// trainRows is how many of n rows of dimension d training learns from,
// for m anchors: Options.TrainSample when set. Else, on a device that
// reports its memory (a GPU; free is what the points may take there,
// beside the anchors' state and within -device-memory, or -1 elsewhere),
// every row that fits: all of them when they fit, so that they stay
// resident and the device encodes. Elsewhere (the CPU),
// DefaultSamplePerAnchor per anchor, no more than a quarter of the host's
// available memory holds as float16. Never more than n.
func trainRows(opt Options, n, d, m int, free int64) int {
	if opt.TrainSample > 0 {
		return min(n, opt.TrainSample)
	}
	if free >= 0 {
		// A GPU holds a point as float16, padded to 64 columns, with
		// its assignment, distance and sort key (24 bytes); an eighth
		// is kept for scratch.
		dp := int64((d + 63) / 64 * 64)
		return min(n, int(max(free-free/8, 0)/(2*dp+24)))
	}
	s := DefaultSamplePerAnchor * m
	if avail, ok := sysmem.Available(); ok {
		s = min(s, int(avail/4/uint64(2*d)))
	}
	return min(n, max(s, 1))
}

// pointMemory is what a device budget leaves for points (and search's
// batches) once m anchors of dimension d have their state: as float32
// and float16, with their fixed-point sums and variances, about 40 bytes
// a value (measured: a 512 MiB cap with 4096 x 768 anchors peaked at 616
// MiB when the cap counted points alone).
func pointMemory(budget int64, m, d int) int64 {
	return budget - int64(m)*int64((d+63)/64*64)*40
}

// spillDir is where index.Write keeps the code arrays of n rows of cb
// code bytes (index.Plan.SpillDir): output's folder when the arrays (about
// 2*n*cb: the entry codes, then the blocked layout's copy) would take more
// than a quarter of the host's available memory, or where that is not
// known; else "", the heap. Arrays that fit stay off the disk: a spilled
// page costs more to touch (measured: at 1M x 768, 4 bits, on an H100
// machine, copying the device's codes back took 0.22 s into files against
// 0.06 s on the heap).
func spillDir(output string, n, cb int) string {
	if avail, ok := sysmem.Available(); ok && 2*uint64(n)*uint64(cb) <= avail/4 {
		return ""
	}
	return filepath.Dir(output)
}

// window is the rows assigned at a time after training on sample of n
// rows of dimension d: as many as trained at once (which fit the device),
// but, when the window is a converted copy (copied), no more than 256 MiB
// of float16 rows; at least minWindow rows.
func window(n, d, sample int, copied bool) int {
	w := sample
	if copied {
		w = min(w, (256<<20)/(2*d))
	}
	return min(n, max(w, minWindow))
}

// minWindow is the fewest rows a window assigns (a variable for tests,
// which walk many windows on small inputs).
var minWindow = 1 << 16

// pickRow is the number of the k-th of sample rows evenly spaced through n.
func pickRow(k, n, sample int) int { return int(int64(k) * int64(n) / int64(sample)) }

// pickRows presents sample rows evenly spaced through Rows.
type pickRows struct {
	index.Rows
	sample int
}

func (p pickRows) Len() int { return p.sample }
func (p pickRows) Row(i int, dst []float32) []float32 {
	return p.Rows.Row(pickRow(i, p.Rows.Len(), p.sample), dst)
}

// rowRange presents rows first to first+n-1 of Rows.
type rowRange struct {
	index.Rows
	first, n int
}

func (r rowRange) Len() int                           { return r.n }
func (r rowRange) Row(i int, dst []float32) []float32 { return r.Rows.Row(r.first+i, dst) }
