package serve

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// vector decodes what encoding/json decodes into []float32, bit for bit,
// and refuses what it refuses.
func TestVectorMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	inputs := []string{`[]`, `[1]`, ` [ 1 , -2.5e-3 ,3E+2 ] `, `[0.1,0.2]`, `[1e39]`, `[-1e39]`, `[1e-46]`, `["1"]`, `[[1]]`, `[1,]`, `[1 2]`, `{}`, `3`, `null`, `[true]`}
	for range 200 {
		var b strings.Builder
		b.WriteString("[")
		for j := range rng.IntN(20) {
			if j > 0 {
				b.WriteString(",")
			}
			x := rng.NormFloat64() * []float64{1e-30, 1e-3, 1, 1e3, 1e30}[rng.IntN(5)]
			b.WriteString(strings.TrimSpace(json.Number(strings.TrimSpace(formatFloat(x))).String()))
		}
		b.WriteString("]")
		inputs = append(inputs, b.String())
	}
	for _, in := range inputs {
		var want []float32
		errWant := json.Unmarshal([]byte(in), &want)
		var got vector
		errGot := json.Unmarshal([]byte(in), &got)
		if (errWant == nil) != (errGot == nil) {
			t.Errorf("%s: encoding/json %v, vector %v", in, errWant, errGot)
			continue
		}
		if errWant == nil && !slices.Equal([]float32(got), want) {
			t.Errorf("%s: %v, encoding/json %v", in, got, want)
		}
	}
}

func formatFloat(x float64) string {
	b, _ := json.Marshal(x)
	return string(b)
}
