package format

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing bytes off to off+n-1 of
// f to the disk without waiting for them (sync_file_range), so that the
// Sync after the last write finds most of the file on its way. Errors are
// ignored: the Sync reports what matters.
func startWriteback(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// preallocate gives f its n bytes of disk before they are written
// (fallocate): a disk without room for them fails here, before the
// encoding and writing, and the writes that follow fill blocks already
// allocated. Measured on a GPU host's ext4 disk (`go run ./bench/hostmem
// write 8 /tmp`: 8 GB in 4 MiB writes, writeback every 32 MiB, then
// fsync): 3.9 s preallocated, 6.3 s not. A file system without fallocate
// is left to grow as it is written.
func preallocate(f *os.File, n int64) error {
	if n == 0 {
		return nil
	}
	err := unix.Fallocate(int(f.Fd()), 0, 0, n)
	for errors.Is(err, unix.EINTR) { // tmpfs stops a long one for a signal
		err = unix.Fallocate(int(f.Fd()), 0, 0, n)
	}
	switch {
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return nil
	case err != nil:
		return fmt.Errorf("reserving %d bytes for the file: %w", n, err)
	}
	return nil
}
