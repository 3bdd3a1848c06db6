package filter_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/filter"
)

// The fields and values random payloads and filters draw from, small so
// that filters often match.
var (
	randFields = []string{"a", "b", "tags", "m", "m.x"}
	randValues = []string{`"x"`, `"y"`, `"xy"`, `""`, `1`, `2.0`, `-3`, `1e400`, `true`, `false`, `null`}
)

func randScalar(r *rand.Rand) string { return randValues[r.IntN(len(randValues))] }

// randPayload writes a payload: usually an object with some of the fields
// (scalars, arrays, nested objects, repeated keys), sometimes not JSON or
// not an object.
func randPayload(r *rand.Rand) []byte {
	switch r.IntN(20) {
	case 0:
		return nil
	case 1:
		return []byte(`{"a": "x", "b":`)
	case 2:
		return []byte(`["a", "x"]`)
	case 3:
		return []byte(`{"a": "x"} {}`)
	}
	var b strings.Builder
	b.WriteString("{")
	n := r.IntN(5)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		key := []string{"a", "b", "tags", "m", "z"}[r.IntN(5)]
		fmt.Fprintf(&b, "%q: ", key)
		randPayloadValue(r, &b, 2)
	}
	b.WriteString("}")
	return []byte(b.String())
}

func randPayloadValue(r *rand.Rand, b *strings.Builder, depth int) {
	switch k := r.IntN(8); {
	case k < 4 || depth == 0:
		b.WriteString(randScalar(r))
	case k < 6:
		b.WriteString("[")
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(",")
			}
			randPayloadValue(r, b, depth-1)
		}
		b.WriteString("]")
	default:
		b.WriteString("{")
		for i := range r.IntN(3) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(b, "%q:", []string{"x", "y"}[r.IntN(2)])
			randPayloadValue(r, b, depth-1)
		}
		b.WriteString("}")
	}
}

// randExpr builds a random filter through the builders and through Parse
// of its JSON at random, so both paths are exercised.
func randExpr(r *rand.Rand, depth int) filter.Expr {
	if depth > 0 && r.IntN(3) == 0 {
		n := 1 + r.IntN(3)
		es := make([]filter.Expr, n)
		for i := range es {
			es[i] = randExpr(r, depth-1)
		}
		switch r.IntN(3) {
		case 0:
			return filter.And(es...)
		case 1:
			return filter.Or(es...)
		}
		return filter.Not(es[0])
	}
	f := randFields[r.IntN(len(randFields))]
	ops := []string{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"}
	o := ops[r.IntN(len(ops))]
	var operand string
	switch o {
	case "$gt", "$gte", "$lt", "$lte":
		operand = []string{`"x"`, `"xy"`, `""`, `1`, `2`, `-3`, `0.5`}[r.IntN(7)]
	case "$in", "$nin":
		vs := make([]string, r.IntN(3))
		for i := range vs {
			vs[i] = randScalar(r)
		}
		operand = "[" + strings.Join(vs, ",") + "]"
	case "$exists":
		operand = []string{"true", "false"}[r.IntN(2)]
	default:
		operand = randScalar(r)
	}
	operand = strings.ReplaceAll(operand, "1e400", "1e300")
	e, err := filter.Parse(fmt.Appendf(nil, `{%q: {%q: %s}}`, f, o, operand))
	if err != nil {
		panic(err)
	}
	return e
}

func matching(e filter.Expr, payloads [][]byte) *roaring.Bitmap {
	b := roaring.New()
	for row, p := range payloads {
		if e.Match(p) {
			b.Add(uint32(row))
		}
	}
	return b
}

// With every field indexed, Resolve is exactly the rows Match accepts;
// with some not indexed, a superset, exact only when the filter reads no
// unindexed field.
func TestResolveAgreesWithMatch(t *testing.T) {
	const seed = 31
	r := rand.New(rand.NewPCG(seed, 1))
	rows := 300
	payloads := make([][]byte, rows)
	for i := range payloads {
		payloads[i] = randPayload(r)
	}
	get := func(row int) ([]byte, error) { return payloads[row], nil }
	full, err := filter.NewColumns(rows, get, randFields)
	if err != nil {
		t.Fatal(err)
	}
	part, err := filter.NewColumns(rows, get, []string{"a", "m.x"})
	if err != nil {
		t.Fatal(err)
	}
	exprs := 2000
	if testing.Short() {
		exprs = 500
	}
	for range exprs {
		e := randExpr(r, 3)
		want := matching(e, payloads)
		got, exact := e.Resolve(full)
		if !exact || !got.Equals(want) {
			t.Fatalf("seed %d: %s: all indexed: exact %v, Resolve %v, Match %v", seed, e, exact, got.ToArray(), want.ToArray())
		}
		got, exact = e.Resolve(part)
		readsUnindexed := slices.ContainsFunc(e.Fields(), func(f string) bool { return !part.Has(f) })
		if exact == readsUnindexed {
			t.Fatalf("seed %d: %s: exact %v with fields %v", seed, e, exact, e.Fields())
		}
		if exact && !got.Equals(want) || !exact && roaring.AndNot(want, got).GetCardinality() != 0 {
			t.Fatalf("seed %d: %s: part indexed: exact %v, Resolve %v, Match %v", seed, e, exact, got.ToArray(), want.ToArray())
		}
	}
}

func TestColumns(t *testing.T) {
	payloads := []string{`{"cat": "a", "n": 1}`, `{"cat": ["a", "b"], "n": [2, 3]}`, `{}`, `x`}
	get := func(row int) ([]byte, error) { return []byte(payloads[row]), nil }
	c, err := filter.NewColumns(len(payloads), get, []string{"n", "cat", "n"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Rows() != 4 || !c.Has("cat") || c.Has("x") || c.Bytes() <= 0 || !slices.Equal(c.Fields(), []string{"cat", "n"}) {
		t.Errorf("Rows %d, Has(cat) %v, Has(x) %v, Bytes %d, Fields %v", c.Rows(), c.Has("cat"), c.Has("x"), c.Bytes(), c.Fields())
	}
	for _, tc := range []struct {
		e     filter.Expr
		rows  []uint32
		exact bool
	}{
		{filter.Eq("cat", "a"), []uint32{0, 1}, true},
		{filter.Ne("cat", "a"), []uint32{2, 3}, true},
		{filter.Gte("n", 2), []uint32{1}, true},
		{filter.Not(filter.Exists("n", true)), []uint32{2, 3}, true},
		{filter.All(), []uint32{0, 1, 2, 3}, true},
		{filter.Eq("x", 1), []uint32{0, 1, 2, 3}, false},
		{filter.And(filter.Eq("x", 1), filter.Lt("n", 2)), []uint32{0}, false},
		{filter.Or(filter.Eq("x", 1), filter.Lt("n", 2)), []uint32{0, 1, 2, 3}, false},
		{filter.Not(filter.Eq("x", 1)), []uint32{0, 1, 2, 3}, false},
		{filter.Gt("n", "a"), nil, true},
		{filter.Eq("cat", 1.0/zero()), nil, true}, // invalid: nothing
	} {
		rows, exact := tc.e.Resolve(c)
		if exact != tc.exact || !slices.Equal(rows.ToArray(), tc.rows) && len(tc.rows)+int(rows.GetCardinality()) > 0 {
			t.Errorf("%v: %v %v, want %v %v", tc.e, rows.ToArray(), exact, tc.rows, tc.exact)
		}
	}
	// Resolve's bitmap is the caller's: changing it changes nothing else.
	rows, _ := filter.Eq("cat", "a").Resolve(c)
	rows.Clear()
	if again, _ := filter.Eq("cat", "a").Resolve(c); again.GetCardinality() != 2 {
		t.Errorf("after clearing a result, Resolve = %v", again.ToArray())
	}
}

func TestNewColumnsErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := filter.NewColumns(3, func(row int) ([]byte, error) {
		if row == 2 {
			return nil, boom
		}
		return nil, nil
	}, []string{"a"})
	if !errors.Is(err, boom) || err.Error() != "payload of row 2: boom" {
		t.Errorf("payload error: %v", err)
	}
	_, err = filter.NewColumns(1, nil, []string{"a", "b..c"})
	if !errors.Is(err, filter.ErrFilter) || err.Error() != `filter: indexed fields: field "b..c" has an empty step in its dotted path` {
		t.Errorf("bad field: %v", err)
	}
	if _, err = filter.NewColumns(-1, nil, nil); !errors.Is(err, filter.ErrFilter) {
		t.Errorf("-1 rows: %v", err)
	}
}

// Ranges over many numbers take whole precomputed blocks plus the two
// ends; check them against Match over spans of every length.
func TestResolveLongRanges(t *testing.T) {
	const seed, rows = 7, 5000
	r := rand.New(rand.NewPCG(seed, 1))
	payloads := make([][]byte, rows)
	for i := range payloads {
		// n: one number a row; a: an array of two in every tenth row.
		if i%10 == 0 {
			payloads[i] = fmt.Appendf(nil, `{"n": %d, "a": [%d, %d]}`, r.IntN(1000), r.IntN(1000), r.IntN(1000))
		} else {
			payloads[i] = fmt.Appendf(nil, `{"n": %d, "a": %d}`, r.IntN(1000), r.IntN(1000))
		}
	}
	c, err := filter.NewColumns(rows, func(row int) ([]byte, error) { return payloads[row], nil }, []string{"n", "a"})
	if err != nil {
		t.Fatal(err)
	}
	tries := 40
	if testing.Short() {
		tries = 10
	}
	for range tries {
		lo, hi := r.IntN(1100)-50, r.IntN(1100)-50
		f := []string{"n", "a"}[r.IntN(2)]
		for _, e := range []filter.Expr{
			filter.And(filter.Gte(f, lo), filter.Lt(f, hi)),
			filter.And(filter.Gt(f, lo), filter.Lte(f, hi), filter.Ne(f, hi-1)),
			filter.Lt(f, hi),
			filter.Not(filter.Gte(f, lo)),
			filter.Eq(f, lo),
		} {
			got, exact := e.Resolve(c)
			if want := matching(e, payloads); !exact || !got.Equals(want) {
				t.Fatalf("seed %d: %s: exact %v, Resolve %d rows, Match %d", seed, e, exact, got.GetCardinality(), want.GetCardinality())
			}
		}
	}
}
