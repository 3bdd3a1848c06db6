package format

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
	hdr := marshalHeader(infos, size)
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
// rewritten. It writes a temporary file "."+base+".tmp-<random>" in the
// same folder, syncs it, renames it over path and syncs the folder. On
// error the temporary file is removed and an existing file at path is left
// as it was.
func WriteFile(path string, sections []Section) error {
	if err := checkSections(sections); err != nil { // before touching the disk
		return fmt.Errorf("format: write %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	tmp, err := createTemp(dir, filepath.Base(path))
	if err != nil {
		return fmt.Errorf("format: write %s: %w", path, err)
	}
	if err := writeSync(tmp, sections); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("format: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("format: write %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("format: write %s: file replaced, but syncing its folder failed: %w", path, err)
	}
	return nil
}

// createTemp is os.CreateTemp with mode 0644 (before umask) rather than
// 0600, since the temporary file becomes the index.
func createTemp(dir, base string) (*os.File, error) {
	for range 1000 {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("cannot create a temporary file in %s", dir)
}

// writeSync encodes into f, syncs it and closes it.
func writeSync(f *os.File, sections []Section) error {
	bw := bufio.NewWriterSize(f, 1<<20)
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
