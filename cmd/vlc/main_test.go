package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// The deep2k test set: 2000 base vectors of dimension 96 (float16), 200
// queries and their exact ground truth.
const (
	deepDir   = "../../testdata/deep2k"
	deepBase  = deepDir + "/base.f16"
	deepQuery = deepDir + "/query.fvecs"
	deepGT    = deepDir + "/groundtruth.ivecs"
	deepN     = 2000
	deepNQ    = 200
	deepDim   = 96
	// anchors picked by default for 2000 vectors: round(sqrt(2000)).
	deepAnchors = 45
)

// runVLC runs one command line in-process and returns its exit status, stdout
// and stderr. run sets the process-wide slog default, so tests that call it
// must not run in parallel.
func runVLC(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// mustVLC runs a command line that must succeed.
func mustVLC(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	code, out, errs := runVLC(t, args...)
	if code != 0 {
		t.Fatalf("vlc %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, errs)
	}
	return out, errs
}

// checkOneLineError checks the contract for a failing command: exit status
// 1, exactly one line on stderr, and nothing that looks like a crash.
func checkOneLineError(t *testing.T, code int, stderr string) {
	t.Helper()
	t.Logf("stderr: %s", strings.TrimSuffix(stderr, "\n"))
	if code != 1 {
		t.Errorf("exit status %d, want 1 (stderr %q)", code, stderr)
	}
	if n := strings.Count(stderr, "\n"); n != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr has %d newlines, want exactly one line: %q", n, stderr)
	}
	for _, bad := range []string{"panic", "goroutine", "internal error"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("stderr contains %q: %q", bad, stderr)
		}
	}
}

// checkFails runs a command line that must fail: one line on stderr that
// holds each of want, and nothing on stdout.
func checkFails(t *testing.T, args []string, want []string) {
	t.Helper()
	code, out, errs := runVLC(t, args...)
	checkOneLineError(t, code, errs)
	if out != "" {
		t.Errorf("stdout %q, want nothing", out)
	}
	for _, w := range want {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr %q does not contain %q", errs, w)
		}
	}
}

var (
	deepOnce  sync.Once
	deepIndex string // built once from deep2k with -seed 1
	deepErr   string
	sharedDir string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vlc-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sharedDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// deepIndexPath returns the path of the deep2k index, building it on first
// use with `compress BASE -dim 96 -o X -seed 1 -quiet` (flags after the
// positional argument).
func deepIndexPath(t *testing.T) string {
	t.Helper()
	deepOnce.Do(func() {
		p := filepath.Join(sharedDir, "deep.vlc")
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"compress", deepBase, "-dim", "96", "-o", p, "-seed", "1", "-quiet"}, &out, &errb)
		if code != 0 {
			deepErr = fmt.Sprintf("compress exit %d: %s", code, errb.String())
			return
		}
		if out.Len() != 0 {
			deepErr = fmt.Sprintf("compress -quiet wrote to stdout: %q", out.String())
			return
		}
		deepIndex = p
	})
	if deepErr != "" {
		t.Fatal(deepErr)
	}
	return deepIndex
}

// randomRows returns n deterministic pseudo-random rows of dimension d in [-1, 1).
func randomRows(n, d int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 42))
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, d)
		for j := range rows[i] {
			rows[i][j] = r.Float32()*2 - 1
		}
	}
	return rows
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFlagOrder builds the deep2k index with the flags before, between and
// after the positional argument: the files must be byte-identical, which
// also shows that the CLI path is deterministic.
func TestFlagOrder(t *testing.T) {
	ref := readFile(t, deepIndexPath(t)) // flags after the input
	dir := t.TempDir()
	tests := []struct {
		name string
		args func(out string) []string
	}{
		{"flags before", func(out string) []string {
			return []string{"compress", "-dim", "96", "-o", out, "-seed", "1", "-quiet", deepBase}
		}},
		{"flags around", func(out string) []string {
			return []string{"compress", "-dim", "96", "-quiet", deepBase, "-o", out, "-seed", "1"}
		}},
		{"double dash flags", func(out string) []string {
			return []string{"compress", "--dim=96", "--o=" + out, deepBase, "--seed=1", "--quiet"}
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && i > 0 {
				t.Skip("short")
			}
			out := filepath.Join(dir, fmt.Sprintf("%d.vlc", i))
			mustVLC(t, tc.args(out)...)
			if got := readFile(t, out); !bytes.Equal(got, ref) {
				t.Errorf("%s: %d bytes differ from the reference index (%d bytes)", tc.name, len(got), len(ref))
			}
		})
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string // help asked for goes to stdout
		stderr []string // the list after a missing command goes to stderr
	}{
		{"no args", nil, 2, nil, []string{"usage: vlc COMMAND", "compress", "search", "eval", "info", "verify", "version"}},
		{"-h", []string{"-h"}, 0, []string{"usage: vlc COMMAND", "vlc help COMMAND"}, nil},
		{"help", []string{"help"}, 0, []string{"usage: vlc COMMAND", "test-webgpu"}, nil},
		{"help compress", []string{"help", "compress"}, 0, []string{"usage: vlc compress", "-dim", "-bits", "-anchors"}, nil},
		{"compress -h", []string{"compress", "-h"}, 0, []string{"usage: vlc compress", "-dim", "-bits", "-anchors", "-metric", "-backend", "-seed", "-quiet"}, nil},
		{"compress file -h", []string{"compress", "x.f16", "-h"}, 0, []string{"usage: vlc compress"}, nil},
		{"search -h", []string{"search", "-h"}, 0, []string{"usage: vlc search", "-query", "-k", "-nprobe", "-rerank"}, nil},
		{"eval -help", []string{"eval", "-help"}, 0, []string{"usage: vlc eval", "-gt", "-base", "-json"}, nil},
		{"help info", []string{"help", "info"}, 0, []string{"usage: vlc info", "-json"}, nil},
		{"verify -h", []string{"verify", "-h"}, 0, []string{"usage: vlc verify"}, nil},
		{"help test-cuda", []string{"help", "test-cuda"}, 0, []string{"usage: vlc test-cuda", "-large"}, nil},
		{"help nope", []string{"help", "nope"}, 2, nil, []string{`unknown command "nope"`}},
		{"help help", []string{"help", "help"}, 0, []string{"usage: vlc COMMAND"}, nil},
		{"help -h", []string{"help", "-h"}, 0, []string{"usage: vlc COMMAND"}, nil},
		{"help two", []string{"help", "compress", "eval"}, 2, nil, []string{"one command at a time"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runVLC(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, errs)
			}
			for _, c := range []struct {
				name, got string
				want      []string
			}{{"stdout", out, tc.stdout}, {"stderr", errs, tc.stderr}} {
				if len(c.want) == 0 && c.got != "" {
					t.Errorf("%s %q, want nothing", c.name, c.got)
				}
				for _, w := range c.want {
					if !strings.Contains(c.got, w) {
						t.Errorf("%s lacks %q:\n%s", c.name, w, c.got)
					}
				}
			}
		})
	}
}

// vlc version names the module version, the Go version and the backends.
func TestVersion(t *testing.T) {
	out, _ := mustVLC(t, "version")
	if !strings.HasPrefix(out, "vlc ") || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, "backends: ") || !strings.Contains(out, "cpu") {
		t.Errorf("version: %q", out)
	}
}
