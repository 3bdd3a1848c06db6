package filter

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"unicode/utf8"
)

// FuzzParse: Parse never panics, and a filter it accepts reads back from
// its canonical JSON to the same canonical JSON, matching the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"cat": "a"}`, `{"cat": {"$in": ["a", "b"]}}`, `{"n": {"$gte": 10, "$lt": 20}}`,
		`{"$and": [{"a": 1}, {"$or": [{"b": true}, {"c": null}]}]}`, `{"$not": {"x": {"$exists": true}}}`,
		`{"n": {"$not": {"$gt": 5, "$lte": 9}}}`, `{"s": "\u00e9\ud83d\ude00\n"}`, `{"meta.lang": {"$nin": ["en"]}}`,
		`{"a": 1, "a": 2}`, `[`, `{"n": 1e400}`,
	} {
		f.Add([]byte(s), []byte(`{"cat": "a", "n": 12, "tags": ["x", 3], "meta": {"lang": "en"}}`))
	}
	f.Fuzz(func(t *testing.T, data, payload []byte) {
		e, err := Parse(data)
		if err != nil {
			return
		}
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON(%s): %v", data, err)
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(MarshalJSON(%s)) = Parse(%s): %v", data, b, err)
		}
		if b2, _ := again.MarshalJSON(); !bytes.Equal(b, b2) {
			t.Fatalf("%s: canonical %s reads back as %s", data, b, b2)
		}
		if !json.Valid(b) {
			t.Fatalf("%s: canonical %s is not JSON", data, b)
		}
		if e.Match(payload) != again.Match(payload) {
			t.Fatalf("%s and %s differ on %s", data, b, payload)
		}
	})
}

// FuzzReader: the payload reader agrees with encoding/json on what is
// valid JSON and on the values it reads.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		`{"a": "x", "b": [1, "y", null, true, [2], {"c": 3}], "m": {"x": -1.5e3}}`,
		`{"a": "\u00e9\ud83d\ude00\ud800x\\\"", "a": 2}`, `{"a": 1,}`, `{"a" 1}`, `[1]`, ` {} `,
		`{"m": {"x": {"y": 1}}, "m": 3}`, `{"a": 01}`, `{"a": 1.}`, `{"a": "\x01"}`, `{"a": 1e999}`,
	} {
		f.Add([]byte(s))
	}
	fields := []string{"a", "b", "m", "m.x"}
	rd := newReader(fields)
	f.Fuzz(func(t *testing.T, data []byte) {
		d := rd.getDoc()
		defer rd.putDoc(d)
		rd.read(data, d)
		s := scanner{data: data}
		ours := s.skip() && s.end()
		if json.Valid(data) != ours && s.depth <= maxDepth {
			t.Fatalf("%q: valid %v, encoding/json says %v (%v)", data, ours, !ours, s.err)
		}
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if !ours || dec.Decode(&doc) != nil || doc == nil {
			for i, sl := range d.slots {
				if sl.present || len(sl.vals) > 0 {
					t.Fatalf("%q: field %s read from a payload that is not a JSON object", data, fields[i])
				}
			}
			return
		}
		for i, f := range fields {
			var v any
			present := false
			if i < 3 {
				v, present = doc[f]
			} else if m, ok := doc["m"].(map[string]any); ok {
				v, present = m["x"]
			}
			sl := d.slots[i]
			if sl.present != present {
				t.Fatalf("%q: %s present %v, encoding/json %v", data, f, sl.present, present)
			}
			var want []any
			switch x := v.(type) {
			case []any:
				for _, el := range x {
					switch el.(type) {
					case []any, map[string]any:
					default:
						want = append(want, el)
					}
				}
			case map[string]any:
			default:
				if present {
					want = []any{x}
				}
			}
			if len(want) != len(sl.vals) {
				t.Fatalf("%q: %s: %d values, encoding/json %v", data, f, len(sl.vals), want)
			}
			for j, w := range want {
				if !sameValue(sl.vals[j], w) {
					t.Fatalf("%q: %s[%d] = %+v, encoding/json %#v", data, f, j, sl.vals[j], w)
				}
			}
		}
	})
}

func sameValue(v value, w any) bool {
	switch x := w.(type) {
	case nil:
		return v.k == kindNull
	case bool:
		return v.k == kindBool && v.b == x
	case string:
		return v.k == kindStr && string(perByteValid(v.s)) == x
	case json.Number:
		f, err := x.Float64()
		if err != nil && !math.IsInf(f, 0) {
			return false
		}
		return v.k == kindNum && v.n == f
	}
	return false
}

// The trie reader clears a field's values when its key, or a key above
// it, repeats.
func TestReaderRepeatedKeys(t *testing.T) {
	rd := newReader([]string{"m", "m.x"})
	d := rd.getDoc()
	rd.read([]byte(`{"m": {"x": [1, 2]}, "m": {"y": 1, "x": 3}}`), d)
	if !d.slots[0].present || !d.slots[1].present || len(d.slots[1].vals) != 1 || d.slots[1].vals[0].n != 3 {
		t.Errorf("slots %+v", d.slots)
	}
	rd.read([]byte(`{"m": {"x": [1, 2]}, "m": 5}`), d)
	if !d.slots[0].present || d.slots[1].present || len(d.slots[0].vals) != 1 || d.slots[0].vals[0].n != 5 {
		t.Errorf("slots %+v", d.slots)
	}
}

// perByteValid replaces each byte that is not UTF-8 with U+FFFD, as
// encoding/json does.
func perByteValid(b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out = utf8.AppendRune(out, r)
		b = b[n:]
	}
	return out
}
