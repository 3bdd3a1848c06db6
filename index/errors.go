package index

import (
	"github.com/vlc-embed/vlc/internal/errs"

	"github.com/vlc-embed/vlc/index/format"
)

// Errors callers can test with errors.Is. Structural damage of any kind
// (bad checksum, lengths that disagree, out-of-range values) is ErrCorrupt.
var (
	ErrCorrupt  = format.ErrCorrupt
	ErrNotIndex = format.ErrNotIndex
	ErrVersion  = format.ErrVersion
	// ErrNotRegular: a path that is not a regular file (a pipe, a device,
	// a socket, a folder), refused as an index or as an output.
	ErrNotRegular = format.ErrNotRegular
	ErrClosed     = errs.ErrClosed
	ErrDim        = errs.New(errs.ErrArgument, "dimension does not match the index")
	ErrMetric     = errs.New(errs.ErrArgument, "unknown metric")
	ErrArgument   = errs.ErrArgument
	// ErrZeroVector: a vector whose every value is 0 (a row or a query)
	// under the cosine metric, which compares directions and a zero
	// vector has none. Refused wherever a vector enters (l2 and ip take
	// it).
	ErrZeroVector = errs.New(errs.ErrArgument, "zero vector under the cosine metric")
)
