package format

import (
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
