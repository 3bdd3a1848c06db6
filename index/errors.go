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
)
