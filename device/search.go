package device

import (
	"context"
	"fmt"
	"slices"

	"github.com/vlc-embed/vlc/internal/errs"
)

// Search on a device (a GPU): the backend holds an index's lists in its
// own memory and answers batches of queries there. The index (package
// index) describes its lists (IndexData) and prepares the queries; the
// backend only computes; the index turns what comes back (entries and
// estimated distances) into hits.

// Errors of device search, for errors.Is.
var (
	// ErrNoSearch: the device cannot search this index (the backend has
	// no search, or none for the index's code, or the index is beyond the
	// kernels' limits).
	ErrNoSearch = errs.New(errs.ErrUnavailable, "no device search")
	// ErrClosed: a Resident used after Close.
	ErrClosed = errs.ErrClosed
	// ErrArgument: a search's sizes are out of range.
	ErrArgument = errs.ErrArgument
)

// Searcher is a backend that can search an index in its own memory: the
// training devices of backend/cuda and backend/webgpu implement it.
type Searcher interface {
	// UploadIndex copies what d describes to the device, where it stays
	// until the Resident is closed.
	UploadIndex(d *IndexData) (Resident, error)
}

// Resident is an index held in a device's memory.
type Resident interface {
	// Search finds, for each of the nq queries (row i at queries[i*Dim:],
	// prepared: see IndexData), the keep entries of least distance in
	// its nprobe nearest lists, nearest first: entries[i*keep+j] and
	// dists[i*keep+j], -1 and +Inf where a query's lists hold fewer. It
	// splits a batch larger than its memory allows, and stops between
	// parts when ctx is done. Callers make one call at a time.
	Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error
	// Bytes is the device memory the index holds now: the resident
	// lists and the batch buffers of the largest batch so far.
	Bytes() int64
	// Close frees the device memory.
	Close() error
}

// LanedResident is a Resident of several copies, each of which takes a
// call at once (a ReplicaSearch's: a copy on each device). Search cuts
// each batch over them; a caller with several batches in hand (the
// chunks of a pipelined batch) gives each lane whole ones instead, so
// that every copy searches a full chunk (a chunk cut in two shares each
// list among half the queries).
type LanedResident interface {
	Resident
	// Lanes is how many calls may run at once, one a lane.
	Lanes() int
	// SearchLane is Search (allow nil) or SearchMasked on copy lane
	// alone (0 <= lane < Lanes()). Calls on different lanes may run at
	// once; a lane takes one call at a time.
	SearchLane(ctx context.Context, lane int, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error
}

// MaskedResident is a Resident that can leave entries out of a search on
// the device itself (a store's deleted rows, a filter's allowed rows),
// so that a search asks for only the k it needs. Where a backend lacks
// it, the index asks for more candidates and drops the masked ones on
// the host.
type MaskedResident interface {
	Resident
	// SearchMasked is Search over the entries whose bit is set in allow
	// (entry e is bit e%64 of allow[e/64]; len(allow) >= (N+63)/64),
	// one mask for every query of the batch.
	SearchMasked(ctx context.Context, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error
}

// HostBuffers is a Resident whose searches copy queries up faster from
// host memory it hands out (page-locked on a GPU: the copy goes straight
// from it, without a pass through a staging buffer). The index prepares
// a batch's queries there.
type HostBuffers interface {
	// HostBuffer returns n float32 of such memory, and the function that
	// gives it back once the search that read it has returned. The
	// memory lives as long as the device: give it back before closing
	// the device.
	HostBuffer(n int) (buf []float32, release func(), err error)
}

// MaxKeep is the most candidates a device search keeps per query (K,
// times RerankFactor when re-ranking): its final selection sorts them in
// one block's shared memory.
const MaxKeep = 4096

// Tile is the number of entries whose level words are interleaved (see
// IndexData).
const Tile = 32

// IndexData is an index as a device searches it, and the definition of
// that search: below for the rotated code (quant.Rotated), the zero Code;
// CodeData says what differs for pq and sq8.
//
// A query q arrives prepared: normalised under cosine, scaled by a power
// of two under ip when far from 1 (index.ScaleIPQuery). The device
// rotates it, q~ = P q (Signs, RotP, RotScale: quant.Rotation's steps,
// which are exact in float32 when repeated in the same order), and takes
// its squared length qq. The probe ranks the lists by Norms[a] - 2 qa (L2
// and cosine) or -qa (ip), qa = <q~, RotAnchors[a]>, and takes the nprobe
// least, ties to the lower list. Each entry e of a probed list a then gets
//
//	dist = mul * score + bias,
//
// where, with q' = q~ - RotAnchors[a] (the L2 form) or q' = q~ (the dot
// form), levels l_j of the entry (Bits each, in Words words), L = 2^Bits-1,
// qu = sum_j q'_j l_j - (L/2) sum_j q'_j, beta = B16 * SqrtScale[a] and
// norm = N16 * Scale[a] (the entry's two float16 scalars):
//
//   - L2 form: score = |q'|^2 + norm - 2 beta qu; dot form: beta qu;
//   - IP with IPCodes, when qq - 2 qa + Norms[a] < qq: the L2 form,
//     mul 0.5, bias -(qq + Norms[a])/2;
//   - else IP: the dot form, mul -1, bias -qa;
//   - else (L2, cosine): the L2 form, mul 1, bias 0.
//
// These are the index's estimates (its Scorer's Score and list forms),
// computed for every entry of the probed lists: the CPU's first, cheaper
// estimate only rules entries out, so results agree up to float rounding,
// ties, and the rare entry whose first estimate's bound failed on the CPU
// (quant.EstimateSigmas).
//
// Entry e is the e-th of the index (lists are entries Offsets[a] to
// Offsets[a+1]-1). Its levels are Words uint32 words, level j at bits
// j*Bits.. of the stream, least significant first (the entry code's
// packed bytes, little endian); in Fill's layout word w of entry e is at
// (e/Tile)*Words*Tile + w*Tile + e%Tile, so that a warp reading word w of
// 32 neighbouring entries reads 128 contiguous bytes. Its scalars are one
// uint32: N16 (|r|^2/s, or the ip slot) in the low half, B16 (B/sqrt(s))
// in the high half.
type IndexData struct {
	N, Dim, Lists int
	// IP: the metric is the inner product (the ip forms above); else L2
	// or cosine, whose queries arrive normalised.
	IP          bool
	IPCodes     bool
	Bits, Words int
	// The rotation: rounds of Dim signs (+-1), each followed by the
	// orthonormal Walsh-Hadamard transform of the first RotP coordinates
	// and then of the last RotP (when RotP < Dim), whose scale is RotScale.
	Signs      [][]float32
	RotP       int
	RotScale   float32
	RotAnchors []float32 // Lists*Dim: P a
	Norms      []float32 // |a|^2, as the CPU's probe takes it
	Offsets    []uint64  // Lists+1
	Scale      []float32 // each list's s
	SqrtScale  []float32 // float32(sqrt(s))
	// Code is the code of the entries: the rotated one (the zero value)
	// or one of those CodeData describes, whose fields below serve it.
	Code Code
	CodeData
	// Fill writes tiles t0 to t1-1: words ((t1-t0)*Words*Tile) and
	// scalars ((t1-t0)*Tile), entries past N as zeros. The index reads
	// its mapped file, on all cores; an error names a fault in the
	// mapping.
	Fill func(t0, t1 int, words, scalars []uint32) error
}

// Tiles is the number of Tile-entry tiles, the last one padded with zero
// entries.
func (d *IndexData) Tiles() int { return (d.N + Tile - 1) / Tile }

// MaxCandidates is the most entries a search of nprobe lists can score
// for one query: the sizes of the nprobe largest lists, summed.
func (d *IndexData) MaxCandidates(nprobe int) int {
	sizes := make([]int, d.Lists)
	for a := range sizes {
		sizes[a] = int(d.Offsets[a+1] - d.Offsets[a])
	}
	slices.Sort(sizes)
	total := 0
	for _, s := range sizes[max(0, d.Lists-nprobe):] {
		total += s
	}
	return total
}

// Code is the kind of code an IndexData's entries hold.
type Code int

const (
	// CodeRotated: quant.Rotated, searched as IndexData describes.
	CodeRotated Code = iota
	// CodePQ: quant.PQ, searched as CodeData describes.
	CodePQ
	// CodeSQ8: quant.SQ8, searched as CodeData describes.
	CodeSQ8
)

func (c Code) String() string {
	switch c {
	case CodeRotated:
		return "rotated"
	case CodePQ:
		return "pq"
	case CodeSQ8:
		return "sq8"
	}
	return fmt.Sprintf("code %d", int(c))
}

// PQCentroids is the number of centroids of a pq subspace: one byte of
// code.
const PQCentroids = 256

// CodeData is what the pq and sq8 codes add to an IndexData, and the
// definition of their search. Both keep IndexData's probe, its forms and
// its layout, with Bits 8: an entry's code bytes are its levels (byte j of
// the code at bits 8j.. of the stream, Words = ceil(bytes/4) words,
// interleaved by Tile as for the rotated code), and only the scalar word
// differs.
//
// The probe is the rotated code's: q~ = P q, qa = <q~, RotAnchors[a]>,
// qq = |q|^2 (of the prepared query, unrotated), the lists ranked by
// Norms[a] - 2 qa (L2, cosine) or -qa (ip). The form of a probed list a
// (the L2 form or the dot form, with its mul and bias) is chosen exactly
// as IndexData says; only score, below, is the code's.
//
// pq (quant.PQ): P is the code's rotation (Signs, RotP, RotScale as for
// the rotated code) and RotAnchors holds P a. Subspace s holds dimensions
// lo = s*Dim/Subspaces up to hi = (s+1)*Dim/Subspaces (integer division);
// its centroid k is Codebooks[256*lo + k*(hi-lo):][:hi-lo]. Per query, two
// lookup tables of Subspaces*256 values:
//
//	L2 table:  T[s][k] = sum_{j<hi-lo} (q~_{lo+j} - RotMean_{lo+j}) * c_{s,k,j}
//	dot table: T[s][k] = sum_{j<hi-lo} q~_{lo+j} * c_{s,k,j}
//
// An entry's bytes k_0..k_{Subspaces-1} give ip = (t0 + t1) + (t2 + t3),
// t_i summing T[s][k_s] (the table of the list's form) over s = i mod 4
// in increasing s; its scalar word holds byte C in bits 0-7 and
// byte B in bits 8-15, read off the list's grids Grids[4a:4a+4] = (B0,
// BStep, C0, CStep) as beta = B0 + B*BStep and c = C0 + C*CStep. Then
//
//	L2 form:  score = |q~ - RotAnchors[a]|^2 + c - 2 beta ip
//	dot form: score = beta ip
//
// sq8 (quant.SQ8): no rotation (Signs is empty, RotP = Dim, RotScale 1,
// RotAnchors the anchors as the index holds them), so q~ = q. Byte j of an
// entry is its level l_j of dimension j; the scalar word is zero. With the
// list's ranges Lo[a*Dim+j] and Step[a*Dim+j]:
//
//	L2 form:  score = sum_j ((q_j - RotAnchors[a*Dim+j] - Lo[a*Dim+j]) - Step[a*Dim+j] l_j)^2
//	dot form: score = sum_j q_j Lo[a*Dim+j] + sum_j (q_j Step[a*Dim+j]) l_j
//
// The parentheses are the CPU scorer's float32 steps. The pq score
// cancels: at few subspaces c and 2 beta ip can be a thousand times the
// distance, so pq's tables and ip follow the CPU's order exactly, each
// product and sum rounded to float32 on its own (no fused multiply-add);
// the order of the other sums is free. These are the estimates of the codes' Scorers, for
// every entry of the probed lists (neither code has a first estimate), so
// results agree with the CPU's up to float rounding and ties.
type CodeData struct {
	// pq
	Subspaces int
	Codebooks []float32 // 256*Dim: centroid values, as above
	RotMean   []float32 // Dim: P mu, mu the mean of the anchors
	Grids     []float32 // Lists*4: B0, BStep, C0, CStep
	// sq8
	Lo, Step []float32 // Lists*Dim: each list's range per dimension
}

// CodeBytes is the bytes of levels of one entry: Subspaces (pq), Dim
// (sq8), or the rotated code's Dim*Bits/8 rounded up.
func (d *IndexData) CodeBytes() int {
	switch d.Code {
	case CodePQ:
		return d.Subspaces
	case CodeSQ8:
		return d.Dim
	}
	return (d.Dim*d.Bits + 7) / 8
}

// PQSub is pq subspace s's dimensions, lo to hi-1.
func (d *IndexData) PQSub(s int) (lo, hi int) {
	return s * d.Dim / d.Subspaces, (s + 1) * d.Dim / d.Subspaces
}
