//go:build linux

// Command hostmem measures what a compress's host side pays for memory
// and files of its size, outside vlc's code: faulting in and unmapping
// anonymous memory with and without huge pages, unmapping a mapped file,
// a process's exit with both mapped, and ways of writing and syncing a
// file. docs/bench/cuda.md ("sixth round") has what it measured on a GPU
// host; the choices in internal/spill (huge pages) and index/format
// (fallocate) come from it. Linux only.
//
//	go run ./bench/hostmem anon 8           # GB of anonymous memory
//	go run ./bench/hostmem file 28 FILE     # map, read and unmap GB of FILE
//	go run ./bench/hostmem exit 8 FILE      # a child's exit with both mapped
//	go run ./bench/hostmem write 8 DIR      # write GB to DIR/wbench.tmp
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const page = 4096

var sinkByte [64]byte

// pages runs f on one byte of every page of b, the pages shared among
// threads goroutines: each reads (write false) or writes the page's first
// byte, so that the kernel faults it in.
func pages(b []byte, threads int, write bool) {
	var wg sync.WaitGroup
	n := len(b)
	for t := 0; t < threads; t++ {
		lo, hi := n*t/threads, n*(t+1)/threads
		wg.Go(func() {
			var s byte
			for i := lo; i < hi; i += page {
				if write {
					b[i] = 1
				} else {
					s += b[i]
				}
			}
			sinkByte[t] = s
		})
	}
	wg.Wait()
}

func touch(b []byte, threads int)  { pages(b, threads, false) }
func write1(b []byte, threads int) { pages(b, threads, true) }

func unmapPieces(b []byte, pieces int) {
	var wg sync.WaitGroup
	n := len(b) / page
	base := uintptr(unsafe.Pointer(&b[0]))
	for t := 0; t < pieces; t++ {
		lo, hi := n*t/pieces*page, n*(t+1)/pieces*page
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, e := unix.Syscall(unix.SYS_MUNMAP, base+uintptr(lo), uintptr(hi-lo), 0)
			if e != 0 {
				panic(e)
			}
		}()
	}
	wg.Wait()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", d.Seconds()*1000) }

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: hostmem anon GB | file GB FILE | exit GB FILE | write GB DIR")
		os.Exit(2)
	}
	mode := os.Args[1]
	switch mode {
	case "file": // file SIZE_GB PATH: map, touch, unmap whole / in pieces
		gb, _ := strconv.Atoi(os.Args[2])
		path := os.Args[3]
		for _, pieces := range []int{1, 16, 1, 16} {
			f, _ := os.Open(path)
			b, err := unix.Mmap(int(f.Fd()), 0, gb<<30, unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				panic(err)
			}
			t0 := time.Now()
			touch(b, 16)
			t1 := time.Now()
			if pieces == 1 {
				unix.Munmap(b)
			} else {
				unmapPieces(b, pieces)
			}
			fmt.Printf("file %d GB: touch (16 threads) %s, unmap in %d pieces %s\n", gb, ms(t1.Sub(t0)), pieces, ms(time.Since(t1)))
			f.Close()
		}
	case "anon": // anon SIZE_GB: fault (16 threads), unmap; with and without MADV_HUGEPAGE
		gb, _ := strconv.Atoi(os.Args[2])
		for _, c := range []struct {
			huge   bool
			pieces int
		}{{false, 1}, {false, 16}, {true, 1}, {true, 16}} {
			b, err := unix.Mmap(-1, 0, gb<<30, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				panic(err)
			}
			if c.huge {
				if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
					fmt.Println("madvise:", err)
				}
			}
			t0 := time.Now()
			write1(b, 16)
			t1 := time.Now()
			if c.pieces == 1 {
				unix.Munmap(b)
			} else {
				unmapPieces(b, c.pieces)
			}
			fmt.Printf("anon %d GB huge=%v: fault (16 threads) %s, unmap in %d pieces %s\n", gb, c.huge, ms(t1.Sub(t0)), c.pieces, ms(time.Since(t1)))
		}
	case "exit": // exit SIZE_GB PATH: a child maps the file and an anonymous buffer, touches them, prints its time and exits; the parent times the rest
		for _, huge := range []string{"0", "1"} {
			cmd := exec.Command(os.Args[0], "child", os.Args[2], os.Args[3], huge)
			out, err := cmd.StdoutPipe()
			if err != nil {
				panic(err)
			}
			cmd.Start()
			var buf [64]byte
			n, _ := out.Read(buf[:])
			ns, _ := strconv.ParseInt(string(buf[:n]), 10, 64)
			cmd.Wait()
			fmt.Printf("exit with %s GB file + %s GB anonymous (huge=%s) mapped: %s from the child's last line to its end\n", os.Args[2], os.Args[2], huge, ms(time.Since(time.Unix(0, ns))))
		}
	case "child":
		gb, _ := strconv.Atoi(os.Args[2])
		f, _ := os.Open(os.Args[3])
		b, _ := unix.Mmap(int(f.Fd()), 0, gb<<30, unix.PROT_READ, unix.MAP_SHARED)
		touch(b, 16)
		a, _ := unix.Mmap(-1, 0, gb<<30, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if os.Args[4] == "1" {
			unix.Madvise(a, unix.MADV_HUGEPAGE)
		}
		write1(a, 16)
		fmt.Print(time.Now().UnixNano())
		os.Exit(0)
	case "write": // write SIZE_GB DIR: ways of writing a file of that size, each synced at the end
		gb, _ := strconv.Atoi(os.Args[2])
		dir := os.Args[3]
		size := int64(gb) << 30
		src := make([]byte, 24<<20)
		for i := range src {
			src[i] = byte(i * 7)
		}
		run := func(name string, f func(fd *os.File)) {
			p := dir + "/wbench.tmp"
			os.Remove(p)
			fd, _ := os.Create(p)
			t0 := time.Now()
			f(fd)
			t1 := time.Now()
			fd.Sync()
			t2 := time.Now()
			fd.Close()
			os.Remove(p)
			fmt.Printf("write %d GB, %s: writes %s, sync %s, total %s (%.2f GB/s)\n", gb, name, ms(t1.Sub(t0)), ms(t2.Sub(t1)), ms(t2.Sub(t0)), float64(size)/t2.Sub(t0).Seconds()/1e9)
		}
		seq := func(fd *os.File, wb bool) {
			var off, started int64
			for off < size {
				for c := 0; c < len(src) && off < size; c += 4 << 20 {
					fd.WriteAt(src[c:c+4<<20], off)
					off += 4 << 20
					if wb && off-started >= 32<<20 {
						unix.SyncFileRange(int(fd.Fd()), started, off-started, unix.SYNC_FILE_RANGE_WRITE)
						started = off
					}
				}
			}
		}
		run("one stream, 4 MiB writes, writeback every 32 MiB (FileWriter)", func(fd *os.File) { seq(fd, true) })
		run("one stream, 4 MiB writes, no writeback", func(fd *os.File) { seq(fd, false) })
		par := func(fd *os.File, k int, wb bool) {
			var wg sync.WaitGroup
			per := size / int64(k)
			for t := 0; t < k; t++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lo := per * int64(t)
					var started = lo
					for off := lo; off < lo+per; off += 4 << 20 {
						fd.WriteAt(src[:4<<20], off)
						if wb && off+4<<20-started >= 32<<20 {
							unix.SyncFileRange(int(fd.Fd()), started, off+4<<20-started, unix.SYNC_FILE_RANGE_WRITE)
							started = off + 4<<20
						}
					}
				}()
			}
			wg.Wait()
		}
		run("4 streams, writeback every 32 MiB", func(fd *os.File) { par(fd, 4, true) })
		run("4 streams, no writeback", func(fd *os.File) { par(fd, 4, false) })
		run("mmap shared, 16 threads copy, writeback every 32 MiB", func(fd *os.File) {
			fd.Truncate(size)
			b, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				panic(err)
			}
			step := int64(32 << 20)
			for off := int64(0); off < size; off += step {
				var wg sync.WaitGroup
				for t := int64(0); t < 16; t++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						lo, hi := off+step*t/16, off+step*(t+1)/16
						copy(b[lo:hi], src[:hi-lo])
					}()
				}
				wg.Wait()
				unix.SyncFileRange(int(fd.Fd()), off, step, unix.SYNC_FILE_RANGE_WRITE)
			}
			unix.Munmap(b)
		})
		run("O_DIRECT-free baseline: fallocate, then one stream with writeback", func(fd *os.File) {
			unix.Fallocate(int(fd.Fd()), 0, 0, size)
			seq(fd, true)
		})
	}
}
