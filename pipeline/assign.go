package pipeline

import (
	"context"
	"github.com/vlc-embed/vlc/device"

	"github.com/vlc-embed/vlc/index"
)

// assignRows assigns every row to its nearest of the m anchors on dev,
// window rows at a time: each window is loaded, assigned and released, so
// the device (and, for input that is not float16, the host) holds one
// window, never the input. It returns the assignments and the mean squared
// distance to the anchors.
func assignRows(ctx context.Context, dev device.Device, src Source, rows index.Rows, normalise bool, anchors []float32, m, window int, progress func(done, total int)) ([]int32, float64, error) {
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
		var pts device.Points
		if src.F16 != nil && !normalise {
			pts = device.Points{Data: src.F16[lo*d : hi*d], N: hi - lo, Dim: d}
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
func assignWindow(dev device.Device, pts device.Points, anchors []float32, m int, assign []int32) (device.StepStats, error) {
	ds, err := dev.Load(pts)
	if err != nil {
		return device.StepStats{}, err
	}
	defer ds.Close()
	if err := ds.SetAnchors(anchors, m); err != nil {
		return device.StepStats{}, err
	}
	st, err := ds.Assign()
	if err != nil {
		return st, err
	}
	return st, ds.Assignments(assign)
}
