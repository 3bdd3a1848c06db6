package vecfile

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/regfile"
)

// WriteF16 writes rows as raw little-endian float16 (rounded to nearest
// even). All rows must have the same length, between 1 and MaxDim.
func WriteF16(path string, rows [][]float32) error {
	if _, err := uniformDim(path, rows); err != nil {
		return err
	}
	return writeFile(path, func(w *bufio.Writer) {
		var buf [2]byte
		for _, r := range rows {
			for _, v := range r {
				binary.LittleEndian.PutUint16(buf[:], f16.FromFloat32(v))
				w.Write(buf[:])
			}
		}
	})
}

// WriteFvecs writes rows in TEXMEX .fvecs layout. All rows must have the
// same length, between 1 and MaxDim.
func WriteFvecs(path string, rows [][]float32) error {
	dim, err := uniformDim(path, rows)
	if err != nil {
		return err
	}
	return writeFile(path, func(w *bufio.Writer) {
		var buf [4]byte
		for _, r := range rows {
			binary.LittleEndian.PutUint32(buf[:], uint32(dim))
			w.Write(buf[:])
			for _, v := range r {
				binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
				w.Write(buf[:])
			}
		}
	})
}

// WriteIvecs writes rows in TEXMEX .ivecs layout. Rows may differ in length
// but none may be empty.
func WriteIvecs(path string, rows [][]int32) error {
	if len(rows) == 0 {
		return newError(ErrEmpty, path, "no rows to write")
	}
	for i, r := range rows {
		if len(r) == 0 || int64(len(r)) > math.MaxInt32 {
			return newError(ErrDim, path, "row %d has length %d", i, len(r))
		}
	}
	return writeFile(path, func(w *bufio.Writer) {
		var buf [4]byte
		for _, r := range rows {
			binary.LittleEndian.PutUint32(buf[:], uint32(len(r)))
			w.Write(buf[:])
			for _, v := range r {
				binary.LittleEndian.PutUint32(buf[:], uint32(v))
				w.Write(buf[:])
			}
		}
	})
}

// WriteNpy writes rows as a 2-D C-order NumPy array of dtype "<f2" (values
// rounded to nearest even) or "<f4", with a version 1.0 header padded so
// that the data starts at a multiple of 64 bytes, as numpy does.
func WriteNpy(path string, rows [][]float32, dtype string) error {
	if dtype != "<f2" && dtype != "<f4" {
		return newError(ErrFormat, path, "dtype %q is not supported (want \"<f2\" or \"<f4\")", dtype)
	}
	dim, err := uniformDim(path, rows)
	if err != nil {
		return err
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }", dtype, len(rows), dim)
	pad := 64 - (10+len(hdr)+1)%64
	if pad == 64 {
		pad = 0
	}
	hdr += strings.Repeat(" ", pad) + "\n"
	return writeFile(path, func(w *bufio.Writer) {
		w.WriteString(npyMagic + "\x01\x00")
		var buf [4]byte
		binary.LittleEndian.PutUint16(buf[:], uint16(len(hdr)))
		w.Write(buf[:2])
		w.WriteString(hdr)
		for _, r := range rows {
			for _, v := range r {
				if dtype == "<f2" {
					binary.LittleEndian.PutUint16(buf[:], f16.FromFloat32(v))
					w.Write(buf[:2])
				} else {
					binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
					w.Write(buf[:])
				}
			}
		}
	})
}

func uniformDim(path string, rows [][]float32) (int, error) {
	if len(rows) == 0 {
		return 0, newError(ErrEmpty, path, "no rows to write")
	}
	dim := len(rows[0])
	if dim == 0 || dim > MaxDim {
		return 0, newError(ErrDim, path, "row 0 has dimension %d, want 1..%d", dim, MaxDim)
	}
	for i, r := range rows {
		if len(r) != dim {
			return 0, newError(ErrDim, path, "row %d has dimension %d, row 0 has %d", i, len(r), dim)
		}
	}
	return dim, nil
}

// writeFile creates path and runs fill on a buffered writer; bufio keeps
// the first write error, which Flush reports.
func writeFile(path string, fill func(w *bufio.Writer)) error {
	if err := regfile.CheckOutput(path); err != nil {
		return &fileError{msg: err.Error(), kind: notRegular}
	}
	f, err := os.Create(path)
	if err != nil {
		return osError(path, err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	fill(w)
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return osError(path, err)
	}
	return nil
}
