package filter

import (
	"bytes"
	"strings"
	"sync"
)

// kind is the type of a scalar JSON value.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNum
	kindStr
)

// value is one scalar: a filter's operand or a payload field's value (or
// one element of a field's array). s holds a string's bytes.
type value struct {
	k kind
	b bool
	n float64
	s []byte
}

// equal is $eq's test: same kind and same value; numbers compare as
// float64 (so 10 and 10.0 are equal), strings byte for byte.
func (v value) equal(w value) bool {
	if v.k != w.k {
		return false
	}
	switch v.k {
	case kindBool:
		return v.b == w.b
	case kindNum:
		return v.n == w.n
	case kindStr:
		return bytes.Equal(v.s, w.s)
	}
	return true
}

// compare orders v against w for the range operators: only a number
// against a number and a string against a string (bytes) are ordered.
func (v value) compare(w value) (int, bool) {
	if v.k != w.k {
		return 0, false
	}
	switch v.k {
	case kindNum:
		switch {
		case v.n < w.n:
			return -1, true
		case v.n > w.n:
			return 1, true
		}
		return 0, true
	case kindStr:
		return bytes.Compare(v.s, w.s), true
	}
	return 0, false
}

// slot holds what one payload read found at one field path.
type slot struct {
	present bool
	vals    []value // the scalar, or an array's scalar elements
}

// pathNode is one step of a trie over the dotted field paths a reader
// looks for.
type pathNode struct {
	name  string
	slot  int   // index into the reader's fields, -1 when only a prefix
	under []int // slots at or below this node, cleared when a key repeats
	kids  []*pathNode
}

func (n *pathNode) kid(key []byte) *pathNode {
	for _, k := range n.kids {
		if k.name == string(key) {
			return k
		}
	}
	return nil
}

// reader reads the given fields (sorted, unique) out of payloads.
type reader struct {
	fields []string
	root   *pathNode
	pool   sync.Pool // of *doc
}

func newReader(fields []string) *reader {
	r := &reader{fields: fields, root: &pathNode{slot: -1}}
	for i, f := range fields {
		n := r.root
		n.under = append(n.under, i)
		for seg := range strings.SplitSeq(f, ".") {
			k := n.kid([]byte(seg))
			if k == nil {
				k = &pathNode{name: seg, slot: -1}
				n.kids = append(n.kids, k)
			}
			n = k
			n.under = append(n.under, i)
		}
		n.slot = i
	}
	return r
}

// doc is one payload as read: a slot per field of its reader.
type doc struct {
	fields []string
	slots  []slot
}

// get returns the slot of field, or nil when the reader did not look for
// it (which cannot happen for an expression's own fields).
func (d *doc) get(field string) *slot {
	for i, f := range d.fields {
		if f == field {
			return &d.slots[i]
		}
	}
	return nil
}

func (r *reader) getDoc() *doc {
	d, _ := r.pool.Get().(*doc)
	if d == nil {
		d = &doc{fields: r.fields, slots: make([]slot, len(r.fields))}
	}
	return d
}

func (r *reader) putDoc(d *doc) {
	for i := range d.slots {
		clear(d.slots[i].vals) // drop references into the payload
	}
	r.pool.Put(d)
}

// read fills d from payload. A payload that is empty, not valid JSON or
// not an object leaves every slot absent: it has no fields. When a key
// repeats, the last one counts (as in encoding/json). Dotted paths step
// through objects only; an array along a path ends it.
func (r *reader) read(payload []byte, d *doc) {
	for i := range d.slots {
		d.slots[i].present = false
		d.slots[i].vals = d.slots[i].vals[:0]
	}
	s := scanner{data: payload}
	if s.peek() != '{' {
		return
	}
	if !r.walk(&s, r.root, d) || !s.end() {
		for i := range d.slots {
			d.slots[i].present = false
			d.slots[i].vals = d.slots[i].vals[:0]
		}
	}
}

// walk reads an object whose fields of interest are n's children.
func (r *reader) walk(s *scanner, n *pathNode, d *doc) bool {
	return s.object(func(key []byte) bool {
		k := n.kid(key)
		if k == nil {
			return s.skip()
		}
		for _, i := range k.under {
			d.slots[i].present = false
			d.slots[i].vals = d.slots[i].vals[:0]
		}
		var sl *slot
		if k.slot >= 0 {
			sl = &d.slots[k.slot]
			sl.present = true
		}
		switch s.peek() {
		case '{':
			if len(k.kids) > 0 {
				return r.walk(s, k, d)
			}
			return s.skip()
		case '[':
			if sl == nil {
				return s.skip()
			}
			return s.array(func(int) bool {
				if c := s.peek(); c == '{' || c == '[' {
					return s.skip()
				}
				v, ok := s.scalar(nil)
				sl.vals = append(sl.vals, v)
				return ok
			})
		default:
			if sl == nil {
				return s.skip()
			}
			v, ok := s.scalar(nil)
			sl.vals = append(sl.vals, v)
			return ok
		}
	})
}
