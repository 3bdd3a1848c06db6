//go:build !linux

package format

import "os"

// startWriteback does nothing where there is no sync_file_range: the Sync
// after the last write writes the whole file.
func startWriteback(f *os.File, off, n int64) {}

// preallocate does nothing where there is no fallocate: the file grows as
// it is written.
func preallocate(f *os.File, n int64) error { return nil }
