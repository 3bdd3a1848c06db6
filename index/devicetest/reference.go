package devicetest

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/vec"
)

// Reference is device.IndexData's search written plainly in Go, one query
// at a time: what the GPU kernels compute, in the same float32 steps,
// without their parallel layout. Its parity with the CPU path (the
// package's own test) checks the description a device works from; a
// backend's kernels are then checked against the CPU path the same way.
func Reference() device.Searcher { return reference{} }

type reference struct{}

// Unmasked is dev with its residents' masked search hidden: a device
// that only searches every entry (device.Resident alone), as WebGPU's
// does. Its parity checks the index's host-side filtering of such a
// device.
func Unmasked(dev device.Searcher) device.Searcher { return unmasked{dev} }

type unmasked struct{ dev device.Searcher }

// plainResident hides every method of a resident but device.Resident's.
type plainResident struct{ device.Resident }

func (u unmasked) UploadIndex(d *device.IndexData) (device.Resident, error) {
	r, err := u.dev.UploadIndex(d)
	if err != nil {
		return nil, err
	}
	return plainResident{r}, nil
}

type refResident struct {
	d       *device.IndexData
	words   []uint32
	scalars []uint32
}

func (reference) UploadIndex(d *device.IndexData) (device.Resident, error) {
	r := &refResident{d: d, words: make([]uint32, d.Tiles()*d.Words*device.Tile), scalars: make([]uint32, d.Tiles()*device.Tile)}
	if err := d.Fill(0, d.Tiles(), r.words, r.scalars); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *refResident) Bytes() int64 { return int64(4 * (len(r.words) + len(r.scalars))) }
func (r *refResident) Close() error { r.words, r.scalars = nil, nil; return nil }

// Rotate applies the rotation d describes to x (Dim values) in place.
func Rotate(d *device.IndexData, x []float32) {
	for _, signs := range d.Signs {
		for j, s := range signs {
			x[j] *= s
		}
		vec.FWHT(x[:d.RotP], d.RotScale)
		if d.RotP != d.Dim {
			vec.FWHT(x[d.Dim-d.RotP:], d.RotScale)
		}
	}
}

type cand struct {
	e    int32
	dist float32
}

var _ device.MaskedResident = (*refResident)(nil)

func (r *refResident) Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	return r.search(ctx, queries, nq, nprobe, keep, nil, entries, dists)
}

// SearchMasked scores only the entries allow allows: a masked entry is
// skipped before it is scored, as a kernel skips it.
func (r *refResident) SearchMasked(ctx context.Context, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error {
	if len(allow) < (r.d.N+63)/64 {
		return fmt.Errorf("%w: a mask of %d words for %d entries", device.ErrArgument, len(allow), r.d.N)
	}
	return r.search(ctx, queries, nq, nprobe, keep, allow, entries, dists)
}

// search is Search over the entries allow allows (every entry when nil).
func (r *refResident) search(ctx context.Context, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error {
	if r.d.Code != device.CodeRotated {
		if allow == nil {
			return r.searchCodes(ctx, queries, nq, nprobe, keep, entries, dists)
		}
		return r.searchCodesMasked(ctx, queries, nq, nprobe, keep, allow, entries, dists)
	}
	d := r.d
	D := d.Dim
	rq := make([]float32, D)
	qp := make([]float32, D)
	L := float32(int(1)<<d.Bits - 1)
	for i := range nq {
		if err := ctx.Err(); err != nil {
			return err
		}
		q := queries[i*D : (i+1)*D]
		copy(rq, q)
		Rotate(d, rq)
		lists, qa, qq := ProbeLists(d, q, rq)
		var found []cand
		for _, a := range lists[:nprobe] {
			dot, mul, bias := listForm(d, qq, qa[a], a)
			var sum, sq float32
			for j := range D {
				qp[j] = rq[j]
				if !dot {
					qp[j] -= d.RotAnchors[a*D+j]
				}
				sum += qp[j]
				sq += qp[j] * qp[j]
			}
			qsum := sum * L / 2
			for e := int(d.Offsets[a]); e < int(d.Offsets[a+1]); e++ {
				if allow != nil && allow[e/64]&(1<<(e%64)) == 0 {
					continue
				}
				tile := r.words[(e/device.Tile)*d.Words*device.Tile:]
				var t float32
				for j := range D {
					bit := j * d.Bits
					w := tile[(bit/32)*device.Tile+e%device.Tile]
					l := w >> (bit % 32) & (1<<d.Bits - 1)
					t += qp[j] * float32(l)
				}
				qu := t - qsum
				sc := r.scalars[e]
				beta := f16.ToFloat32(uint16(sc>>16)) * d.SqrtScale[a]
				score := beta * qu
				if !dot {
					norm := f16.ToFloat32(uint16(sc)) * d.Scale[a]
					score = sq + norm - 2*beta*qu
				}
				found = append(found, cand{int32(e), mul*score + bias})
			}
		}
		slices.SortFunc(found, func(x, y cand) int { return cmp.Or(cmp.Compare(x.dist, y.dist), cmp.Compare(x.e, y.e)) })
		for j := range keep {
			entries[i*keep+j], dists[i*keep+j] = -1, float32(math.Inf(1))
			if j < len(found) {
				entries[i*keep+j], dists[i*keep+j] = found[j].e, found[j].dist
			}
		}
	}
	return nil
}

// searchCodesMasked is searchCodes over the entries allow allows: every
// candidate of the probed lists, the masked ones dropped, the keep best
// kept.
func (r *refResident) searchCodesMasked(ctx context.Context, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error {
	all := max(keep, r.d.MaxCandidates(nprobe))
	e, d := make([]int32, nq*all), make([]float32, nq*all)
	if err := r.searchCodes(ctx, queries, nq, nprobe, all, e, d); err != nil {
		return err
	}
	for i := range nq {
		j := 0
		for t, x := range e[i*all : (i+1)*all] {
			if x < 0 || j == keep {
				break
			}
			if allow[x/64]>>(x%64)&1 != 0 {
				entries[i*keep+j], dists[i*keep+j] = x, d[i*all+t]
				j++
			}
		}
		for ; j < keep; j++ {
			entries[i*keep+j], dists[i*keep+j] = -1, float32(math.Inf(1))
		}
	}
	return nil
}
