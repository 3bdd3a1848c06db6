package langchaingo_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/filter"
	"github.com/vlc-embed/vlc/integrations/langchaingo"
)

// ids are the metadata ids of documents, sorted.
func ids(docs []schema.Document) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i], _ = d.Metadata["id"].(string)
	}
	slices.Sort(out)
	return out
}

// DeleteDocuments deletes by id; an unknown id deletes nothing.
func TestDeleteDocuments(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, filepath.Join(t.TempDir(), "del.vlc"), &fakeEmbedder{dim: dim}, langchaingo.WithIDKey("id"))
	if err := s.DeleteDocuments(ctx, []string{"en-cats"}); !errors.Is(err, vlc.ErrNotFound) {
		t.Errorf("delete from an empty store: %v, want vlc.ErrNotFound", err)
	}
	if _, err := s.AddDocuments(ctx, pets); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDocuments(ctx, []string{"en-cats", "nope"}); !errors.Is(err, vlc.ErrNotFound) {
		t.Errorf("delete of an unknown id: %v, want vlc.ErrNotFound", err)
	}
	if err := s.DeleteDocuments(ctx, []string{"en-cats", "de-katzen"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SimilaritySearch(ctx, "cats purr", 8)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"de-fische", "de-hunde", "de-papagei", "en-cat-mouse", "en-dogs", "en-parrot"}
	if !slices.Equal(ids(got), want) {
		t.Errorf("after deleting en-cats and de-katzen: %v, want %v", ids(got), want)
	}
	if err := s.DeleteDocuments(ctx, nil); err != nil {
		t.Errorf("delete of no ids: %v", err)
	}
	s.Close()
	if err := s.DeleteDocuments(ctx, []string{"en-dogs"}); !errors.Is(err, langchaingo.ErrClosed) {
		t.Errorf("delete after Close: %v", err)
	}
}

// Without WithUpsert an id held is refused; with it, the document is
// replaced.
func TestUpsert(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "up.vlc")
	e := &fakeEmbedder{dim: dim}
	s := newStore(t, path, e, langchaingo.WithIDKey("id"))
	if _, err := s.AddDocuments(ctx, pets); err != nil {
		t.Fatal(err)
	}
	edited := schema.Document{PageContent: "cats purr loudly at night", Metadata: map[string]any{"lang": "en", "year": 2024, "id": "en-cats"}}
	if _, err := s.AddDocuments(ctx, []schema.Document{edited}); !errors.Is(err, vlc.ErrDuplicateID) {
		t.Fatalf("add of an id held without WithUpsert: %v, want vlc.ErrDuplicateID", err)
	}
	s.Close()
	s = newStore(t, path, e, langchaingo.WithIDKey("id"), langchaingo.WithUpsert())
	got, err := s.AddDocuments(ctx, []schema.Document{edited, {PageContent: "owls hoot", Metadata: map[string]any{"lang": "en", "id": "en-owls"}}})
	if err != nil || !slices.Equal(got, []string{"en-cats", "en-owls"}) {
		t.Fatalf("upsert: %v %v", got, err)
	}
	if n, err := s.Index().Count(nil); err != nil || n != 9 {
		t.Errorf("after replacing one and adding one: %d documents, %v; want 9", n, err)
	}
	found, err := s.SimilaritySearch(ctx, "cats purr loudly at night", 8, vectorstores.WithFilters(map[string]any{"year": 2024}))
	if err != nil || len(found) != 1 || found[0].PageContent != edited.PageContent {
		t.Errorf("the replacing document: %q, %v", contents(found), err)
	}
}

// The filter map takes the JSON filter syntax over the metadata; WithFilter
// takes a vlc.Filter over the payload.
func TestRichFilters(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, filepath.Join(t.TempDir(), "f.vlc"), &fakeEmbedder{dim: dim}, langchaingo.WithIDKey("id"))
	if _, err := s.AddDocuments(ctx, pets); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddDocuments(ctx, []schema.Document{{PageContent: "cats in space", Metadata: map[string]any{"lang": "en", "year": 2021, "id": "ns-cats"}}}, vectorstores.WithNameSpace("other")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		where map[string]any
		want  []string
	}{
		{map[string]any{"year": map[string]any{"$in": []int{2020, 2023}}}, []string{"de-fische", "de-papagei", "en-parrot"}},
		{map[string]any{"year": map[string]any{"$gte": 2021, "$lt": 2022}, "lang": "en"}, []string{"en-cats", "en-dogs"}},
		{map[string]any{"$or": []any{map[string]any{"id": "en-dogs"}, map[string]any{"year": 2023}}}, []string{"de-fische", "en-dogs"}},
		{map[string]any{"$or": []map[string]any{{"id": "en-dogs"}, {"id": "de-hunde"}}}, []string{"de-hunde", "en-dogs"}},
		{map[string]any{"$and": []any{map[string]any{"lang": "de"}, map[string]any{"$not": map[string]any{"year": map[string]any{"$lte": 2021}}}}}, []string{"de-fische", "de-hunde"}},
		{map[string]any{"lang": map[string]any{"$nin": []string{"de"}}, "year": map[string]any{"$ne": 2021}}, []string{"en-cat-mouse", "en-parrot"}},
		{map[string]any{"color": map[string]any{"$exists": true}}, []string{}},
	} {
		got, err := s.SimilaritySearch(ctx, "cats", 10, vectorstores.WithFilters(c.where))
		if err != nil || !slices.Equal(ids(got), c.want) {
			t.Errorf("filter %v: %v, %v; want %v", c.where, ids(got), err, c.want)
		}
	}
	// WithFilter: a vlc.Filter as it is, the namespace not added.
	got, err := s.SimilaritySearch(ctx, "cats", 10, langchaingo.WithFilter(vlc.Match(filter.Eq("metadata.year", 2021))))
	if want := []string{"de-katzen", "en-cats", "en-dogs", "ns-cats"}; err != nil || !slices.Equal(ids(got), want) {
		t.Errorf("WithFilter year 2021: %v, %v; want %v", ids(got), err, want)
	}
	for _, bad := range []map[string]any{
		{"year": map[string]any{"$between": []int{1, 2}}},
		{"$nor": []any{}},
		{"$or": "lang"},
		{"$or": []any{"lang"}},
		{"$not": 1},
	} {
		if _, err := s.SimilaritySearch(ctx, "cats", 2, vectorstores.WithFilters(bad)); !errors.Is(err, langchaingo.ErrInvalidFilters) {
			t.Errorf("filter %v: %v, want ErrInvalidFilters", bad, err)
		}
	}
}
