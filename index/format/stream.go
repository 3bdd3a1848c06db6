package format

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
)

// FileWriter writes a container whose section kinds and lengths are known
// before their bytes are: each section has its place in the file from the
// start, so the caller hands its bytes over as they become ready, and the
// disk writes them while the rest is still being made. It gives the bytes
// WriteFile gives for the same sections, with the same temporary file,
// checks, cancellation and rename.
//
// Sections fill in any order, one interleaved with another, each from its
// first byte to its last; each one's CRC-32C is taken as its bytes pass,
// and the header and table are written last, by Commit. A FileWriter is
// not safe for concurrent use.
type FileWriter struct {
	ctx     context.Context
	path    string
	f       *os.File
	infos   []SectionInfo // CRC: of the bytes written so far
	size    int64
	filled  []int64 // bytes written of each section
	started []int64 // bytes of each section the disk was asked to write (startWriteback)
	err     error   // the first error; once set, the temporary file is gone
}

// CreateFile starts a container at path holding sections of these kinds
// and lengths, in this order (at most 64, kinds of 4 printable ASCII
// bytes, no kind twice: as Encode requires, checked before touching the
// disk). It creates the temporary file WriteFile writes, first removing
// the leftovers of earlier writes to path, and reserves the file's whole
// size on the disk where the file system can (preallocate), so that a
// disk too small fails here rather than after the encoding and writing.
// The file at path, if any, is replaced only by Commit; the caller calls
// Abort when it gives up.
func CreateFile(ctx context.Context, path string, kinds []Kind, lengths []int64) (*FileWriter, error) {
	secs := make([]Section, len(kinds))
	for i, k := range kinds {
		secs[i].Kind = k
	}
	err := checkSections(secs)
	if err == nil && len(lengths) != len(kinds) {
		err = fmt.Errorf("%d lengths for %d sections", len(lengths), len(kinds))
	}
	for i, n := range lengths {
		if err == nil && n < 0 {
			err = fmt.Errorf("section %q: %w: %d", kinds[i], ErrSectionLength, n)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("format: write %s: %w", path, err)
	}
	infos := make([]SectionInfo, len(kinds))
	off := alignUp(headerSize + entrySize*int64(len(kinds)))
	for i, k := range kinds {
		infos[i] = SectionInfo{Kind: k, Offset: off, Length: lengths[i]}
		off = alignUp(off + lengths[i])
	}
	f, err := openTemp(ctx, path)
	if err != nil {
		return nil, err
	}
	w := &FileWriter{ctx: ctx, path: path, f: f, infos: infos, size: off,
		filled: make([]int64, len(kinds)), started: make([]int64, len(kinds))}
	if err := preallocate(f, off); err != nil {
		return nil, w.fail(err)
	}
	for i := range infos {
		if infos[i].Length == 0 {
			if err := w.pad(i); err != nil {
				return nil, w.fail(err)
			}
		}
	}
	return w, nil
}

// WriteSection appends p to section i (its place in the list CreateFile
// was given), in chunks of at most 4 MiB with ctx checked before each.
// Bytes beyond the section's length are refused. On any error the
// temporary file is removed and every later call fails.
func (w *FileWriter) WriteSection(i int, p []byte) error {
	if w.err != nil {
		return w.err
	}
	if i < 0 || i >= len(w.infos) {
		return w.fail(fmt.Errorf("no section %d of %d", i, len(w.infos)))
	}
	s := &w.infos[i]
	if rest := s.Length - w.filled[i]; int64(len(p)) > rest {
		return w.fail(fmt.Errorf("section %q: %w: %d bytes past its %d", s.Kind, ErrSectionLength, int64(len(p))-rest, s.Length))
	}
	for len(p) > 0 {
		if err := w.ctx.Err(); err != nil {
			return w.fail(err)
		}
		chunk := p[:min(len(p), ctxChunk)]
		if _, err := w.f.WriteAt(chunk, s.Offset+w.filled[i]); err != nil {
			return w.fail(err)
		}
		s.CRC = crc32.Update(s.CRC, castagnoli, chunk)
		w.filled[i] += int64(len(chunk))
		p = p[len(chunk):]
		if w.filled[i]-w.started[i] >= writeBehindBytes {
			startWriteback(w.f, s.Offset+w.started[i], w.filled[i]-w.started[i])
			w.started[i] = w.filled[i]
		}
	}
	if w.filled[i] == s.Length {
		if err := w.pad(i); err != nil {
			return w.fail(err)
		}
	}
	return nil
}

// pad writes the zeros between the end of section i and the next
// 64-byte boundary.
func (w *FileWriter) pad(i int) error {
	var zero [align]byte
	end := w.infos[i].Offset + w.infos[i].Length
	_, err := w.f.WriteAt(zero[:alignUp(end)-end], end)
	return err
}

// Commit writes the header and section table, syncs the file and puts it
// at path, replacing the file there, as WriteFile does. Every section must
// be whole. On any error the temporary file is removed and the file at
// path left as it was.
func (w *FileWriter) Commit() error {
	if w.err != nil {
		return w.err
	}
	for i, s := range w.infos {
		if w.filled[i] != s.Length {
			return w.fail(fmt.Errorf("section %q: %w: %d of its %d bytes written", s.Kind, ErrSectionLength, w.filled[i], s.Length))
		}
	}
	if err := w.ctx.Err(); err != nil {
		return w.fail(err)
	}
	hdr := marshalHeader(w.infos, w.size, fileVersion(w.infos, nil))
	head := make([]byte, w.infos[0].Offset) // the header, the table, zeros to the first section
	copy(head, hdr)
	_, err := w.f.WriteAt(head, 0)
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.err = fmt.Errorf("format: write %s: already committed", w.path)
	return install(w.ctx, w.path, w.f.Name(), err)
}

// Abort gives the write up: it removes the temporary file, leaving the
// file at path as it was. It does nothing after Commit or an error, so a
// caller may defer it.
func (w *FileWriter) Abort() {
	if w.err == nil {
		w.fail(fmt.Errorf("aborted"))
	}
}

// fail removes the temporary file and makes err, naming the path, every
// later call's answer.
func (w *FileWriter) fail(err error) error {
	w.f.Close()
	os.Remove(w.f.Name())
	w.err = fmt.Errorf("format: write %s: %w", w.path, err)
	return w.err
}
