package filter

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
)

// The builders make the same expressions Parse makes: Eq("cat", "a") is
// Parse(`{"cat": "a"}`), And(Gte("n", 10), Lt("n", 20)) is
// Parse(`{"n": {"$gte": 10, "$lt": 20}}`).
//
// A value is a string, a bool, nil (JSON null), any Go integer or float
// type (or a type defined on one, such as a named string), or a
// json.Number. The builders never panic: given a value they cannot use
// (another type, NaN, an infinity, a string that is not UTF-8, null or a
// bool for a range), an unusable field path, or a nil Expr, they return an
// invalid expression. An invalid expression matches nothing, its Resolve
// is empty and exact, its MarshalJSON returns its error, and it makes
// every And, Or or Not holding it invalid too; Check returns its error.

// Check returns the error of an invalid expression made by a builder, nil
// for any other (Parse never returns an invalid one).
func Check(e Expr) error {
	if e == nil {
		return fmt.Errorf("%w: a nil Expr", ErrFilter)
	}
	if x := e.node(); x.op == opInvalid {
		return x.err
	}
	return nil
}

func invalid(err error) *expr { return newExpr(&expr{op: opInvalid, err: err}) }

// toValue converts a builder's Go value.
func toValue(v any) (value, error) {
	var out value
	switch x := v.(type) {
	case nil:
		return value{k: kindNull}, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return out, fmt.Errorf("json.Number %q is not a number", string(x))
		}
		out = value{k: kindNum, n: f}
	default:
		r := reflect.ValueOf(v)
		switch r.Kind() {
		case reflect.String:
			out = value{k: kindStr, s: []byte(r.String())}
		case reflect.Bool:
			out = value{k: kindBool, b: r.Bool()}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out = value{k: kindNum, n: float64(r.Int())}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			out = value{k: kindNum, n: float64(r.Uint())}
		case reflect.Float32, reflect.Float64:
			out = value{k: kindNum, n: r.Float()}
		default:
			return out, fmt.Errorf("got a %T; a value is a string, a bool, nil or a number", v)
		}
	}
	return out, checkValue(out)
}

func build(field string, o op, v any) Expr {
	if err := checkField(field); err != nil {
		return invalid(fmt.Errorf("%w: %v", ErrFilter, err))
	}
	val, err := toValue(v)
	if err != nil {
		return invalid(filterError(field, "%s: %v", opNames[o], err))
	}
	e, err := leaf(field, o, val, field)
	if err != nil {
		return invalid(err)
	}
	return e
}

// Eq matches payloads whose field equals v (or holds an array with an
// element equal to v).
func Eq(field string, v any) Expr { return build(field, opEq, v) }

// Ne matches payloads that Eq(field, v) does not match, those without the
// field included.
func Ne(field string, v any) Expr { return build(field, opNe, v) }

// Gt matches payloads whose field (or an element of it) is a number above
// the number v, or a string after the string v.
func Gt(field string, v any) Expr { return build(field, opGt, v) }

// Gte is Gt or equal.
func Gte(field string, v any) Expr { return build(field, opGte, v) }

// Lt matches payloads whose field (or an element of it) is a number below
// the number v, or a string before the string v.
func Lt(field string, v any) Expr { return build(field, opLt, v) }

// Lte is Lt or equal.
func Lte(field string, v any) Expr { return build(field, opLte, v) }

// In matches payloads whose field equals one of vs (with no vs, none).
func In(field string, vs ...any) Expr { return buildIn(field, opIn, vs) }

// Nin matches payloads that In(field, vs...) does not match, those
// without the field included.
func Nin(field string, vs ...any) Expr { return buildIn(field, opNin, vs) }

func buildIn(field string, o op, vs []any) Expr {
	if err := checkField(field); err != nil {
		return invalid(fmt.Errorf("%w: %v", ErrFilter, err))
	}
	e := &expr{op: o, field: field, vals: make([]value, 0, len(vs))}
	for i, v := range vs {
		val, err := toValue(v)
		if err != nil {
			return invalid(filterError(field, "%s[%d]: %v", opNames[o], i, err))
		}
		e.vals = append(e.vals, val)
	}
	return newExpr(e)
}

// Exists matches payloads that have the field (whatever its value, null
// included) when want is true, and those that lack it when want is false.
func Exists(field string, want bool) Expr {
	if err := checkField(field); err != nil {
		return invalid(fmt.Errorf("%w: %v", ErrFilter, err))
	}
	return newExpr(&expr{op: opExists, field: field, want: want})
}

// All matches every payload; it is Parse("{}").
func All() Expr { return newExpr(&expr{op: opAll}) }

// And matches payloads every one of es matches; And() is All().
func And(es ...Expr) Expr {
	if len(es) == 0 {
		return All()
	}
	return list(opAnd, es)
}

// Or matches payloads one of es matches; Or() is invalid, as an empty
// $or is in JSON.
func Or(es ...Expr) Expr {
	if len(es) == 0 {
		return invalid(filterError("$or", "wants at least one filter, got none"))
	}
	return list(opOr, es)
}

// Not matches payloads e does not match.
func Not(e Expr) Expr { return list(opNot, []Expr{e}) }

func list(o op, es []Expr) Expr {
	x := &expr{op: o, kids: make([]*expr, 0, len(es))}
	for i, e := range es {
		if e == nil {
			if o == opNot {
				return invalid(filterError("$not", "a nil Expr"))
			}
			return invalid(filterError(fmt.Sprintf("%s[%d]", opNames[o], i), "a nil Expr"))
		}
		k := e.node()
		if k.op == opInvalid {
			return k
		}
		x.kids = append(x.kids, k)
	}
	if newExpr(x); x.depth > MaxNesting {
		return invalid(filterError("", "nested deeper than %d", MaxNesting))
	}
	return x
}
