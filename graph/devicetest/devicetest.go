// Package devicetest is the conformance suite of a graph build's
// measuring on a device (device.RowMeter): every distance must be
// vec.L2Lanes's to the bit, every list pruned as device.DeviceRows.Prune
// defines, kept row for kept row, and every walk (DeviceRows.Walk) expand
// the rows graph's beam search expands, in order. A backend's tests get
// it from one call:
//
//	devicetest.Parity(t, meter)
//
// The cases straddle the kernels' groups of four entries and eight lanes:
// lists of 0 to 150 entries, a list's own row and repeated rows among
// them, dimensions of 8 to 776, float16 and float32 rows, rows
// that coincide, keeping 1 to 64 rows; walks over adjacencies of 5 to
// 128 slots a row (a warp's 32 and more), with repeated and self links
// and short rows, pools of 1 to 256 rows, caps that cut walks short,
// and more walks than a GPU runs at once. Reference is the same written
// plainly in Go; its own test holds it to the suite in CI, and graph's
// tests build through it.
package devicetest

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/errs"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/vec"
)

// Reference is a device.RowMeter on the host: the contract written
// plainly.
type Reference struct{}

// LoadRows keeps rows (not a copy).
func (Reference) LoadRows(rows device.HostRows) (device.DeviceRows, error) {
	if err := rows.Check(); err != nil {
		return nil, err
	}
	return &refRows{rows: rows}, nil
}

type refRows struct {
	rows   device.HostRows
	adj    []uint32 // LoadAdjacency's copy
	r      int
	closed bool
}

func (x *refRows) dist(a, b uint32) float32 {
	d := x.rows.Dim
	if x.rows.Half != nil {
		return vec.L2LanesHalf(x.rows.Half[int(a)*d:int(a+1)*d], x.rows.Half[int(b)*d:int(b+1)*d])
	}
	return vec.L2Lanes(x.rows.Float[int(a)*d:int(a+1)*d], x.rows.Float[int(b)*d:int(b+1)*d])
}

func (x *refRows) check(l device.RowLists) error {
	if x.closed {
		return errors.New("devicetest: rows closed")
	}
	return l.Check(x.rows.N)
}

func (x *refRows) Measure(l device.RowLists) error {
	if err := x.check(l); err != nil {
		return err
	}
	for i, p := range l.Of {
		for k := l.Offsets[i]; k < l.Offsets[i+1]; k++ {
			l.Dists[k] = x.dist(p, l.IDs[k])
		}
	}
	return nil
}

func (x *refRows) Prune(l device.RowLists, r int, alpha2 float32, kept []uint32, keptDists []float32) error {
	if err := x.check(l); err != nil {
		return err
	}
	if r < 1 || len(kept) != len(l.Of)*r || len(keptDists) != len(l.Of)*r || !(alpha2 >= 1) {
		return fmt.Errorf("%w: prune: keep %d a list in %d and %d slots for %d lists, alpha^2 %v", errs.ErrArgument, r, len(kept), len(keptDists), len(l.Of), alpha2)
	}
	for i, p := range l.Of {
		kk, kd := kept[i*r:i*r], keptDists[i*r:i*r]
		for e := l.Offsets[i]; e < l.Offsets[i+1] && len(kk) < r; e++ {
			c := l.IDs[e]
			if c == p {
				continue
			}
			ok := true
			for _, k := range kk {
				if k == c || alpha2*x.dist(c, k) <= l.Dists[e] {
					ok = false
					break
				}
			}
			if ok {
				kk, kd = append(kk, c), append(kd, l.Dists[e])
			}
		}
		for k := len(kk); k < r; k++ {
			kept[i*r+k], keptDists[i*r+k] = device.NoRow, 0
		}
	}
	return nil
}

func (x *refRows) LoadAdjacency(adj []uint32, r int) error {
	if x.closed {
		return errors.New("devicetest: rows closed")
	}
	if err := device.CheckAdjacency(adj, r, x.rows.N); err != nil {
		return err
	}
	x.adj, x.r = slices.Clone(adj), r
	return nil
}

func (x *refRows) Walk(w device.RowWalks) error {
	if x.closed {
		return errors.New("devicetest: rows closed")
	}
	if err := w.Check(x.rows.N); err != nil {
		return err
	}
	if x.adj == nil {
		return fmt.Errorf("%w: walk: no adjacency loaded", errs.ErrArgument)
	}
	type pooled struct {
		d    float32
		id   uint32
		done bool
	}
	for i, p := range w.Of {
		seen := map[uint32]bool{w.Starts[i]: true}
		pool := []pooled{{x.dist(p, w.Starts[i]), w.Starts[i], false}}
		count := 0
		for next := 0; next < len(pool); {
			if count == w.Cap {
				count = -1
				break
			}
			c := pool[next]
			pool[next].done = true
			w.IDs[i*w.Cap+count], w.Dists[i*w.Cap+count] = c.id, c.d
			count++
			for _, v := range x.adj[int(c.id)*x.r : int(c.id+1)*x.r] {
				if v == device.NoRow {
					break
				}
				if seen[v] {
					continue
				}
				seen[v] = true
				d := x.dist(p, v)
				if len(pool) == w.Ef && !(d < pool[len(pool)-1].d) {
					continue
				}
				at := 0
				for at < len(pool) && pool[at].d <= d {
					at++
				}
				if len(pool) < w.Ef {
					pool = append(pool, pooled{})
				}
				copy(pool[at+1:], pool[at:])
				pool[at] = pooled{d, v, false}
			}
			for next = 0; next < len(pool) && pool[next].done; next++ {
			}
		}
		w.Counts[i] = int32(count)
	}
	return nil
}

func (x *refRows) Close() error {
	x.closed = true
	return nil
}

// Case is one set of rows the suite measures and prunes lists of.
type Case struct {
	N, Dim int
	Half   bool
}

func (c Case) String() string {
	kind := "float32"
	if c.Half {
		kind = "float16"
	}
	return fmt.Sprintf("%dx%d-%s", c.N, c.Dim, kind)
}

// DefaultCases are the suite's rows.
var DefaultCases = []Case{
	{300, 8, true}, {300, 8, false}, {257, 24, true}, {500, 96, true}, {500, 96, false},
	{200, 776, true}, {120, 768, false},
}

// Rows returns c's rows, normal values rounded to float16 (held as
// float32 or float16), rows 1 and 2 the same as row 0 (ties).
func Rows(c Case, seed uint64) device.HostRows {
	rng := rand.New(rand.NewPCG(seed, 7))
	r := device.HostRows{N: c.N, Dim: c.Dim}
	h := make([]uint16, c.N*c.Dim)
	for i := range h {
		h[i] = f16.FromFloat32(float32(rng.NormFloat64() * 3))
	}
	for k := 1; k < 3 && k < c.N; k++ {
		copy(h[k*c.Dim:(k+1)*c.Dim], h[:c.Dim])
	}
	if c.Half {
		r.Half = h
		return r
	}
	r.Float = make([]float32, len(h))
	f16.DecodeRow(r.Float, h)
	return r
}

// Lists returns lists of rows for every third row: 0 to 150 entries,
// random rows with the list's own row and repeats among them, each list
// sorted by its reference distances (then row), as a build hands them;
// the last list is left unsorted.
func Lists(rows device.HostRows, seed uint64) device.RowLists {
	rng := rand.New(rand.NewPCG(seed, 11))
	ref := &refRows{rows: rows}
	l := device.RowLists{Offsets: []uint32{0}}
	for p := 0; p < rows.N; p += 3 {
		size := rng.IntN(151)
		if p < 30 {
			size = p / 3 // 0 to 9: around the groups of four
		}
		start := len(l.IDs)
		for range size {
			c := uint32(rng.IntN(rows.N))
			switch rng.IntN(20) {
			case 0:
				c = uint32(p)
			case 1:
				if len(l.IDs) > start {
					c = l.IDs[start+rng.IntN(len(l.IDs)-start)]
				}
			}
			l.IDs = append(l.IDs, c)
			l.Dists = append(l.Dists, ref.dist(uint32(p), c))
		}
		if p+3 < rows.N {
			type pair struct {
				d  float32
				id uint32
			}
			ps := make([]pair, size)
			for k := range ps {
				ps[k] = pair{l.Dists[start+k], l.IDs[start+k]}
			}
			slices.SortFunc(ps, func(a, b pair) int {
				if c := cmp.Compare(a.d, b.d); c != 0 {
					return c
				}
				return cmp.Compare(a.id, b.id)
			})
			for k, q := range ps {
				l.Dists[start+k], l.IDs[start+k] = q.d, q.id
			}
		}
		l.Of = append(l.Of, uint32(p))
		l.Offsets = append(l.Offsets, uint32(len(l.IDs)))
	}
	return l
}

// Parity checks m against the reference on every case: Measure's
// distances bit for bit, Prune's kept rows and distances for several
// widths and factors, Walk's expanded rows and distances, and that bad
// lists, walks and adjacencies are refused as errs.ErrArgument.
func Parity(t *testing.T, m device.RowMeter) {
	for _, c := range DefaultCases {
		t.Run(c.String(), func(t *testing.T) {
			rows := Rows(c, uint64(c.N*c.Dim))
			dr, err := m.LoadRows(rows)
			if err != nil {
				t.Fatal(err)
			}
			defer dr.Close()
			ref, _ := Reference{}.LoadRows(rows)
			l := Lists(rows, uint64(c.Dim))
			want := slices.Clone(l.Dists)
			clear(l.Dists)
			if err := dr.Measure(l); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for k := range want {
				if math.Float32bits(l.Dists[k]) != math.Float32bits(want[k]) {
					if bad++; bad <= 5 {
						t.Errorf("Measure: entry %d (row %d): %v, want %v", k, l.IDs[k], l.Dists[k], want[k])
					}
				}
			}
			if bad > 0 {
				t.Fatalf("Measure: %d of %d distances differ", bad, len(want))
			}
			for _, r := range []int{1, 5, 32, 64} {
				for _, alpha2 := range []float32{1, 1.21} {
					got, gotD := make([]uint32, len(l.Of)*r), make([]float32, len(l.Of)*r)
					wantK, wantD := make([]uint32, len(l.Of)*r), make([]float32, len(l.Of)*r)
					if err := dr.Prune(l, r, alpha2, got, gotD); err != nil {
						t.Fatal(err)
					}
					if err := ref.Prune(l, r, alpha2, wantK, wantD); err != nil {
						t.Fatal(err)
					}
					for i := range l.Of {
						a, b := got[i*r:(i+1)*r], wantK[i*r:(i+1)*r]
						ad, bd := gotD[i*r:(i+1)*r], wantD[i*r:(i+1)*r]
						if !slices.Equal(a, b) || !slices.Equal(ad, bd) {
							t.Fatalf("Prune r %d alpha^2 %v: list %d (row %d) kept %v %v, want %v %v", r, alpha2, i, l.Of[i], a, ad, b, bd)
						}
					}
				}
			}
			walkParity(t, dr, ref, rows.N, uint64(c.Dim), c.Dim == 8)
			refuse := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, errs.ErrArgument) {
					t.Errorf("%s: %v, want an ErrArgument", what, err)
				}
			}
			bl := l
			bl.IDs = slices.Clone(l.IDs)
			bl.IDs[len(bl.IDs)/2] = uint32(c.N)
			refuse("a row past the rows", dr.Measure(bl))
			bl = l
			bl.Offsets = slices.Clone(l.Offsets)
			bl.Offsets[len(bl.Offsets)-1]++
			refuse("offsets past the entries", dr.Measure(bl))
			refuse("room for too few kept rows", dr.Prune(l, 4, 1, make([]uint32, 3), make([]float32, 3)))
		})
	}
}

// Adjacency returns r random slots a row for n rows: each row's
// neighbours then NoRow (some rows full, some empty), a row's own number
// and repeats among them.
func Adjacency(n, r int, seed uint64) []uint32 {
	rng := rand.New(rand.NewPCG(seed, 13))
	adj := make([]uint32, n*r)
	for i := range n {
		deg := r
		if rng.IntN(3) == 0 {
			deg = rng.IntN(r + 1)
		}
		for k := range r {
			v := device.NoRow
			if k < deg {
				v = uint32(rng.IntN(n))
				switch rng.IntN(15) {
				case 0:
					v = uint32(i)
				case 1:
					if k > 0 {
						v = adj[i*r+rng.IntN(k)]
					}
				}
			}
			adj[i*r+k] = v
		}
	}
	return adj
}

// walkParity checks dr's walks against ref's over random adjacencies:
// counts, expanded rows and distances (bits), several widths, slots a row
// that straddle a warp's 32, and caps that cut walks short; with many,
// one set of 20,000 walks.
func walkParity(t *testing.T, dr, ref device.DeviceRows, n int, seed uint64, many bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 17))
	for _, r := range []int{5, 32, 40, device.MaxWalkSlots} {
		adj := Adjacency(n, r, seed+uint64(r))
		for _, x := range []device.DeviceRows{dr, ref} {
			if err := x.LoadAdjacency(adj, r); err != nil {
				t.Fatal(err)
			}
		}
		for _, ef := range []int{1, 7, 64, device.MaxWalkEf} {
			for _, most := range []int{n, 9} {
				walks := 50
				if many && r == 40 && ef == 7 && most == n {
					walks = 20000 // more than a GPU's warps at once
				}
				w := device.RowWalks{Of: make([]uint32, walks), Starts: make([]uint32, walks), Ef: ef, Cap: most,
					IDs: make([]uint32, walks*most), Dists: make([]float32, walks*most), Counts: make([]int32, walks)}
				for i := range walks {
					w.Of[i], w.Starts[i] = uint32(rng.IntN(n)), uint32(rng.IntN(n))
				}
				want := w
				want.IDs, want.Dists, want.Counts = make([]uint32, walks*most), make([]float32, walks*most), make([]int32, walks)
				if err := dr.Walk(w); err != nil {
					t.Fatal(err)
				}
				if err := ref.Walk(want); err != nil {
					t.Fatal(err)
				}
				for i := range walks {
					if w.Counts[i] != want.Counts[i] {
						t.Fatalf("Walk r %d ef %d cap %d: walk %d (row %d from %d) expanded %d, want %d", r, ef, most, i, w.Of[i], w.Starts[i], w.Counts[i], want.Counts[i])
					}
					k := int(max(want.Counts[i], 0))
					if want.Counts[i] < 0 {
						k = most
					}
					a, b := w.IDs[i*most:i*most+k], want.IDs[i*most:i*most+k]
					ad, bd := w.Dists[i*most:i*most+k], want.Dists[i*most:i*most+k]
					if !slices.Equal(a, b) || !slices.Equal(ad, bd) {
						t.Fatalf("Walk r %d ef %d cap %d: walk %d (row %d from %d) expanded %v %v, want %v %v", r, ef, most, i, w.Of[i], w.Starts[i], a, ad, b, bd)
					}
				}
			}
		}
	}
	bad := device.RowWalks{Of: []uint32{0}, Starts: []uint32{uint32(n)}, Ef: 4, Cap: 4, IDs: make([]uint32, 4), Dists: make([]float32, 4), Counts: make([]int32, 1)}
	if err := dr.Walk(bad); !errors.Is(err, errs.ErrArgument) {
		t.Errorf("Walk from a row past the rows: %v, want an ErrArgument", err)
	}
	if err := dr.LoadAdjacency(make([]uint32, 3), 4); !errors.Is(err, errs.ErrArgument) {
		t.Errorf("LoadAdjacency of 3 slots for rows of 4: %v, want an ErrArgument", err)
	}
}
