//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/vecfile"
)

// Temporary files that an earlier, killed compress left (their writer's
// process id no longer runs, and they are older than this process) are
// removed by the next compress to the same output, which logs each; files
// of a live process, of another output and of other names stay.
func TestStaleTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "v.f16"), filepath.Join(dir, "v.vlc")
	if err := vecfile.WriteF16(in, randomRows(100, 8, 1)); err != nil {
		t.Fatal(err)
	}
	dead := deadPID(t)
	old := time.Now().Add(-time.Hour)
	names := map[string]bool{ // name: should survive
		fmt.Sprintf(".v.vlc.tmp-%d-abc123", dead):    false,
		fmt.Sprintf(".v.vlc.tmp-%d-probe99", dead):   false,
		".v.vlc.tmp-1-abc123":                        true, // pid 1 runs
		fmt.Sprintf(".w.vlc.tmp-%d-abc123", dead):    true, // another output
		".v.vlc.tmp-abc123":                          true, // not of this form
		fmt.Sprintf("v.vlc.tmp-%d-abc123", dead):     true, // not hidden: not ours
		fmt.Sprintf(".v.vlc.tmp-%d-fresh", dead+1e6): true, // made after this process started (below)
	}
	for name := range names {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(name, "fresh") {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, stderr := mustVLC(t, "compress", in, "-dim", "8", "-o", out, "-anchors", "4")
	for name, survive := range names {
		_, err := os.Stat(filepath.Join(dir, name))
		if survive != (err == nil) {
			t.Errorf("%s: exists %v, want %v", name, err == nil, survive)
		}
		if logged := strings.Contains(stderr, "file="+filepath.Join(dir, name)+"\n"); logged == survive {
			t.Errorf("%s: removal logged %v, want %v", name, logged, !survive)
		}
	}
	mustVLC(t, "verify", out)
}

// deadPID returns a process id that no process has: a child that has
// exited and been waited for.
func deadPID(t *testing.T) int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// The output checks happen before any work: a folder as output, or a
// folder the user may not write to, fails at once with one line, and an
// index already there is untouched. As root, which bypasses folder
// permissions, the CLI runs as user nobody.
func TestOutputFolderProblems(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "v.f16")
	if err := vecfile.WriteF16(in, randomRows(100, 8, 1)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "x.vlc"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runVLC(t, "compress", in, "-dim", "8", "-o", filepath.Join(dir, "x.vlc"))
	checkOneLineError(t, code, errs)
	if !strings.Contains(errs, "is a folder") {
		t.Errorf("stderr %q", errs)
	}

	if testing.Short() && os.Geteuid() == 0 {
		t.Skip("the read-only case builds the CLI to run it as another user")
	}
	ro, err := os.MkdirTemp(sharedDir, "ro-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(ro, 0o755)
	pub := filepath.Join(ro, "v.f16")
	oldIndex := filepath.Join(ro, "v.vlc")
	for _, err := range []error{
		os.Chmod(sharedDir, 0o755), os.Chmod(ro, 0o755),
		os.WriteFile(pub, readFile(t, in), 0o644),
		os.WriteFile(oldIndex, []byte("old"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"compress", pub, "-dim", "8", "-o", oldIndex, "-quiet"}
	var stderr string
	if os.Geteuid() != 0 {
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		code, _, stderr = runVLC(t, args...)
	} else {
		// ro stays root's and 0755: user nobody may read it, not write it.
		cmd := exec.Command(builtVLC(t, nil), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var eb bytes.Buffer
		cmd.Stderr = &eb
		cmd.Run()
		code, stderr = cmd.ProcessState.ExitCode(), eb.String()
	}
	checkOneLineError(t, code, stderr)
	if want := "vlc compress: output " + oldIndex + ": cannot write in " + ro + ": permission denied\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if got := string(readFile(t, oldIndex)); got != "old" {
		t.Errorf("the file already there changed: %q", got)
	}
}
