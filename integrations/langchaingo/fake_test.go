package langchaingo_test

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// fakeEmbedder embeds a text deterministically, with no network: each
// lower-cased word is hashed to one of dim coordinates with a sign, and
// the sum is normalised. Texts sharing words are near; the cosine of two
// texts is about their shared words over the square roots of their word
// counts.
type fakeEmbedder struct {
	dim   int
	calls int // EmbedDocuments and EmbedQuery calls
}

func (e *fakeEmbedder) embed(text string) []float32 {
	v := make([]float32, e.dim)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		h := fnv.New64a()
		h.Write([]byte(w))
		x := h.Sum64()
		sign := float32(1)
		if x>>63 == 1 {
			sign = -1
		}
		v[x%uint64(e.dim)] += sign
	}
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		v[0] = 1 // an empty text: some vector of norm 1
		return v
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(n))
	}
	return v
}

func (e *fakeEmbedder) EmbedDocuments(_ context.Context, texts []string) ([][]float32, error) {
	e.calls++
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.embed(t)
	}
	return out, nil
}

func (e *fakeEmbedder) EmbedQuery(_ context.Context, text string) ([]float32, error) {
	e.calls++
	return e.embed(text), nil
}

// cosine of two normalised vectors.
func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
