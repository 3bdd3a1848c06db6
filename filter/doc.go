// Package filter is vlc's payload filter: an expression over the JSON
// object a vector carries (Expr), read from the JSON syntax that Chroma and
// MongoDB users write (Parse) or built in Go (Eq, In, And, ...), and an
// index of chosen payload fields for one immutable segment (Columns) from
// which an expression resolves to the rows that can match.
//
// # Syntax
//
// A filter is a JSON object; all its keys must hold:
//
//	{}                                   every payload
//	{"cat": "a"}                         cat equals "a" (implicit $eq)
//	{"cat": {"$ne": "a"}}                $eq $ne $gt $gte $lt $lte
//	{"cat": {"$in": ["a", "b"]}}         $in $nin: an array of values
//	{"n": {"$gte": 10, "$lt": 20}}       several operators on a field: all hold
//	{"n": {"$exists": true}}             the field is there (any value, null too)
//	{"n": {"$not": {"$gt": 5}}}          not: an operator object on the field
//	{"$and": [f, ...]}, {"$or": [f, ...]}, {"$not": f}
//	{"meta.lang": "en"}                  a dotted path steps into objects
//
// Values are strings, numbers, booleans and null. The canonical JSON
// (MarshalJSON, String) writes $eq implicitly, every other operator
// explicitly, and joins several keys of one object in an $and; Parse reads
// it back to an equal expression.
//
// Parse refuses, naming where (for example `filter: $and[1].n: $gte wants
// a number or a string, got true`): an unknown operator (listing the
// known ones), an operand of the wrong type ($in without an array, a range
// on a boolean or null, $exists on anything but true or false), an empty
// $and or $or, an operator object mixed with plain keys, an array or an
// object as a value to compare, a duplicate key, a string that is not
// UTF-8, a number beyond float64, nesting deeper than MaxNesting and a
// text longer than MaxFilterBytes. Every error matches ErrFilter and
// errs.ErrArgument.
//
// # Rules
//
//   - A payload that is nil, empty, not valid JSON or not an object has no
//     fields. When a key repeats, the last one counts. A dotted path steps
//     through objects only; a key holding a dot cannot be addressed.
//   - A field's values are its scalar, or the scalar elements of its array
//     (nested arrays and objects inside an array are ignored). An object
//     or an empty array gives the field no values, but it exists.
//   - $eq and $in hold when any value equals an operand. Numbers compare as
//     float64 (10 and 10.0 are equal); strings byte for byte; a number
//     never equals a string; null equals only null (a missing field is not
//     null: write {"$exists": false} for that, unlike MongoDB).
//   - $gt, $gte, $lt and $lte hold when any value is of the operand's type
//     (number or string) and on the right side of it, strings ordered by
//     bytes. Several operators on one field may be met by different
//     elements of an array, as in MongoDB.
//   - $ne and $nin are the negations of $eq and $in: they hold for
//     payloads without the field, those that are not JSON objects
//     included. $not is the negation of its operand.
//
// # Index
//
// For each segment the store builds Columns once over the fields the user
// chose to index; per search, Resolve gives a bitmap of candidate rows,
// exact when every field the expression reads is indexed, else a superset
// that the caller checks row by row with Match. And intersects its
// operands' rows; Or with an operand on an unindexed field, and Not of an
// inexact operand, resolve to all rows.
//
// Match reads a payload with this package's own JSON scanner, in one pass
// that validates the whole text but decodes only the fields the filter
// reads.
package filter
