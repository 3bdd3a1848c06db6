package devicetest

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/vlc-embed/vlc/device"
)

// searchCodes is Search for the pq and sq8 codes (device.CodeData).
func (r *refResident) searchCodes(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	d := r.d
	D := d.Dim
	rq := make([]float32, D)
	for i := range nq {
		if err := ctx.Err(); err != nil {
			return err
		}
		q := queries[i*D : (i+1)*D]
		copy(rq, q)
		Rotate(d, rq)
		probe, qa, qq := ProbeLists(d, q, rq)
		var luts [2][]float32 // pq: the L2 and the dot table
		if d.Code == device.CodePQ {
			luts[0] = PQTable(d, rq, false)
			if d.IP {
				luts[1] = PQTable(d, rq, true)
			}
		}
		var found []cand
		for _, a := range probe[:nprobe] {
			found = r.scoreList(found, q, rq, luts, qq, qa[a], a)
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

// ProbeLists ranks d's lists for query q (prepared; rq rotated) as the
// probe does, nearest first, ties to the lower list, and returns them
// with qa (<rq, RotAnchors[a]> for every list) and qq = |q|^2.
func ProbeLists(d *device.IndexData, q, rq []float32) (lists []int, qa []float32, qq float32) {
	D := d.Dim
	for _, v := range q {
		qq += v * v
	}
	qa = make([]float32, d.Lists)
	probe := make([]cand, d.Lists)
	for a := range d.Lists {
		var s float32
		for j, v := range d.RotAnchors[a*D : (a+1)*D] {
			s += rq[j] * v
		}
		qa[a] = s
		dist := d.Norms[a] - 2*s
		if d.IP {
			dist = -s
		}
		probe[a] = cand{int32(a), dist}
	}
	slices.SortFunc(probe, func(x, y cand) int { return cmp.Or(cmp.Compare(x.dist, y.dist), cmp.Compare(x.e, y.e)) })
	lists = make([]int, d.Lists)
	for i, p := range probe {
		lists[i] = int(p.e)
	}
	return lists, qa, qq
}

// listForm is the form of list a for a query of qq and qa: the dot form
// or the L2 form, and mul and bias (device.IndexData).
func listForm(d *device.IndexData, qq, qa float32, a int) (dot bool, mul, bias float32) {
	switch {
	case d.IPCodes && qq-2*qa+d.Norms[a] < qq:
		return false, 0.5, -(qq + d.Norms[a]) / 2
	case d.IP:
		return true, -1, -qa
	}
	return false, 1, 0
}

// level is byte j of entry e's code, from the tiled words.
func (r *refResident) level(e, j int) uint32 {
	w := r.words[(e/device.Tile)*r.d.Words*device.Tile+(j/4)*device.Tile+e%device.Tile]
	return w >> (8 * (j % 4)) & 0xff
}

// scoreList appends the distances of list a's entries for query q
// (rotated: rq; pq's tables luts; qq, qa as the probe took them) to
// found.
func (r *refResident) scoreList(found []cand, q, rq []float32, luts [2][]float32, qq, qa float32, a int) []cand {
	d := r.d
	D := d.Dim
	dot, mul, bias := listForm(d, qq, qa, a)
	lo, hi := int(d.Offsets[a]), int(d.Offsets[a+1])
	switch d.Code {
	case device.CodePQ:
		lut := luts[0]
		if dot {
			lut = luts[1]
		}
		var qqa float32 // |q~ - P a|^2, the L2 form's
		for j, v := range d.RotAnchors[a*D : (a+1)*D] {
			x := rq[j] - v
			qqa += x * x
		}
		g := d.Grids[4*a : 4*a+4]
		for e := lo; e < hi; e++ {
			var t [4]float32 // subspaces s = i mod 4, in order
			for s := range d.Subspaces {
				t[s%4] += lut[s*device.PQCentroids+int(r.level(e, s))]
			}
			ip := (t[0] + t[1]) + (t[2] + t[3])
			sc := r.scalars[e]
			beta := g[0] + float32(sc>>8&0xff)*g[1]
			score := beta * ip
			if !dot {
				c := g[2] + float32(sc&0xff)*g[3]
				score = qqa + c - 2*beta*ip
			}
			found = append(found, cand{int32(e), mul*score + bias})
		}
	case device.CodeSQ8:
		lo8, step := d.Lo[a*D:(a+1)*D], d.Step[a*D:(a+1)*D]
		u := make([]float32, D)
		var base float32
		for j := range D {
			if dot {
				base += q[j] * lo8[j]
				u[j] = q[j] * step[j]
			} else {
				u[j] = q[j] - d.RotAnchors[a*D+j] - lo8[j]
			}
		}
		for e := lo; e < hi; e++ {
			var score float32
			for j := range D {
				l := float32(r.level(e, j))
				if dot {
					score += u[j] * l
				} else {
					t := u[j] - step[j]*l
					score += t * t
				}
			}
			if dot {
				score += base
			}
			found = append(found, cand{int32(e), mul*score + bias})
		}
	}
	return found
}

// PQTable is a pq query's lookup table (device.CodeData), Subspaces*256
// values, subspace s's at s*256: the dot table for dot, else the L2 table.
func PQTable(d *device.IndexData, rq []float32, dot bool) []float32 {
	lut := make([]float32, d.Subspaces*device.PQCentroids)
	for s := range d.Subspaces {
		lo, hi := d.PQSub(s)
		w := hi - lo
		for k := range device.PQCentroids {
			c := d.Codebooks[device.PQCentroids*lo+k*w:][:w]
			var p float32
			for j, v := range c {
				x := rq[lo+j]
				if !dot {
					x -= d.RotMean[lo+j]
				}
				p += v * x
			}
			lut[s*device.PQCentroids+k] = p
		}
	}
	return lut
}
