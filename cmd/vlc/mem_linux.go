package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// availableMemory is the memory that can be allocated without swapping:
// MemAvailable from /proc/meminfo, or, on kernels without it, free plus
// buffer memory from sysinfo(2).
func availableMemory() (uint64, bool) {
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := bytes.Fields(sc.Bytes())
			if len(f) >= 2 && string(f[0]) == "MemAvailable:" {
				if kb, err := strconv.ParseUint(string(f[1]), 10, 64); err == nil {
					return kb * 1024, true
				}
			}
		}
	}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0, false
	}
	return (uint64(si.Freeram) + uint64(si.Bufferram)) * uint64(si.Unit), true
}

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
