package filter

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
)

// Columns is the payload index of one immutable segment for the fields
// chosen to be indexed. Per field it keeps the rows that have the field, a
// posting bitmap per string, boolean and null value, and the numbers as
// (value, row) pairs sorted by value, so that a range is two binary
// searches. A field holding an array is indexed under each scalar
// element. It reads payloads the way Match does, so Resolve on indexed
// fields gives exactly the rows Match accepts. Columns is read-only after
// NewColumns and safe for concurrent use.
type Columns struct {
	rows   int
	cols   map[string]*column
	nbytes int
}

// column is one indexed field.
type column struct {
	present  *roaring.Bitmap            // rows that have the field
	keywords map[string]*roaring.Bitmap // keywordKey(value) -> rows
	strs     []string                   // the distinct strings, sorted
	numVals  []float64                  // sorted
	numRows  []uint32                   // numRows[i] holds numVals[i]
	blocks   []*roaring.Bitmap          // blocks[i]: numRows[i*numBlock:(i+1)*numBlock]
	// manyNums: some row holds several numbers (an array), so two
	// comparisons may be met by different ones and their spans must not
	// be intersected.
	manyNums bool
}

// numBlock is how many sorted numbers share a precomputed bitmap: a range
// over many numbers is an Or of whole blocks plus two partial ends, not
// thousands of single adds.
const numBlock = 1024

// appendKeywordKey appends the posting key of a string, boolean or null.
func appendKeywordKey(b []byte, v value) []byte {
	switch v.k {
	case kindNull:
		return append(b, 'n')
	case kindBool:
		if v.b {
			return append(b, 't')
		}
		return append(b, 'f')
	}
	return append(append(b, 's'), v.s...)
}

// NewColumns indexes fields (dotted paths) of a segment's rows in one pass
// over their payloads; payload returns row's payload (nil when it has
// none). An error from payload is returned, naming the row; a payload
// that is not a JSON object is indexed as having no fields, as Match
// reads it.
func NewColumns(rows int, payload func(row int) ([]byte, error), fields []string) (*Columns, error) {
	if rows < 0 || rows > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d rows, want 0 to %d", ErrFilter, rows, uint32(math.MaxUint32))
	}
	fs := slices.Clone(fields)
	slices.Sort(fs)
	fs = slices.Compact(fs)
	for _, f := range fs {
		if err := checkField(f); err != nil {
			return nil, fmt.Errorf("%w: indexed fields: %v", ErrFilter, err)
		}
	}
	c := &Columns{rows: rows, cols: make(map[string]*column, len(fs))}
	cols := make([]*column, len(fs))
	for i, f := range fs {
		cols[i] = &column{present: roaring.New(), keywords: map[string]*roaring.Bitmap{}}
		c.cols[f] = cols[i]
	}
	if len(fs) == 0 {
		return c, nil
	}
	rd := newReader(fs)
	d := rd.getDoc()
	var key []byte
	for row := range rows {
		p, err := payload(row)
		if err != nil {
			return nil, fmt.Errorf("payload of row %d: %w", row, err)
		}
		rd.read(p, d)
		for i, sl := range d.slots {
			if !sl.present {
				continue
			}
			col := cols[i]
			col.present.Add(uint32(row))
			nums := 0
			for _, v := range sl.vals {
				if v.k == kindNum {
					if nums++; nums == 2 {
						col.manyNums = true
					}
				}
				if v.k == kindNum {
					col.numVals = append(col.numVals, v.n)
					col.numRows = append(col.numRows, uint32(row))
					continue
				}
				key = appendKeywordKey(key[:0], v)
				b := col.keywords[string(key)]
				if b == nil {
					b = roaring.New()
					col.keywords[string(key)] = b
				}
				b.Add(uint32(row))
			}
		}
	}
	for _, col := range cols {
		col.sortNumbers()
		for key, b := range col.keywords {
			b.RunOptimize()
			c.nbytes += len(key) + 64 + int(b.GetSizeInBytes())
			if key[0] == 's' {
				col.strs = append(col.strs, key[1:])
			}
		}
		slices.Sort(col.strs)
		col.present.RunOptimize()
		c.nbytes += int(col.present.GetSizeInBytes()) + 12*len(col.numVals) + 16*len(col.strs)
		for _, b := range col.blocks {
			c.nbytes += int(b.GetSizeInBytes())
		}
	}
	return c, nil
}

func (col *column) sortNumbers() {
	type pair struct {
		v   float64
		row uint32
	}
	ps := make([]pair, len(col.numVals))
	for i := range ps {
		ps[i] = pair{col.numVals[i], col.numRows[i]}
	}
	slices.SortFunc(ps, func(a, b pair) int {
		return cmp.Or(cmp.Compare(a.v, b.v), cmp.Compare(a.row, b.row))
	})
	col.numVals = slices.Clip(col.numVals)
	col.numRows = slices.Clip(col.numRows)
	for i, p := range ps {
		col.numVals[i], col.numRows[i] = p.v, p.row
	}
	for lo := 0; lo+numBlock <= len(ps); lo += numBlock {
		b := sortedBitmap(col.numRows[lo : lo+numBlock])
		b.RunOptimize()
		col.blocks = append(col.blocks, b)
	}
}

// sortedBitmap makes a bitmap of rows, sorting a copy first: roaring adds
// rows in order in linear time, but out of order in quadratic time
// within a container.
func sortedBitmap(rows []uint32) *roaring.Bitmap {
	sorted := slices.Clone(rows)
	slices.Sort(sorted)
	b := roaring.New()
	b.AddMany(sorted)
	return b
}

// numSpan returns the span [lo, hi) of the sorted numbers that o ($eq,
// $gt, $gte, $lt, $lte) accepts against n.
func (col *column) numSpan(o op, n float64) (lo, hi int) {
	vals := col.numVals
	above := func(i int) bool { return vals[i] > n }
	lo, hi = 0, len(vals)
	switch o {
	case opEq:
		lo = sort.SearchFloat64s(vals, n)
		hi = sort.Search(len(vals), above)
	case opGt:
		lo = sort.Search(len(vals), above)
	case opGte:
		lo = sort.SearchFloat64s(vals, n)
	case opLt:
		hi = sort.SearchFloat64s(vals, n)
	case opLte:
		hi = sort.Search(len(vals), above)
	}
	return lo, hi
}

// numBitmap returns the rows of the sorted numbers [lo, hi).
func (col *column) numBitmap(lo, hi int) *roaring.Bitmap {
	if hi <= lo {
		return roaring.New()
	}
	first, last := (lo+numBlock-1)/numBlock, hi/numBlock // whole blocks
	if last-first < 2 {
		return sortedBitmap(col.numRows[lo:hi])
	}
	b := roaring.FastOr(col.blocks[first:last]...)
	b.Or(sortedBitmap(col.numRows[lo : first*numBlock]))
	b.Or(sortedBitmap(col.numRows[last*numBlock : hi]))
	return b
}

// numSpan reports whether e is a comparison with a number on a field c
// indexes with at most one number a row, and the span of sorted numbers
// it accepts.
func (e *expr) numSpan(c *Columns) (col *column, lo, hi int, ok bool) {
	if e.op != opEq && (e.op < opGt || e.op > opLte) || e.val.k != kindNum {
		return nil, 0, 0, false
	}
	if col = c.cols[e.field]; col == nil || col.manyNums {
		return nil, 0, 0, false
	}
	lo, hi = col.numSpan(e.op, e.val.n)
	return col, lo, hi, true
}

// Has reports whether field is indexed.
func (c *Columns) Has(field string) bool {
	_, ok := c.cols[field]
	return ok
}

// Rows returns the number of rows indexed.
func (c *Columns) Rows() int { return c.rows }

// Bytes returns roughly the memory the index holds.
func (c *Columns) Bytes() int { return c.nbytes }

// Fields returns the indexed fields, sorted.
func (c *Columns) Fields() []string {
	fs := make([]string, 0, len(c.cols))
	for f := range c.cols {
		fs = append(fs, f)
	}
	slices.Sort(fs)
	return fs
}

// Resolve returns a new bitmap of rows (never nil) that holds every row of
// c's segment that e matches. exact is true when every field e reads is
// indexed in c: then rows are exactly the rows e matches. Otherwise rows
// are a superset (all rows where nothing narrows them) for the caller to
// check with Match.
func (e *expr) Resolve(c *Columns) (*roaring.Bitmap, bool) {
	rows, exact := e.resolve(c)
	if rows == nil {
		rows = c.all()
	}
	return rows, exact
}

func (c *Columns) all() *roaring.Bitmap {
	b := roaring.New()
	b.AddRange(0, uint64(c.rows))
	return b
}

// resolve returns e's rows, or nil for all rows; a bitmap it returns is
// its own (callers may change it).
func (e *expr) resolve(c *Columns) (*roaring.Bitmap, bool) {
	switch e.op {
	case opAll:
		return nil, true
	case opInvalid:
		return roaring.New(), true
	case opAnd:
		// Comparisons with numbers on one field intersect as spans of
		// its sorted numbers, so {"$gte": 10, "$lt": 20} reads only the
		// rows between.
		type span struct {
			col    *column
			lo, hi int
		}
		var spans []span
		var rows *roaring.Bitmap
		exact := true
		for _, k := range e.kids {
			if col, lo, hi, ok := k.numSpan(c); ok {
				i := slices.IndexFunc(spans, func(s span) bool { return s.col == col })
				if i < 0 {
					spans = append(spans, span{col, lo, hi})
				} else {
					spans[i].lo, spans[i].hi = max(spans[i].lo, lo), min(spans[i].hi, hi)
				}
				continue
			}
		}
		for _, s := range spans {
			b := s.col.numBitmap(s.lo, s.hi)
			if rows == nil {
				rows = b
			} else {
				rows.And(b)
			}
		}
		for _, k := range e.kids {
			if _, _, _, ok := k.numSpan(c); ok {
				continue
			}
			b, x := k.resolve(c)
			exact = exact && x
			switch {
			case b == nil:
			case rows == nil:
				rows = b
			default:
				rows.And(b)
			}
		}
		return rows, exact
	case opOr:
		rows := roaring.New()
		exact, all := true, false
		for _, k := range e.kids {
			b, x := k.resolve(c)
			exact = exact && x
			if b == nil {
				all = true
			} else if !all {
				rows.Or(b)
			}
		}
		if all {
			return nil, exact
		}
		return rows, exact
	case opNot:
		b, x := e.kids[0].resolve(c)
		if !x {
			return nil, false
		}
		return c.complement(b), true
	}
	col := c.cols[e.field]
	if col == nil {
		return nil, false
	}
	switch e.op {
	case opExists:
		if e.want {
			return col.present.Clone(), true
		}
		return c.complement(col.present.Clone()), true
	case opEq:
		return col.equal(e.val), true
	case opNe:
		return c.complement(col.equal(e.val)), true
	case opIn, opNin:
		bs := make([]*roaring.Bitmap, 0, len(e.vals))
		var key [64]byte
		for _, v := range e.vals {
			if v.k == kindNum {
				bs = append(bs, col.equal(v))
			} else if p := col.keywords[string(appendKeywordKey(key[:0], v))]; p != nil {
				bs = append(bs, p) // FastOr leaves its operands alone
			}
		}
		b := roaring.FastOr(bs...)
		if e.op == opNin {
			b = c.complement(b)
		}
		return b, true
	}
	return col.rng(e.op, e.val), true
}

// complement returns all rows but b's (nil b: all rows, so none).
func (c *Columns) complement(b *roaring.Bitmap) *roaring.Bitmap {
	if b == nil {
		return roaring.New()
	}
	b.Flip(0, uint64(c.rows))
	return b
}

// equal returns the rows holding v.
func (col *column) equal(v value) *roaring.Bitmap {
	if v.k == kindNum {
		return col.numBitmap(col.numSpan(opEq, v.n))
	}
	var key [64]byte
	if b := col.keywords[string(appendKeywordKey(key[:0], v))]; b != nil {
		return b.Clone()
	}
	return roaring.New()
}

// rng returns the rows holding a value that o ($gt, $gte, $lt, $lte)
// accepts against v, a number or a string.
func (col *column) rng(o op, v value) *roaring.Bitmap {
	if v.k == kindNum {
		return col.numBitmap(col.numSpan(o, v.n))
	}
	s := string(v.s)
	lo, hi := 0, len(col.strs)
	switch o {
	case opGt:
		lo = sort.Search(hi, func(i int) bool { return col.strs[i] > s })
	case opGte:
		lo = sort.SearchStrings(col.strs, s)
	case opLt:
		hi = sort.SearchStrings(col.strs, s)
	case opLte:
		hi = sort.Search(hi, func(i int) bool { return col.strs[i] > s })
	}
	bs := make([]*roaring.Bitmap, 0, max(hi-lo, 0))
	for _, str := range col.strs[lo:max(lo, hi)] {
		bs = append(bs, col.keywords["s"+str])
	}
	return roaring.FastOr(bs...)
}
