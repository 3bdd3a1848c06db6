package index

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/vlc-embed/vlc/index/format"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/quant"
)

// Model is what an index was trained into, apart from its rows: the
// anchors, the residual code (kind, bits, subspaces, and the seed that
// draws its rotation), each list's code parameters, the code's shared
// parameters (the pq codebooks) and the metric. Rows encoded under one
// model, apart or together (Plan.Params, Plan.Global), get the same
// codes, so their indexes merge.
//
// A model file holds one in a few sections, without the codes of any
// row: ReadModel reads it (or the model of an index file), WriteModel
// writes it, and docs/FORMAT.md ("Model files") draws the bytes.
type Model struct {
	// Meta is the META of the index the model was taken from. Code,
	// Bits, Subspaces, Metric, Seed, FlagIPCodes, Dim and M define the
	// model; N and the training statistics describe that index (for
	// people: encoding ignores them). FlagSegment is never set.
	Meta Meta
	// Anchors are M rows of Dim, as the index stores them (float16
	// values): residuals are taken from exactly these.
	Anchors []float32
	// Params are each list's code parameters (PARM), M x ParamBytes.
	Params []byte
	// Global are the code's shared parameters (QGLB: the pq code's
	// codebooks), nil for codes without them.
	Global []byte
}

// secModel is a model file's META layout. A model file has MODL where an
// index has META, so neither is ever read for the other.
var secModel = format.KindOf("MODL")

// Dim is the dimension of the rows the model encodes.
func (m *Model) Dim() int { return int(m.Meta.Dim) }

// Lists is the number of anchors (inverted lists).
func (m *Model) Lists() int { return int(m.Meta.M) }

// ModelOf returns the model of an open index: copies of its anchors, list
// parameters and shared parameters, and its META less FlagSegment.
func ModelOf(ix *Index) (_ *Model, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil, ErrClosed
	}
	defer format.CatchFault(ix.path, &err, debug.SetPanicOnFault(true))
	meta := ix.meta
	meta.Flags &^= FlagSegment
	var global []byte
	if g, ok := ix.file.Section(secGlobal); ok {
		global = bytes.Clone(g)
	}
	return &Model{Meta: meta, Anchors: slices.Clone(ix.anchors), Params: bytes.Clone(ix.params), Global: global}, nil
}

// ReadModel reads the model at path: a model file (WriteModel), or the
// model of an index file. A model file is checked whole, every checksum
// and every value; of an index, only the sections the model is made of
// (META, ANCH, PARM, QGLB) are checked and copied, so that reading the
// model of a large index costs little more than its anchors. Errors name
// the file and wrap ErrNotIndex (a store manifest, a file that is not
// vlc's), ErrVersion or ErrCorrupt.
func ReadModel(path string) (*Model, error) {
	if !littleEndian() {
		return nil, fmt.Errorf("%s: vlc indexes are read in place and need a little-endian host", path)
	}
	f, err := format.Open(path, format.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, ok := f.Section(secModel); ok {
		if err := f.Verify(); err != nil { // a small file: every byte
			return nil, err
		}
		return readModel(f)
	}
	if err := f.VerifySections(secMeta, secAnchors, secParams, secGlobal); err != nil {
		return nil, err
	}
	ix, err := load(f, path) // refuses a store manifest by name
	if err != nil {
		return nil, err
	}
	return ModelOf(ix) // f, which ix maps, is closed after the copy
}

// readModel reads the model file f, whose checksums were checked.
func readModel(f *format.File) (m *Model, err error) {
	path := f.Path()
	defer format.CatchFault(path, &err, debug.SetPanicOnFault(true))
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: model file: %s", path, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if _, ok := f.Section(secMeta); ok {
		return nil, bad("it has both %q and %q sections", secModel, secMeta)
	}
	sec := map[format.Kind][]byte{}
	for _, k := range []format.Kind{secModel, secAnchors, secParams} {
		b, ok := f.Section(k)
		if !ok {
			return nil, bad("section %q missing", k)
		}
		sec[k] = b
	}
	meta, err := unmarshalMeta(sec[secModel], secModel)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if meta.Flags&FlagSegment != 0 {
		return nil, bad("%s marks a segment", secModel)
	}
	code, err := checkModelMeta(meta)
	if err != nil {
		return nil, bad("%v", err)
	}
	d, lists := int(meta.Dim), int(meta.M)
	// Dim and M are at most 2^16 and 2^32: the products fit an int64.
	if want := int64(lists) * int64(d) * 2; int64(len(sec[secAnchors])) != want {
		return nil, bad("section %q is %d bytes, want %d (%d anchors of dimension %d)", secAnchors, len(sec[secAnchors]), want, lists, d)
	}
	if want := int64(lists) * int64(code.ParamBytes()); int64(len(sec[secParams])) != want {
		return nil, bad("section %q is %d bytes, want %d", secParams, len(sec[secParams]), want)
	}
	anchors := make([]float32, lists*d)
	for i, h := range viewU16(sec[secAnchors]) {
		if !f16.IsFinite(h) {
			return nil, bad("anchor %d is not finite", i/d)
		}
		anchors[i] = f16.ToFloat32(h)
	}
	g, found := f.Section(secGlobal)
	var global []byte
	switch tr, ok := code.(quant.Trainer); {
	case ok && (!found || len(g) != tr.GlobalBytes()):
		return nil, bad("section %q is missing or %d bytes, want %d", secGlobal, len(g), tr.GlobalBytes())
	case ok:
		code.SetAnchors(anchors)
		if err := tr.SetGlobal(g); err != nil {
			return nil, bad("%v", err)
		}
		global = bytes.Clone(g)
	case found:
		return nil, bad("section %q for the %s code, which has no shared parameters", secGlobal, code.Spec().Kind)
	}
	return &Model{Meta: meta, Anchors: anchors, Params: bytes.Clone(sec[secParams]), Global: global}, nil
}

// checkModelMeta checks what defines a model in meta (its flags and
// reserved bytes aside) and returns its code.
func checkModelMeta(meta Meta) (quant.Code, error) {
	switch {
	case meta.Dim < 1 || meta.Dim > 1<<16:
		return nil, fmt.Errorf("dimension %d", meta.Dim)
	case meta.M < 1:
		return nil, fmt.Errorf("%d anchors", meta.M)
	case meta.Metric > Cosine:
		return nil, fmt.Errorf("unknown metric %d", meta.Metric)
	case meta.Flags&FlagIPCodes != 0 && meta.Metric != IP:
		return nil, fmt.Errorf("inner-product codes for metric %s", meta.Metric)
	}
	return quant.New(meta.CodeSpec())
}

// WriteModel writes m to path as a model file, atomically (a temporary
// file renamed over path: an existing file there is replaced only by a
// complete model). The anchors are stored as float16, as an index stores
// them. A model that could not be read back (sizes that disagree with
// its META, a code quant refuses, anchors beyond float16, FlagSegment or
// unknown flags) is refused with ErrArgument before anything is written.
func WriteModel(path string, m *Model) error {
	secs, err := m.sections()
	if err != nil {
		return fmt.Errorf("model %s: %w", path, err)
	}
	return format.WriteFile(path, secs)
}

// sections lays m out as a model file's sections, in file order.
func (m *Model) sections() ([]format.Section, error) {
	meta := m.Meta
	if meta.Flags&^FlagIPCodes != 0 {
		return nil, fmt.Errorf("%w: flags %#x (a model has at most FlagIPCodes)", ErrArgument, meta.Flags)
	}
	code, err := checkModelMeta(meta)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrArgument, err)
	}
	d, lists := m.Dim(), m.Lists()
	if len(m.Anchors) != lists*d {
		return nil, fmt.Errorf("%w: %d anchor values for %d anchors of dimension %d", ErrArgument, len(m.Anchors), lists, d)
	}
	if len(m.Params) != lists*code.ParamBytes() {
		return nil, fmt.Errorf("%w: %d bytes of list parameters for %d lists of %d", ErrArgument, len(m.Params), lists, code.ParamBytes())
	}
	anchors16 := make([]uint16, len(m.Anchors))
	anchors := make([]float32, len(m.Anchors))
	for i, v := range m.Anchors {
		anchors16[i] = f16.FromFloat32(v)
		if !f16.IsFinite(anchors16[i]) {
			return nil, fmt.Errorf("%w: anchor %d holds %v, beyond float16", ErrArgument, i/d, v)
		}
		anchors[i] = f16.ToFloat32(anchors16[i])
	}
	tr, isTrainer := code.(quant.Trainer)
	switch {
	case isTrainer && len(m.Global) != tr.GlobalBytes():
		return nil, fmt.Errorf("%w: %d bytes of shared parameters, the %s code has %d", ErrArgument, len(m.Global), code.Spec().Kind, tr.GlobalBytes())
	case isTrainer:
		code.SetAnchors(anchors)
		if err := tr.SetGlobal(m.Global); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrArgument, err)
		}
	case m.Global != nil:
		return nil, fmt.Errorf("%w: shared parameters for the %s code, which has none", ErrArgument, code.Spec().Kind)
	}
	secs := []format.Section{
		{Kind: secModel, Data: meta.marshal()},
		{Kind: secAnchors, Data: u16Bytes(anchors16)},
		{Kind: secParams, Data: m.Params},
	}
	if isTrainer {
		secs = append(secs, format.Section{Kind: secGlobal, Data: m.Global})
	}
	return secs, nil
}
