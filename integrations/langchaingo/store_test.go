package langchaingo_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/integrations/langchaingo"
)

const dim = 256

// pets are the documents of most tests: two languages, a year each.
var pets = []schema.Document{
	{PageContent: "cats purr and sleep all day", Metadata: map[string]any{"lang": "en", "year": 2021, "id": "en-cats"}},
	{PageContent: "a cat chases the mouse", Metadata: map[string]any{"lang": "en", "year": 2022, "id": "en-cat-mouse"}},
	{PageContent: "dogs bark at the postman", Metadata: map[string]any{"lang": "en", "year": 2021, "id": "en-dogs"}},
	{PageContent: "the parrot talks all day", Metadata: map[string]any{"lang": "en", "year": 2020, "id": "en-parrot"}},
	{PageContent: "Katzen schnurren und cats sleep", Metadata: map[string]any{"lang": "de", "year": 2021, "id": "de-katzen"}},
	{PageContent: "Hunde bellen laut", Metadata: map[string]any{"lang": "de", "year": 2022, "id": "de-hunde"}},
	{PageContent: "der Papagei spricht und cats purr", Metadata: map[string]any{"lang": "de", "year": 2020, "id": "de-papagei"}},
	{PageContent: "Fische schwimmen im Wasser", Metadata: map[string]any{"lang": "de", "year": 2023, "id": "de-fische"}},
}

func newStore(t *testing.T, path string, e embeddings.Embedder, opts ...langchaingo.Option) *langchaingo.Store {
	t.Helper()
	s, err := langchaingo.New(path, e, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func contents(docs []schema.Document) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.PageContent
	}
	return out
}

// TestAddSearchFilterThreshold adds documents in two calls (the first
// builds the index, the second adds a segment), then searches with a
// metadata filter and a score threshold and checks the documents, their
// metadata and their scores against exact cosines of the embeddings.
func TestAddSearchFilterThreshold(t *testing.T) {
	ctx := context.Background()
	e := &fakeEmbedder{dim: dim}
	path := filepath.Join(t.TempDir(), "pets.vlc")
	s := newStore(t, path, e, langchaingo.WithIDKey("id"))
	if s.Index() != nil {
		t.Fatal("a new store has an index before its first AddDocuments")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("New wrote %s before any document: %v", path, err)
	}
	ids, err := s.AddDocuments(ctx, pets[:5])
	if err != nil {
		t.Fatal(err)
	}
	more, err := s.AddDocuments(ctx, pets[5:])
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, more...)
	for i, id := range ids {
		if want := pets[i].Metadata["id"]; id != want {
			t.Errorf("id %d: %q, want %q (WithIDKey)", i, id, want)
		}
	}
	if n := s.Index().Len(); n != len(pets) {
		t.Fatalf("index holds %d documents, want %d", n, len(pets))
	}

	// Unfiltered: the English "cats purr and sleep all day" is nearest.
	got, err := s.SimilaritySearch(ctx, "cats purr", 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cats purr and sleep all day", "der Papagei spricht und cats purr", "Katzen schnurren und cats sleep"}; !slices.Equal(contents(got), want) {
		t.Fatalf("unfiltered: %q, want %q", contents(got), want)
	}

	// German only: the filter applies before ranking, so two German
	// documents come back although English ones are nearer.
	got, err = s.SimilaritySearch(ctx, "cats purr", 2, vectorstores.WithFilters(map[string]any{"lang": "de"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"der Papagei spricht und cats purr", "Katzen schnurren und cats sleep"}; !slices.Equal(contents(got), want) {
		t.Fatalf("lang de: %q, want %q", contents(got), want)
	}
	q := e.embed("cats purr")
	for _, d := range got {
		if d.Metadata["lang"] != "de" {
			t.Errorf("%q: metadata %v, want lang de", d.PageContent, d.Metadata)
		}
		exact := cosine(q, e.embed(d.PageContent))
		if math.Abs(float64(d.Score)-exact) > 1e-3 {
			t.Errorf("%q: score %.4f, exact cosine %.4f", d.PageContent, d.Score, exact)
		}
	}

	// Two keys (a number among them) and a threshold: of the German
	// documents of 2020 and 2021 that share words with the query, only
	// the one scoring at least 0.5 is left.
	filter := vectorstores.WithFilters(map[string]any{"lang": "de", "year": 2021})
	got, err = s.SimilaritySearch(ctx, "cats sleep", 5, filter)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Katzen schnurren und cats sleep"}; !slices.Equal(contents(got), want) {
		t.Fatalf("lang de, year 2021: %q, want %q", contents(got), want)
	}
	got, err = s.SimilaritySearch(ctx, "cats purr", 5, vectorstores.WithFilters(map[string]string{"lang": "de"}), vectorstores.WithScoreThreshold(0.5))
	if err != nil {
		t.Fatal(err)
	}
	// "der Papagei spricht und cats purr": 2 of 6 words, 2/sqrt(2*6) =
	// 0.577; "Katzen schnurren und cats sleep": 1/sqrt(2*5) = 0.316.
	if want := []string{"der Papagei spricht und cats purr"}; !slices.Equal(contents(got), want) {
		t.Fatalf("lang de, score >= 0.5: %q (scores %v), want %q", contents(got), scores(got), want)
	}
	if d := got[0]; d.Metadata["year"] != float64(2020) || d.Metadata["id"] != "de-papagei" {
		t.Errorf("metadata %v, want year 2020 (as float64) and id de-papagei", d.Metadata)
	}
	got, err = s.SimilaritySearch(ctx, "cats purr", 5, vectorstores.WithScoreThreshold(0.99))
	if err != nil || len(got) != 0 {
		t.Fatalf("threshold 0.99: %q, %v; want nothing", contents(got), err)
	}
	got, err = s.SimilaritySearch(ctx, "cats purr", 5, vectorstores.WithFilters(map[string]any{"lang": "fr"}))
	if err != nil || len(got) != 0 {
		t.Fatalf("lang fr: %q, %v; want nothing", contents(got), err)
	}
}

func scores(docs []schema.Document) []float32 {
	out := make([]float32, len(docs))
	for i, d := range docs {
		out[i] = d.Score
	}
	return out
}

// TestFilterBeforeRanking: a filter that 1 document in 25 passes still
// gets k documents back, and they are the k nearest of those it passes
// (exact cosines of the embeddings decide).
func TestFilterBeforeRanking(t *testing.T) {
	ctx := context.Background()
	e := &fakeEmbedder{dim: dim}
	s := newStore(t, filepath.Join(t.TempDir(), "many.vlc"), e)
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"}
	var docs []schema.Document
	for i := range 1000 {
		text := fmt.Sprintf("%s %s %s doc%d", words[i%12], words[(i/12)%12], words[(i/144)%12], i)
		docs = append(docs, schema.Document{PageContent: text, Metadata: map[string]any{"rare": i%25 == 7, "n": i}})
	}
	if _, err := s.AddDocuments(ctx, docs[:600]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddDocuments(ctx, docs[600:]); err != nil {
		t.Fatal(err)
	}
	const k = 5
	query := "alpha beta gamma"
	got, err := s.SimilaritySearch(ctx, query, k, vectorstores.WithFilters(map[string]any{"rare": true}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != k {
		t.Fatalf("%d documents, want %d", len(got), k)
	}
	q := e.embed(query)
	var rare []float64
	for _, d := range docs {
		if d.Metadata["rare"] == true {
			rare = append(rare, cosine(q, e.embed(d.PageContent)))
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(rare)))
	for i, d := range got {
		if d.Metadata["rare"] != true {
			t.Errorf("%q: metadata %v does not pass the filter", d.PageContent, d.Metadata)
		}
		exact := cosine(q, e.embed(d.PageContent))
		if math.Abs(exact-rare[i]) > 1e-6 {
			t.Errorf("hit %d %q: exact cosine %.4f, the %d-th best of the rare ones is %.4f", i, d.PageContent, exact, i+1, rare[i])
		}
	}
}

// TestReopen closes the store, opens it from disk and searches again,
// then adds to it.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	e := &fakeEmbedder{dim: dim}
	path := filepath.Join(t.TempDir(), "pets.vlc")
	s, err := langchaingo.New(path, e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddDocuments(ctx, pets[:6]); err != nil {
		t.Fatal(err)
	}
	filter := vectorstores.WithFilters(map[string]any{"lang": "en"})
	before, err := s.SimilaritySearch(ctx, "the cat and the mouse", 2, filter)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = newStore(t, path, e)
	if s.Index() == nil || s.Index().Len() != 6 {
		t.Fatal("reopened store does not hold the 6 documents")
	}
	after, err := s.SimilaritySearch(ctx, "the cat and the mouse", 2, filter)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a cat chases the mouse", "dogs bark at the postman"}; !slices.Equal(contents(after), want) {
		t.Fatalf("after reopening: %q, want %q", contents(after), want)
	}
	for i := range after {
		if after[i].Score != before[i].Score || fmt.Sprint(after[i].Metadata) != fmt.Sprint(before[i].Metadata) {
			t.Errorf("hit %d: %+v after reopening, %+v before", i, after[i], before[i])
		}
	}
	if _, err := s.AddDocuments(ctx, pets[6:]); err != nil {
		t.Fatal(err)
	}
	got, err := s.SimilaritySearch(ctx, "Fische Wasser", 1)
	if err != nil || len(got) != 1 || got[0].PageContent != "Fische schwimmen im Wasser" {
		t.Fatalf("added after reopening: %q, %v", contents(got), err)
	}
}

// TestErrors: a closed store, the wrong dimension, bad options.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	e := &fakeEmbedder{dim: dim}
	path := filepath.Join(t.TempDir(), "pets.vlc")
	s := newStore(t, path, e)
	if _, err := s.AddDocuments(ctx, pets); err != nil {
		t.Fatal(err)
	}

	other := vectorstores.WithEmbedder(&fakeEmbedder{dim: 32})
	if _, err := s.SimilaritySearch(ctx, "cats", 2, other); !errors.Is(err, index.ErrDim) {
		t.Errorf("query of dimension 32 in an index of %d: %v, want index.ErrDim", dim, err)
	}
	if _, err := s.AddDocuments(ctx, pets[:1], other); !errors.Is(err, index.ErrDim) {
		t.Errorf("document of dimension 32 in an index of %d: %v, want index.ErrDim", dim, err)
	}
	for _, c := range []struct {
		name string
		err  error
		call func() error
	}{
		{"k 0", langchaingo.ErrInvalidNumDocuments, func() error { _, err := s.SimilaritySearch(ctx, "cats", 0); return err }},
		{"threshold 1.5", langchaingo.ErrInvalidScoreThreshold, func() error {
			_, err := s.SimilaritySearch(ctx, "cats", 2, vectorstores.WithScoreThreshold(1.5))
			return err
		}},
		{"filters of a wrong type", langchaingo.ErrInvalidFilters, func() error {
			_, err := s.SimilaritySearch(ctx, "cats", 2, vectorstores.WithFilters([]string{"lang"}))
			return err
		}},
		{"filters in AddDocuments", langchaingo.ErrUnsupportedOptions, func() error {
			_, err := s.AddDocuments(ctx, pets[:1], vectorstores.WithFilters(map[string]any{"lang": "de"}))
			return err
		}},
		{"embedder one vector short", langchaingo.ErrEmbedderWrongNumberVectors, func() error {
			_, err := s.AddDocuments(ctx, pets[:2], vectorstores.WithEmbedder(short{e}))
			return err
		}},
		{"metadata not JSON", nil, func() error {
			_, err := s.AddDocuments(ctx, []schema.Document{{PageContent: "x", Metadata: map[string]any{"f": func() {}}}})
			if err == nil {
				return errors.New("no error")
			}
			return nil
		}},
	} {
		if err := c.call(); c.err == nil && err != nil || c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
	if n := s.Index().Len(); n != len(pets) {
		t.Errorf("after refused calls the index holds %d documents, want %d", n, len(pets))
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.SimilaritySearch(ctx, "cats", 2); !errors.Is(err, langchaingo.ErrClosed) {
		t.Errorf("search of a closed store: %v, want ErrClosed", err)
	}
	if _, err := s.AddDocuments(ctx, pets[:1]); !errors.Is(err, langchaingo.ErrClosed) {
		t.Errorf("add to a closed store: %v, want ErrClosed", err)
	}

	empty := newStore(t, filepath.Join(t.TempDir(), "empty.vlc"), e)
	empty.Close()
	if _, err := empty.AddDocuments(ctx, pets); !errors.Is(err, langchaingo.ErrClosed) {
		t.Errorf("add to a closed empty store: %v, want ErrClosed", err)
	}

	if _, err := langchaingo.New(path, e, langchaingo.WithBuildOptions(vlc.Options{Metric: "l2"})); !errors.Is(err, langchaingo.ErrMetric) {
		t.Errorf("metric l2: %v, want ErrMetric", err)
	}
	l2 := filepath.Join(t.TempDir(), "l2.vlc")
	ix, err := vlc.Build(ctx, l2, []vlc.Document{{Vector: e.embed("a")}, {Vector: e.embed("b")}}, vlc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	if _, err := langchaingo.New(l2, e); !errors.Is(err, langchaingo.ErrMetric) {
		t.Errorf("opening an l2 index: %v, want ErrMetric", err)
	}
	none := newStore(t, filepath.Join(t.TempDir(), "none.vlc"), nil)
	if _, err := none.AddDocuments(ctx, pets); !errors.Is(err, langchaingo.ErrNoEmbedder) {
		t.Errorf("no embedder: %v, want ErrNoEmbedder", err)
	}
}

// short returns one vector fewer than asked.
type short struct{ *fakeEmbedder }

func (s short) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	v, err := s.fakeEmbedder.EmbedDocuments(ctx, texts)
	return v[:len(v)-1], err
}

// TestEmptyStore: searching a store no document was added to finds
// nothing and writes nothing; adding nothing keeps it empty.
func TestEmptyStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "empty.vlc")
	s := newStore(t, path, &fakeEmbedder{dim: dim})
	got, err := s.SimilaritySearch(ctx, "cats", 3)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	if ids, err := s.AddDocuments(ctx, nil); err != nil || ids != nil {
		t.Fatalf("adding nothing: %v, %v", ids, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty store wrote %s: %v", path, err)
	}
	// One document is enough to build from (one anchor).
	if _, err := s.AddDocuments(ctx, pets[:1]); err != nil {
		t.Fatal(err)
	}
	got, err = s.SimilaritySearch(ctx, "cats", 3)
	if err != nil || len(got) != 1 || got[0].PageContent != pets[0].PageContent {
		t.Fatalf("store of one document: %q, %v", contents(got), err)
	}
}

// TestIDsNamespacesDeduplicater: generated ids are UUIDs; a namespace
// sees only its documents; the deduplicater drops documents before they
// are embedded.
func TestIDsNamespacesDeduplicater(t *testing.T) {
	ctx := context.Background()
	e := &fakeEmbedder{dim: dim}
	s := newStore(t, filepath.Join(t.TempDir(), "ns.vlc"), e)
	ids, err := s.AddDocuments(ctx, pets[:4])
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := uuid.Parse(id); err != nil {
			t.Errorf("generated id %q: %v", id, err)
		}
	}
	rec, err := s.Index().Get(ids[2])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"content":"dogs bark at the postman","metadata":{"id":"en-dogs","lang":"en","year":2021}}`; string(rec.Payload) != want {
		t.Errorf("payload %s, want %s", rec.Payload, want)
	}
	german, err := s.AddDocuments(ctx, pets[4:], vectorstores.WithNameSpace("german"))
	if err != nil || len(german) != 4 {
		t.Fatal(german, err)
	}
	got, err := s.SimilaritySearch(ctx, "cats purr", 8)
	if err != nil || len(got) != 4 {
		t.Fatalf("default namespace: %q, %v; want the 4 English documents", contents(got), err)
	}
	for _, d := range got {
		if d.Metadata["lang"] != "en" {
			t.Errorf("default namespace returned %q", d.PageContent)
		}
	}
	// All 4, those of similarity 0 (less, by the codes) too: no threshold.
	got, err = s.SimilaritySearch(ctx, "cats purr", 8, vectorstores.WithNameSpace("german"))
	if err != nil || len(got) != 4 || got[0].PageContent != "der Papagei spricht und cats purr" {
		t.Fatalf("namespace german: %q, %v", contents(got), err)
	}
	ns := newStore(t, filepath.Join(t.TempDir(), "ns2.vlc"), e, langchaingo.WithNameSpace("german"))
	if _, err := ns.AddDocuments(ctx, pets); err != nil {
		t.Fatal(err)
	}
	if got, err := ns.SimilaritySearch(ctx, "Hunde", 8); err != nil || len(got) != 8 {
		t.Fatalf("store namespace: %d documents, %v; want 8", len(got), err)
	}

	calls := e.calls
	seen := map[string]bool{}
	dedup := vectorstores.WithDeduplicater(func(_ context.Context, d schema.Document) bool {
		dup := seen[d.PageContent]
		seen[d.PageContent] = true
		return dup
	})
	docs := []schema.Document{{PageContent: "owls hoot"}, {PageContent: "owls hoot"}, {PageContent: "bats fly"}}
	ids, err = s.AddDocuments(ctx, docs, dedup)
	if err != nil || len(ids) != 2 {
		t.Fatalf("deduplicated: ids %v, %v; want 2", ids, err)
	}
	if e.calls != calls+1 {
		t.Errorf("%d embedder calls for one AddDocuments", e.calls-calls)
	}
	if ids, err := s.AddDocuments(ctx, docs[:1], dedup); err != nil || len(ids) != 0 {
		t.Fatalf("all duplicates: ids %v, %v", ids, err)
	}
}
