//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/par"
)

// ppState is the device side of one k-means++ initialisation: the sample's
// rows gathered column-major and the distances.
type ppState struct {
	rows    *int // &rows[0] of the sample it was built for
	s       int
	t, dist uint64
}

var _ device.PlusPlusDrawer = (*dataset)(nil)

// DrawPlusPlus runs every k-means++ round on the device: per round the
// distances to the last pick (vlc_pp_dist, reading the pick on the
// device), the block sums and the draw (vlc_pp_blocksums, vlc_pp_draw),
// queued with no round trip; the picks come back once. The same picks as
// kmeans.PlusPlusRounds on the host (TestDrawPlusPlusParity).
func (s *dataset) DrawPlusPlus(rows []int, first int, u []float64, fallback []int) ([]int, error) {
	n, rounds := len(rows), len(u)
	if n == 0 || first < 0 || first >= n || len(fallback) != rounds {
		return nil, fmt.Errorf("cuda: k-means++: %d rows, first %d, %d draws, %d fallbacks", n, first, rounds, len(fallback))
	}
	picks := make([]int32, rounds+1)
	picks[0] = int32(first)
	for k, f := range fallback {
		if f < 0 || f >= n {
			return nil, fmt.Errorf("cuda: k-means++: fallback %d of %d rows", f, n)
		}
		picks[k+1] = int32(f)
	}
	if rounds == 0 {
		return nil, nil
	}
	err := s.run(func() error {
		d := s.dev
		if err := s.ppSetup(rows); err != nil {
			return err
		}
		nb := (n + ppBlock - 1) / ppBlock
		tmp := jobBufs{s: s}
		defer tmp.free()
		up := tmp.upload
		pk, err := up(unsafe.Pointer(&picks[0]), int64(rounds+1)*4)
		if err != nil {
			return err
		}
		ub, err := up(unsafe.Pointer(&u[0]), int64(rounds)*8)
		if err != nil {
			return err
		}
		fb, err := up(unsafe.Pointer(&picks[1]), int64(rounds)*4) // the fallbacks, before the picks overwrite them
		if err != nil {
			return err
		}
		blocks, err := tmp.alloc(int64(nb) * 8)
		if err != nil {
			return err
		}
		if err := s.launchPPDist(0, pk, false); err != nil {
			return err
		}
		for k := 1; k <= rounds; k++ {
			if err := d.launch("vlc_pp_blocksums", (nb+127)/128, 1, 128, 0, s.pp.dist, i32(n), blocks, i32(nb)); err != nil {
				return err
			}
			if err := d.launch("vlc_pp_draw", 1, 1, ppDrawThreads, 0, s.pp.dist, i32(n), blocks, i32(nb), ub, fb, pk, i32(k)); err != nil {
				return err
			}
			if k < rounds {
				if err := s.launchPPDist(0, pk+uint64(k)*4, true); err != nil {
					return err
				}
			}
		}
		if err := d.dtoh(unsafe.Pointer(&picks[0]), pk, int64(rounds+1)*4); err != nil {
			return err
		}
		s.toHost.Add(int64(rounds+1) * 4)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]int, rounds)
	for k := range out {
		out[k] = int(picks[k+1])
	}
	return out, nil
}

// launchPPDist updates the sample's distances to centre c, or to the
// centre at device address cptr when it is not 0 (on the worker).
func (s *dataset) launchPPDist(c uint64, cptr uint64, keep bool) error {
	n := s.pp.s
	return s.dev.launch("vlc_pp_dist", (n+31)/32, 1, 128, 0, s.pp.t, i32(n), i32(s.d), c, cptr, b32(keep), s.pp.dist)
}

// ppSetup gathers the sample's rows on the device, column-major, once per
// sample (on the worker). rows are rows of the whole set: a share gathers
// them on the host when some are not its own, as a dataset whose points
// stream in batches does.
func (s *dataset) ppSetup(rows []int) error {
	d, n := s.dev, len(rows)
	if s.pp.rows == &rows[0] && s.pp.s == n {
		return nil
	}
	s.freePP()
	local := s.batch == 0
	r32 := make([]int32, n)
	for i, r := range rows {
		if r < 0 || r >= s.gn {
			return fmt.Errorf("cuda: k-means++: row %d of %d points", r, s.gn)
		}
		if r < s.lo || r >= s.lo+s.n {
			local = false
		}
		r32[i] = int32(r - s.lo)
	}
	var err error
	if s.pp.t, err = d.alloc(int64(n) * int64(s.d) * 2); err != nil {
		return err
	}
	if s.pp.dist, err = d.alloc(int64(n) * 4); err != nil {
		s.freePP()
		return err
	}
	x, dp := s.x, s.dp
	if !local {
		// The points stream from the host, or some are another share's:
		// the rows are gathered on the host (a copy each, on all cores),
		// uploaded, and transposed on the device as resident rows are.
		// (Gathered column-major on the host, a write every n values, on
		// one core, k-means++ took 0.98 s split over two H200s against
		// 0.39 s on one, at 4M x 768 and 4,096 anchors.)
		gathered := make([]uint16, n*s.d)
		par.For(n, 1024, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				r := rows[i]
				copy(gathered[i*s.d:(i+1)*s.d], s.all[r*s.d:(r+1)*s.d])
			}
		})
		hx, err := d.alloc(int64(len(gathered)) * 2)
		if errors.Is(err, errOutOfMemory) {
			// No room for the rows beside the sample (a share whose
			// points stream is short of memory): transpose them here.
			if err := s.ppUploadTransposed(gathered); err != nil {
				return err
			}
			s.pp.rows, s.pp.s = &rows[0], n
			return nil
		}
		if err != nil {
			s.freePP()
			return err
		}
		defer d.free(hx)
		if err := d.htod(hx, unsafe.Pointer(&gathered[0]), int64(len(gathered))*2); err != nil {
			s.freePP()
			return err
		}
		s.toDev.Add(int64(len(gathered)) * 2)
		x, dp = hx, s.d
		for i := range r32 {
			r32[i] = int32(i)
		}
	}
	rb, err := d.alloc(int64(n) * 4)
	if err != nil {
		s.freePP()
		return err
	}
	defer d.free(rb)
	if err := d.htod(rb, unsafe.Pointer(&r32[0]), int64(n)*4); err != nil {
		s.freePP()
		return err
	}
	s.toDev.Add(int64(n) * 4)
	if err := d.launch("vlc_pp_gather", 4*d.info.SMs, 1, 256, 0, x, i32(dp), rb, i32(n), i32(s.d), s.pp.t); err != nil {
		s.freePP()
		return err
	}
	s.pp.rows, s.pp.s = &rows[0], n
	return nil
}

// ppUploadTransposed uploads the sample's gathered rows (n x d, row-major)
// column-major, transposed on the host's cores (on the worker).
func (s *dataset) ppUploadTransposed(gathered []uint16) error {
	t := columnMajor(gathered, s.d)
	if err := s.dev.htod(s.pp.t, unsafe.Pointer(&t[0]), int64(len(t))*2); err != nil {
		s.freePP()
		return err
	}
	s.toDev.Add(int64(len(t)) * 2)
	return nil
}

// freePP releases the k-means++ buffers (on the worker).
func (s *dataset) freePP() {
	s.dev.free(s.pp.t)
	s.dev.free(s.pp.dist)
	s.pp = ppState{}
}
