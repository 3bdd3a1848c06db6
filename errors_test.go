package vlc_test

import (
	"context"
	"errors"
	"github.com/vlc-embed/vlc/device"
	"os"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/anneal"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/quant"
	"github.com/vlc-embed/vlc/vecfile"
)

// Every package's sentinel falls in exactly one of the root's categories.
func TestErrorCategories(t *testing.T) {
	categories := []error{vlc.ErrArgument, vlc.ErrNotFound, vlc.ErrDuplicate, vlc.ErrCorrupt, vlc.ErrFormat, vlc.ErrLocked,
		vlc.ErrNotRegular, vlc.ErrOutOfMemory, vlc.ErrChanged, vlc.ErrClosed, vlc.ErrUnavailable}
	for _, c := range []struct {
		err, category error
	}{
		{index.ErrDim, vlc.ErrArgument}, {index.ErrMetric, vlc.ErrArgument}, {index.ErrZeroVector, vlc.ErrArgument},
		{index.ErrKey, vlc.ErrArgument}, {index.ErrPayload, vlc.ErrArgument}, {index.ErrDuplicateKey, vlc.ErrDuplicate},
		{index.ErrClosed, vlc.ErrClosed}, {device.ErrNoSearch, vlc.ErrUnavailable}, {device.ErrNonFinite, vlc.ErrArgument},
		{format.ErrCorrupt, vlc.ErrCorrupt}, {format.ErrNotIndex, vlc.ErrFormat}, {format.ErrVersion, vlc.ErrFormat},
		{vecfile.ErrEmpty, vlc.ErrArgument}, {vecfile.ErrSize, vlc.ErrFormat}, {vecfile.ErrDim, vlc.ErrArgument},
		{vecfile.ErrNonFinite, vlc.ErrArgument}, {vecfile.ErrZero, vlc.ErrArgument}, {vecfile.ErrFormat, vlc.ErrFormat},
		{vecfile.ErrChanged, vlc.ErrChanged}, {vecfile.ErrRows, vlc.ErrArgument}, {vecfile.ErrNotRegular, vlc.ErrNotRegular},
		{anneal.ErrTooFewPoints, vlc.ErrArgument}, {device.ErrNonFinite, vlc.ErrArgument}, {device.ErrNoBackend, vlc.ErrUnavailable},
		{quant.ErrBits, vlc.ErrArgument}, {vlc.ErrNotFound, vlc.ErrNotFound}, {vlc.ErrLocked, vlc.ErrLocked},
		{vlc.ErrModel, vlc.ErrArgument}, {vlc.ErrRange, vlc.ErrArgument}, {vlc.ErrUnderflow, vlc.ErrArgument},
		{&vlc.OptionError{Fields: []string{"Bits"}}, vlc.ErrArgument},
	} {
		for _, cat := range categories {
			if got, want := errors.Is(c.err, cat), cat == c.category; got != want {
				t.Errorf("errors.Is(%q, %q) = %v", c.err, cat, got)
			}
		}
	}
}

// Bad options are an *OptionError naming the field, in ErrArgument, the
// cause kept: bits no code takes, a dimension the input does not have.
func TestBadOptionsAreOptionErrors(t *testing.T) {
	const deep2k = "testdata/deep2k/base.f16"
	out := filepath.Join(t.TempDir(), "x.vlc")
	fvecs := filepath.Join(t.TempDir(), "x.fvecs")
	rows := [][]float32{{1, 2, 3, 4, 5, 6, 7, 8}, {8, 7, 6, 5, 4, 3, 2, 1}}
	if err := vecfile.WriteFvecs(fvecs, rows); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		input string
		opt   vlc.Options
		field string
		cause error
	}{
		{"bits 3", deep2k, vlc.Options{Dim: 96, Bits: 3}, "Bits", quant.ErrBits},
		{"bits 4 of sq8", deep2k, vlc.Options{Dim: 96, Bits: 4, Code: "sq8"}, "Bits", quant.ErrBits},
		{"unknown code", deep2k, vlc.Options{Dim: 96, Code: "lvq"}, "Code", nil},
		{"dim against the file's", fvecs, vlc.Options{Dim: 7}, "Dim", vecfile.ErrDim},
	} {
		_, err := vlc.Compress(context.Background(), c.input, out, c.opt)
		var oe *vlc.OptionError
		switch {
		case !errors.As(err, &oe) || len(oe.Fields) != 1 || oe.Fields[0] != c.field:
			t.Errorf("%s: %v, want an *OptionError of %s", c.name, err, c.field)
		case !errors.Is(err, vlc.ErrArgument):
			t.Errorf("%s: %v is not ErrArgument", c.name, err)
		case c.cause != nil && !errors.Is(err, c.cause):
			t.Errorf("%s: %v does not keep its cause %v", c.name, err, c.cause)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: an index was written", c.name)
		}
	}
}
