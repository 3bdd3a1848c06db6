package filter

import (
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/RoaringBitmap/roaring/v2"
)

// Expr is a filter over a JSON payload object, parsed (Parse) or built
// (Eq, In, And, ...). An Expr is immutable and safe for concurrent use.
// The set of implementations is closed.
type Expr interface {
	// Match reports whether payload, a JSON object, passes. A payload that
	// is nil, empty, not valid JSON or not an object has no fields.
	Match(payload []byte) bool
	// Fields returns the field paths the filter reads, sorted and unique.
	Fields() []string
	// MarshalJSON returns the canonical JSON, in the syntax Parse reads.
	// It fails only for a builder's invalid expression (see Check).
	MarshalJSON() ([]byte, error)
	// String returns the canonical JSON (for an invalid expression, its
	// error inside angle brackets).
	String() string
	// Resolve returns the rows of c's segment that may match and whether
	// they are exactly the matching rows; see Columns.
	Resolve(c *Columns) (rows *roaring.Bitmap, exact bool)

	node() *expr
}

// op names what an expr node does.
type op uint8

const (
	opAll op = iota
	opEq
	opNe
	opGt
	opGte
	opLt
	opLte
	opIn
	opNin
	opExists
	opAnd
	opOr
	opNot
	opInvalid
)

var opNames = [...]string{
	opEq: "$eq", opNe: "$ne", opGt: "$gt", opGte: "$gte", opLt: "$lt", opLte: "$lte",
	opIn: "$in", opNin: "$nin", opExists: "$exists", opAnd: "$and", opOr: "$or", opNot: "$not",
}

// expr is the one implementation of Expr: a node of the filter tree.
type expr struct {
	op     op
	field  string  // the leaves' field path
	val    value   // $eq ... $lte's operand
	vals   []value // $in and $nin's operands
	want   bool    // $exists's operand
	kids   []*expr // $and, $or (one or more) and $not (one)
	err    error   // opInvalid's error
	fields []string
	depth  int // 1 for a leaf; and, or and not add 1 to their deepest kid

	once sync.Once
	rd   *reader // made on the first Match
}

func (e *expr) node() *expr { return e }

func newExpr(e *expr) *expr {
	set := map[string]bool{}
	e.addFields(set)
	e.fields = make([]string, 0, len(set))
	for f := range set {
		e.fields = append(e.fields, f)
	}
	slices.Sort(e.fields)
	e.depth = 1
	for _, k := range e.kids {
		e.depth = max(e.depth, k.depth+1)
	}
	return e
}

func (e *expr) addFields(set map[string]bool) {
	if e.field != "" {
		set[e.field] = true
	}
	for _, k := range e.kids {
		for _, f := range k.fields {
			set[f] = true
		}
	}
}

func (e *expr) Fields() []string { return slices.Clone(e.fields) }

func (e *expr) Match(payload []byte) bool {
	switch e.op {
	case opAll:
		return true
	case opInvalid:
		return false
	}
	e.once.Do(func() { e.rd = newReader(e.fields) })
	d := e.rd.getDoc()
	e.rd.read(payload, d)
	ok := e.eval(d)
	e.rd.putDoc(d)
	return ok
}

// eval evaluates the tree on a read payload.
func (e *expr) eval(d *doc) bool {
	switch e.op {
	case opAll:
		return true
	case opAnd:
		for _, k := range e.kids {
			if !k.eval(d) {
				return false
			}
		}
		return true
	case opOr:
		for _, k := range e.kids {
			if k.eval(d) {
				return true
			}
		}
		return false
	case opNot:
		return !e.kids[0].eval(d)
	case opInvalid:
		return false
	}
	sl := d.get(e.field)
	switch e.op {
	case opExists:
		return sl.present == e.want
	case opEq, opNe:
		return e.anyEqual(sl, e.val) == (e.op == opEq)
	case opIn, opNin:
		found := false
		for _, w := range e.vals {
			if e.anyEqual(sl, w) {
				found = true
				break
			}
		}
		return found == (e.op == opIn)
	}
	for _, v := range sl.vals {
		c, ok := v.compare(e.val)
		if !ok {
			continue
		}
		switch {
		case e.op == opGt && c > 0, e.op == opGte && c >= 0, e.op == opLt && c < 0, e.op == opLte && c <= 0:
			return true
		}
	}
	return false
}

func (e *expr) anyEqual(sl *slot, w value) bool {
	for _, v := range sl.vals {
		if v.equal(w) {
			return true
		}
	}
	return false
}

func (e *expr) MarshalJSON() ([]byte, error) {
	if e.op == opInvalid {
		return nil, e.err
	}
	return e.appendJSON(nil), nil
}

func (e *expr) String() string {
	if e.op == opInvalid {
		return "<" + e.err.Error() + ">"
	}
	return string(e.appendJSON(nil))
}

// appendJSON writes the canonical form: {} for All; {"f":v} for $eq;
// {"f":{"$op":v}} for the other leaves; {"$and":[...]}, {"$or":[...]},
// {"$not":{...}}.
func (e *expr) appendJSON(b []byte) []byte {
	switch e.op {
	case opAll:
		return append(b, "{}"...)
	case opAnd, opOr:
		b = append(b, `{"`...)
		b = append(b, opNames[e.op]...)
		b = append(b, `":[`...)
		for i, k := range e.kids {
			if i > 0 {
				b = append(b, ',')
			}
			b = k.appendJSON(b)
		}
		return append(b, "]}"...)
	case opNot:
		b = append(b, `{"$not":`...)
		b = e.kids[0].appendJSON(b)
		return append(b, '}')
	}
	b = append(b, '{')
	b = appendString(b, e.field)
	b = append(b, ':')
	switch e.op {
	case opEq:
		b = appendValue(b, e.val)
		return append(b, '}')
	case opExists:
		b = append(b, `{"$exists":`...)
		b = strconv.AppendBool(b, e.want)
	case opIn, opNin:
		b = append(b, `{"`...)
		b = append(b, opNames[e.op]...)
		b = append(b, `":[`...)
		for i, v := range e.vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, v)
		}
		b = append(b, ']')
	default:
		b = append(b, `{"`...)
		b = append(b, opNames[e.op]...)
		b = append(b, `":`...)
		b = appendValue(b, e.val)
	}
	return append(b, "}}"...)
}

func appendValue(b []byte, v value) []byte {
	switch v.k {
	case kindNull:
		return append(b, "null"...)
	case kindBool:
		return strconv.AppendBool(b, v.b)
	case kindNum:
		return strconv.AppendFloat(b, v.n, 'g', -1, 64)
	}
	return appendString(b, string(v.s))
}

// appendString writes s as a JSON string; s is valid UTF-8 (Parse and the
// builders refuse anything else).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			_, n := utf8.DecodeRuneInString(s[i:])
			b = append(b, s[i:i+n]...)
			i += n
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

// describe names a value for an error message: its canonical JSON.
func describe(v value) string { return string(appendValue(nil, v)) }
