package serve

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unsafe"
)

// vector is a JSON array of numbers decoded straight into float32s: the
// reflection of encoding/json per number costs more than the search of
// the vector itself in a batch request. A number beyond the float32
// range is an error, as encoding/json makes it.
type vector []float32

func (v *vector) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = nil
		return nil
	}
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '[' {
		return errors.New("a vector must be an array of numbers")
	}
	out := (*v)[:0]
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		*v = vector{}
		return nil
	}
	for {
		j := i
		for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
			j++
		}
		if j == i {
			return fmt.Errorf("value %d of a vector is not a number", len(out))
		}
		tok := unsafe.String(&b[i], j-i) // b outlives the call
		f, err := strconv.ParseFloat(tok, 32)
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("value %d of a vector, %s, is not a float32", len(out), tok)
		}
		out = append(out, float32(f))
		i = skipSpace(b, j)
		if i == len(b) {
			return errors.New("a vector's array is not closed")
		}
		if b[i] == ']' {
			break
		}
		if b[i] != ',' {
			return fmt.Errorf("after value %d of a vector: %q", len(out)-1, b[i])
		}
		i = skipSpace(b, i+1)
	}
	*v = out
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
