package format

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// CreateFile reserves the whole file on the disk before any section is
// written (where the file system has fallocate): the temporary file has
// its final size and its blocks, and filling it gives WriteFile's bytes
// (TestFileWriterSameBytes).
func TestCreateFilePreallocates(t *testing.T) {
	dir := t.TempDir()
	probe, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(probe.Fd()), 0, 0, 4096); err != nil {
		t.Skipf("no fallocate in %s: %v", dir, err)
	}
	probe.Close()
	secs := []Section{{Kind: KindOf("AAAA"), Data: make([]byte, 1<<20)}, {Kind: KindOf("BBBB"), Data: make([]byte, 100)}}
	w, err := createFor(context.Background(), filepath.Join(dir, "x.vlc"), secs)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(w.f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != w.size {
		t.Fatalf("temporary file of %d bytes before any write, want its final %d", st.Size, w.size)
	}
	if st.Blocks*512 < w.size {
		t.Skipf("%d of %d bytes allocated: this file system keeps preallocated files sparse", st.Blocks*512, w.size)
	}
}
