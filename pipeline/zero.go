package pipeline

import (
	"errors"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// check refuses the rows of src that metric cannot index before any work:
// values not finite and, under cosine, zero rows (a file's, in the same
// pass; Build's and Add's documents were checked by checkDocs, and
// points refuses a zero row it normalises in any case).
func (src Source) check(metric index.Metric) error {
	if src.CheckRows != nil {
		return src.CheckRows(metric == index.Cosine)
	}
	return nil
}

// zeroRows turns vecfile's zero row error ("<path>: row 17: every value
// is 0") into one that says why and wraps ErrZeroVector (and
// vecfile.ErrZero); other errors come back as they are.
func zeroRows(err error) error {
	if !errors.Is(err, vecfile.ErrZero) {
		return err
	}
	return &rangeError{err.Error() + ": " + zeroWhy, errors.Join(ErrZeroVector, err)}
}
