package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Some tests need the real program in a process of its own (to kill it,
// interrupt it, run it as another user, or build it with other tags).
// builtVLC builds it once per tag set with `go build`, into a folder that
// every user may read, and returns its path.

var (
	buildMu   sync.Mutex
	builtBins = map[string]string{}
)

func builtVLC(t *testing.T, env []string, tags ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the CLI with: %v", err)
	}
	key := strings.Join(env, " ") + "/" + strings.Join(tags, ",")
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := builtBins[key]; ok {
		return bin
	}
	dir, err := os.MkdirTemp(sharedDir, "bin-")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{sharedDir, dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "vlc")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command(goTool, append(args, ".")...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	builtBins[key] = bin
	return bin
}
