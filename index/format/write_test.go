package format

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countdownCtx is a context whose Err turns to Canceled after a given
// number of calls: it cancels a write at a chosen chunk.
type countdownCtx struct {
	context.Context
	left atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// A write canceled at any point (before the temporary file, after any
// 4 MiB chunk, before the rename) removes its temporary file, leaves the
// old file as it was and returns an error wrapping the context's; one that
// is not canceled writes the same bytes as Encode.
func TestWriteFileContextCanceled(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*ctxChunk/16+5) // 3 chunks and a bit
	secs := []Section{{Kind: KindOf("META"), Data: []byte("meta")}, {Kind: KindOf("BIG."), Data: big}}
	dir := t.TempDir()
	path := filepath.Join(dir, "idx.vlc")
	if err := WriteFile(path, smallSections()); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	canceledAt := 0
	for calls := int64(0); ; calls++ {
		ctx := &countdownCtx{Context: context.Background()}
		ctx.left.Store(calls)
		err := WriteFileContext(ctx, path, secs)
		if err == nil {
			canceledAt = int(calls)
			break
		}
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), path) {
			t.Fatalf("canceled after %d checks: %v, want context.Canceled naming the file", calls, err)
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
			t.Fatalf("canceled after %d checks: the old file changed", calls)
		}
		if n := names(t, dir); len(n) != 1 {
			t.Fatalf("canceled after %d checks: folder holds %v", calls, n)
		}
		if calls > 100 {
			t.Fatal("never completes")
		}
	}
	if canceledAt < 5 { // before the file, 4 chunks, before the rename
		t.Errorf("the write checked its context only %d times", canceledAt)
	}
	got, _ := os.ReadFile(path)
	if want := encode(t, secs); !bytes.Equal(got, want) {
		t.Error("the completed write differs from Encode")
	}
}

// RemoveStaleTemps removes the temporary files of dead processes that
// predate this one, and nothing else.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idx.vlc")
	const dead = 1<<22 + 12345 // above Linux's pid_max: no such process
	old := processStart.Add(-time.Minute)
	files := map[string]bool{ // name: removed
		fmt.Sprintf(".idx.vlc.tmp-%d-x1", dead):        true,
		fmt.Sprintf(".idx.vlc.tmp-%d-new", dead):       false, // modified after this process started
		fmt.Sprintf(".idx.vlc.tmp-%d-x1", os.Getpid()): false, // this process
		".idx.vlc.tmp-1-x1":                            false, // pid 1 runs
		".idx.vlc.tmp-x1":                              false, // another form
		fmt.Sprintf(".other.vlc.tmp-%d-x1", dead):      false, // another file's
		fmt.Sprintf(".idx.vlc.tmp-%d-x1.keep/a", dead): false, // a folder
	}
	for name := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/a") {
			os.MkdirAll(filepath.Dir(p), 0o755)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(name, "-new") {
			os.Chtimes(p, old, old)
			os.Chtimes(filepath.Dir(p), old, old)
		}
	}
	removed := RemoveStaleTemps(path)
	for name, gone := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if gone != (err != nil) {
			t.Errorf("%s: removed %v, want %v", name, err != nil, gone)
		}
	}
	if len(removed) != 1 {
		t.Errorf("removed %v, want one file", removed)
	}
}

// CheckWritable refuses, naming the path, a missing folder, a folder that
// is a file and a path that is a folder, and leaves nothing behind when
// the path can be written.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
		is         error
	}{
		{filepath.Join(dir, "no", "x.vlc"), "no/x.vlc", os.ErrNotExist},
		{filepath.Join(file, "x.vlc"), "is not a folder", nil},
		{dir, "is a folder", nil},
	} {
		err := CheckWritable(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%s: %v, want an error with %q", c.path, err, c.want)
		}
	}
	if err := CheckWritable(filepath.Join(dir, "x.vlc")); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the check left %d files in the folder, want only %s", len(ents), file)
	}
}
