package main

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// memorySampleEvery is how often sampleMemory reads RssAnon.
const memorySampleEvery = 50 * time.Millisecond

// sampleMemory starts reading this process's anonymous resident memory
// (RssAnon in /proc/self/status: the heap and other private memory, not
// the pages of mapped files, which the kernel can drop) every
// memorySampleEvery; the returned function stops it and reports the peak
// seen, false where the kernel does not report it.
func sampleMemory() func() (int64, bool) {
	peak := atomic.Int64{}
	read := func() {
		if v, ok := rssAnon(); ok && v > peak.Load() {
			peak.Store(v)
		}
	}
	if _, ok := rssAnon(); !ok {
		return func() (int64, bool) { return 0, false }
	}
	read()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(memorySampleEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() (int64, bool) {
		close(done)
		<-stopped
		read()
		return peak.Load(), true
	}
}

// rssAnon reads RssAnon from /proc/self/status, in bytes.
func rssAnon() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("RssAnon:")); ok {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
				return kb * 1024, true
			}
		}
	}
	return 0, false
}
