//go:build unix

package testenv

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SpecialFiles makes, in a temporary folder, one of each kind of file that
// is not regular, each with a name ending in ext (an input of that kind
// must be refused by name, not opened): a named pipe, a symbolic link to
// it, links to the devices /dev/null and /dev/zero (a read never ends), a
// folder and a Unix socket. Each maps to the words its error must contain.
func SpecialFiles(t testing.TB, ext string) []Special {
	dir := t.TempDir()
	var out []Special
	add := func(name, what string, make func(p string) error) {
		p := filepath.Join(dir, name+ext)
		if err := make(p); err != nil {
			t.Logf("no %s: %v", name, err)
			return
		}
		out = append(out, Special{name, p, what})
	}
	fifo := filepath.Join(dir, "fifo"+ext)
	add("fifo", "a named pipe (FIFO)", func(p string) error { return syscall.Mkfifo(p, 0o644) })
	add("link-to-fifo", "a named pipe (FIFO)", func(p string) error { return os.Symlink(fifo, p) })
	add("dev-null", "a device", func(p string) error { return os.Symlink("/dev/null", p) })
	add("dev-zero", "a device", func(p string) error { return os.Symlink("/dev/zero", p) })
	add("folder", "a folder", func(p string) error { return os.Mkdir(p, 0o755) })
	add("socket", "a socket", func(p string) error {
		l, err := net.Listen("unix", p)
		if err == nil {
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			t.Cleanup(func() { l.Close() })
		}
		return err
	})
	return out
}
