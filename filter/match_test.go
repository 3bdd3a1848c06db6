package filter_test

import (
	"testing"

	"github.com/vlc-embed/vlc/filter"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		filter, payload string
		want            bool
	}{
		// Equality, numbers as float64, types never equal across.
		{`{"cat": "a"}`, `{"cat": "a"}`, true},
		{`{"cat": "a"}`, `{"cat": "b"}`, false},
		{`{"cat": "a"}`, `{"cat": "\u0061"}`, true},
		{`{"cat": "é"}`, `{"cat": "\u00e9"}`, true},
		{`{"cat": "😀"}`, `{"cat": "\ud83d\ude00"}`, true},
		{`{"n": 10}`, `{"n": 10.0}`, true},
		{`{"n": 10}`, `{"n": 1e1}`, true},
		{`{"n": 10}`, `{"n": "10"}`, false},
		{`{"b": true}`, `{"b": true}`, true},
		{`{"b": true}`, `{"b": 1}`, false},
		{`{"f": null}`, `{"f": null}`, true},
		{`{"f": null}`, `{}`, false},
		{`{"f": {"$ne": null}}`, `{}`, true},
		// Arrays: any element.
		{`{"tags": "x"}`, `{"tags": ["w", "x"]}`, true},
		{`{"tags": "x"}`, `{"tags": [["x"]]}`, false},
		{`{"tags": {"$in": ["q", "x"]}}`, `{"tags": ["w", "x"]}`, true},
		{`{"tags": {"$ne": "x"}}`, `{"tags": ["w", "x"]}`, false},
		{`{"tags": {"$nin": ["x"]}}`, `{"tags": ["w"]}`, true},
		{`{"n": {"$gt": 5, "$lt": 3}}`, `{"n": [1, 9]}`, true},
		// Ranges: same type only; strings by bytes.
		{`{"n": {"$gte": 10, "$lt": 20}}`, `{"n": 10}`, true},
		{`{"n": {"$gte": 10, "$lt": 20}}`, `{"n": 20}`, false},
		{`{"n": {"$gt": 5}}`, `{"n": "9"}`, false},
		{`{"n": {"$lte": -1e308}}`, `{"n": -1e400}`, true},
		{`{"s": {"$gt": "a"}}`, `{"s": "b"}`, true},
		{`{"s": {"$gt": "a"}}`, `{"s": "B"}`, false},
		{`{"s": {"$lt": "b"}}`, `{"s": "ab"}`, true},
		{`{"b": {"$ne": true}}`, `{"b": false}`, true},
		// Missing fields and negations.
		{`{"cat": {"$ne": "a"}}`, `{}`, true},
		{`{"cat": {"$nin": ["a"]}}`, `{"x": 1}`, true},
		{`{"cat": {"$in": []}}`, `{"cat": "a"}`, false},
		{`{"cat": {"$nin": []}}`, `{"cat": "a"}`, true},
		{`{"n": {"$not": {"$gt": 5}}}`, `{}`, true},
		{`{"n": {"$not": {"$gt": 5}}}`, `{"n": 6}`, false},
		{`{"n": {"$not": {"$gt": 5}}}`, `{"n": "x"}`, true},
		{`{"x": {"$exists": true}}`, `{"x": null}`, true},
		{`{"x": {"$exists": true}}`, `{"x": []}`, true},
		{`{"x": {"$exists": true}}`, `{"x": {}}`, true},
		{`{"x": {"$exists": false}}`, `{"y": 1}`, true},
		// Payloads that are not JSON objects have no fields.
		{`{"cat": {"$ne": "a"}}`, `not json`, true},
		{`{"cat": {"$ne": "a"}}`, `{"cat": "a"`, true},
		{`{"cat": "a"}`, `{"cat": "a"`, false},
		{`{"cat": "a"}`, `{"cat": "a"} x`, false},
		{`{"cat": "a"}`, `["cat", "a"]`, false},
		{`{"cat": "a"}`, ``, false},
		{`{"x": {"$exists": false}}`, `42`, true},
		{`{"cat": "a"}`, " \n{\"cat\":\"a\"}\t", true},
		// An error after the field is read still voids the payload.
		{`{"cat": "a"}`, `{"cat": "a", "z": [1,}`, false},
		// The last of repeated keys counts.
		{`{"cat": "a"}`, `{"cat": "a", "cat": "b"}`, false},
		{`{"cat": "b"}`, `{"cat": "a", "cat": "b"}`, true},
		{`{"m.x": 1}`, `{"m": {"x": 1}, "m": {"y": 2}}`, false},
		// Dotted paths step through objects only.
		{`{"meta.lang": "en"}`, `{"meta": {"lang": "en"}}`, true},
		{`{"meta.lang": "en"}`, `{"meta.lang": "en"}`, false},
		{`{"meta.lang": "en"}`, `{"meta": [{"lang": "en"}]}`, false},
		{`{"meta": {"$exists": true}, "meta.lang": "en"}`, `{"meta": {"lang": "en"}}`, true},
		{`{"a.b.c": 1}`, `{"a": {"x": {"c": 1}, "b": {"c": [0, 1]}}}`, true},
		// Logic.
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"b": 2}`, true},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"b": 3}`, false},
		{`{"a": 1, "b": 2}`, `{"a": 1, "b": 2}`, true},
		{`{"a": 1, "b": 2}`, `{"a": 1}`, false},
		{`{"$not": {"a": 1}}`, `{"a": 1}`, false},
		{`{"$not": {}}`, `{"a": 1}`, false},
		{`{}`, `not json`, true},
	} {
		e, err := filter.Parse([]byte(tc.filter))
		if err != nil {
			t.Fatalf("Parse(%s): %v", tc.filter, err)
		}
		if got := e.Match([]byte(tc.payload)); got != tc.want {
			t.Errorf("%s on %s = %v, want %v", tc.filter, tc.payload, got, tc.want)
		}
	}
}
