// Package vecfile reads files of embedding vectors through a read-only
// memory mapping, so that inputs larger than memory can be processed and the
// whole set is never copied to float32.
//
// Formats are chosen by file extension (case-insensitive):
//
//	.f16    raw little-endian float16 rows; the dimension comes from Options.Dim,
//	        refused when the values look like rows of another (ErrLikelyDim)
//	.npy    NumPy format v1/v2/v3, C order, dtype '<f2', '<f4' or '<f8';
//	        2-D (rows, dim), or 1-D (dim,) for a single vector. float64 is
//	        converted to float32 as rows are read
//	.fvecs  TEXMEX: every row is an int32 dimension then that many float32
//
// A file truncated or rewritten by another program while a Matrix maps it
// makes reading a page that no longer exists raise SIGBUS. In a goroutine
// that has debug.SetPanicOnFault on (vlc's searches and the vlc command do,
// and internal/par's workers inherit it) the fault becomes an error that
// names this file and wraps ErrChanged; elsewhere it ends the process.
package vecfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"unsafe"

	"github.com/edsrzf/mmap-go"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/fault"
	"github.com/vlc-embed/vlc/internal/regfile"
)

// Options configures Open.
type Options struct {
	// Dim is the number of values per vector. It is required for .f16 files,
	// which do not record it; for .npy and .fvecs it is optional and, when
	// non-zero, must equal the file's dimension.
	Dim int
}

// Matrix is a read-only, memory-mapped set of vectors. Len, Dim, Path,
// Float16, Row, RowF16 and CheckFinite may be called from several goroutines
// at once. Close must not run concurrently with any of them, and neither the
// Matrix nor slices returned by Float16 may be used after Close.
type Matrix struct {
	path string
	mm   mmap.MMap // the whole file; nil once closed
	data []byte    // the row area of mm: exactly n*stride bytes

	n, dim int
	elem   int // bytes per value: 2 (float16), 4 (float32) or 8 (float64, .npy only)
	stride int // bytes from the start of a row to the start of the next
	skip   int // bytes before a row's first value (4 for the .fvecs dimension)

	// Zero-copy views of data, set only on little-endian hosts when data is
	// suitably aligned; Row falls back to byte decoding otherwise.
	u16 []uint16  // all values when elem == 2 and rows are contiguous
	f32 []float32 // all of data as float32 when elem == 4 (for .fvecs it includes the dimension words)

	closeMu sync.Mutex
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Open maps the file at path and validates its layout. For .fvecs this reads
// every row's dimension field (in parallel); no values are read.
func Open(path string, opt Options) (_ *Matrix, err error) {
	defer fault.Catch(&err, debug.SetPanicOnFault(true), path, ErrChanged) // parsing reads the mapping
	ext := strings.ToLower(filepath.Ext(path))
	var parse func(m *Matrix, opt Options) error
	switch ext {
	case ".f16":
		parse = (*Matrix).parseF16
	case ".npy":
		parse = (*Matrix).parseNpy
	case ".fvecs":
		parse = (*Matrix).parseFvecs
	default:
		return nil, newError(ErrFormat, path, "unknown extension %q (want .f16, .npy or .fvecs)", ext)
	}
	if opt.Dim < 0 || opt.Dim > MaxDim {
		return nil, newError(ErrDim, path, "dimension %d out of range [1, %d]", opt.Dim, MaxDim)
	}
	if ext == ".f16" && opt.Dim == 0 {
		return nil, newError(ErrDim, path, "raw float16 file needs its dimension (-dim)")
	}

	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the mapping stays valid after the file is closed
	st, err := f.Stat()
	if err != nil {
		return nil, osError(path, err)
	}
	if st.Size() == 0 {
		return nil, newError(ErrEmpty, path, "empty file (0 bytes)")
	}
	if st.Size() > math.MaxInt {
		return nil, newError(ErrSize, path, "file size %d bytes is too large for this platform", st.Size())
	}
	mm, err := mmap.Map(f, mmap.RDONLY, 0)
	if err != nil {
		return nil, osError(path, err)
	}
	fault.Register(mm, path, ErrChanged)
	m := &Matrix{path: path, mm: mm}
	if len(mm) == 0 { // shrank after Stat
		err = newError(ErrEmpty, path, "empty file (0 bytes)")
	} else {
		err = parse(m, opt)
	}
	if err != nil {
		fault.Unregister(mm)
		mm.Unmap()
		return nil, err
	}
	m.makeViews()
	return m, nil
}

// openRegular opens path without blocking on a named pipe, refusing
// anything that is not a regular file (ErrNotRegular and ErrFormat).
func openRegular(path string) (*os.File, error) {
	f, err := regfile.Open(path)
	if errors.Is(err, ErrNotRegular) {
		return nil, &fileError{msg: err.Error(), kind: notRegular}
	}
	if err != nil {
		return nil, osError(path, err)
	}
	return f, nil
}

// osError words an operating system error as "<path>: <op>: <cause>" and
// keeps the cause reachable for errors.Is (fs.ErrNotExist, fs.ErrPermission).
func osError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fileError{msg: path + ": " + pe.Op + ": " + pe.Err.Error(), kind: err}
	}
	return &fileError{msg: path + ": " + err.Error(), kind: err}
}

func (m *Matrix) parseF16(opt Options) error {
	rowBytes := 2 * opt.Dim
	size := len(m.mm)
	if left := size % rowBytes; left != 0 {
		return newError(ErrSize, m.path,
			"file size %d bytes is not a multiple of the row size %d bytes (dim %d x float16): %d bytes left over",
			size, rowBytes, opt.Dim, left)
	}
	m.setLayout(m.mm, size/rowBytes, opt.Dim, 2, rowBytes, 0)
	return m.checkF16Dim()
}

func (m *Matrix) setLayout(data []byte, n, dim, elem, stride, skip int) {
	m.data, m.n, m.dim, m.elem, m.stride, m.skip = data[:n*stride], n, dim, elem, stride, skip
}

// makeViews sets the zero-copy views where host byte order and alignment
// allow (the mapping is page aligned; an .npy data offset may not be).
func (m *Matrix) makeViews() {
	if !littleEndian || len(m.data) == 0 {
		return
	}
	p := unsafe.Pointer(&m.data[0])
	switch m.elem {
	case 2:
		if m.stride == 2*m.dim && uintptr(p)%2 == 0 {
			m.u16 = unsafe.Slice((*uint16)(p), len(m.data)/2)
		}
	case 4:
		if m.stride%4 == 0 && m.skip%4 == 0 && uintptr(p)%4 == 0 {
			m.f32 = unsafe.Slice((*float32)(p), len(m.data)/4)
		}
	}
}

// Len returns the number of vectors.
func (m *Matrix) Len() int { return m.n }

// Dim returns the number of values per vector.
func (m *Matrix) Dim() int { return m.dim }

// Path returns the path the Matrix was opened from.
func (m *Matrix) Path() string { return m.path }

// Float16 returns all Len()*Dim() values, row after row, as float16 bits
// without copying: a view of the read-only mapping, valid until Close and
// never to be written. ok is false, and the slice nil, unless the file
// stores float16 contiguously (.f16, .npy '<f2') and the host is
// little-endian (and, for .npy, the data offset is even).
func (m *Matrix) Float16() (values []uint16, ok bool) {
	return m.u16, m.u16 != nil
}

// Row decodes row i into dst and returns dst[:Dim()]. If cap(dst) < Dim()
// a new slice is allocated. float64 values are rounded to float32; those
// beyond its range become ±Inf, which CheckFinite reports. Row panics if i
// is out of range.
func (m *Matrix) Row(i int, dst []float32) []float32 {
	m.checkRow(i)
	if cap(dst) < m.dim {
		dst = make([]float32, m.dim)
	}
	dst = dst[:m.dim]
	switch {
	case m.u16 != nil:
		f16.DecodeRow(dst, m.u16[i*m.dim:(i+1)*m.dim])
	case m.f32 != nil:
		s := (i*m.stride + m.skip) / 4
		copy(dst, m.f32[s:s+m.dim])
	case m.elem == 2:
		b := m.rowBytes(i)
		for j := range dst {
			dst[j] = f16.ToFloat32(uint16(b[2*j]) | uint16(b[2*j+1])<<8)
		}
	case m.elem == 8:
		b := m.rowBytes(i)
		for j := range dst {
			dst[j] = f64to32(binary.LittleEndian.Uint64(b[8*j:]))
		}
	default:
		b := m.rowBytes(i)
		for j := range dst {
			dst[j] = math.Float32frombits(le32(b[4*j:]))
		}
	}
	return dst
}

// RowF16 returns row i as float16 bits in dst[:Dim()], allocating if
// cap(dst) < Dim(). float32 sources are rounded to nearest even (values
// beyond the float16 range become ±Inf); float64 sources are first
// converted to float32 as by Row, so that RowF16 always agrees with Row.
// RowF16 panics if i is out of range.
func (m *Matrix) RowF16(i int, dst []uint16) []uint16 {
	m.checkRow(i)
	if cap(dst) < m.dim {
		dst = make([]uint16, m.dim)
	}
	dst = dst[:m.dim]
	switch {
	case m.u16 != nil:
		copy(dst, m.u16[i*m.dim:(i+1)*m.dim])
	case m.f32 != nil:
		s := (i*m.stride + m.skip) / 4
		for j, v := range m.f32[s : s+m.dim] {
			dst[j] = f16.FromFloat32(v)
		}
	case m.elem == 2:
		b := m.rowBytes(i)
		for j := range dst {
			dst[j] = uint16(b[2*j]) | uint16(b[2*j+1])<<8
		}
	case m.elem == 8:
		b := m.rowBytes(i)
		for j := range dst {
			dst[j] = f16.FromFloat32(f64to32(binary.LittleEndian.Uint64(b[8*j:])))
		}
	default:
		b := m.rowBytes(i)
		for j := range dst {
			dst[j] = f16.FromFloat32(math.Float32frombits(le32(b[4*j:])))
		}
	}
	return dst
}

func (m *Matrix) checkRow(i int) {
	if m.data == nil {
		panic("vecfile: " + m.path + ": Matrix used after Close")
	}
	if uint(i) >= uint(m.n) {
		panic(fmt.Sprintf("vecfile: %s: row %d out of range [0, %d)", m.path, i, m.n))
	}
}

// rowBytes returns the value bytes of row i.
func (m *Matrix) rowBytes(i int) []byte {
	off := i*m.stride + m.skip
	return m.data[off : off+m.dim*m.elem]
}

// f64to32 converts the float64 with bits u to float32. Values beyond the
// float32 range become ±Inf: plain conversion would round those just above
// math.MaxFloat32 down to it, and Row would then hide a value that
// CheckFinite reports.
func f64to32(u uint64) float32 {
	v := math.Float64frombits(u)
	switch {
	case v > math.MaxFloat32:
		return float32(math.Inf(1))
	case v < -math.MaxFloat32:
		return float32(math.Inf(-1))
	}
	return float32(v)
}

func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// Close unmaps the file. It is idempotent; only the first call can fail.
func (m *Matrix) Close() error {
	m.closeMu.Lock()
	defer m.closeMu.Unlock()
	if m.mm == nil {
		return nil
	}
	fault.Unregister(m.mm)
	err := m.mm.Unmap()
	m.mm, m.data, m.u16, m.f32 = nil, nil, nil, nil
	if err != nil {
		return osError(m.path, err)
	}
	return nil
}
