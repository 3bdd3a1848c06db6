package format

import (
	"github.com/vlc-embed/vlc/internal/errs"

	"github.com/vlc-embed/vlc/internal/regfile"
)

// Sentinel errors. Every error from Open and Verify that is about the file's
// content wraps exactly one of them, so callers can tell "not ours" and "too
// new" (worth a different message) from "damaged" (rebuild the index).
var (
	// ErrCorrupt covers every structural or checksum problem: a truncated
	// file, a bad header or table, a section out of bounds, a CRC mismatch
	// or non-zero padding.
	ErrCorrupt = errs.New(errs.ErrCorrupt, "corrupt index")

	// ErrNotIndex means the file does not start with the magic bytes (or is
	// too short to hold them): it is not a vlc index at all. It does not
	// satisfy errors.Is(err, ErrCorrupt).
	ErrNotIndex = errs.New(errs.ErrFormat, "not a vlc index")

	// ErrVersion means the file is a vlc index in a format version this
	// build cannot read. It does not satisfy errors.Is(err, ErrCorrupt).
	ErrVersion = errs.New(errs.ErrFormat, "unsupported index version")

	// ErrNotRegular means a path is not a regular file: a named pipe, a
	// device, a socket or a folder. Open refuses such an index without
	// blocking on it (the error matches ErrNotIndex too); CheckWritable
	// and WriteFile refuse such an output rather than replace it.
	ErrNotRegular = regfile.ErrNotRegular

	// ErrSectionLength means a FileWriter was handed more bytes for a
	// section than the length it was created with, or fewer by Commit.
	ErrSectionLength = errs.New(errs.ErrArgument, "section bytes do not match its length")
)

// notRegular wraps a refusal of an index that is not a regular file, so
// that it matches ErrNotIndex too, keeping its message.
func notRegular(err error) error { return notRegularIndex{err} }

type notRegularIndex struct{ error }

func (e notRegularIndex) Unwrap() error        { return e.error }
func (e notRegularIndex) Is(target error) bool { return target == ErrNotIndex }
