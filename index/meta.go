package index

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/quant"
)

// Metric is how distances are measured. Every metric reports distances where
// smaller is nearer.
type Metric uint32

const (
	L2     Metric = 0 // squared Euclidean distance
	IP     Metric = 1 // negative inner product
	Cosine Metric = 2 // 1 - cosine similarity; vectors are normalised before training
)

func (m Metric) String() string {
	switch m {
	case L2:
		return "l2"
	case IP:
		return "ip"
	case Cosine:
		return "cosine"
	}
	return fmt.Sprintf("metric(%d)", uint32(m))
}

// ParseMetric reads "l2", "ip" or "cosine".
func ParseMetric(s string) (Metric, error) {
	switch strings.ToLower(s) {
	case "l2":
		return L2, nil
	case "ip":
		return IP, nil
	case "cosine":
		return Cosine, nil
	}
	return 0, fmt.Errorf("%w %q (want l2, ip or cosine)", ErrMetric, s)
}

// Section kinds of format v1.
var (
	secMeta    = format.KindOf("META")
	secAnchors = format.KindOf("ANCH")
	secLists   = format.KindOf("LIST")
	secIDs     = format.KindOf("ROWS")
	secParams  = format.KindOf("PARM")
	secCodes   = format.KindOf("CODE")
	secGlobal  = format.KindOf("QGLB") // only for codes with shared parameters (quant.Trainer)
	secBlocks  = format.KindOf("SCAN") // version 2, blocked codes (quant.Blocked): the blocks; CODE holds the low bits
)

// Meta is the META section: what the index holds and how it was trained.
// Fixed little-endian layout, metaSize bytes, the unused tail zero.
type Meta struct {
	N      uint64 // vectors
	Dim    uint32
	M      uint32 // anchors (lists)
	Code   uint32 // quant.Kind
	Bits   uint32 // bits per dimension of the code
	Metric Metric
	Flags  uint32 // FlagIPCodes, FlagSegment, or zero
	Seed   uint64

	// Training statistics.
	Iterations uint32
	Converged  uint32 // 1 if the loop stopped on its tolerance
	Merged     uint32
	Split      uint32
	Energy     float64 // mean squared distance to the final anchors
	InitEnergy float64 // the same for the starting anchors

	// Subspaces of the product code (quant.Spec.Subspaces); zero for the
	// other codes. Appended after the fields above, so files of the other
	// codes read as before.
	Subspaces uint32
}

// CodeSpec is the residual code the index was written with.
func (m Meta) CodeSpec() quant.Spec {
	return quant.Spec{Kind: quant.Kind(m.Code), Dim: int(m.Dim), Bits: int(m.Bits), Subspaces: int(m.Subspaces), Seed: m.Seed,
		IP: m.Flags&FlagIPCodes != 0}
}

const metaSize = 128

// FlagIPCodes (META flags) marks an ip index whose codes were written in
// the inner-product form (quant.Spec.IP); ip indexes without it (written
// before the flag existed) are scored with the codes' dot estimate.
const FlagIPCodes uint32 = 1

// FlagSegment (META flags) marks a segment of a store (docs/FORMAT.md,
// "Stores"): vectors added to an index after training, encoded against its
// anchors, so that it may hold fewer vectors than anchors.
const FlagSegment uint32 = 2

const knownFlags = FlagIPCodes | FlagSegment

func (m *Meta) marshal() []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, m) // fixed-size struct: cannot fail
	out := make([]byte, metaSize)
	copy(out, b.Bytes())
	return out
}

// unmarshalMeta reads a META layout from b, the data of the section of
// kind sec (META, or a model file's MODL), which errors name.
func unmarshalMeta(b []byte, sec format.Kind) (Meta, error) {
	var m Meta
	if len(b) != metaSize {
		return m, fmt.Errorf("%w: %s section is %d bytes, want %d", ErrCorrupt, sec, len(b), metaSize)
	}
	binary.Read(bytes.NewReader(b), binary.LittleEndian, &m) // length checked above
	used := binary.Size(m)
	if m.Flags&^knownFlags != 0 || !allZero(b[used:]) {
		return m, fmt.Errorf("%w: %s has unknown flags or reserved bytes set (written by a newer vlc?)", ErrCorrupt, sec)
	}
	if m.Flags&FlagIPCodes != 0 && m.Metric != IP {
		return m, fmt.Errorf("%w: %s marks inner-product codes for metric %s", ErrCorrupt, sec, m.Metric)
	}
	return m, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
