//go:build webgpu

package webgpu

import (
	"fmt"

	"github.com/vlc-embed/vlc/device"
)

// The pq and sq8 codes (device.CodeData) on the device: the rotated
// code's rotate, coarse, probe and topk kernels, with score_pq (after lut,
// which writes each query's tables) or score_sq8 in place of score.

// checkCodeData refuses a pq or sq8 description the kernels cannot
// search, saying why.
func checkCodeData(d *device.IndexData) error {
	switch {
	case d.Code != device.CodePQ && d.Code != device.CodeSQ8:
		return fmt.Errorf("no search for %s", d.Code)
	case d.Code == device.CodePQ && (d.Subspaces < 1 || d.Subspaces > d.Dim || d.Subspaces > 0xffff):
		return fmt.Errorf("pq: %d subspaces of dimension %d", d.Subspaces, d.Dim)
	case d.Bits != 8 || d.Words < 1 || 4*d.Words < d.CodeBytes():
		return fmt.Errorf("%s: %d words of %d-bit levels per entry: want 8-bit levels, %d bytes", d.Code, d.Words, d.Bits, d.CodeBytes())
	case d.Code == device.CodePQ && (len(d.Codebooks) != device.PQCentroids*d.Dim || len(d.RotMean) != d.Dim || len(d.Grids) != 4*d.Lists):
		return fmt.Errorf("pq: %d centroid values, %d mean values, %d grid values for dimension %d and %d lists", len(d.Codebooks), len(d.RotMean), len(d.Grids), d.Dim, d.Lists)
	case d.Code == device.CodeSQ8 && (len(d.Lo) != d.Lists*d.Dim || len(d.Step) != d.Lists*d.Dim):
		return fmt.Errorf("sq8: %d and %d range values for %d lists of dimension %d", len(d.Lo), len(d.Step), d.Lists, d.Dim)
	}
	return nil
}

// uploadCode allocates and fills codeBuf: pq's centroids then P mu, or
// sq8's ranges (per list, lo then step); nothing for the rotated code.
func (r *resident) uploadCode(d *device.IndexData) error {
	var v []float32
	switch d.Code {
	case device.CodePQ:
		v = append(append(v, d.Codebooks...), d.RotMean...)
	case device.CodeSQ8:
		v = make([]float32, 0, 2*len(d.Lo))
		for a := range d.Lists {
			v = append(append(v, d.Lo[a*d.Dim:(a+1)*d.Dim]...), d.Step[a*d.Dim:(a+1)*d.Dim]...)
		}
	default:
		return nil
	}
	if lim := r.dev.bindingLimit(); int64(len(v))*4 > lim {
		return fmt.Errorf("webgpu: the %s code's parameters (%.1f MiB) exceed one storage binding of %s (%.1f MiB)",
			d.Code, float64(len(v))/(1<<18), r.dev.info.Name, float64(lim)/(1<<20))
	}
	var err error
	if r.codeBuf, err = r.alloc("search code", int64(len(v))*4, storage); err != nil {
		return err
	}
	return r.write(r.codeBuf, 0, f32bytes(v))
}

// lutBytes is the size of one query's pq tables (0 for other codes).
func (r *resident) lutBytes() int64 {
	return int64(r.ntab) * int64(r.nsub) * device.PQCentroids * 4
}
