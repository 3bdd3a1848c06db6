package device

import (
	"fmt"

	"github.com/vlc-embed/vlc/internal/errs"
)

// RowMeter is a device that can hold a graph build's vectors and do the
// build's exact measuring on them: each row's distances to its
// candidates, the robust pruning of its lists, and the greedy searches of
// the refinement passes (Walk). Its distances are the
// CPU's to the bit (graph's meter, vec.L2Lanes): the squared difference
// of value j added into lane j%8, each product and sum rounded on its
// own, the eight lanes folded as (l0+l4 + l2+l6) + (l1+l5 + l3+l7). So a
// graph built with one has the bytes of a graph built without.
type RowMeter interface {
	// LoadRows places rows on the device for the life of the DeviceRows.
	LoadRows(rows HostRows) (DeviceRows, error)
}

// HostRows are N vectors of Dim values (Dim a multiple of 8, the lanes),
// row after row: Half holds them as float16 bit patterns (N*Dim), or
// else Float as float32 (N*Dim). Every value must be finite.
type HostRows struct {
	N, Dim int
	Half   []uint16
	Float  []float32
}

// Check says what is wrong with r, naming the field.
func (r HostRows) Check() error {
	switch {
	case r.N < 1 || r.Dim < 8 || r.Dim%8 != 0:
		return fmt.Errorf("%w: rows: %d x %d: want at least one row and a dimension that is a multiple of 8", errs.ErrArgument, r.N, r.Dim)
	case (r.Half == nil) == (r.Float == nil):
		return fmt.Errorf("%w: rows: want float16 or float32 values, one of the two", errs.ErrArgument)
	case r.Half != nil && len(r.Half) != r.N*r.Dim:
		return fmt.Errorf("%w: rows: %d float16 values for %d x %d", errs.ErrArgument, len(r.Half), r.N, r.Dim)
	case r.Float != nil && len(r.Float) != r.N*r.Dim:
		return fmt.Errorf("%w: rows: %d float32 values for %d x %d", errs.ErrArgument, len(r.Float), r.N, r.Dim)
	}
	return nil
}

// RowLists are lists of rows, one for each of some rows: list i belongs
// to row Of[i] and holds the rows IDs[Offsets[i]:Offsets[i+1]], with
// Dists beside them (a squared distance to row Of[i] each).
type RowLists struct {
	Of      []uint32
	Offsets []uint32 // len(Of)+1 of them, from 0, never decreasing
	IDs     []uint32
	Dists   []float32
}

// Check says what is wrong with l for n rows, naming the field.
func (l RowLists) Check(n int) error {
	switch {
	case len(l.Offsets) != len(l.Of)+1:
		return fmt.Errorf("%w: lists: %d offsets for %d lists", errs.ErrArgument, len(l.Offsets), len(l.Of))
	case l.Offsets[0] != 0 || int(l.Offsets[len(l.Of)]) != len(l.IDs) || len(l.Dists) != len(l.IDs):
		return fmt.Errorf("%w: lists: offsets from %d to %d over %d rows and %d distances", errs.ErrArgument, l.Offsets[0], l.Offsets[len(l.Of)], len(l.IDs), len(l.Dists))
	}
	for i, o := range l.Of {
		if int64(o) >= int64(n) {
			return fmt.Errorf("%w: lists: list %d is row %d's, of %d rows", errs.ErrArgument, i, o, n)
		}
		if l.Offsets[i+1] < l.Offsets[i] {
			return fmt.Errorf("%w: lists: offset %d is %d, below the one before it (%d)", errs.ErrArgument, i+1, l.Offsets[i+1], l.Offsets[i])
		}
	}
	for k, id := range l.IDs {
		if int64(id) >= int64(n) {
			return fmt.Errorf("%w: lists: entry %d is row %d, of %d rows", errs.ErrArgument, k, id, n)
		}
	}
	return nil
}

// DeviceRows are rows resident on a device (RowMeter.LoadRows). Its
// methods may be called from one goroutine at a time.
type DeviceRows interface {
	// Measure sets l.Dists[k] to the squared distance between row IDs[k]
	// and the row its list belongs to.
	Measure(l RowLists) error
	// Prune robust-prunes each list, as graph's prune does: the entries
	// are taken in order (nearest first, ties by row, as given), an entry
	// that is the list's own row skipped, and entry c is kept unless a
	// kept entry k is the same row or alpha2*|c - k|^2 <= Dists[c] (alpha2
	// times the distance rounded as float32), until r are kept. List i's
	// kept rows and their Dists go to kept[i*r:] and keptDists[i*r:], the
	// slots past them set to NoRow and 0.
	Prune(l RowLists, r int, alpha2 float32, kept []uint32, keptDists []float32) error
	// LoadAdjacency places a graph's neighbour lists for Walk, replacing
	// any loaded before: r slots a row (at most MaxWalkSlots), a row's
	// neighbours first, NoRow past them, every neighbour below the rows'
	// count.
	LoadAdjacency(adj []uint32, r int) error
	// Walk searches the loaded adjacency for each row w.Of[i], from row
	// w.Starts[i], with graph's greedy beam search over exact distances
	// (RowWalks).
	Walk(w RowWalks) error
	Close() error
}

// MaxWalkEf and MaxWalkSlots bound RowWalks.Ef and the adjacency's slots
// a row that DeviceRows.Walk takes.
const (
	MaxWalkEf    = 256
	MaxWalkSlots = 128
)

// RowWalks are greedy searches of a loaded adjacency (DeviceRows.Walk),
// one for each row Of[i], from row Starts[i]. A search keeps a pool of
// the Ef rows nearest to its row found so far, nearest first, ties in
// the order they were met, the start first; each step expands the
// nearest pool row not expanded yet: its neighbours (slot order, up to
// the first NoRow) not seen before in this search are measured, in that
// order, and each enters the pool after the rows of equal distance where
// nearer than the farthest of a full pool (which then drops out). The
// search ends when every pool row is expanded. The expanded rows, in
// order, and their distances go to IDs and Dists[i*Cap:], their count
// to Counts[i]; a search that would expand more than Cap rows stops
// there, its count -1.
type RowWalks struct {
	Of, Starts []uint32
	Ef, Cap    int
	IDs        []uint32
	Dists      []float32
	Counts     []int32
}

// Check says what is wrong with w for n rows, naming the field.
func (w RowWalks) Check(n int) error {
	walks := len(w.Of)
	switch {
	case len(w.Starts) != walks || len(w.Counts) != walks:
		return fmt.Errorf("%w: walks: %d rows, %d starts and %d counts", errs.ErrArgument, walks, len(w.Starts), len(w.Counts))
	case w.Ef < 1 || w.Ef > MaxWalkEf || w.Cap < 1 || w.Cap > 1<<24:
		return fmt.Errorf("%w: walks: ef %d and cap %d: want ef 1 to %d and a cap of 1 to 2^24", errs.ErrArgument, w.Ef, w.Cap, MaxWalkEf)
	case len(w.IDs) != walks*w.Cap || len(w.Dists) != walks*w.Cap:
		return fmt.Errorf("%w: walks: room for %d and %d expanded rows, want %d (%d walks of %d)", errs.ErrArgument, len(w.IDs), len(w.Dists), walks*w.Cap, walks, w.Cap)
	}
	for i := range walks {
		if int64(w.Of[i]) >= int64(n) || int64(w.Starts[i]) >= int64(n) {
			return fmt.Errorf("%w: walks: walk %d is row %d's from row %d, of %d rows", errs.ErrArgument, i, w.Of[i], w.Starts[i], n)
		}
	}
	return nil
}

// CheckAdjacency says what is wrong with adj as r slots a row for n rows.
func CheckAdjacency(adj []uint32, r, n int) error {
	if r < 1 || r > MaxWalkSlots || len(adj) != n*r {
		return fmt.Errorf("%w: adjacency: %d slots for %d rows of %d: want 1 to %d a row", errs.ErrArgument, len(adj), n, r, MaxWalkSlots)
	}
	for k, v := range adj {
		if v != NoRow && int64(v) >= int64(n) {
			return fmt.Errorf("%w: adjacency: row %d's slot %d is row %d, of %d rows", errs.ErrArgument, k/r, k%r, v, n)
		}
	}
	return nil
}

// NoRow marks an empty slot of DeviceRows.Prune's kept rows.
const NoRow = ^uint32(0)
