//go:build !linux

package spill

import "os"

// reserve sizes f to n bytes (sparse where the file system allows).
func reserve(f *os.File, n int64) error { return f.Truncate(n) }
