package format

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"runtime/debug"
	"slices"

	"github.com/edsrzf/mmap-go"
	"github.com/vlc-embed/vlc/internal/fault"
	"github.com/vlc-embed/vlc/internal/regfile"
)

// File is an open, read-only, memory-mapped container. Its methods may be
// called from several goroutines, but not concurrently with Close.
type File struct {
	path     string
	data     mmap.MMap // nil once closed
	info     os.FileInfo
	size     int64
	version  int
	sections []SectionInfo
}

// OpenOptions controls Open.
type OpenOptions struct {
	// Verify checks every section's CRC and the zero padding before Open
	// returns. It reads the whole file; without it Open reads only the
	// header and table, and a caller may Verify later.
	Verify bool
}

// Open maps the container at path read-only and validates its header and
// section table before trusting any of it. Errors name the path and wrap
// ErrNotIndex, ErrVersion or ErrCorrupt, or the error from the file system.
//
// The file must not be modified in place while open (the mapping would
// change under the reader); WriteFile replaces files, which is safe.
func Open(path string, opt OpenOptions) (*File, error) {
	fh, err := regfile.Open(path) // a FIFO is refused, not waited on
	if errors.Is(err, ErrNotRegular) {
		return nil, notRegular(err)
	}
	if err != nil {
		return nil, fmt.Errorf("format: %w", err)
	}
	defer fh.Close() // the mapping outlives the descriptor
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("format: %w", err)
	}
	size := fi.Size()
	if size < int64(len(magic)) { // also: mmap cannot map an empty file
		return nil, fmt.Errorf("%s: file is %d bytes, too short for the magic: %w", path, size, ErrNotIndex)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("%s: file is %d bytes, too large to map on this platform", path, size)
	}
	// Map exactly the size checked above, not whatever Stat says later.
	m, err := mmap.MapRegion(fh, int(size), mmap.RDONLY, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("format: mmap %s: %w", path, err)
	}
	fault.Register(m, path, ErrCorrupt)
	infos, version, err := parseHeaderGuarded(path, m)
	if err != nil {
		fault.Unregister(m)
		m.Unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &File{path: path, data: m, info: fi, size: size, version: version, sections: infos}
	if opt.Verify {
		if err := f.Verify(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// Version is the file's format version, MinVersion to Version.
func (f *File) Version() int { return f.version }

// Section returns the data of the section of kind k, and whether there is
// one. The slice points into the read-only mapping: it must not be written
// to (that faults) and must not be used after Close.
func (f *File) Section(k Kind) ([]byte, bool) {
	if f.data == nil {
		return nil, false
	}
	for _, s := range f.sections {
		if s.Kind == k {
			return f.data[s.Offset : s.Offset+s.Length : s.Offset+s.Length], true
		}
	}
	return nil, false
}

// Sections returns the section table, in file order, for tools such as
// `vlc info`. The caller may modify the returned slice.
func (f *File) Sections() []SectionInfo {
	return append([]SectionInfo(nil), f.sections...)
}

// Verify reads the whole file and checks every section's CRC and that all
// padding is zero. The error names the damaged section and wraps ErrCorrupt.
func (f *File) Verify() (err error) {
	if f.data == nil {
		return fmt.Errorf("format: verify %s: %w", f.path, os.ErrClosed)
	}
	defer CatchFault(f.path, &err, debug.SetPanicOnFault(true))
	if err := verifyBody(f.data, f.sections); err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	return nil
}

// VerifySections checks the CRC of each section of the given kinds that
// the file has, reading only those: for a reader that uses a few small
// sections of a large file (the model of an index). A mismatch names the
// section and wraps ErrCorrupt; a kind the file lacks is no error.
func (f *File) VerifySections(kinds ...Kind) (err error) {
	if f.data == nil {
		return fmt.Errorf("format: verify %s: %w", f.path, os.ErrClosed)
	}
	defer CatchFault(f.path, &err, debug.SetPanicOnFault(true))
	for _, s := range f.sections {
		if !slices.Contains(kinds, s.Kind) {
			continue
		}
		if got := crc32.Checksum(f.data[s.Offset:s.Offset+s.Length], castagnoli); got != s.CRC {
			return fmt.Errorf("%s: %w", f.path, corrupt("section %q checksum mismatch: stored 0x%08x, computed 0x%08x", s.Kind, s.CRC, got))
		}
	}
	return nil
}

// Stat describes the file that was mapped, as it was when Open read it
// (fstat of the descriptor mapped, not of whatever the path names later).
// While the mapping lives the file cannot be freed, so os.SameFile of a
// later Stat of a path and this proves that the path still names this
// very file: a file system reuses a file's identity only once it is gone.
func (f *File) Stat() os.FileInfo { return f.info }

// Path is the path the file was opened from.
func (f *File) Path() string { return f.path }

// Size returns the file's size in bytes.
func (f *File) Size() int64 { return f.size }

// Close unmaps the file. Slices from Section become invalid. Closing twice
// is allowed and does nothing the second time.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	fault.Unregister(f.data)
	err := f.data.Unmap()
	f.data = nil
	if err != nil {
		return fmt.Errorf("format: close %s: %w", f.path, err)
	}
	return nil
}

// verifyBody checks every section's CRC and that every byte outside the
// header, the table and the sections is zero. infos must come from
// parseHeader(b).
func verifyBody(b []byte, infos []SectionInfo) error {
	end := int64(headerSize + entrySize*len(infos))
	after := "section table"
	for _, s := range infos {
		if i := firstNonZero(b[end:s.Offset]); i >= 0 {
			return corrupt("padding after %s is not zero (offset %d)", after, end+int64(i))
		}
		if got := crc32.Checksum(b[s.Offset:s.Offset+s.Length], castagnoli); got != s.CRC {
			return corrupt("section %q checksum mismatch: stored 0x%08x, computed 0x%08x", s.Kind, s.CRC, got)
		}
		end = s.Offset + s.Length
		after = fmt.Sprintf("section %q", s.Kind)
	}
	if i := firstNonZero(b[end:]); i >= 0 {
		return corrupt("padding after %s is not zero (offset %d)", after, end+int64(i))
	}
	return nil
}

// parseHeaderGuarded is parseHeader with a fault in the mapping (the file
// shrank after it was measured) reported as an error; it also returns the
// version parseHeader checked.
func parseHeaderGuarded(path string, m []byte) (infos []SectionInfo, version int, err error) {
	defer CatchFault(path, &err, debug.SetPanicOnFault(true))
	infos, err = parseHeader(m)
	if err != nil {
		return nil, 0, err
	}
	return infos, int(le.Uint32(m[8:])), nil
}
