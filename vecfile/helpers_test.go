package vecfile

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// randRows returns n rows of dim values in about [-4, 4), deterministic.
func randRows(n, dim int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, dim)
		for j := range rows[i] {
			rows[i][j] = float32(r.NormFloat64())
		}
	}
	return rows
}

// writeBytes writes b to a file called name in a new temp dir.
func writeBytes(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// npyFile builds an .npy file: magic, version major.0, header dict text
// followed by a newline, then data.
func npyFile(major byte, dict string, data []byte) []byte {
	return npyRaw(major, dict+"\n", data)
}

// npyRaw is npyFile with the header text taken as is.
func npyRaw(major byte, hdr string, data []byte) []byte {
	b := []byte("\x93NUMPY")
	b = append(b, major, 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	}
	b = append(b, hdr...)
	return append(b, data...)
}

func f32Bytes(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func f64Bytes(vals ...float64) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// writeNpyF8 writes rows as a 2-D '<f8' .npy file, the dtype numpy writes
// by default (WriteNpy does not write it).
func writeNpyF8(path string, rows [][]float32) error {
	var data []byte
	for _, r := range rows {
		for _, v := range r {
			data = append(data, f64Bytes(float64(v))...)
		}
	}
	shape := "(" + strconv.Itoa(len(rows)) + ", " + strconv.Itoa(len(rows[0])) + ")"
	return os.WriteFile(path, npyFile(1, npyDict("<f8", "False", shape), data), 0o644)
}

func f16Bytes(vals ...uint16) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

// fvecsBytes builds an .fvecs file from rows, each with its own dim field.
func fvecsBytes(rows ...[]float32) []byte {
	var b []byte
	for _, r := range rows {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(r)))
		b = append(b, f32Bytes(r...)...)
	}
	return b
}

func zeros(n int) []float32 { return make([]float32, n) }

func mustOpen(t testing.TB, path string, opt Options) *Matrix {
	t.Helper()
	m, err := Open(path, opt)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
