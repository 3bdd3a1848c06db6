package index

import (
	"errors"

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
	ErrClosed     = errors.New("index: closed")
	ErrDim        = errors.New("index: query dimension does not match the index")
	ErrMetric     = errors.New("index: unknown metric")
	ErrArgument   = errors.New("index: invalid argument")
	// ErrZeroVector: a vector whose every value is 0 (a row or a query)
	// under the cosine metric, which compares directions and a zero
	// vector has none. Refused wherever a vector enters (l2 and ip take
	// it).
	ErrZeroVector = errors.New("index: zero vector under the cosine metric")
)
