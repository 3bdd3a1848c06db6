//go:build unix

package vlc_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

// An output folder the user cannot write to is refused before training,
// with an error that wraps fs.ErrPermission, and an index already there is
// untouched. Root bypasses folder permissions, so as root the check runs
// in a copy of this test binary started as user nobody (65534).
func TestCompressReadOnlyFolder(t *testing.T) {
	if dir := os.Getenv("VLC_TEST_READONLY_DIR"); dir != "" {
		readOnlyChild(t, dir)
		return
	}
	dir, err := os.MkdirTemp("", "vlc-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ro := filepath.Join(dir, "ro")
	for _, err := range []error{
		os.Chmod(dir, 0o755),
		vecfile.WriteF16(filepath.Join(dir, "in.f16"), rows(300, 8, 1)),
		os.Mkdir(ro, 0o755),
		os.WriteFile(filepath.Join(ro, "old.vlc"), []byte("the old index"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(ro, 0o755)
		readOnlyChild(t, dir)
		return
	}
	if err := os.Chown(ro, 65534, 65534); err != nil {
		t.Skipf("cannot hand the folder to user nobody: %v", err)
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "vlc.test")
	if b, err := os.ReadFile(self); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copying the test binary: %v", err)
	}
	cmd := exec.Command(bin, "-test.run=^TestCompressReadOnlyFolder$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "VLC_TEST_READONLY_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("as user nobody:\n%s", out)
	if err != nil {
		t.Fatalf("the check as user nobody failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestCompressReadOnlyFolder") {
		t.Fatal("the child did not run the check")
	}
}

func readOnlyChild(t *testing.T, dir string) {
	ro := filepath.Join(dir, "ro")
	out := filepath.Join(ro, "old.vlc")
	start := time.Now()
	_, err := vlc.Compress(context.Background(), filepath.Join(dir, "in.f16"), out, vlc.Options{Dim: 8})
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "cannot write in "+ro) {
		t.Fatalf("Compress into a read-only folder: %v, want fs.ErrPermission and %q", err, "cannot write in "+ro)
	}
	t.Logf("refused after %v: %v", time.Since(start), err)
	if b, _ := os.ReadFile(out); string(b) != "the old index" {
		t.Errorf("the file already there changed: %q", b)
	}
	if ents, _ := os.ReadDir(ro); len(ents) != 1 {
		t.Errorf("folder holds %d files, want only old.vlc", len(ents))
	}
}
