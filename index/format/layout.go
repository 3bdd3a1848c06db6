// Package format is the on-disk container of a vlc index file: a 64-byte
// header, a section table, and 64-byte-aligned sections, each with a
// CRC-32C. It knows nothing about what the sections mean; docs/FORMAT.md
// ("Container") describes the bytes.
package format

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Version is the newest format version this package reads and writes. The
// container is the same in every version; the version tells the index
// which layout its sections have, so a reader older than the file refuses
// it. A file is written under BaseVersion unless it holds a section of a
// kind in kindVersions or one whose Section.Version asks for more, so
// that a file without one keeps its bytes.
const Version = 4

// BaseVersion is the version of a file none of whose sections needs a
// newer reader.
const BaseVersion = 2

// kindVersions names the section kinds that a reader of an older version
// would ignore to its users' surprise, and the version a file holding one
// is written under: GRPH, an index's graph (package graph), which a
// reader of version 2 would skip, searching by the lists alone.
var kindVersions = map[Kind]uint32{{'G', 'R', 'P', 'H'}: 3}

// fileVersion is the version a file of these sections is written under:
// the newest its kinds (kindVersions) or the sections themselves
// (Section.Version) need, at least BaseVersion.
func fileVersion(infos []SectionInfo, sections []Section) uint32 {
	v := uint32(BaseVersion)
	for _, s := range infos {
		v = max(v, kindVersions[s.Kind])
	}
	for _, s := range sections {
		v = max(v, s.Version)
	}
	return v
}

// MinVersion is the oldest format version this package reads.
const MinVersion = 1

const (
	magic       = "VLCINDEX"
	headerSize  = 64
	entrySize   = 32
	align       = 64 // section offsets and the file size are multiples of this
	maxSections = 64 // bounds the table so a corrupt count cannot make us read far
)

var (
	le         = binary.LittleEndian
	castagnoli = crc32.MakeTable(crc32.Castagnoli) // hardware-accelerated on amd64 and arm64
)

// Kind names a section: four printable ASCII bytes such as "META".
type Kind [4]byte

// KindOf converts a 4-byte string to a Kind. It panics if len(s) != 4:
// kinds are constants in the caller's code, so a wrong length is a
// programmer error, not an input error.
func KindOf(s string) Kind {
	if len(s) != 4 {
		panic(fmt.Sprintf("format: KindOf(%q): kind must be 4 bytes", s))
	}
	var k Kind
	copy(k[:], s)
	return k
}

// String returns the kind's four bytes as a string.
func (k Kind) String() string { return string(k[:]) }

// valid reports whether every byte is printable ASCII other than space, so
// kinds read well in `vlc info` and in error messages.
func (k Kind) valid() bool {
	for _, c := range k {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// Section is one section to write.
type Section struct {
	Kind Kind
	Data []byte
	// Version, when above the version the file would be written under
	// otherwise, raises the file's version to it: for data laid out so
	// that an older reader would misread it (a graph of format version
	// 4, whose GRPH section a version-3 reader takes for corrupt). At
	// most Version; 0 for the kind's own.
	Version uint32
}

// SectionInfo describes one section of an open file, as stored in its table.
type SectionInfo struct {
	Kind   Kind
	Offset int64  // from the start of the file; a multiple of 64
	Length int64  // bytes of data, without padding
	CRC    uint32 // CRC-32C (Castagnoli) of the data
}

func alignUp(n int64) int64 { return (n + align - 1) &^ (align - 1) }

// checkSections rejects input that Encode cannot write.
func checkSections(sections []Section) error {
	if len(sections) == 0 {
		return fmt.Errorf("no sections")
	}
	if len(sections) > maxSections {
		return fmt.Errorf("%d sections, at most %d allowed", len(sections), maxSections)
	}
	for i, s := range sections {
		if !s.Kind.valid() {
			return fmt.Errorf("section %d: kind %q is not 4 printable ASCII bytes", i, s.Kind)
		}
		if s.Version > Version {
			return fmt.Errorf("section %q: version %d, this build writes versions up to %d", s.Kind, s.Version, Version)
		}
		for _, t := range sections[:i] {
			if t.Kind == s.Kind {
				return fmt.Errorf("duplicate section kind %q", s.Kind)
			}
		}
	}
	return nil
}

// layout places the sections in order, each at the next multiple of 64, and
// returns their table entries and the file size.
func layout(sections []Section) ([]SectionInfo, int64) {
	infos := make([]SectionInfo, len(sections))
	off := alignUp(headerSize + entrySize*int64(len(sections)))
	for i, s := range sections {
		infos[i] = SectionInfo{
			Kind:   s.Kind,
			Offset: off,
			Length: int64(len(s.Data)),
			CRC:    crc32.Checksum(s.Data, castagnoli),
		}
		off = alignUp(off + int64(len(s.Data)))
	}
	return infos, off
}

// marshalHeader returns the header followed by the section table.
func marshalHeader(infos []SectionInfo, size int64, version uint32) []byte {
	b := make([]byte, headerSize+entrySize*len(infos))
	copy(b, magic)
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], uint32(len(infos)))
	le.PutUint64(b[16:], uint64(size))
	for i, s := range infos {
		e := b[headerSize+i*entrySize:]
		copy(e, s.Kind[:])
		le.PutUint64(e[8:], uint64(s.Offset))
		le.PutUint64(e[16:], uint64(s.Length))
		le.PutUint32(e[24:], s.CRC)
	}
	le.PutUint32(b[24:], headerCRC(b))
	return b
}

// headerCRC is the CRC-32C of the header, with its CRC field taken as
// zero, followed by the section table; b holds both.
func headerCRC(b []byte) uint32 {
	var h [headerSize]byte
	copy(h[:], b)
	clear(h[24:28])
	return crc32.Update(crc32.Checksum(h[:], castagnoli), castagnoli, b[headerSize:])
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
}

// parseHeader validates the header and section table of a whole file b and
// returns the table. Every number is bounded before it is used, so any
// content yields an error rather than a panic or a large allocation.
// It does not look at section data or padding; see verifyBody.
func parseHeader(b []byte) ([]SectionInfo, error) {
	size := uint64(len(b))
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		return nil, fmt.Errorf("bad magic: %w", ErrNotIndex)
	}
	if size < headerSize {
		return nil, corrupt("file is %d bytes, shorter than the %d-byte header", size, headerSize)
	}
	// The version comes before any other check: a later version may lay
	// out everything after it differently.
	if v := le.Uint32(b[8:]); v < MinVersion || v > Version {
		return nil, fmt.Errorf("format version %d, this build reads versions %d to %d: %w", v, MinVersion, Version, ErrVersion)
	}
	if size%align != 0 {
		what := "truncated?"
		if n := le.Uint32(b[12:]); n >= 1 && n <= maxSections && headerSize+uint64(n)*entrySize <= size {
			table := b[:headerSize+n*entrySize]
			if k, ok := cutSection(table[headerSize:], size); ok && le.Uint32(b[24:]) == headerCRC(table) {
				what = fmt.Sprintf("truncated in section %q?", k)
			}
		}
		return nil, corrupt("file size %d is not a multiple of %d (%s)", size, align, what)
	}
	n := le.Uint32(b[12:])
	if n < 1 || n > maxSections {
		return nil, corrupt("section count %d out of range 1..%d", n, maxSections)
	}
	tableEnd := headerSize + uint64(n)*entrySize
	if tableEnd > size {
		return nil, corrupt("section table of %d entries runs past the end of the file (%d bytes)", n, size)
	}
	if stored, got := le.Uint32(b[24:]), headerCRC(b[:tableEnd]); stored != got {
		return nil, corrupt("header checksum mismatch: stored 0x%08x, computed 0x%08x", stored, got)
	}
	if hs := le.Uint64(b[16:]); hs != size {
		what := "truncated?"
		if size > hs {
			what = "extended?"
		} else if k, ok := cutSection(b[headerSize:tableEnd], size); ok {
			what = fmt.Sprintf("truncated in section %q?", k)
		}
		return nil, corrupt("header says the file is %d bytes, it is %d (%s)", hs, size, what)
	}
	if !allZero(b[28:headerSize]) {
		return nil, corrupt("reserved header bytes are not zero")
	}
	infos := make([]SectionInfo, n)
	end := tableEnd // where the previous section (or the table) ends
	for i := range infos {
		e := b[headerSize+i*entrySize:][:entrySize]
		var k Kind
		copy(k[:], e)
		if !k.valid() {
			return nil, corrupt("table entry %d: kind %q is not 4 printable ASCII bytes", i, k)
		}
		for _, prev := range infos[:i] {
			if prev.Kind == k {
				return nil, corrupt("section %q appears twice in the table", k)
			}
		}
		if flags := le.Uint32(e[4:]); flags != 0 {
			return nil, corrupt("section %q: flags %#x, want 0", k, flags)
		}
		if !allZero(e[28:]) {
			return nil, corrupt("section %q: reserved table bytes are not zero", k)
		}
		off, length := le.Uint64(e[8:]), le.Uint64(e[16:])
		switch {
		case off%align != 0:
			return nil, corrupt("section %q: offset %d is not a multiple of %d", k, off, align)
		case i == 0 && off < end:
			return nil, corrupt("section %q: offset %d is inside the section table (ends at %d)", k, off, end)
		case off < end:
			return nil, corrupt("section %q: offset %d overlaps section %q (ends at %d)", k, off, infos[i-1].Kind, end)
		case off > size || length > size-off: // no off+length: it may overflow
			return nil, corrupt("section %q: offset %d length %d runs past the end of the file (%d bytes)", k, off, length, size)
		}
		infos[i] = SectionInfo{Kind: k, Offset: int64(off), Length: int64(length), CRC: le.Uint32(e[24:])}
		end = off + length
	}
	return infos, nil
}

// cutSection names the first section of table (whose CRC has been
// checked) that runs past size, the real size of a truncated file.
func cutSection(table []byte, size uint64) (Kind, bool) {
	for e := table; len(e) >= entrySize; e = e[entrySize:] {
		off, length := le.Uint64(e[8:]), le.Uint64(e[16:])
		if off > size || length > size-off {
			var k Kind
			copy(k[:], e)
			return k, k.valid()
		}
	}
	return Kind{}, false
}

func allZero(b []byte) bool { return firstNonZero(b) < 0 }

func firstNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

// FileSize is the size of the file Encode writes for sections of these
// lengths, so callers can predict an index's size before building it.
func FileSize(lengths ...int64) int64 {
	off := alignUp(headerSize + entrySize*int64(len(lengths)))
	for _, n := range lengths {
		off = alignUp(off + n)
	}
	return off
}
