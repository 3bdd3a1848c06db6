//go:build !linux

package spill

import "github.com/edsrzf/mmap-go"

// anonymous maps n zeroed bytes of anonymous memory.
func anonymous(n int) (mmap.MMap, error) {
	return mmap.MapRegion(nil, n, mmap.COPY, mmap.ANON, 0) // private
}
