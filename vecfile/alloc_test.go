package vecfile

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates on the heap (the test must not
// run in parallel with others).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Input files whose length fields claim huge sizes are refused without
// allocating anything near the claim: the readers map the file and bound
// every length by the bytes actually there before using it.
func TestHugeClaimsBoundedAllocation(t *testing.T) {
	const limit = 64 << 10 // bytes; an honest refusal costs a few hundred
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	npy2 := func(hlen uint32) []byte { // version 2: 4-byte header length
		return append([]byte("\x93NUMPY\x02\x00"), u32(hlen)...)
	}
	cases := []struct {
		name string
		file string
		data []byte
		dim  int
		want error
	}{
		{"npy header length 2^32-1", "h.npy", append(npy2(math.MaxUint32), "{}\n"...), 0, ErrFormat},
		{"npy header length 1 MiB + 1", "h.npy", append(npy2(1<<20+1), "{}\n"...), 0, ErrFormat},
		{"npy shape 2^62 rows", "s.npy", npyFile(1, npyDict("<f4", "False", "(4611686018427387904, 96)"), f32Bytes(1, 2)), 0, ErrSize},
		{"npy shape 2^63-1 rows", "s.npy", npyFile(1, npyDict("<f2", "False", "(9223372036854775807, 1)"), f16Bytes(1)), 0, ErrSize},
		{"npy shape 2^62 columns", "c.npy", npyFile(1, npyDict("<f4", "False", "(1, 4611686018427387904)"), f32Bytes(1)), 0, ErrDim},
		{"npy shape value past int64", "c.npy", npyFile(1, npyDict("<f4", "False", "(99999999999999999999, 2)"), f32Bytes(1)), 0, ErrFormat},
		{"npy 64 dimensions of 2^62", "d.npy", npyFile(1, npyDict("<f4", "False", "("+strings.Repeat("4611686018427387904, ", 64)+")"), nil), 0, ErrFormat},
		{"fvecs dimension 2^31-1", "d.fvecs", append(u32(math.MaxInt32), 0, 0, 0, 0), 0, ErrDim},
		{"fvecs dimension 65536, one value", "d.fvecs", append(u32(1<<16), f32Bytes(1)...), 0, ErrSize},
		{"f16 -dim 65536, one value", "d.f16", f16Bytes(1), 1 << 16, ErrSize},
		{"f16 -dim 2^31", "d.f16", f16Bytes(1), 1 << 31, ErrDim},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeBytes(t, c.file, c.data)
			var err error
			got := allocated(func() {
				var m *Matrix
				if m, err = Open(path, Options{Dim: c.dim}); err == nil {
					m.Close()
				}
			})
			if !errors.Is(err, c.want) {
				t.Errorf("Open = %v, want %v", err, c.want)
			}
			if got > limit {
				t.Errorf("Open allocated %d bytes, limit %d", got, limit)
			}
			t.Logf("%d bytes allocated: %v", got, err)
		})
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"ivecs row length 2^31-1", u32(math.MaxInt32)},
		{"ivecs second row length 2^31-1", append(append(u32(1), u32(7)...), u32(math.MaxInt32)...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeBytes(t, "gt.ivecs", c.data)
			var err error
			got := allocated(func() { _, err = ReadIvecs(path) })
			if !errors.Is(err, ErrSize) {
				t.Errorf("ReadIvecs = %v, want ErrSize", err)
			}
			if got > limit {
				t.Errorf("ReadIvecs allocated %d bytes, limit %d", got, limit)
			}
			t.Logf("%d bytes allocated: %v", got, err)
		})
	}
}
