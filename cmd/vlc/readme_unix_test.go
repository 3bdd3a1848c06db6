//go:build unix

package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The README's vlc serve example runs as written (with the built vlc on
// PATH, its index in a temporary folder and a free port).
func TestReadmeServe(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README example needs %s: %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- serve-example -->\n```sh\n")
	block, _, ok2 := strings.Cut(block, "```\n<!-- /serve-example -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no serve example between its markers")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	dir := t.TempDir()
	script := strings.NewReplacer("/tmp/deep.vlc", filepath.Join(dir, "deep.vlc"), "8089", port).Replace(block)
	bin := builtVLC(t, nil)
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README example failed: %v\n%s", err, out)
	}
	for _, want := range []string{`{"hits":[{"id":"`, `"name":"deep"`, `"live":10000`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README example's output lacks %s:\n%s", want, out)
		}
	}
}
