package format

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vlc-embed/vlc/internal/regfile"
	"github.com/vlc-embed/vlc/internal/shortname"
)

// Encode writes a container holding sections, in the given order, to w. The
// bytes depend only on the sections, so the same input always gives the same
// file. It rejects an empty list, more than 64 sections, kinds that are not
// 4 printable ASCII bytes and duplicate kinds, before writing anything.
func Encode(w io.Writer, sections []Section) error {
	if err := checkSections(sections); err != nil {
		return fmt.Errorf("format: encode: %w", err)
	}
	infos, size := layout(sections)
	hdr := marshalHeader(infos, size, fileVersion(infos, sections))
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("format: encode: %w", err)
	}
	var zero [align]byte
	pos := int64(len(hdr))
	for i, s := range sections {
		if _, err := w.Write(zero[:infos[i].Offset-pos]); err != nil {
			return fmt.Errorf("format: encode: %w", err)
		}
		if _, err := w.Write(s.Data); err != nil {
			return fmt.Errorf("format: encode: %w", err)
		}
		pos = infos[i].Offset + infos[i].Length
	}
	if _, err := w.Write(zero[:size-pos]); err != nil {
		return fmt.Errorf("format: encode: %w", err)
	}
	return nil
}

// WriteFile writes a container to path atomically: readers see either the
// old file or the complete new one, never a partial write, and an open
// mapping of the old file stays valid because the file is replaced, not
// rewritten. It writes a temporary file ".<base>.tmp-<pid>-<random>" in
// the same folder (<base> is path's file name, shortened when longer than
// 220 bytes so that the temporary name fits in 255; see tempPrefix), syncs
// it, renames it over path and syncs the folder. On error the temporary
// file is removed and an existing file at path is left as it was. A
// process killed while writing cannot remove its temporary file;
// WriteFile first removes such leftovers of earlier writes to the same
// path (see RemoveStaleTemps). A path that exists and is not a regular
// file, checked before writing and again before the rename, is refused
// with ErrNotRegular and left as it was. A symbolic link to a regular file
// is replaced by the new file; its target is left as it was.
func WriteFile(path string, sections []Section) error {
	return WriteFileContext(context.Background(), path, sections)
}

// WriteFileContext is WriteFile that gives up when ctx is done: it checks
// ctx before creating the temporary file, between chunks of at most 4 MiB
// while writing, and before the rename. On cancellation the temporary file
// is removed, path is left as it was, and the error wraps ctx's error.
// Once the rename has happened the write has succeeded, whatever ctx says.
func WriteFileContext(ctx context.Context, path string, sections []Section) error {
	if err := checkSections(sections); err != nil { // before touching the disk
		return fmt.Errorf("format: write %s: %w", path, err)
	}
	tmp, err := openTemp(ctx, path)
	if err != nil {
		return err
	}
	return install(ctx, path, tmp.Name(), writeSync(ctx, tmp, sections))
}

// openTemp checks ctx and path (regfile.CheckOutput), removes the
// leftovers of earlier writes to path and creates the temporary file the
// new one is written to.
func openTemp(ctx context.Context, path string) (*os.File, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("format: write %s: %w", path, err)
	}
	if err := regfile.CheckOutput(path); err != nil {
		return nil, err
	}
	RemoveStaleTemps(path)
	tmp, err := createTemp(filepath.Dir(path), filepath.Base(path), "")
	if err != nil {
		return nil, fmt.Errorf("format: write %s: %w", path, err)
	}
	return tmp, nil
}

// install puts the temporary file tmp, written, synced and closed (err:
// the first error doing so), at path: it checks ctx and path again,
// renames tmp over path and syncs the folder. On any error before the
// rename it removes tmp.
func install(ctx context.Context, path, tmp string, err error) error {
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		// Again: a device or pipe made at path meanwhile is not replaced.
		err = regfile.CheckOutput(path)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if errors.Is(err, ErrNotRegular) {
		os.Remove(tmp)
		return err
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("format: write %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("format: write %s: file replaced, but syncing its folder failed: %w", path, err)
	}
	return nil
}

// tempBaseMax is the longest file name that its temporary files hold
// whole: with the longest pid (10 digits), "-probe" and random part (13
// digits), ".<base>.tmp-<pid>-probe<random>" then has 255 bytes.
const tempBaseMax = shortname.Max - len(".") - len(".tmp-") - len("4294967295-probe") - 13

// tempPrefix is how the names of temporary files of a file named base
// start: "." + base + ".tmp-", where a base longer than tempBaseMax bytes
// is shortened (shortname.Fit: its first bytes cut at a rune boundary, "~"
// and 16 hexadecimal digits of its SHA-256), so that every temporary name
// fits in 255 bytes. It depends on base alone, so that RemoveStaleTemps
// finds the leftovers of another process.
func tempPrefix(base string) string { return "." + shortname.Fit(base, tempBaseMax) + ".tmp-" }

// createTemp is os.CreateTemp with mode 0644 (before umask) rather than
// 0600, since the temporary file becomes the index, and with the writer's
// process id in the name, so that a later write can tell a leftover of a
// killed process from a file another process is still writing. tag, when
// not empty, goes before the random part (CheckWritable's "probe").
func createTemp(dir, base, tag string) (*os.File, error) {
	for range 1000 {
		name := filepath.Join(dir, tempPrefix(base)+strconv.Itoa(os.Getpid())+"-"+tag+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("cannot create a temporary file in %s", dir)
}

// CheckWritable fails when a container could not be written to path: its
// folder is missing or not a folder, path (or the target of a symbolic link
// there) exists and is not a regular file (ErrNotRegular: a folder, a
// device, a named pipe, a socket), or the folder is not writable (a
// temporary file of WriteFile's form, named
// ".<base>.tmp-<pid>-probe<random>" with <base> shortened as there, is
// created and removed to find out, so a process killed meanwhile leaves a
// file that RemoveStaleTemps removes). For callers about to do long work
// whose result goes to path.
func CheckWritable(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("output %s: %s is not a folder", path, dir)
	}
	if err := regfile.CheckOutput(path); err != nil {
		return err // "output PATH is a device, not a regular file"
	}
	probe, err := createTemp(dir, filepath.Base(path), "probe")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("output %s: cannot write in %s: %w", path, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// processStart is about when this process started: no temporary file it
// writes is older.
var processStart = time.Now()

// RemoveStaleTemps removes the temporary files that writes to path by
// processes that no longer run have left behind (a process killed with
// SIGKILL, or by a power cut, cannot clean up), and returns the names it
// removed. A file is stale when its name is ".<base>.tmp-<pid>-<random>"
// (<base> shortened as WriteFile does for a name longer than 220 bytes), no
// process <pid> runs on this machine, and it was last modified before
// this process started; anything else (another writer's file in progress,
// names of another form) is left alone. Where process ids cannot be
// checked (not Unix), nothing is removed. Errors are ignored: cleaning up
// is a courtesy, never a reason to fail a write.
func RemoveStaleTemps(path string) []string {
	dir, prefix := filepath.Dir(path), tempPrefix(filepath.Base(path))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || processRuns(pid) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(processStart) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		if os.Remove(name) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}

// writeSync encodes into f, syncs it and closes it. Writes go through in
// chunks of at most ctxChunk bytes, ctx checked before each.
func writeSync(ctx context.Context, f *os.File, sections []Section) error {
	// A buffer no larger than the file: a store writes many small ones.
	size := 4096
	for _, s := range sections {
		size += 64 + len(s.Data)
	}
	bw := bufio.NewWriterSize(ctxWriter{ctx, &writeBehind{f: f}}, min(size, 1<<20))
	err := Encode(bw, sections)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

const ctxChunk = 4 << 20

// writeBehind writes to f and starts the disk writing every
// writeBehindBytes written (startWriteback), so that the disk works while
// the rest is written rather than all at the Sync.
type writeBehind struct {
	f            *os.File
	off, started int64
}

const writeBehindBytes = 32 << 20

func (w *writeBehind) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.started >= writeBehindBytes {
		startWriteback(w.f, w.started, w.off-w.started)
		w.started = w.off
	}
	return n, err
}

// ctxWriter writes to w in chunks and stops once ctx is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if err := c.ctx.Err(); err != nil {
			return n, err
		}
		m, err := c.w.Write(p[n:min(len(p), n+ctxChunk)])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// syncDir makes the rename durable. Windows cannot open a folder for
// syncing, so there it does nothing.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Stale reports whether a file that process pid wrote, last modified at
// mod, is left over from a process that has exited: pid runs no more on
// this machine and the file predates this process. Where process ids
// cannot be checked (not Unix) nothing is stale.
func Stale(pid int, mod time.Time) bool {
	return pid > 0 && pid != os.Getpid() && !processRuns(pid) && mod.Before(processStart)
}
