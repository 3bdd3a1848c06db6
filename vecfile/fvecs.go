package vecfile

import "io"

// parseFvecs validates a TEXMEX .fvecs file: every row is a little-endian
// int32 dimension d followed by d float32 values, and every row's d must
// equal the first. Rows are read in place with a stride of 4+4d bytes.
func (m *Matrix) parseFvecs(opt Options) error {
	b := m.mm
	if len(b) < 4 {
		return newError(ErrSize, m.path, "file size %d bytes is smaller than a row's 4-byte dimension field", len(b))
	}
	d := int64(int32(le32(b)))
	if d <= 0 || d > MaxDim {
		return newError(ErrDim, m.path, "row 0: dimension %d out of range [1, %d]", d, MaxDim)
	}
	dim := int(d)
	if opt.Dim != 0 && opt.Dim != dim {
		return newError(ErrDim, m.path, "dimension mismatch: file has %d, -dim says %d", dim, opt.Dim)
	}
	stride := 4 + 4*dim
	n := len(b) / stride
	// Check the dimension field of every whole row first: a row with another
	// dimension usually also breaks the size check below, and naming the row
	// is the more useful diagnosis. Rows before the first bad one all have
	// dimension dim, so the bad row really starts at bad*stride.
	bad := parallelFirst(n, max(1, (256<<10)/stride), func(lo, hi int) int {
		for i := lo; i < hi; i++ {
			if le32(b[i*stride:]) != uint32(dim) {
				return i
			}
		}
		return -1
	})
	if bad < n {
		return newError(ErrDim, m.path, "row %d has dimension %d, row 0 has %d",
			bad, int32(le32(b[bad*stride:])), dim)
	}
	if left := len(b) - n*stride; left != 0 {
		if left >= 4 && le32(b[n*stride:]) != uint32(dim) {
			return newError(ErrDim, m.path, "row %d has dimension %d, row 0 has %d",
				n, int32(le32(b[n*stride:])), dim)
		}
		return newError(ErrSize, m.path,
			"file size %d bytes is not a multiple of the row size %d bytes (4-byte dimension + %d x float32): %d bytes left over",
			len(b), stride, dim, left)
	}
	m.setLayout(b, n, dim, 4, stride, 4)
	return nil
}

// ReadIvecs reads a whole .ivecs file (such as ground-truth neighbour ids):
// every row is a little-endian int32 length k > 0 followed by k int32
// values. Rows may differ in length. Every length is checked against the
// bytes left in the file before it is used, so memory use is bounded by a
// small multiple of the file size. The rows share one backing array.
func ReadIvecs(path string) ([][]int32, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, osError(path, err)
	}
	if len(b) == 0 {
		return nil, newError(ErrEmpty, path, "empty file (0 bytes)")
	}
	vals := make([]int32, 0, len(b)/4)
	var rows [][]int32
	for off := 0; off < len(b); {
		r := len(rows)
		if len(b)-off < 4 {
			return nil, newError(ErrSize, path, "row %d: %d bytes left at offset %d, too few for the 4-byte length field", r, len(b)-off, off)
		}
		k := int64(int32(le32(b[off:])))
		off += 4
		if k <= 0 {
			return nil, newError(ErrDim, path, "row %d: length %d, want > 0", r, k)
		}
		if k > int64(len(b)-off)/4 {
			return nil, newError(ErrSize, path, "row %d: length %d needs %d bytes but only %d are left in the file", r, k, 4*k, len(b)-off)
		}
		start := len(vals)
		for j := int64(0); j < k; j++ {
			vals = append(vals, int32(le32(b[off:])))
			off += 4
		}
		rows = append(rows, vals[start:len(vals):len(vals)])
	}
	return rows, nil
}
