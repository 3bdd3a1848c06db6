package errs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vlc-embed/vlc/internal/errs"
)

// A sentinel matches itself and its category, through wrapping, and no
// other; its message is its own.
func TestSentinel(t *testing.T) {
	dim := errs.New(errs.ErrArgument, "dimension does not match")
	other := errs.New(errs.ErrArgument, "unknown metric")
	err := fmt.Errorf("x.vlc: %w: 95 values, the index has 96", dim)
	switch {
	case !errors.Is(err, dim):
		t.Error("does not match its sentinel")
	case !errors.Is(err, errs.ErrArgument):
		t.Error("does not match its category")
	case errors.Is(err, other):
		t.Error("matches a sibling sentinel")
	case errors.Is(err, errs.ErrCorrupt):
		t.Error("matches another category")
	case err.Error() != "x.vlc: dimension does not match: 95 values, the index has 96":
		t.Errorf("message %q", err)
	}
}
