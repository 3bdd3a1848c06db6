package spill

import (
	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"
)

// anonymous maps n zeroed bytes of private anonymous memory and asks for
// huge pages (MADV_HUGEPAGE: the kernel's "madvise" setting gives them only
// where asked). Without them the mapping is used in 4 KiB pages.
func anonymous(n int) (mmap.MMap, error) {
	m, err := mmap.MapRegion(nil, n, mmap.COPY, mmap.ANON, 0) // private: mmap.RDWR would share it (shmem, no huge pages)
	if err != nil {
		return nil, err
	}
	unix.Madvise(m, unix.MADV_HUGEPAGE) // advice: refused where the kernel has no huge pages
	return m, nil
}
