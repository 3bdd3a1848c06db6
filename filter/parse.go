package filter

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/vlc-embed/vlc/internal/errs"
)

// ErrFilter marks every error about a filter: bad JSON, a bad operator or
// operand, a builder given a value it cannot use. It is in the category
// errs.ErrArgument.
var ErrFilter = errs.New(errs.ErrArgument, "filter")

// The limits Parse enforces.
const (
	MaxFilterBytes = 64 << 10 // the longest filter text
	MaxNesting     = 32       // the deepest nesting of $and, $or and $not
)

const (
	fieldOps = "$eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $not"
	topOps   = "$and, $or, $not"
)

// filterError makes an error naming where (a path like $and[1].n; empty
// for the whole filter) and what.
func filterError(where, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if where == "" {
		return fmt.Errorf("%w: %s", ErrFilter, msg)
	}
	return fmt.Errorf("%w: %s: %s", ErrFilter, where, msg)
}

// jnode is a JSON value read in order, keys kept as written.
type jnode struct {
	kind byte // '{', '[' or 0 for a scalar
	keys []string
	kids []jnode
	v    value
}

// describe names j for an error message.
func (j *jnode) describe() string {
	switch j.kind {
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return describe(j.v)
}

func readNode(s *scanner) (jnode, bool) {
	switch s.peek() {
	case '{':
		j := jnode{kind: '{'}
		ok := s.object(func(key []byte) bool {
			k, ok := readNode(s)
			j.keys = append(j.keys, string(key))
			j.kids = append(j.kids, k)
			return ok
		})
		return j, ok
	case '[':
		j := jnode{kind: '['}
		ok := s.array(func(int) bool {
			k, ok := readNode(s)
			j.kids = append(j.kids, k)
			return ok
		})
		return j, ok
	}
	v, ok := s.scalar(nil)
	if ok && v.k == kindStr {
		v.s = append([]byte(nil), v.s...) // own it: it may alias the input
	}
	return jnode{v: v}, ok
}

// Parse reads a filter in the JSON syntax of the package doc. Every error
// matches ErrFilter and errs.ErrArgument and names where it is.
func Parse(data []byte) (Expr, error) {
	if len(data) > MaxFilterBytes {
		return nil, filterError("", "%d bytes, over the limit of %d", len(data), MaxFilterBytes)
	}
	s := scanner{data: data}
	if s.peek() == 0 && s.pos == len(data) {
		return nil, filterError("", "empty; {} matches every payload")
	}
	j, ok := readNode(&s)
	if !ok || !s.end() {
		return nil, filterError("", "%v", s.err)
	}
	e, err := parseFilter(&j, "", 1)
	if err != nil {
		return nil, err
	}
	if e.depth > MaxNesting {
		// Several keys or operators in one object join in an $and, which
		// counts as a level.
		return nil, filterError("", "nested deeper than %d, counting the $and that joins several keys of one object", MaxNesting)
	}
	return e, nil
}

func join(path, step string) string {
	if path == "" || strings.HasPrefix(step, "[") {
		return path + step
	}
	return path + "." + step
}

// checkKeys refuses duplicate keys and keys that are not UTF-8.
func checkKeys(j *jnode, path string) error {
	seen := make(map[string]bool, len(j.keys))
	for _, k := range j.keys {
		if !utf8.ValidString(k) {
			return filterError(path, "key %q is not valid UTF-8", k)
		}
		if seen[k] {
			return filterError(path, "duplicate key %q", k)
		}
		seen[k] = true
	}
	return nil
}

// parseFilter reads an object of clauses (fields and $and, $or, $not),
// which all hold.
func parseFilter(j *jnode, path string, depth int) (*expr, error) {
	if depth > MaxNesting {
		return nil, filterError(path, "nested deeper than %d", MaxNesting)
	}
	if j.kind != '{' {
		return nil, filterError(path, "a filter is a JSON object, got %s", j.describe())
	}
	if err := checkKeys(j, path); err != nil {
		return nil, err
	}
	var clauses []*expr
	for i, key := range j.keys {
		kid := &j.kids[i]
		where := join(path, key)
		var e *expr
		var err error
		switch {
		case key == "$and" || key == "$or":
			e, err = parseList(kid, key, where, depth)
		case key == "$not":
			var inner *expr
			if inner, err = parseFilter(kid, where, depth+1); err == nil {
				e = newExpr(&expr{op: opNot, kids: []*expr{inner}})
			}
		case strings.HasPrefix(key, "$"):
			err = filterError(path, "unknown operator %s (known at this level: %s, or a field name)", key, topOps)
		default:
			if err = checkField(key); err != nil {
				return nil, filterError(path, "%v", err)
			}
			e, err = parseField(key, kid, where, depth)
		}
		if err != nil {
			return nil, err
		}
		clauses = append(clauses, e)
	}
	switch len(clauses) {
	case 0:
		return newExpr(&expr{op: opAll}), nil
	case 1:
		return clauses[0], nil
	}
	return newExpr(&expr{op: opAnd, kids: clauses}), nil
}

func parseList(j *jnode, key, where string, depth int) (*expr, error) {
	if j.kind != '[' {
		return nil, filterError(where, "wants an array of filters, got %s", j.describe())
	}
	if len(j.kids) == 0 {
		return nil, filterError(where, "wants at least one filter, got []")
	}
	e := &expr{op: opAnd}
	if key == "$or" {
		e.op = opOr
	}
	for i := range j.kids {
		k, err := parseFilter(&j.kids[i], fmt.Sprintf("%s[%d]", where, i), depth+1)
		if err != nil {
			return nil, err
		}
		e.kids = append(e.kids, k)
	}
	return newExpr(e), nil
}

// checkField refuses a field path Match could never address.
func checkField(f string) error {
	switch {
	case f == "":
		return fmt.Errorf("an empty field name")
	case !utf8.ValidString(f):
		return fmt.Errorf("field %q is not valid UTF-8", f)
	case strings.HasPrefix(f, "$"):
		return fmt.Errorf("field %q starts with $", f)
	case strings.HasPrefix(f, ".") || strings.HasSuffix(f, ".") || strings.Contains(f, ".."):
		return fmt.Errorf("field %q has an empty step in its dotted path", f)
	}
	return nil
}

// parseField reads a field's condition: a scalar ($eq) or an object of
// operators, which all hold.
func parseField(field string, j *jnode, where string, depth int) (*expr, error) {
	switch j.kind {
	case '[':
		return nil, filterError(where, `an array is not a value to compare; for "any of", write {"$in": [...]}`)
	case 0:
		return leaf(field, opEq, j.v, where)
	}
	if err := checkKeys(j, where); err != nil {
		return nil, err
	}
	if len(j.keys) == 0 {
		return nil, filterError(where, "an empty object is neither a value nor operators (%s)", fieldOps)
	}
	ops, plain := 0, ""
	for _, k := range j.keys {
		if strings.HasPrefix(k, "$") {
			ops++
		} else if plain == "" {
			plain = k
		}
	}
	if ops == 0 {
		return nil, filterError(where, "an object is not a value to compare; for a nested field, write a dotted path (%q)", field+"."+plain)
	}
	if plain != "" {
		return nil, filterError(where, "an operator object mixed with plain keys (%q); operators are %s", plain, fieldOps)
	}
	var clauses []*expr
	for i, key := range j.keys {
		kid := &j.kids[i]
		var e *expr
		var err error
		switch key {
		case "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
			if kid.kind != 0 {
				return nil, filterError(where, "%s wants %s, got %s", key, wants(opByName(key)), kid.describe())
			}
			e, err = leaf(field, opByName(key), kid.v, where)
		case "$in", "$nin":
			e, err = parseIn(field, key, kid, where)
		case "$exists":
			if kid.kind != 0 || kid.v.k != kindBool {
				return nil, filterError(where, "$exists wants true or false, got %s", kid.describe())
			}
			e = newExpr(&expr{op: opExists, field: field, want: kid.v.b})
		case "$not":
			if depth+1 > MaxNesting {
				return nil, filterError(where, "nested deeper than %d", MaxNesting)
			}
			if kid.kind != '{' {
				return nil, filterError(where, "$not wants an operator object like {\"$gt\": 5}, got %s", kid.describe())
			}
			var inner *expr
			if inner, err = parseField(field, kid, join(where, "$not"), depth+1); err == nil {
				e = newExpr(&expr{op: opNot, kids: []*expr{inner}})
			}
		default:
			return nil, filterError(where, "unknown operator %s (known: %s)", key, fieldOps)
		}
		if err != nil {
			return nil, err
		}
		clauses = append(clauses, e)
	}
	if len(clauses) == 1 {
		return clauses[0], nil
	}
	return newExpr(&expr{op: opAnd, kids: clauses}), nil
}

func parseIn(field, key string, j *jnode, where string) (*expr, error) {
	if j.kind != '[' {
		return nil, filterError(where, "%s wants an array, got %s", key, j.describe())
	}
	e := &expr{op: opIn, field: field, vals: make([]value, 0, len(j.kids))}
	if key == "$nin" {
		e.op = opNin
	}
	for i := range j.kids {
		k := &j.kids[i]
		if k.kind != 0 {
			return nil, filterError(where, "%s[%d] wants a string, number, boolean or null, got %s", key, i, k.describe())
		}
		if err := checkValue(k.v); err != nil {
			return nil, filterError(where, "%s[%d]: %v", key, i, err)
		}
		e.vals = append(e.vals, k.v)
	}
	return newExpr(e), nil
}

func opByName(name string) op {
	for o, n := range opNames {
		if n == name {
			return op(o)
		}
	}
	return opInvalid
}

// wants says what an operator takes.
func wants(o op) string {
	switch o {
	case opGt, opGte, opLt, opLte:
		return "a number or a string"
	case opExists:
		return "true or false"
	}
	return "a string, number, boolean or null"
}

func checkValue(v value) error {
	switch {
	case v.k == kindStr && !utf8.Valid(v.s):
		return fmt.Errorf("string %q is not valid UTF-8", v.s)
	case v.k == kindNum && (math.IsInf(v.n, 0) || math.IsNaN(v.n)):
		return fmt.Errorf("number %v is not finite (beyond float64's range)", v.n)
	}
	return nil
}

// leaf makes a comparison, checking the operand suits the operator.
func leaf(field string, o op, v value, where string) (*expr, error) {
	if o >= opGt && o <= opLte && v.k != kindNum && v.k != kindStr {
		return nil, filterError(where, "%s wants %s, got %s", opNames[o], wants(o), describe(v))
	}
	if err := checkValue(v); err != nil {
		return nil, filterError(where, "%s: %v", opNames[o], err)
	}
	return newExpr(&expr{op: o, field: field, val: v}), nil
}
