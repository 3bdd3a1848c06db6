//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/internal/testenv"
	"github.com/vlc-embed/vlc/vecfile"
)

// specialRig is a small index and the files its commands need.
type specialRig struct {
	bin, dir, base, query, idx, add, ids, payloads string
	idxBytes                                       []byte
}

func newSpecialRig(t *testing.T) *specialRig {
	r := &specialRig{bin: builtVLC(t, nil), dir: t.TempDir()}
	p := func(name string) string { return filepath.Join(r.dir, name) }
	r.base, r.query, r.idx, r.add = p("base.fvecs"), p("q.fvecs"), p("idx.vlc"), p("add.fvecs")
	r.ids, r.payloads = p("ids.txt"), p("payloads.jsonl")
	for path, rows := range map[string][][]float32{r.base: randomRows(300, 8, 1), r.query: randomRows(5, 8, 2), r.add: randomRows(3, 8, 3)} {
		if err := vecfile.WriteFvecs(path, rows); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(r.ids, []byte("a\nb\nc\n"), 0o644)
	os.WriteFile(r.payloads, []byte("1\n2\n3\n"), 0o644)
	mustVLC(t, "compress", r.base, "-o", r.idx, "-anchors", "4", "-quiet")
	r.idxBytes = readFile(t, r.idx)
	return r
}

// vlc runs the built CLI with stdout going to stdout (a buffer for nil),
// killed after 20 s: a command that blocks fails the test, not hangs it.
func (r *specialRig) vlc(t *testing.T, stdout *os.File, args ...string) (code int, out, errs string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, args...)
	var ob, eb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &ob, &eb
	if stdout != nil {
		cmd.Stdout = stdout
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("vlc %s: still running after 20 s, killed", strings.Join(args, " "))
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), ob.String(), eb.String()
}

// TestSpecialFilesCLI gives every file argument of every command, input
// and output, each kind of file that is not regular (a FIFO, a link to
// one, links to /dev/null and /dev/zero, a folder, a socket): each is
// refused at once, exit 1, one line naming the file and what it is; the
// special file stays what it was and the index is unchanged.
func TestSpecialFilesCLI(t *testing.T) {
	r := newSpecialRig(t)
	out := filepath.Join(r.dir, "out.vlc")
	const X = "{}" // where the special file goes
	cases := []struct {
		name, ext string
		args      []string
	}{
		{"compress INPUT f16", ".f16", []string{"compress", X, "-dim", "8", "-o", out}},
		{"compress INPUT npy", ".npy", []string{"compress", X, "-o", out}},
		{"compress INPUT fvecs", ".fvecs", []string{"compress", X, "-o", out}},
		{"compress -ids", ".txt", []string{"compress", r.base, "-ids", X, "-o", out}},
		{"compress -payloads", ".jsonl", []string{"compress", r.base, "-payloads", X, "-o", out}},
		{"compress -o", ".vlc", []string{"compress", r.base, "-anchors", "4", "-o", X}},
		{"compress -cpuprofile", ".prof", []string{"compress", r.base, "-anchors", "4", "-o", out, "-cpuprofile", X}},
		{"graph -cpuprofile", ".prof", []string{"graph", r.idx, "-base", r.base, "-o", out, "-cpuprofile", X}},
		{"search INDEX", ".vlc", []string{"search", X, "-query", r.query}},
		{"search -query", ".fvecs", []string{"search", r.idx, "-query", X}},
		{"search -rerank", ".fvecs", []string{"search", r.idx, "-query", r.query, "-rerank", X}},
		{"eval INDEX", ".vlc", []string{"eval", X, "-query", r.query, "-base", r.base}},
		{"eval -query", ".fvecs", []string{"eval", r.idx, "-query", X, "-base", r.base}},
		{"eval -base", ".fvecs", []string{"eval", r.idx, "-query", r.query, "-base", X}},
		{"eval -gt", ".ivecs", []string{"eval", r.idx, "-query", r.query, "-gt", X}},
		{"eval -rerank", ".fvecs", []string{"eval", r.idx, "-query", r.query, "-base", r.base, "-rerank", X}},
		{"eval -cpuprofile", ".prof", []string{"eval", r.idx, "-query", r.query, "-base", r.base, "-cpuprofile", X}},
		{"eval -sweep INDEX", ".vlc", []string{"eval", r.idx, X, "-query", r.query, "-base", r.base, "-sweep"}},
		{"eval -plot png", ".png", []string{"eval", r.idx, "-query", r.query, "-base", r.base, "-plot", X}},
		{"eval -plot svg", ".svg", []string{"eval", r.idx, "-query", r.query, "-base", r.base, "-plot", X}},
		{"info", ".vlc", []string{"info", X}},
		{"info -json", ".vlc", []string{"info", X, "-json"}},
		{"verify", ".vlc", []string{"verify", X}},
		{"get", ".vlc", []string{"get", X, "1"}},
		{"add INDEX", ".vlc", []string{"add", X, r.add}},
		{"add VECTORS", ".fvecs", []string{"add", r.idx, X}},
		{"add -ids", ".txt", []string{"add", r.idx, r.add, "-ids", X}},
		{"add -payloads", ".jsonl", []string{"add", r.idx, r.add, "-payloads", X}},
		{"delete INDEX", ".vlc", []string{"delete", X, "1"}},
		{"delete -ids", ".txt", []string{"delete", r.idx, "-ids", X}},
		{"compact", ".vlc", []string{"compact", X}},
		{"retrain", ".vlc", []string{"retrain", X}},
	}
	n := 0
	for _, c := range cases {
		for _, s := range testenv.SpecialFiles(t, c.ext) {
			t.Run(c.name+"/"+s.Name, func(t *testing.T) {
				n++
				args := make([]string, len(c.args))
				for i, a := range c.args {
					args[i] = strings.ReplaceAll(a, X, s.Path)
				}
				code, stdout, errs := r.vlc(t, nil, args...)
				checkOneLineError(t, code, errs)
				if want := s.Path + " is " + s.What + ", not a regular file"; !strings.Contains(errs, want) {
					t.Errorf("stderr %q does not contain %q", errs, want)
				}
				if stdout != "" {
					t.Errorf("stdout %q, want nothing", stdout)
				}
				if got := testenv.Kind(t, s.Path); got != s.What {
					t.Errorf("%s is now %s", s.Path, got)
				}
				if !bytes.Equal(readFile(t, r.idx), r.idxBytes) {
					t.Fatalf("%s changed", r.idx)
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("%s written", out)
					os.Remove(out)
				}
			})
		}
	}
	t.Logf("%d cases", n)
}
