// Package quant turns residuals (a vector minus its anchor) into fixed-size
// codes and scores queries against the codes without decoding them to memory.
// Each kind of code is one type behind the Code interface; the index stores
// the kind's ID and asks New for it on open.
package quant

import (
	"errors"
	"fmt"
)

// ErrBits is returned for a bits-per-dimension setting no code supports.
var ErrBits = errors.New("quant: unsupported bits per dimension")

// Kind identifies a code in the index file. Values are never reused.
type Kind uint32

const (
	// KindSQ8 is 8-bit scalar quantization with a per-list, per-dimension
	// affine range.
	KindSQ8 Kind = 1
	// KindRotated is the rotated code with per-vector scale and unbiased
	// correction (type Rotated), 1, 2, 4 or 8 bits per dimension.
	KindRotated Kind = 2
	// KindPQ is rotated product quantization (type PQ): one byte per
	// subspace of 8/bits rotated dimensions, codebooks shared by all lists;
	// 1, 2 or 4 bits per dimension. Codes are the size of the rotated
	// code's, but the codebooks add 256*dim bytes to the index: it pays
	// where n is large next to 256, or where recall matters more than a
	// few bytes per vector (docs/QUANTIZATION.md).
	KindPQ Kind = 3
)

// Code is one kind of residual code, bound to a dimension.
//
// A list's parameters (ranges, scales) are fitted once from the list's
// residuals and stored beside its codes; each vector's code has a fixed size.
type Code interface {
	Kind() Kind
	Bits() int
	Dim() int
	CodeBytes() int  // bytes per vector
	ParamBytes() int // bytes of parameters per list
	// Fit sets params (ParamBytes long) from the residuals of one list,
	// count rows of Dim values, row-major. count may be zero.
	Fit(params []byte, residuals []float32, count int)
	// Encode writes the code of one residual of list a under params.
	// Safe for concurrent use once SetAnchors (and, for a Trainer, SetGlobal)
	// has been called.
	Encode(code []byte, a int, params []byte, residual []float32)
	// Decode reconstructs a residual; for tests and tools, not for search.
	Decode(dst []float32, params []byte, code []byte)
	// SetAnchors gives the code the index's anchors (m rows of Dim),
	// once, before any Encode or NewScorer; a code working in a
	// transformed space transforms them here once rather than per query.
	SetAnchors(anchors []float32)
	// NewScorer returns scratch for one goroutine's queries.
	NewScorer() Scorer
}

// Trainer is implemented by codes that learn parameters shared by all
// lists (codebooks) from a sample of residuals before encoding. The index
// stores them in a section of their own.
type Trainer interface {
	// GlobalBytes is the size of the shared parameters, known before
	// training so that index sizes can be predicted.
	GlobalBytes() int
	// Train learns the shared parameters from count residuals (rows of
	// Dim), deterministically, and returns them; SetGlobal is still needed.
	Train(residuals []float32, count int) []byte
	// SetGlobal installs shared parameters, from Train or from a file;
	// it validates them, since a file may be damaged.
	SetGlobal(params []byte) error
}

// Scorer estimates distances from one query to coded vectors, one list at a
// time, without decoding the codes. Not safe for concurrent use.
type Scorer interface {
	// SetQuery sets the query (normalised already for cosine).
	SetQuery(q []float32)
	// ForL2 prepares to estimate |q - x|^2 for the entries x of list a,
	// whose parameters are params.
	ForL2(a int, params []byte)
	// ForDot prepares to estimate <q, x - anchor_a> for the entries of
	// list a.
	ForDot(a int, params []byte)
	// Score returns the estimate for one code, as the last For* set up.
	Score(code []byte) float32
}

// New returns the code of the given kind, bits per dimension and dimension;
// seed draws any randomness the code uses (the rotation).
func New(kind Kind, dim, bits int, seed uint64) (Code, error) {
	switch {
	case kind == KindSQ8 && bits == 8:
		return NewSQ8(dim), nil
	case kind == KindRotated && (bits == 1 || bits == 2 || bits == 4 || bits == 8):
		return NewRotated(dim, bits, seed), nil
	case kind == KindPQ && (bits == 1 || bits == 2 || bits == 4):
		return NewPQ(dim, bits, seed), nil
	}
	return nil, fmt.Errorf("quant: no code of kind %d with %d bits", kind, bits)
}

// Bits lists the bits-per-dimension settings a kind of code supports, most
// first.
func Bits(kind Kind) []int {
	switch kind {
	case KindSQ8:
		return []int{8}
	case KindPQ:
		return []int{4, 2, 1}
	}
	return []int{8, 4, 2, 1}
}

// ForBits returns the code of a kind for a bits-per-dimension setting, or
// an error wrapping ErrBits naming the settings the kind supports.
func ForBits(kind Kind, bits, dim int, seed uint64) (Code, error) {
	c, err := New(kind, dim, bits, seed)
	if err != nil {
		return nil, fmt.Errorf("%w: %d (%s supports %v)", ErrBits, bits, kind, Bits(kind))
	}
	return c, nil
}

// ParseKind reads a code's name as the CLI's -code flag gives it.
func ParseKind(name string) (Kind, error) {
	switch name {
	case "", "rotated":
		return KindRotated, nil
	case "pq":
		return KindPQ, nil
	case "sq8":
		return KindSQ8, nil
	}
	return 0, fmt.Errorf("quant: unknown code %q (want rotated, pq or sq8)", name)
}

func (k Kind) String() string {
	switch k {
	case KindSQ8:
		return "sq8"
	case KindRotated:
		return "rotated"
	case KindPQ:
		return "pq"
	}
	return fmt.Sprintf("code(%d)", uint32(k))
}
