package filter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/filter"
	"github.com/vlc-embed/vlc/internal/errs"
)

// Parse's canonical form: the text each input reads back as.
func TestParseCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{` { } `, `{}`},
		{`{"cat": "a"}`, `{"cat":"a"}`},
		{`{"cat": {"$eq": "a"}}`, `{"cat":"a"}`},
		{`{"n": 10.0}`, `{"n":10}`},
		{`{"n": 1e21}`, `{"n":1e+21}`},
		{`{"n": -0.5}`, `{"n":-0.5}`},
		{`{"f": null}`, `{"f":null}`},
		{`{"f": {"$ne": null}}`, `{"f":{"$ne":null}}`},
		{`{"b": true}`, `{"b":true}`},
		{`{"s": "a\"b\\c\u00e9\n\u0001/"}`, `{"s":"a\"b\\c` + "\u00e9" + `\n\u0001/"}`},
		{`{"cat": {"$in": ["a", 1, true, null]}}`, `{"cat":{"$in":["a",1,true,null]}}`},
		{`{"cat": {"$in": []}}`, `{"cat":{"$in":[]}}`},
		{`{"cat": {"$nin": ["a"]}}`, `{"cat":{"$nin":["a"]}}`},
		{`{"n": {"$gte": 10, "$lt": 20}}`, `{"$and":[{"n":{"$gte":10}},{"n":{"$lt":20}}]}`},
		{`{"s": {"$gt": "m", "$lte": "t"}}`, `{"$and":[{"s":{"$gt":"m"}},{"s":{"$lte":"t"}}]}`},
		{`{"a": 1, "b": 2}`, `{"$and":[{"a":1},{"b":2}]}`},
		{`{"x": {"$exists": false}}`, `{"x":{"$exists":false}}`},
		{`{"n": {"$not": {"$gt": 5}}}`, `{"$not":{"n":{"$gt":5}}}`},
		{`{"n": {"$not": {"$gt": 5, "$lt": 9}}}`, `{"$not":{"$and":[{"n":{"$gt":5}},{"n":{"$lt":9}}]}}`},
		{`{"$not": {"cat": "a"}}`, `{"$not":{"cat":"a"}}`},
		{`{"$not": {}}`, `{"$not":{}}`},
		{`{"$or": [{"a": 1}, {"$and": [{"b": 2}]}]}`, `{"$or":[{"a":1},{"$and":[{"b":2}]}]}`},
		{`{"meta.lang": "en"}`, `{"meta.lang":"en"}`},
	} {
		e, err := filter.Parse([]byte(tc.in))
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.in, err)
			continue
		}
		if got := e.String(); got != tc.want {
			t.Errorf("Parse(%s) = %s, want %s", tc.in, got, tc.want)
		}
		b, err := e.MarshalJSON()
		if err != nil || string(b) != tc.want {
			t.Errorf("MarshalJSON(%s) = %s, %v", tc.in, b, err)
		}
		again, err := filter.Parse(b)
		if err != nil || again.String() != tc.want {
			t.Errorf("Parse(MarshalJSON(%s)) = %v, %v", tc.in, again, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	deep := strings.Repeat(`{"$not":`, 32) + `{}` + strings.Repeat(`}`, 32)
	deepOK := strings.Repeat(`{"$not":`, 31) + `{}` + strings.Repeat(`}`, 31)
	if _, err := filter.Parse([]byte(deepOK)); err != nil {
		t.Errorf("31 $not: %v", err)
	}
	for _, tc := range []struct{ in, want string }{
		{``, `filter: empty; {} matches every payload`},
		{`  `, `filter: empty; {} matches every payload`},
		{`{"a": 1`, `filter: invalid JSON at offset 7: want ',' or '}' in an object`},
		{`{"a": 1} x`, `filter: invalid JSON at offset 9: data after the value`},
		{`{"a": tru}`, `filter: invalid JSON at offset 6: invalid literal`},
		{`[1]`, `filter: a filter is a JSON object, got an array`},
		{`"a"`, `filter: a filter is a JSON object, got "a"`},
		{`{"$and": [{}, {"n": {"$gte": true}}]}`, `filter: $and[1].n: $gte wants a number or a string, got true`},
		{`{"n": {"$lt": null}}`, `filter: n: $lt wants a number or a string, got null`},
		{`{"n": {"$gt": [1]}}`, `filter: n: $gt wants a number or a string, got an array`},
		{`{"n": {"$eq": {}}}`, `filter: n: $eq wants a string, number, boolean or null, got an object`},
		{`{"n": {"$regex": "a"}}`, `filter: n: unknown operator $regex (known: $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $not)`},
		{`{"$nor": []}`, `filter: unknown operator $nor (known at this level: $and, $or, $not, or a field name)`},
		{`{"$or": [{"$xor": 1}]}`, `filter: $or[0]: unknown operator $xor (known at this level: $and, $or, $not, or a field name)`},
		{`{"cat": {"$in": "a"}}`, `filter: cat: $in wants an array, got "a"`},
		{`{"cat": {"$nin": {}}}`, `filter: cat: $nin wants an array, got an object`},
		{`{"cat": {"$in": ["a", ["b"]]}}`, `filter: cat: $in[1] wants a string, number, boolean or null, got an array`},
		{`{"$and": []}`, `filter: $and: wants at least one filter, got []`},
		{`{"$or": {}}`, `filter: $or: wants an array of filters, got an object`},
		{`{"$or": [1]}`, `filter: $or[0]: a filter is a JSON object, got 1`},
		{`{"$not": []}`, `filter: $not: a filter is a JSON object, got an array`},
		{`{"n": {"$gt": 1, "x": 2}}`, `filter: n: an operator object mixed with plain keys ("x"); operators are $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $not`},
		{`{"meta": {"lang": "en"}}`, `filter: meta: an object is not a value to compare; for a nested field, write a dotted path ("meta.lang")`},
		{`{"n": {}}`, `filter: n: an empty object is neither a value nor operators ($eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $not)`},
		{`{"tags": ["a"]}`, `filter: tags: an array is not a value to compare; for "any of", write {"$in": [...]}`},
		{`{"x": {"$exists": 1}}`, `filter: x: $exists wants true or false, got 1`},
		{`{"n": {"$not": 5}}`, `filter: n: $not wants an operator object like {"$gt": 5}, got 5`},
		{`{"n": {"$not": {"$foo": 5}}}`, `filter: n.$not: unknown operator $foo (known: $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $not)`},
		{`{"a": 1, "a": 2}`, `filter: duplicate key "a"`},
		{`{"n": {"$gt": 1, "$gt": 2}}`, `filter: n: duplicate key "$gt"`},
		{`{"": 1}`, `filter: an empty field name`},
		{`{"a..b": 1}`, `filter: field "a..b" has an empty step in its dotted path`},
		{`{"n": 1e400}`, `filter: n: $eq: number +Inf is not finite (beyond float64's range)`},
		{"{\"s\": \"\xff\"}", `filter: s: $eq: string "\xff" is not valid UTF-8`},
		{deep, `filter: ` + strings.Repeat(`$not.`, 31) + `$not: nested deeper than 32`},
		{`{"a":"` + strings.Repeat("x", 64<<10) + `"}`, `filter: 65544 bytes, over the limit of 65536`},
	} {
		e, err := filter.Parse([]byte(tc.in))
		if err == nil {
			t.Errorf("Parse(%.60s) = %v, want an error", tc.in, e)
			continue
		}
		if !errors.Is(err, errs.ErrArgument) || !errors.Is(err, filter.ErrFilter) {
			t.Errorf("Parse(%.60s): %v does not match ErrArgument and ErrFilter", tc.in, err)
		}
		if err.Error() != tc.want {
			t.Errorf("Parse(%.60s):\n got %s\nwant %s", tc.in, err, tc.want)
		}
	}
}

// The builders make what Parse makes from the same filter in JSON.
func TestBuildersEqualParse(t *testing.T) {
	type cat string
	for _, tc := range []struct {
		e    filter.Expr
		json string
	}{
		{filter.Eq("cat", "a"), `{"cat": "a"}`},
		{filter.Eq("cat", cat("a")), `{"cat": "a"}`},
		{filter.Eq("n", 10), `{"n": 10.0}`},
		{filter.Eq("n", uint8(10)), `{"n": 10}`},
		{filter.Eq("n", float32(0.5)), `{"n": 0.5}`},
		{filter.Eq("f", nil), `{"f": null}`},
		{filter.Ne("b", true), `{"b": {"$ne": true}}`},
		{filter.Gt("n", 1), `{"n": {"$gt": 1}}`},
		{filter.Gte("s", "m"), `{"s": {"$gte": "m"}}`},
		{filter.Lt("n", -2.5), `{"n": {"$lt": -2.5}}`},
		{filter.Lte("n", int64(1)<<53), `{"n": {"$lte": 9007199254740992}}`},
		{filter.In("cat", "a", 1, true, nil), `{"cat": {"$in": ["a", 1, true, null]}}`},
		{filter.In("cat"), `{"cat": {"$in": []}}`},
		{filter.Nin("cat", "a"), `{"cat": {"$nin": ["a"]}}`},
		{filter.Exists("x", false), `{"x": {"$exists": false}}`},
		{filter.All(), `{}`},
		{filter.And(), `{}`},
		{filter.And(filter.Gte("n", 10), filter.Lt("n", 20)), `{"n": {"$gte": 10, "$lt": 20}}`},
		{filter.Or(filter.Eq("a", 1), filter.And(filter.Eq("b", 2))), `{"$or": [{"a": 1}, {"$and": [{"b": 2}]}]}`},
		{filter.Not(filter.Gt("n", 5)), `{"n": {"$not": {"$gt": 5}}}`},
		{filter.Not(filter.All()), `{"$not": {}}`},
		{filter.Eq("meta.lang", "en"), `{"meta.lang": "en"}`},
	} {
		p, err := filter.Parse([]byte(tc.json))
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.json, err)
			continue
		}
		if err := filter.Check(tc.e); err != nil {
			t.Errorf("builder for %s: %v", tc.json, err)
		}
		if tc.e.String() != p.String() {
			t.Errorf("builder %s, Parse %s", tc.e, p)
		}
	}
}

// A builder given what it cannot use returns an invalid expression: it
// matches nothing, cannot be marshalled, and spreads to what holds it.
func TestBuilderInvalid(t *testing.T) {
	var nilExpr filter.Expr
	deep := filter.All()
	for range 32 {
		deep = filter.Not(deep)
	}
	for _, tc := range []struct {
		e    filter.Expr
		want string
	}{
		{filter.Eq("cat", []string{"a"}), `filter: cat: $eq: got a []string; a value is a string, a bool, nil or a number`},
		{filter.Gt("n", true), `filter: n: $gt wants a number or a string, got true`},
		{filter.Gte("n", nil), `filter: n: $gte wants a number or a string, got null`},
		{filter.Eq("n", 0.0/zero()), `filter: n: $eq: number NaN is not finite (beyond float64's range)`},
		{filter.Eq("s", "\xff"), `filter: s: $eq: string "\xff" is not valid UTF-8`},
		{filter.Eq("", 1), `filter: an empty field name`},
		{filter.Exists("$x", true), `filter: field "$x" starts with $`},
		{filter.In("c", "a", struct{}{}), `filter: c: $in[1]: got a struct {}; a value is a string, a bool, nil or a number`},
		{filter.Or(), `filter: $or: wants at least one filter, got none`},
		{filter.And(filter.Eq("a", 1), nilExpr), `filter: $and[1]: a nil Expr`},
		{filter.Not(nilExpr), `filter: $not: a nil Expr`},
		{filter.Not(filter.Or(filter.Eq("a", 1), filter.Gt("n", false))), `filter: n: $gt wants a number or a string, got false`},
		{deep, `filter: nested deeper than 32`},
	} {
		err := filter.Check(tc.e)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Check(%v) = %v, want %s", tc.e, err, tc.want)
			continue
		}
		if !errors.Is(err, errs.ErrArgument) || !errors.Is(err, filter.ErrFilter) {
			t.Errorf("%v does not match ErrArgument and ErrFilter", err)
		}
		if _, merr := tc.e.MarshalJSON(); merr != err {
			t.Errorf("MarshalJSON of %v: %v", tc.e, merr)
		}
		if tc.e.Match([]byte(`{}`)) || tc.e.Match(nil) {
			t.Errorf("%v matches", tc.e)
		}
	}
	if err := filter.Check(nilExpr); !errors.Is(err, filter.ErrFilter) {
		t.Errorf("Check(nil) = %v", err)
	}
}

func zero() float64 { return 0 }

func TestFields(t *testing.T) {
	e, err := filter.Parse([]byte(`{"b": 1, "$or": [{"a": 2}, {"m.x": {"$not": {"$exists": true}}}, {"b": 3}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.Fields(), " "); got != "a b m.x" {
		t.Errorf("Fields = %s", got)
	}
	if got := filter.All().Fields(); len(got) != 0 {
		t.Errorf("All().Fields = %v", got)
	}
}
