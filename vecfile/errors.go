package vecfile

import (
	"errors"
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"

	"github.com/vlc-embed/vlc/internal/regfile"
)

// Sentinel errors. Every error returned by this package names the file path
// first and then the problem (row, value, sizes); it wraps one of these
// sentinels (or, for operating system failures, the underlying error, so that
// errors.Is(err, fs.ErrNotExist) works; CheckFinite after Close wraps
// fs.ErrClosed), to be tested with errors.Is.
var (
	// ErrEmpty reports an input without vectors: a 0-byte file, or an .npy
	// header whose shape has 0 rows, or is (0,).
	ErrEmpty = errs.New(errs.ErrArgument, "no vectors")

	// ErrSize reports a file whose size does not fit its layout: not a whole
	// number of rows, an .npy data section that is shorter or longer than its
	// shape says, or an .ivecs row that runs past the end of the file.
	ErrSize = errs.New(errs.ErrFormat, "file size does not match the layout")

	// ErrDim reports a missing or invalid dimension: no Options.Dim for a raw
	// .f16 file, Options.Dim different from the file's own dimension, a
	// dimension <= 0 or > MaxDim, an .fvecs row whose dimension differs
	// from the first row's, or a raw .f16 file whose values look like rows
	// of another dimension (ErrLikelyDim).
	ErrDim = errs.New(errs.ErrArgument, "bad dimension")

	// ErrLikelyDim reports a raw .f16 file whose values look like rows of
	// another dimension than Options.Dim (a dimension that divides the
	// file size reads without error, but each row then mixes values of
	// different coordinates, or holds several vectors). The message names
	// the likely dimension. Such errors match ErrDim too.
	ErrLikelyDim = errs.New(ErrDim, "the dimension looks wrong")

	// ErrNonFinite reports a NaN or infinite value, found by CheckFinite;
	// also a float64 value beyond the float32 range, as it would read as
	// ±Inf.
	ErrNonFinite = errs.New(errs.ErrArgument, "non-finite value")

	// ErrZero reports a row whose every value is 0, found by CheckRows
	// when asked (the cosine metric refuses such rows).
	ErrZero = errs.New(errs.ErrArgument, "zero row")

	// ErrFormat reports a file this package cannot read: unknown extension,
	// not a regular file, bad .npy magic, version, header, dtype, memory
	// order or shape.
	ErrFormat = errs.New(errs.ErrFormat, "unsupported format")

	// ErrChanged reports a file that another program truncated or
	// rewrote in place while a Matrix mapped it: reading the missing part
	// faulted. The error names this file, not whatever else the faulting
	// code was reading (package internal/fault).
	ErrChanged = errs.New(errs.ErrChanged, "file changed while in use")
	// ErrRows reports a range of rows that is not inside the file.
	ErrRows = errs.New(errs.ErrArgument, "rows outside the file")

	// ErrNotRegular reports a path that is not a regular file (a named
	// pipe, a device, a socket, a folder), refused before anything blocks
	// on it or, for an output, replaces it. Such errors match ErrFormat too.
	ErrNotRegular = regfile.ErrNotRegular
)

// MaxDim is the largest dimension accepted.
const MaxDim = 1 << 16

// fileError is the error type of this package: msg is the full message,
// starting with the path, kind is the wrapped sentinel or cause.
type fileError struct {
	msg  string
	kind error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.kind }

// likelyDim is the kind of an error refusing a raw .f16 file's dimension.
var likelyDim = errors.Join(ErrDim, ErrLikelyDim)

// notRegular is the kind of an error refusing a file that is not regular.
var notRegular = errors.Join(ErrFormat, ErrNotRegular)

// newError returns an error whose message is "<path>: <formatted detail>"
// and which wraps kind.
func newError(kind error, path, format string, args ...any) error {
	return &fileError{msg: path + ": " + fmt.Sprintf(format, args...), kind: kind}
}
