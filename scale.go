package vlc

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/sysmem"
	"github.com/vlc-embed/vlc/quant"
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

// assignRows assigns every row to its nearest of the m anchors on dev,
// window rows at a time: each window is loaded, assigned and released, so
// the device (and, for input that is not float16, the host) holds one
// window, never the input. It returns the assignments and the mean squared
// distance to the anchors.
func assignRows(ctx context.Context, dev anneal.Device, src source, rows index.Rows, normalise bool, anchors []float32, m, window int, progress func(done, total int)) ([]int32, float64, error) {
	n, d := rows.Len(), rows.Dim()
	assign := make([]int32, n)
	var energy float64
	if progress != nil {
		progress(0, n)
	}
	for lo := 0; lo < n; lo += window {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		hi := min(n, lo+window)
		var pts anneal.Points
		if src.f16 != nil && !normalise {
			pts = anneal.Points{Data: src.f16[lo*d : hi*d], N: hi - lo, Dim: d}
		} else {
			first := lo
			var err error
			if pts, err = points(src, rowRange{rows, lo, hi - lo}, normalise, func(i int) int { return first + i }); err != nil {
				return nil, 0, err
			}
		}
		st, err := assignWindow(dev, pts, anchors, m, assign[lo:hi])
		if err != nil {
			return nil, 0, err
		}
		energy += st.Energy * float64(hi-lo)
		if progress != nil {
			progress(hi, n)
		}
	}
	return assign, energy / float64(n), nil
}

// assignWindow assigns pts to the anchors on dev, writing to assign.
func assignWindow(dev anneal.Device, pts anneal.Points, anchors []float32, m int, assign []int32) (anneal.StepStats, error) {
	ds, err := dev.Load(pts)
	if err != nil {
		return anneal.StepStats{}, err
	}
	defer ds.Close()
	if err := ds.SetAnchors(anchors, m); err != nil {
		return anneal.StepStats{}, err
	}
	st, err := ds.Assign()
	if err != nil {
		return st, err
	}
	return st, ds.Assignments(assign)
}

// loadModel reads the model at path (a model file, an index or a store)
// for rows of dimension d, refusing options that contradict it.
func loadModel(path string, d int, opt Options) (*index.Model, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("-anchors-from: %w", err)
	}
	model, err := index.ReadModel(path)
	if errors.Is(err, index.ErrNotIndex) {
		if _, _, isStore := storeAt(path); isStore {
			model, err = storeModel(path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	meta := model.Meta
	if model.Dim() != d {
		return nil, fmt.Errorf("%w: the input has dimension %d, the model %s has %d", index.ErrDim, d, path, model.Dim())
	}
	spec := meta.CodeSpec()
	spec.Dim = d
	code, err := quant.New(spec)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	spec = code.Spec()
	kind, _ := quant.ParseKind(opt.Code)
	for _, c := range []struct {
		field string
		value any
		bad   bool
		has   any
	}{
		{"Bits", opt.Bits, opt.Bits != 0 && opt.Bits != spec.Bits, spec.Bits},
		{"Subspaces", opt.Subspaces, opt.Subspaces != 0 && opt.Subspaces != spec.Subspaces, spec.Subspaces},
		{"Ratio", opt.Ratio, opt.Ratio != 0, "its own size"},
		{"Code", opt.Code, !opt.autoCode() && kind != spec.Kind, spec.Kind},
		{"Metric", opt.Metric, opt.Metric != "" && opt.Metric != meta.Metric.String(), meta.Metric},
		{"Anchors", opt.Anchors, opt.Anchors != 0 && opt.Anchors != model.Lists(), model.Lists()},
	} {
		if c.bad {
			return nil, &OptionError{Fields: []string{c.field}, Value: c.value, Reason: fmt.Sprintf("the model %s has %v (AnchorsFrom sets it)", path, c.has)}
		}
	}
	return model, nil
}

// storeModel is the model of the store at path: its first segment's,
// which every segment shares.
func storeModel(path string) (*index.Model, error) {
	ix, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer ix.Close()
	snap, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer snap.release()
	return index.ModelOf(snap.segs[0].ix)
}
