//go:build cuda

package cuda

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vlc-embed/vlc/device"
)

// exchange combines the partial sums of the shares of one split point set
// on the devices (shard.go): a reduce-scatter, in which share i adds part
// i of every other share's sums to its own, then an all-gather, in which
// share i copies part j of the total from share j. Each share moves
// (k-1)/k of the sums in each half, whatever k: the bytes a ring would
// move, and on GPUs that all reach each other (NVLink, NVSwitch, one PCIe
// root) no link carries more. Where the driver grants peer access, the
// add and copy kernels read the other GPU's memory themselves; elsewhere
// the driver copies (cuMemcpyPeerAsync, staged through the host without
// peer access) into scratch, which the add kernel then reads.
type exchange struct {
	shares []*dataset
	// direct[i][j]: share i's GPU reads share j's memory itself (peer
	// access, or the same GPU).
	direct [][]bool
	// engine: copy with the driver's copy engines even where kernels
	// could read the peer (VLC_CUDA_EXCHANGE=copy, for measurements).
	engine bool
	bar    barrier
	bytes  atomic.Int64 // copied between shares, since the set was loaded
}

func newExchange(shares []*dataset) *exchange {
	return &exchange{shares: shares, direct: make([][]bool, len(shares)), bar: barrier{n: len(shares)},
		engine: os.Getenv("VLC_CUDA_EXCHANGE") == "copy"}
}

// enablePeers gives s's context access to every other share's memory
// where the GPUs differ and the driver allows it.
func (g *exchange) enablePeers(s *dataset) error {
	i := s.share.index
	direct := make([]bool, len(g.shares))
	err := s.run(func() error {
		dr := s.dev.drv
		for j, o := range g.shares {
			if o.dev.ctx == s.dev.ctx {
				direct[j] = true
				continue
			}
			var can int32
			if err := dr.call("cuDeviceCanAccessPeer", dr.cuDeviceCanAccessPeer, uintptr(unsafe.Pointer(&can)), uintptr(s.dev.dev), uintptr(o.dev.dev)); err != nil {
				return err
			}
			if can == 0 {
				continue
			}
			// A refusal (too many peers, a platform that forbids it)
			// leaves the pair to the driver's staged copies.
			direct[j] = dr.enablePeer(o.dev.ctx) == nil
		}
		return nil
	})
	g.direct[i] = direct
	return err
}

// path says how the shares' bytes travel.
func (g *exchange) path() string {
	peers, staged := 0, 0
	for i, row := range g.direct {
		for j, ok := range row {
			switch {
			case i == j || g.shares[i].dev.ctx == g.shares[j].dev.ctx:
			case ok:
				peers++
			default:
				staged++
			}
		}
	}
	how := "kernels read the peer"
	if g.engine {
		how = "copy engines"
	}
	switch {
	case peers == 0 && staged == 0:
		return "within one GPU"
	case staged == 0:
		return "peer to peer, " + how
	case peers == 0:
		return "staged through the host by the driver (no peer access)"
	}
	return "peer to peer (" + how + ") where the GPUs allow it, else staged through the host"
}

// reads: share i's kernels read share j's memory in place.
func (g *exchange) reads(i, j int) bool { return g.direct[i][j] && !g.engine }

// grid is the blocks of an add or copy kernel over n elements.
func grid(d *Device, n int64) int { return int(max(1, min((n+255)/256, int64(8*d.info.SMs)))) }

// statsPart names one of the sums in a dataset's stats buffer.
type statsPart int

const (
	partSum statsPart = iota
	partSq
	partWsum
	partCnt
)

// part returns where a part of s's sums starts on its device, its
// elements and their size in bytes.
func (s *dataset) part(p statsPart) (ptr uint64, n, size int64) {
	md := int64(s.m) * int64(s.d)
	switch p {
	case partSum:
		return s.sum, md, 8
	case partSq:
		return s.sq, md, 8
	case partWsum:
		return s.wsum, int64(s.m), 8
	}
	return s.cnt, int64(s.m), 4
}

// piece is share i's piece of n elements among k: elements lo to hi-1.
func piece(n int64, i, k int) (lo, hi int64) {
	return n * int64(i) / int64(k), n * int64(i+1) / int64(k)
}

// allReduce leaves the total of parts in every share's buffers, then runs
// then on s's worker. Each share calls it at once (failed: that share
// cannot take part; the others then stop at the barrier too).
func (g *exchange) allReduce(s *dataset, parts []statsPart, failed error, then func() error) error {
	start := time.Now()
	err := failed
	if err == nil && len(g.shares) > 1 {
		err = s.run(func() error { return g.reduceScatter(s, parts) })
	}
	if !g.bar.wait(err == nil) {
		if err == nil {
			err = errors.New("cuda: another share of the set failed its exchange")
		}
		return err
	}
	return s.run(func() error {
		if len(g.shares) > 1 {
			if err := g.allGather(s, parts); err != nil {
				return err
			}
		}
		s.share.exchanged += time.Since(start)
		return then()
	})
}

// reduceScatter adds part i of parts from every other share to s's own
// (s is share i), and waits for the adds (on s's worker).
func (g *exchange) reduceScatter(s *dataset, parts []statsPart) error {
	i, k := s.share.index, len(g.shares)
	d := s.dev
	for _, p := range parts {
		ptr, n, size := s.part(p)
		lo, hi := piece(n, i, k)
		bytes := (hi - lo) * size
		if bytes == 0 {
			continue
		}
		kernel := "vlc_add_i64"
		if size == 4 {
			kernel = "vlc_add_u32"
		}
		for j, o := range g.shares {
			if j == i {
				continue
			}
			optr, _, _ := o.part(p)
			src := optr + uint64(lo*size)
			if g.reads(i, j) {
				g.bytes.Add(bytes)
			} else {
				if err := s.ensureScratch(bytes); err != nil {
					return err
				}
				if err := g.copyPeer(s, s.share.scratch, o, src, bytes); err != nil {
					return err
				}
				src = s.share.scratch
			}
			if err := d.launch(kernel, grid(d, hi-lo), 1, 256, 0, ptr+uint64(lo*size), src, i64(hi-lo)); err != nil {
				return err
			}
		}
	}
	return d.drv.call("cuCtxSynchronize", d.drv.cuCtxSynchronize)
}

// allGather copies part j of parts from every other share j into s's
// buffers, and waits for the copies (on s's worker).
func (g *exchange) allGather(s *dataset, parts []statsPart) error {
	i, k := s.share.index, len(g.shares)
	d := s.dev
	for _, p := range parts {
		ptr, n, size := s.part(p)
		for j, o := range g.shares {
			if j == i {
				continue
			}
			lo, hi := piece(n, j, k)
			optr, _, _ := o.part(p)
			dst, src := ptr+uint64(lo*size), optr+uint64(lo*size)
			if !g.reads(i, j) {
				if err := g.copyPeer(s, dst, o, src, (hi-lo)*size); err != nil {
					return err
				}
				continue
			}
			kernel := "vlc_copy_u64"
			if size == 4 {
				kernel = "vlc_copy_u32"
			}
			if hi > lo {
				if err := d.launch(kernel, grid(d, hi-lo), 1, 256, 0, dst, src, i64(hi-lo)); err != nil {
					return err
				}
				g.bytes.Add((hi - lo) * size)
			}
		}
	}
	return d.drv.call("cuCtxSynchronize", d.drv.cuCtxSynchronize)
}

// copyPeer queues a copy of bytes from src on o's device to dst on s's, on
// s's default stream (on s's worker).
func (g *exchange) copyPeer(s *dataset, dst uint64, o *dataset, src uint64, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	dr := s.dev.drv
	if err := dr.call("cuMemcpyPeerAsync", dr.cuMemcpyPeerAsync, uintptr(dst), s.dev.ctx, uintptr(src), o.dev.ctx, uintptr(bytes), 0); err != nil {
		return err
	}
	g.bytes.Add(bytes)
	return nil
}

// ensureScratch sizes s's scratch for bytes (on the worker).
func (s *dataset) ensureScratch(bytes int64) error {
	sh := s.share
	if sh.scratchBytes >= bytes {
		return nil
	}
	s.dev.free(sh.scratch)
	sh.scratch, sh.scratchBytes = 0, 0
	p, err := s.dev.alloc(bytes)
	if err != nil {
		return err
	}
	sh.scratch, sh.scratchBytes = p, bytes
	return nil
}

// fetchSq combines the shares' sums of squares (a reduce-scatter: the
// shares' buffers are left with their own part of the total) and brings
// each share's part back into sq, and the counts, already total on every
// share after Apply, from the first into cnt.
func (g *exchange) fetchSq(shares []*dataset, sq []int64, cnt []uint32) error {
	errs := make([]error, len(shares))
	var wg sync.WaitGroup
	for i, s := range shares {
		wg.Go(func() {
			start := time.Now()
			errs[i] = s.run(func() error {
				if len(shares) > 1 {
					if err := g.reduceScatter(s, []statsPart{partSq}); err != nil {
						return err
					}
				}
				ptr, n, size := s.part(partSq)
				lo, hi := piece(n, i, len(shares))
				if hi > lo {
					if err := s.dev.dtoh(unsafe.Pointer(&sq[lo]), ptr+uint64(lo*size), (hi-lo)*size); err != nil {
						return err
					}
				}
				s.toHost.Add((hi - lo) * size)
				if i == 0 {
					if err := s.dev.dtoh(unsafe.Pointer(&cnt[0]), s.cnt, int64(s.m)*4); err != nil {
						return err
					}
					s.toHost.Add(int64(s.m) * 4)
				}
				return nil
			})
			s.share.exchanged += time.Since(start)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

var _ device.Exchanger = (*dataset)(nil)

// Exchanged reports the set's bytes between devices, this share's time in
// the exchange and the path (device.Exchanger); zeros for a dataset that
// is not a share.
func (s *dataset) Exchanged() (bytes int64, wall time.Duration, path string) {
	if s.share == nil || s.share.group == nil {
		return 0, 0, ""
	}
	return s.share.group.bytes.Load(), s.share.exchanged, s.share.group.path()
}
