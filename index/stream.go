package index

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/enctrace"
	"github.com/vlc-embed/vlc/internal/par"
	"github.com/vlc-embed/vlc/quant"
)

// write encodes b and writes the index to path while it encodes
// (format.FileWriter): every section but the list parameters and the
// codes first, then the codes, packed for a quant.Blocked code, as each
// run of whole lists becomes final, then the parameters. times, when
// set, gets the wall time from start until the last code was packed, and
// the rest.
func (b *prepared) write(ctx context.Context, path string, p Plan, start time.Time) error {
	n := len(b.ids)
	bl, blocked := b.code.(quant.Blocked)
	codeLen, blockLen := n*b.code.CodeBytes(), 0
	if blocked {
		codeLen = n*bl.LowBytes() + quant.LowPad
		blockLen = (n + quant.BlockLen - 1) / quant.BlockLen * bl.BlockBytes()
	}
	secs := sections(b.meta, b.anchors16, b.offsets, b.ids, b.params, nil, nil, blocked, b.global, p.Keys, p.Payloads)
	kinds, lengths := make([]format.Kind, len(secs)), make([]int64, len(secs))
	cw := &codeWriter{code: b.code, codes: b.codes, n: n}
	if enctrace.On() {
		cw.tr = &sinkTrace{start: time.Now()}
	}
	for i, s := range secs {
		kinds[i], lengths[i] = s.Kind, int64(len(s.Data))
		switch s.Kind {
		case secCodes:
			cw.codeSec, lengths[i] = i, int64(codeLen)
		case secBlocks:
			cw.blockSec, lengths[i] = i, int64(blockLen)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w, err := format.CreateFile(ctx, path, kinds, lengths)
	if err != nil {
		return err
	}
	defer w.Abort()
	cw.w = w
	var lead []int // what is known now, written while encoding starts
	for i, s := range secs {
		if s.Kind != secParams && s.Kind != secCodes && s.Kind != secBlocks {
			lead = append(lead, i)
		}
	}
	enctrace.Printf("write trace: file created %v after the start\n", time.Since(start).Round(time.Millisecond))
	sk := startSink(cw, func() error {
		for _, i := range lead {
			if err := w.WriteSection(i, secs[i].Data); err != nil {
				return err
			}
		}
		return nil
	}, cancel)
	stopped := false
	defer func() {
		// A panic while encoding (a fault reading a truncated input,
		// turned into a panic for the caller to recover): the sink must
		// be done with the codes before the arena unmaps them and before
		// Abort closes the file.
		if !stopped {
			cancel(errors.New("index: write abandoned"))
			sk.stop(false)
		}
	}()
	err = b.encode(ctx, p, sk.signal)
	if err != nil {
		cancel(err) // the sink stops at its next chunk
	}
	stopped = true
	if serr := sk.stop(err == nil); err == nil {
		err = serr
	}
	if err != nil {
		// The first failure: the caller's cancellation, the encoding's
		// error or the write's, rather than the cancellation it caused.
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	for i, s := range secs {
		if s.Kind == secParams {
			err = w.WriteSection(i, b.params)
		}
	}
	if err == nil {
		err = w.Commit()
	}
	if p.Times != nil {
		p.Times.Build, p.Times.Write = cw.packed.Sub(start), time.Since(cw.packed)
	}
	return err
}

// codeWriter packs entry codes as they become final, in chunks of at most
// writeChunk entries, and writes them to their sections: the low bits
// and the blocks of a quant.Blocked code, else the entry codes as they
// are.
type codeWriter struct {
	w                 *format.FileWriter
	code              quant.Code
	codes             []byte
	n                 int
	codeSec, blockSec int
	done              int       // entries written: a multiple of quant.BlockLen, or n
	packed            time.Time // when the last entry was packed
	// bufs are two chunks' packed bytes, reused in turn: one is written
	// while the next is packed into the other.
	bufs [2]struct{ blocks, low []byte }
	turn int
	tr   *sinkTrace // nil unless VLC_ENCODE_TRACE is set
}

// sinkTrace sums, with VLC_ENCODE_TRACE set, where the sink's time went:
// clearing and packing chunks, waiting for the chunk before to be
// written, writing (on the writes' goroutines) and waiting for codes.
type sinkTrace struct {
	start                              time.Time
	chunks                             int
	clear, pack, waitWrite, idle, lead time.Duration
	write                              atomic.Int64 // nanoseconds
}

func (t *sinkTrace) print(n int) {
	if t == nil {
		return
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	enctrace.Printf("write trace: %d entries in %d chunks over %v: first sections %v, clear %v, pack %v, waiting for writes %v, waiting for codes %v; writes %v\n",
		n, t.chunks, r(time.Since(t.start)), r(t.lead), r(t.clear), r(t.pack), r(t.waitWrite), r(t.idle), r(time.Duration(t.write.Load())))
}

// writeChunk is the most entries packed at once: a few tens of MiB of
// scratch for 768 dimensions, and the disk starts on one chunk while the
// next is packed.
var writeChunk = 64 << 10 // a variable for tests of several chunks

// upTo packs and writes the entries below hi not yet written, in whole
// blocks (the last block with the last entry). Pack writes each block
// from its own entries alone, so packing in chunks gives the bytes of
// packing at once. A chunk is written on a goroutine while the next is
// packed; upTo returns once everything below hi is written. Measured
// (vlc compress of 20M x 768, 4 bits, two H200s, one call each): the
// encoding and writing took 13.3 s with each chunk packed, then written,
// and 10.6 s with the two overlapped; the devices' own encoding took
// 6.2-6.6 s of it.
func (c *codeWriter) upTo(hi int) (err error) {
	if hi < c.n {
		hi -= hi % quant.BlockLen
	}
	var writing chan error // the chunk in flight
	defer func() {
		if writing != nil {
			if werr := <-writing; err == nil {
				err = werr
			}
		}
	}()
	cb := c.code.CodeBytes()
	for c.done < hi {
		lo, end := c.done, min(hi, c.done+writeChunk)
		b, ok := c.code.(quant.Blocked)
		if !ok {
			if end == c.n {
				c.packed = time.Now()
			}
			if err := c.w.WriteSection(c.codeSec, c.codes[lo*cb:end*cb]); err != nil {
				return err
			}
			c.done = end
			continue
		}
		k, bb, lb := end-lo, b.BlockBytes(), b.LowBytes()
		buf := &c.bufs[c.turn]
		if buf.low == nil {
			chunk := min(c.n, writeChunk)
			buf.blocks = make([]byte, (chunk+quant.BlockLen-1)/quant.BlockLen*bb)
			buf.low = make([]byte, chunk*lb+quant.LowPad)
		}
		blocks, low := buf.blocks[:(k+quant.BlockLen-1)/quant.BlockLen*bb], buf.low[:k*lb+quant.LowPad]
		t0 := time.Now()
		par.For(len(blocks), 1<<20, func(lo, hi int) { clear(blocks[lo:hi]) })
		par.For(len(low), 1<<20, func(lo, hi int) { clear(low[lo:hi]) })
		t1 := time.Now()
		b.Pack(c.codes[lo*cb:end*cb], k, blocks, low)
		if c.tr != nil {
			c.tr.chunks++
			c.tr.clear += t1.Sub(t0)
			c.tr.pack += time.Since(t1)
		}
		if end == c.n {
			c.packed = time.Now()
		} else {
			low = low[:k*lb] // the pad follows the last entry only
		}
		if writing != nil { // the chunk before, written into the other buffers
			t0 := time.Now()
			err, writing = <-writing, nil
			if c.tr != nil {
				c.tr.waitWrite += time.Since(t0)
			}
			if err != nil {
				return err
			}
		}
		writing = make(chan error, 1)
		go func(done chan<- error) {
			t0 := time.Now()
			err := c.w.WriteSection(c.codeSec, low)
			if err == nil {
				err = c.w.WriteSection(c.blockSec, blocks)
			}
			if c.tr != nil {
				c.tr.write.Add(int64(time.Since(t0)))
			}
			done <- err
		}(writing)
		c.turn ^= 1
		c.done = end
	}
	return nil
}

// sink runs a codeWriter on a goroutine of its own, so that encoding
// goes on while codes are packed and written: signal tells it how far the
// codes are final, and it catches up from wherever it is.
type sink struct {
	mu     sync.Mutex
	hi     int
	finish bool          // write what was signalled before quitting
	wake   chan struct{} // a signal since the goroutine last looked
	quit   chan struct{}
	exited chan struct{}
	err    error // the goroutine's, read after exited
}

// startSink starts the goroutine: first, then cw's codes as they are
// signalled. On an error it calls cancel with it, so that encoding stops.
func startSink(cw *codeWriter, first func() error, cancel context.CancelCauseFunc) *sink {
	s := &sink{wake: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(s.exited)
		s.err = s.run(cw, first)
		if s.err != nil {
			cancel(s.err)
		}
	}()
	return s
}

func (s *sink) run(cw *codeWriter, first func() error) error {
	t0 := time.Now()
	if err := first(); err != nil {
		return err
	}
	if cw.tr != nil {
		cw.tr.lead = time.Since(t0)
		defer cw.tr.print(cw.n)
	}
	for {
		if err := cw.upTo(s.final()); err != nil || cw.done == cw.n {
			return err
		}
		t1 := time.Now()
		select {
		case <-s.wake:
			if cw.tr != nil {
				cw.tr.idle += time.Since(t1)
			}
		case <-s.quit:
			s.mu.Lock()
			finish := s.finish
			s.mu.Unlock()
			if finish { // the last signal may be unseen
				return cw.upTo(s.final())
			}
			return nil
		}
	}
}

func (s *sink) final() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hi
}

// signal says that the codes of entries below hi are final. It never
// blocks.
func (s *sink) signal(hi int) {
	s.mu.Lock()
	s.hi = hi
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// stop waits for the goroutine, having it write every code signalled
// when finish (the encoding succeeded), else stop where it is, and
// returns its error.
func (s *sink) stop(finish bool) error {
	s.mu.Lock()
	s.finish = finish
	s.mu.Unlock()
	close(s.quit)
	<-s.exited
	return s.err
}
