package index

import (
	"encoding/binary"
	"fmt"
	"github.com/vlc-embed/vlc/internal/errs"
	"slices"
	"strconv"
	"unsafe"

	"github.com/vlc-embed/vlc/index/format"
)

// Caller ids (keys) and payloads. An index may give each row a key, the
// caller's name for the vector (a document id), and a payload, opaque
// bytes returned with hits (the document's text or metadata). Three
// optional sections hold them:
//
//	KEYS  (N+1) uint64 offsets into the bytes that follow, then the keys' bytes
//	KIDX  N uint32 rows in order of (keyHash(key), row): lookups by key
//	PAYL  (N+1) uint64 offsets, then the payloads' bytes
//
// An index without KEYS names each row by its number in decimal ("0",
// "1", ...), the row of the input file, as before keys existed.

// Limits on what a row may carry, so that one bad record cannot make a
// section (or a search's result) unbounded.
const (
	MaxKeyBytes     = 1024
	MaxPayloadBytes = 1 << 20
)

var (
	secKeys     = format.KindOf("KEYS")
	secKeyIndex = format.KindOf("KIDX")
	secPayloads = format.KindOf("PAYL")
)

// Errors of keys and payloads.
var (
	ErrDuplicateKey = errs.New(errs.ErrDuplicate, "duplicate id")
	ErrKey          = errs.New(errs.ErrArgument, "invalid id")
	ErrPayload      = errs.New(errs.ErrArgument, "payload too large")
)

// keyHash is 64-bit FNV-1a: fixed for all time, as KIDX is ordered by it.
func keyHash(k string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(k); i++ {
		h ^= uint64(k[i])
		h *= 1099511628211
	}
	return h
}

// CheckKeys reports the first key that is empty, longer than MaxKeyBytes
// or repeated, naming its row (and the earlier row for a repeat).
func CheckKeys(keys []string) error {
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		if err := CheckKey(k); err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
		if j, dup := seen[k]; dup {
			return fmt.Errorf("%w %q: rows %d and %d", ErrDuplicateKey, k, j, i)
		}
		seen[k] = i
	}
	return nil
}

// CheckKey reports a key that is empty or longer than MaxKeyBytes.
func CheckKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: empty", ErrKey)
	case len(k) > MaxKeyBytes:
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrKey, len(k), MaxKeyBytes)
	}
	return nil
}

// CheckPayloads reports the first payload over MaxPayloadBytes.
func CheckPayloads(payloads [][]byte) error {
	for i, p := range payloads {
		if len(p) > MaxPayloadBytes {
			return fmt.Errorf("row %d: %w: %d bytes (at most %d)", i, ErrPayload, len(p), MaxPayloadBytes)
		}
	}
	return nil
}

// docSections returns the KEYS, KIDX and PAYL sections of checked keys
// and payloads in row order, leaving out those not given.
func docSections(keys []string, payloads [][]byte) []format.Section {
	var secs []format.Section
	if keys != nil {
		secs = keySections(keys)
	}
	if payloads != nil {
		secs = append(secs, format.Section{Kind: secPayloads, Data: packBlobs(len(payloads), func(i int) []byte { return payloads[i] })})
	}
	return secs
}

// keySections returns KEYS and KIDX for keys in row order (checked).
func keySections(keys []string) []format.Section {
	order := make([]uint32, len(keys))
	hashes := make([]uint64, len(keys))
	for i, k := range keys {
		order[i], hashes[i] = uint32(i), keyHash(k)
	}
	slices.SortFunc(order, func(a, b uint32) int {
		if hashes[a] != hashes[b] {
			if hashes[a] < hashes[b] {
				return -1
			}
			return 1
		}
		return int(a) - int(b)
	})
	idx := make([]byte, 4*len(keys))
	for i, r := range order {
		binary.LittleEndian.PutUint32(idx[4*i:], r)
	}
	return []format.Section{{Kind: secKeys, Data: packBlobs(len(keys), func(i int) []byte { return unsafe.Slice(unsafe.StringData(keys[i]), len(keys[i])) })},
		{Kind: secKeyIndex, Data: idx}}
}

// packBlobs lays n byte strings out as (n+1) offsets and their bytes.
func packBlobs(n int, at func(i int) []byte) []byte {
	total := 0
	for i := range n {
		total += len(at(i))
	}
	b := make([]byte, 8*(n+1), 8*(n+1)+total)
	for i := range n {
		binary.LittleEndian.PutUint64(b[8*(i+1):], uint64(len(b)-8*(n+1)+len(at(i))))
		b = append(b, at(i)...)
	}
	return b
}

// blobs is a KEYS or PAYL section read in place.
type blobs struct {
	off  []uint64
	data []byte
}

// loadBlobs checks the section's size and its first and last offsets; the
// offsets between are checked by Verify (checkBlobs) and, cheaply, by at.
func loadBlobs(b []byte, n int) (blobs, bool) {
	if len(b) < 8*(n+1) {
		return blobs{}, false
	}
	bl := blobs{off: viewU64(b[:8*(n+1)]), data: b[8*(n+1):]}
	return bl, bl.off[0] == 0 && bl.off[n] == uint64(len(bl.data))
}

// at returns blob i, or ok false when its offsets are out of order.
func (bl blobs) at(i int) ([]byte, bool) {
	lo, hi := bl.off[i], bl.off[i+1]
	if lo > hi || hi > uint64(len(bl.data)) {
		return nil, false
	}
	return bl.data[lo:hi:hi], true
}

// HasKeys reports whether the index holds caller ids (a KEYS section).
func (ix *Index) HasKeys() bool { return ix.keys.off != nil }

// HasPayloads reports whether the index holds payloads (a PAYL section).
func (ix *Index) HasPayloads() bool { return ix.payloads.off != nil }

// Key returns row's id: its KEYS entry, or the row number in decimal in
// an index without keys. The bytes are a view of the mapping (copy them to
// keep them past Close).
func (ix *Index) Key(row int) ([]byte, error) {
	if row < 0 || row >= ix.n {
		return nil, fmt.Errorf("%w: row %d of %d", ErrArgument, row, ix.n)
	}
	if ix.keys.off == nil {
		return strconv.AppendInt(nil, int64(row), 10), nil
	}
	k, ok := ix.keys.at(row)
	if !ok {
		return nil, fmt.Errorf("%s: %w: KEYS offsets of row %d out of order", ix.path, ErrCorrupt, row)
	}
	return k, nil
}

// Payload returns row's payload (nil when it has none), a view of the
// mapping.
func (ix *Index) Payload(row int) ([]byte, error) {
	if row < 0 || row >= ix.n {
		return nil, fmt.Errorf("%w: row %d of %d", ErrArgument, row, ix.n)
	}
	if ix.payloads.off == nil {
		return nil, nil
	}
	p, ok := ix.payloads.at(row)
	if !ok {
		return nil, fmt.Errorf("%s: %w: PAYL offsets of row %d out of order", ix.path, ErrCorrupt, row)
	}
	return p, nil
}

// Find returns the row whose id is key, by binary search of KIDX (in an
// index without keys: the row the decimal key names).
func (ix *Index) Find(key string) (row int, ok bool) {
	if ix.keys.off == nil {
		r, err := strconv.ParseUint(key, 10, 63)
		if err != nil || r >= uint64(ix.n) || strconv.FormatUint(r, 10) != key {
			return 0, false
		}
		return int(r), true
	}
	h := keyHash(key)
	rows := ix.keyIndex
	i, _ := slices.BinarySearchFunc(rows, h, func(r uint32, h uint64) int {
		k, _ := ix.keys.at(int(r) % ix.n)
		if x := keyHash(unsafe.String(unsafe.SliceData(k), len(k))); x != h {
			if x < h {
				return -1
			}
			return 1
		}
		return 0
	})
	for ; i < len(rows); i++ {
		r := int(rows[i]) % ix.n
		k, _ := ix.keys.at(r)
		s := unsafe.String(unsafe.SliceData(k), len(k))
		if keyHash(s) != h {
			break
		}
		if s == key {
			return r, true
		}
	}
	return 0, false
}

// loadKeys finds the optional KEYS, KIDX and PAYL sections of an index of
// n rows and checks their sizes.
func (ix *Index) loadKeys(f *format.File, bad func(string, ...any) error) error {
	if b, ok := f.Section(secKeys); ok {
		kb, ok := loadBlobs(b, ix.n)
		if !ok {
			return bad("section %q does not hold %d offsets and their bytes", secKeys, ix.n+1)
		}
		idx, found := f.Section(secKeyIndex)
		if !found || len(idx) != 4*ix.n {
			return bad("section %q is missing or %d bytes, want %d", secKeyIndex, len(idx), 4*ix.n)
		}
		ix.keys, ix.keyIndex = kb, unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(idx))), ix.n)
	}
	if b, ok := f.Section(secPayloads); ok {
		pb, ok := loadBlobs(b, ix.n)
		if !ok {
			return bad("section %q does not hold %d offsets and their bytes", secPayloads, ix.n+1)
		}
		ix.payloads = pb
	}
	return nil
}

// checkKeys is Verify's pass over keys and payloads: offsets in order,
// keys valid and unique, KIDX a permutation in key-hash order.
func (ix *Index) checkKeys() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", ix.path, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	for _, bl := range []struct {
		b    blobs
		kind format.Kind
		max  int
	}{{ix.keys, secKeys, MaxKeyBytes}, {ix.payloads, secPayloads, MaxPayloadBytes}} {
		if bl.b.off == nil {
			continue
		}
		for i := range ix.n {
			v, ok := bl.b.at(i)
			if !ok || len(v) > bl.max || bl.kind == secKeys && len(v) == 0 {
				return bad("section %q: entry of row %d is out of order, empty or too long", bl.kind, i)
			}
		}
	}
	if ix.keys.off == nil {
		return nil
	}
	seen := make([]uint64, (ix.n+63)/64)
	var prevHash uint64
	prevRow := -1
	for i, r32 := range ix.keyIndex {
		r := int(r32)
		if r >= ix.n || seen[r/64]&(1<<(r%64)) != 0 {
			return bad("section %q: entry %d names row %d twice or out of range", secKeyIndex, i, r)
		}
		seen[r/64] |= 1 << (r % 64)
		k, _ := ix.keys.at(r)
		h := keyHash(string(k))
		if i > 0 && (h < prevHash || h == prevHash && r < prevRow) {
			return bad("section %q is not in key order at entry %d", secKeyIndex, i)
		}
		if i > 0 && h == prevHash {
			pk, _ := ix.keys.at(prevRow)
			if string(pk) == string(k) {
				return bad("rows %d and %d have the same id %q", prevRow, r, k)
			}
		}
		prevHash, prevRow = h, r
	}
	return nil
}
