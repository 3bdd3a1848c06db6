//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/vlc-embed/vlc/anneal"
)

var _ anneal.SampleDistancer = (*dataset)(nil)

// ppState is the device side of one k-means++ initialisation: the sample's
// rows gathered column-major and the distances.
type ppState struct {
	rows    *int // &rows[0] of the sample it was built for
	s       int
	t, dist uint64
	// pinned is page-locked host memory for the distances: the copy of a
	// round comes back at the bus's speed, not through the driver's
	// staging of pageable memory.
	pinned unsafe.Pointer
}

// SampleDistances computes k-means++'s distance update on the device
// (vlc_pp_dist), the same bits as the host's vec.L2 over the decoded rows
// (TestSampleDistancesParity), and copies the s distances back: 4 s bytes a
// round instead of s*d multiply-adds on the host.
func (s *dataset) SampleDistances(rows []int, c int, keep bool, dist []float32) error {
	n := len(rows)
	if n == 0 || len(dist) < n || c < 0 || c >= n {
		return fmt.Errorf("cuda: sample distances: %d rows, %d distances, centre %d", n, len(dist), c)
	}
	return s.run(func() error {
		d := s.dev
		if s.pp.rows != &rows[0] || s.pp.s != n {
			s.freePP()
			r32 := make([]int32, n)
			for i, r := range rows {
				if r < 0 || r >= s.n {
					return fmt.Errorf("cuda: sample distances: row %d of %d points", r, s.n)
				}
				r32[i] = int32(r)
			}
			var err error
			if s.pp.t, err = d.alloc(int64(n) * int64(s.d) * 2); err != nil {
				return err
			}
			if s.pp.dist, err = d.alloc(int64(n) * 4); err != nil {
				s.freePP()
				return err
			}
			if err := d.drv.call("cuMemAllocHost", d.drv.cuMemAllocHost, uintptr(unsafe.Pointer(&s.pp.pinned)), uintptr(n)*4); err != nil {
				s.freePP()
				return err
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
			if s.batch > 0 {
				// The points stream from the host: gather there.
				t := make([]uint16, n*s.d)
				for i, r := range rows {
					for j := range s.d {
						t[j*n+i] = s.host[r*s.d+j]
					}
				}
				if err := d.htod(s.pp.t, unsafe.Pointer(&t[0]), int64(len(t))*2); err != nil {
					s.freePP()
					return err
				}
				s.toDev.Add(int64(len(t)) * 2)
			} else if err := d.launch("vlc_pp_gather", 4*d.info.SMs, 1, 256, 0, s.x, i32(s.dp), rb, i32(n), i32(s.d), s.pp.t); err != nil {
				s.freePP()
				return err
			}
			s.pp.rows, s.pp.s = &rows[0], n
		}
		// With keep, the distances the device kept from the last call
		// are dist as the caller holds it (the interface's contract).
		if err := d.launch("vlc_pp_dist", (n+31)/32, 1, 128, 0, s.pp.t, i32(n), i32(s.d), i32(c), b32(keep), s.pp.dist); err != nil {
			return err
		}
		if err := d.dtoh(s.pp.pinned, s.pp.dist, int64(n)*4); err != nil {
			return err
		}
		copy(dist[:n], unsafe.Slice((*float32)(s.pp.pinned), n))
		s.toHost.Add(int64(n) * 4)
		return nil
	})
}

// freePP releases the k-means++ buffers (on the worker).
func (s *dataset) freePP() {
	s.dev.free(s.pp.t)
	s.dev.free(s.pp.dist)
	if s.pp.pinned != nil {
		s.dev.drv.call("cuMemFreeHost", s.dev.drv.cuMemFreeHost, uintptr(s.pp.pinned))
	}
	s.pp = ppState{}
}
