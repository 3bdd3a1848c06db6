// Package sysmem reports the host's memory that can be allocated without
// swapping: what sizes a training sample and what bench checks a run
// against.
package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// Available is the memory that can be allocated without swapping:
// MemAvailable from /proc/meminfo, or, on kernels without it, free plus
// buffer memory from sysinfo(2).
func Available() (uint64, bool) {
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
