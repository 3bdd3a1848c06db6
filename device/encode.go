package device

import "errors"

// ErrNotResident is a RotatedEncoder's answer when it cannot encode the
// points itself: they stream from the host rather than stay on the
// device, or they are beyond its kernel's limits. The host encodes them
// instead.
var ErrNotResident = errors.New("device: the points are not resident on the device")

// RotatedLayout is what a device needs to write the rotated code
// (quant.Rotated) itself, byte for byte as the host does: the code's
// sizes, the rotation's sign rounds and block size, and the rotated
// anchors for the ip form. One code is Packed bytes of levels (Bits a
// dimension), then two float16 scalars; a list's parameters are one
// float32.
type RotatedLayout struct {
	Dim          int
	Bits, Packed int // bits per dimension; bytes of packed levels (CodeBytes - 4)
	IP           bool
	P            int         // the Walsh-Hadamard block: the largest power of two <= Dim
	Scale        float32     // its normalisation, 1/sqrt(P) as float32
	Signs        [][]float32 // rounds of Dim signs (+-1), in order
	RotAnchors   []float32   // P a for every anchor (after the code's SetAnchors)
}

// CodeBytes is the size of one entry's code.
func (l RotatedLayout) CodeBytes() int { return l.Packed + 4 }

// ParamBytes is the size of one list's parameters.
func (l RotatedLayout) ParamBytes() int { return 4 }

// RotatedEncoder is implemented by a training device's resident dataset
// that writes the rotated code of its own points (backend/cuda), sparing the
// host the encoding: codes and params as quant.Rotated's EncodeList fills
// them for the lists in order, entry e being point ids[e] of list a for
// offsets[a] <= e < offsets[a+1], against anchors as stored (m x Dim).
//
// EncodeRotated returns an error wrapping ErrNotResident, having written
// nothing, when the points are not all on the device; the host encodes
// then.
type RotatedEncoder interface {
	EncodeRotated(l RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte) error
}

// RotatedStreamEncoder is a RotatedEncoder that hands its codes over in
// runs of entries as the device finishes them, so that the caller can
// work on one run (repack it, say) while the device encodes the next.
type RotatedStreamEncoder interface {
	RotatedEncoder
	// EncodeRotatedStream is EncodeRotated that calls ready(lo, hi) once
	// entries lo to hi-1 of codes are written: runs in order from 0 to
	// the entry count, after every list parameter is written, one call at
	// a time; none when it returns an error.
	EncodeRotatedStream(l RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte, ready func(lo, hi int)) error
}

// EncodeRotatedStream has enc write the rotated code as a
// RotatedStreamEncoder does: through its stream when it has one, else in
// one run, ready(0, n) following EncodeRotated.
func EncodeRotatedStream(enc RotatedEncoder, l RotatedLayout, anchors []float32, ids []uint32, offsets []uint64, codes, params []byte, ready func(lo, hi int)) error {
	if s, ok := enc.(RotatedStreamEncoder); ok {
		return s.EncodeRotatedStream(l, anchors, ids, offsets, codes, params, ready)
	}
	if err := enc.EncodeRotated(l, anchors, ids, offsets, codes, params); err != nil {
		return err
	}
	ready(0, len(ids))
	return nil
}
