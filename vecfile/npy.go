package vecfile

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// The .npy header is parsed here rather than with github.com/sbinet/npyio
// (v0.9.0), whose npy.Reader does not suit a memory-mapped reader of
// untrusted files (see npy/reader.go, readHeader and readDescr):
//   - it slices the header at bytes.LastIndexByte(hdr, '\n') without
//     checking for -1, so a header without a newline panics
//     ("slice bounds out of range [:-1]");
//   - it locates 'descr', 'fortran_order' and 'shape' with bytes.Index and
//     slices between them assuming that order, so a header with the keys in
//     another order panics or yields garbage;
//   - it allocates the header length read from the file before reading it,
//     up to 4 GiB for a v2 header (uint32 length);
//   - it reads through an io.Reader and does not expose the data offset, so
//     the data cannot be mapped in place (and it rejects format v3).

const (
	npyMagic     = "\x93NUMPY"
	maxNpyHeader = 1 << 20 // bytes; numpy's own writer stays far below this

	// npyDtypes lists the accepted dtypes, for error messages.
	npyDtypes = "'<f2', '<f4' or '<f8'"
)

// parseNpy validates a NumPy .npy file: 1-D (one vector, as np.save writes a
// single embedding) or 2-D, C order, dtype '<f2', '<f4' or '<f8' (numpy's
// default float64, converted to float32 on read), format version 1, 2 or 3,
// data exactly rows*dim*elemsize bytes.
func (m *Matrix) parseNpy(opt Options) error {
	b := m.mm
	if len(b) < len(npyMagic) || string(b[:len(npyMagic)]) != npyMagic {
		return newError(ErrFormat, m.path, "not a NumPy .npy file (bad magic)")
	}
	if len(b) < 8 {
		return newError(ErrFormat, m.path, "truncated header: file has only %d bytes", len(b))
	}
	major, minor := b[6], b[7]
	var pre int
	var hlen uint64
	switch major {
	case 1:
		pre = 10
		if len(b) >= pre {
			hlen = uint64(binary.LittleEndian.Uint16(b[8:]))
		}
	case 2, 3:
		pre = 12
		if len(b) >= pre {
			hlen = uint64(binary.LittleEndian.Uint32(b[8:]))
		}
	default:
		return newError(ErrFormat, m.path, "unsupported .npy format version %d.%d (want 1.x, 2.x or 3.x)", major, minor)
	}
	if len(b) < pre {
		return newError(ErrFormat, m.path, "truncated header: file has only %d bytes", len(b))
	}
	if hlen > maxNpyHeader {
		return newError(ErrFormat, m.path, "header length %d bytes exceeds the %d-byte limit", hlen, maxNpyHeader)
	}
	if hlen > uint64(len(b)-pre) {
		return newError(ErrFormat, m.path, "truncated header: header length is %d bytes but only %d bytes follow the preamble", hlen, len(b)-pre)
	}
	hdr := b[pre : pre+int(hlen)]
	if len(hdr) == 0 || hdr[len(hdr)-1] != '\n' {
		return newError(ErrFormat, m.path, "header does not end in a newline")
	}
	h, err := parseNpyHeader(hdr[:len(hdr)-1])
	if err != nil {
		return newError(ErrFormat, m.path, "bad header: %v", err)
	}

	var elem int
	switch h.descr {
	case "<f2":
		elem = 2
	case "<f4":
		elem = 4
	case "<f8":
		elem = 8
	case ">f2", ">f4", ">f8":
		return newError(ErrFormat, m.path, "big-endian dtype '%s' is not supported (want %s)", h.descr, npyDtypes)
	case "O", "|O", "<O", ">O", "=O":
		return newError(ErrFormat, m.path, "object dtype '%s' is not supported (want %s)", h.descr, npyDtypes)
	default:
		return newError(ErrFormat, m.path, "dtype '%s' is not supported (want %s)", h.descr, npyDtypes)
	}
	if h.fortran {
		return newError(ErrFormat, m.path, "Fortran-order array is not supported (want C order; save np.ascontiguousarray(x))")
	}
	var rows, d int64
	switch len(h.shape) {
	case 1:
		// One vector. Checked here, as the dimension check below would call
		// an empty vector a bad dimension rather than an empty input.
		rows, d = 1, h.shape[0]
		if d == 0 {
			return newError(ErrEmpty, m.path, "shape %s has no values", formatShape(h.shape))
		}
	case 2:
		rows, d = h.shape[0], h.shape[1]
	default:
		return newError(ErrFormat, m.path, "shape %s is %d-D, want 1-D (dim,) or 2-D (rows, dim)", formatShape(h.shape), len(h.shape))
	}
	if d <= 0 || d > MaxDim {
		return newError(ErrDim, m.path, "shape %s: dimension %d out of range [1, %d]", formatShape(h.shape), d, MaxDim)
	}
	dim := int(d)
	if opt.Dim != 0 && opt.Dim != dim {
		return newError(ErrDim, m.path, "dimension mismatch: file has %d, -dim says %d", dim, opt.Dim)
	}
	if rows == 0 {
		return newError(ErrEmpty, m.path, "shape %s has no rows", formatShape(h.shape))
	}
	off := pre + int(hlen)
	data := len(b) - off
	rowBytes := dim * elem // <= 8*MaxDim, no overflow
	// rows is compared by division so that rows*rowBytes cannot overflow.
	if whole := data / rowBytes; uint64(rows) > uint64(whole) {
		return newError(ErrSize, m.path,
			"shape %s needs %d rows of %d bytes but the file holds only %d bytes of data (%d whole rows)",
			formatShape(h.shape), rows, rowBytes, data, whole)
	}
	n := int(rows)
	if extra := data - n*rowBytes; extra != 0 {
		return newError(ErrSize, m.path,
			"%d bytes of data follow the %d rows of %d bytes that shape %s describes",
			extra, n, rowBytes, formatShape(h.shape))
	}
	m.setLayout(b[off:], n, dim, elem, rowBytes, 0)
	return nil
}

func formatShape(s []int64) string {
	var sb strings.Builder
	sb.WriteByte('(')
	for i, v := range s {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(v, 10))
	}
	if len(s) == 1 {
		sb.WriteByte(',')
	}
	sb.WriteByte(')')
	return sb.String()
}

type npyHeader struct {
	descr   string
	fortran bool
	shape   []int64
}

// parseNpyHeader parses the header dictionary, a Python literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (10000, 96), }
// with exactly the keys descr, fortran_order and shape, in any order.
// Shape entries may carry the 'L' suffix that Python 2 wrote for longs.
func parseNpyHeader(b []byte) (npyHeader, error) {
	p := hparser{b: b}
	var h npyHeader
	seen := map[string]bool{}
	p.space()
	if !p.take('{') {
		return h, p.errorf("want '{'")
	}
	for {
		p.space()
		if p.take('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return h, err
		}
		if seen[key] {
			return h, p.errorf("duplicate key '%s'", key)
		}
		seen[key] = true
		p.space()
		if !p.take(':') {
			return h, p.errorf("want ':' after key '%s'", key)
		}
		p.space()
		switch key {
		case "descr":
			if p.peek() == '[' {
				return h, p.errorf("structured dtype (a list of fields) is not supported")
			}
			h.descr, err = p.str()
		case "fortran_order":
			h.fortran, err = p.boolean()
		case "shape":
			h.shape, err = p.tuple()
		default:
			return h, p.errorf("unexpected key '%s'", key)
		}
		if err != nil {
			return h, err
		}
		p.space()
		if p.take(',') {
			continue
		}
		if p.take('}') {
			break
		}
		return h, p.errorf("want ',' or '}'")
	}
	p.space()
	if p.i != len(p.b) {
		return h, p.errorf("unexpected text after '}'")
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, fmt.Errorf("missing key '%s'", k)
		}
	}
	return h, nil
}

type hparser struct {
	b []byte
	i int
}

func (p *hparser) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *hparser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *hparser) take(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *hparser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\r' || p.b[p.i] == '\n') {
		p.i++
	}
}

// str parses a quoted string without escapes, as numpy writes keys and
// simple dtype strings.
func (p *hparser) str() (string, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", p.errorf("want a quoted string")
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch p.b[j] {
		case q:
			p.i = j + 1
			return string(p.b[start:j]), nil
		case '\\', '\n':
			p.i = j
			return "", p.errorf("unsupported character in string")
		}
		if j-start > 64 {
			p.i = j
			return "", p.errorf("string longer than 64 bytes")
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *hparser) boolean() (bool, error) {
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "True":
		p.i += 4
		return true, nil
	case len(rest) >= 5 && string(rest[:5]) == "False":
		p.i += 5
		return false, nil
	}
	return false, p.errorf("want True or False")
}

// tuple parses a tuple of non-negative integers: (), (n,), (a, b), (a, b,).
func (p *hparser) tuple() ([]int64, error) {
	if !p.take('(') {
		return nil, p.errorf("want '(' to start the shape")
	}
	var t []int64
	for {
		p.space()
		if p.take(')') {
			return t, nil
		}
		if len(t) >= 64 {
			return nil, p.errorf("shape has more than 64 dimensions")
		}
		start := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == start {
			return nil, p.errorf("want a non-negative integer in the shape")
		}
		v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
		if err != nil {
			return nil, p.errorf("shape value %s is too large", p.b[start:p.i])
		}
		t = append(t, v)
		if p.peek() == 'L' || p.peek() == 'l' {
			p.i++
		}
		p.space()
		if p.take(')') {
			return t, nil
		}
		if !p.take(',') {
			return nil, p.errorf("want ',' or ')' in the shape")
		}
	}
}
