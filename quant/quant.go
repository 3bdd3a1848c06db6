// Package quant turns residuals (a vector minus its anchor) into fixed-size
// codes and scores queries against the codes without decoding them to memory.
// Each kind of code is one type behind the Code interface; the index stores
// the kind's ID and asks New for it on open.
package quant

import (
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"
)

// ErrBits is returned for a bits-per-dimension setting no code supports.
var ErrBits = errs.New(errs.ErrArgument, "unsupported bits per dimension")

// Kind identifies a code in the index file. Values are never reused.
type Kind uint32

const (
	// KindSQ8 is 8-bit scalar quantization with a per-list, per-dimension
	// affine range.
	KindSQ8 Kind = 1
	// KindRotated is the rotated code with per-vector scale and unbiased
	// correction (type Rotated), 1, 2, 4 or 8 bits per dimension.
	KindRotated Kind = 2
	// kindPQ1 was the first layout of the product code (float16
	// corrections per vector, subspaces of 8/bits dimensions). Retired:
	// files holding it must be compressed again.
	kindPQ1 Kind = 3
	// KindPQ is rotated product quantization (type PQ): one byte per
	// subspace of rotated dimensions, any number of subspaces from 1 to
	// the dimension, codebooks shared by all lists, two one-byte
	// corrections per vector. The codebooks add 256*dim bytes to the
	// index: it pays where n is large next to 256 (docs/QUANTIZATION.md).
	KindPQ Kind = 4
	// KindFlat is the residual itself, Dim float32 values (type Flat):
	// exact, 32 bits per dimension, no list parameters. A store keeps
	// its vectors in this code, under one anchor at the origin, until it
	// holds enough of them to train anchors.
	KindFlat Kind = 5
)

// Spec names a code completely: the index stores it (META) and rebuilds
// the code from it on open.
type Spec struct {
	Kind Kind
	Dim  int
	// Bits per dimension: 1, 2, 4 or 8. For the product code it only sets
	// the default number of subspaces, ceil(Dim*Bits/8), and may be zero
	// when Subspaces is given. The flat code takes 32 or 0 (meaning 32);
	// its Spec, and so every index of it, says 32.
	Bits int
	// Subspaces of the product code (bytes of code per vector, 1..Dim);
	// zero for the other codes.
	Subspaces int
	Seed      uint64
	// IP marks codes of an inner-product index (rotated and pq): where
	// an L2 code keeps |r|^2 they keep -2<a, r> (a the anchor), so that
	// the L2 estimate, less |q|^2 + |a|^2 and halved, estimates -<q, x>
	// with the error of the L2 estimate, which scales with |q - a|,
	// rather than that of the dot estimate, which scales with |q|.
	IP bool
}

// BitsPerDim is the code's size per dimension, corrections not counted:
// Bits, or 8*Subspaces/Dim for the product code.
func (s Spec) BitsPerDim() float64 {
	switch {
	case s.Kind == KindPQ && s.Dim > 0:
		return 8 * float64(s.Subspaces) / float64(s.Dim)
	case s.Kind == KindFlat:
		return flatBits
	}
	return float64(s.Bits)
}

// String describes the code as a person reads it: "rotated, 4 bits per
// dimension", "pq, 14 subspaces (1.17 bits per dimension)", "flat, 32 bits
// per dimension".
func (s Spec) String() string {
	switch s.Kind {
	case KindPQ:
		return fmt.Sprintf("%s, %d subspaces (%.2f bits per dimension)", s.Kind, s.Subspaces, s.BitsPerDim())
	case KindFlat:
		return fmt.Sprintf("%s, %d bits per dimension", s.Kind, flatBits)
	}
	return fmt.Sprintf("%s, %d bits per dimension", s.Kind, s.Bits)
}

// Code is one kind of residual code, bound to a dimension.
//
// A list's parameters (ranges, scales) are fitted once from the list's
// residuals and stored beside its codes; each vector's code has a fixed size.
type Code interface {
	Kind() Kind
	Spec() Spec // what rebuilds this code; Seed as given to New
	Dim() int
	CodeBytes() int  // bytes per vector
	ParamBytes() int // bytes of parameters per list
	// EncodeList fits the parameters of list a (params, ParamBytes long)
	// to its count residuals (rows of Dim values, row-major; count may be
	// zero) and writes their codes, CodeBytes each, to codes. Safe for
	// concurrent use on different lists once SetAnchors (and, for a
	// Trainer, SetGlobal) has been called.
	EncodeList(codes, params []byte, a int, residuals []float32, count int)
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

// New returns the code a Spec names; its Seed draws any randomness the
// code uses (the rotation, the codebooks' training).
func New(s Spec) (Code, error) {
	bitsOK := s.Bits == 1 || s.Bits == 2 || s.Bits == 4 || s.Bits == 8
	switch {
	case s.Dim < 1:
		return nil, fmt.Errorf("%w: dimension %d", errs.ErrArgument, s.Dim)
	case s.Kind == KindSQ8 && s.Bits == 8 && s.Subspaces == 0 && !s.IP:
		return NewSQ8(s.Dim), nil
	case s.Kind == KindRotated && bitsOK && s.Subspaces == 0:
		c := NewRotated(s.Dim, s.Bits, s.Seed)
		c.ip = s.IP
		return c, nil
	case s.Kind == KindPQ && s.Subspaces == 0 && bitsOK:
		c := NewPQ(s.Dim, PQSubspaces(s.Dim, s.Bits), s.Bits, s.Seed)
		c.ip = s.IP
		return c, nil
	case s.Kind == KindPQ && s.Subspaces >= 1 && s.Subspaces <= s.Dim && (s.Bits == 0 || bitsOK):
		c := NewPQ(s.Dim, s.Subspaces, s.Bits, s.Seed)
		c.ip = s.IP
		return c, nil
	case s.Kind == KindFlat && (s.Bits == 0 || s.Bits == flatBits) && s.Subspaces == 0:
		return NewFlat(s.Dim, s.IP), nil
	case s.Kind == kindPQ1:
		return nil, fmt.Errorf("quant: code kind 3 (the first layout of the pq code) is no longer read; compress the vectors again")
	}
	if s.Kind == KindPQ {
		return nil, fmt.Errorf("%w: no pq code of %d bits and %d subspaces for dimension %d", ErrBits, s.Bits, s.Subspaces, s.Dim)
	}
	return nil, fmt.Errorf("%w: no code of kind %d with %d bits", ErrBits, s.Kind, s.Bits)
}

// PQSubspaces is the number of subspaces of the product code at bits per
// dimension: one byte of code per 8/bits dimensions.
func PQSubspaces(dim, bits int) int { return (dim*bits + 7) / 8 }

// Bits lists the bits-per-dimension settings a kind of code supports, most
// first.
func Bits(kind Kind) []int {
	switch kind {
	case KindSQ8:
		return []int{8}
	case KindFlat:
		return []int{flatBits}
	}
	return []int{8, 4, 2, 1}
}

// ForBits returns the code of a kind for a bits-per-dimension setting, or
// an error wrapping ErrBits naming the settings the kind supports.
func ForBits(kind Kind, bits, dim int, seed uint64) (Code, error) {
	c, err := New(Spec{Kind: kind, Dim: dim, Bits: bits, Seed: seed})
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
	case "flat":
		return KindFlat, nil
	}
	return 0, fmt.Errorf("%w: unknown code %q (want rotated, pq, sq8 or flat)", errs.ErrArgument, name)
}

func (k Kind) String() string {
	switch k {
	case KindSQ8:
		return "sq8"
	case KindRotated:
		return "rotated"
	case KindPQ:
		return "pq"
	case KindFlat:
		return "flat"
	}
	return fmt.Sprintf("code(%d)", uint32(k))
}

// encodeEach writes the codes of a list whose parameters are fitted, one
// Encode per residual: EncodeList for codes whose parameters do not
// depend on the codes.
func encodeEach(c interface {
	Encode(code []byte, a int, params []byte, residual []float32)
	CodeBytes() int
	Dim() int
}, codes, params []byte, a int, residuals []float32, count int) {
	cb, d := c.CodeBytes(), c.Dim()
	for i := range count {
		c.Encode(codes[i*cb:(i+1)*cb], a, params, residuals[i*d:(i+1)*d])
	}
}

// dot64 is <a, b> accumulated in float64.
func dot64(a, b []float32) float64 {
	var s float64
	for j := range a {
		s += float64(a[j]) * float64(b[j])
	}
	return s
}
