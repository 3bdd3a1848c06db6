package vlc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

// articles returns 1,000 documents: the first rows of testdata/deep2k as
// their embeddings, with ids and JSON payloads, as a RAG pipeline would
// hold them.
func articles() []vlc.Document {
	m, err := vecfile.Open("testdata/deep2k/base.f16", vecfile.Options{Dim: 96})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	docs := make([]vlc.Document, 1000)
	for i := range docs {
		lang := "en"
		if i%4 == 0 {
			lang = "de"
		}
		payload, _ := json.Marshal(map[string]any{"title": fmt.Sprintf("Article %d", i), "lang": lang})
		docs[i] = vlc.Document{ID: fmt.Sprintf("article-%d", i), Vector: m.Row(i, nil), Payload: payload}
	}
	return docs
}

// Build an index from documents in memory and search it: hits carry the
// documents' ids and payloads.
func ExampleBuild() {
	dir, _ := os.MkdirTemp("", "vlc-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	docs := articles()
	ix, err := vlc.Build(ctx, filepath.Join(dir, "articles.vlc"), docs, vlc.Options{Metric: "cosine", Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	hits, err := ix.Search(ctx, docs[42].Vector, vlc.SearchOptions{K: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range hits {
		fmt.Printf("%s %s\n", h.ID, h.Payload)
	}
	// Output:
	// article-42 {"lang":"en","title":"Article 42"}
	// article-861 {"lang":"en","title":"Article 861"}
	// article-942 {"lang":"en","title":"Article 942"}
}

// Restrict a search to some documents: by id (AllowIDs) or by a
// predicate over ids and payloads (Where).
func ExampleWhere() {
	dir, _ := os.MkdirTemp("", "vlc-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	docs := articles()
	ix, err := vlc.Build(ctx, filepath.Join(dir, "articles.vlc"), docs, vlc.Options{Metric: "cosine", Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	german := vlc.Where(func(id string, payload []byte) bool {
		var p struct{ Lang string }
		return json.Unmarshal(payload, &p) == nil && p.Lang == "de"
	})
	hits, _ := ix.Search(ctx, docs[42].Vector, vlc.SearchOptions{K: 2, Filter: german})
	for _, h := range hits {
		fmt.Printf("%s %s\n", h.ID, h.Payload)
	}
	hits, _ = ix.Search(ctx, docs[42].Vector, vlc.SearchOptions{K: 2, Filter: vlc.AllowIDs("article-7", "article-9", "article-11")})
	for _, h := range hits {
		fmt.Println(h.ID)
	}
	// Output:
	// article-336 {"lang":"de","title":"Article 336"}
	// article-672 {"lang":"de","title":"Article 672"}
	// article-11
	// article-9
}

// Add documents without retraining and delete others: searches see each
// change whole, and it survives a crash and a reopen.
func ExampleStore_Add() {
	dir, _ := os.MkdirTemp("", "vlc-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	docs := articles()
	path := filepath.Join(dir, "articles.vlc")
	ix, err := vlc.Build(ctx, path, docs[:900], vlc.Options{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := ix.Add(ctx, docs[900:]); err != nil {
		fmt.Println(err)
		return
	}
	if err := ix.Delete(ctx, []string{"article-950"}); err != nil {
		fmt.Println(err)
		return
	}
	ix.Close()

	ix, err = vlc.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	hits, _ := ix.Search(ctx, docs[950].Vector, vlc.SearchOptions{K: 1})
	fmt.Println("nearest to article-950:", hits[0].ID)
	hits, _ = ix.Search(ctx, docs[951].Vector, vlc.SearchOptions{K: 1})
	fmt.Println("nearest to article-951:", hits[0].ID)
	_, err = ix.Get("article-950")
	fmt.Println(err)
	in, _ := ix.Info()
	fmt.Printf("%d live, %d deleted, %d segments\n", in.Rows, in.Deleted, len(in.Segments))
	ix.Compact(ctx)
	in, _ = ix.Info()
	fmt.Printf("compacted: %d live, %d deleted, %d segment\n", in.Rows, in.Deleted, len(in.Segments))
	// Output:
	// nearest to article-950: article-677
	// nearest to article-951: article-951
	// id not found: "article-950"
	// 999 live, 1 deleted, 2 segments
	// compacted: 999 live, 0 deleted, 1 segment
}

// vectors serves the original vectors of documents by id, for re-ranking.
type vectors map[string][]float32

func (v vectors) Vector(id string, dst []float32) ([]float32, error) {
	x, ok := v[id]
	if !ok {
		return nil, fmt.Errorf("no vector for %q", id)
	}
	return append(dst[:0], x...), nil
}

// Re-rank: the best RerankFactor*K hits by code are scored again against
// the original vectors, so the distances are exact.
func ExampleSearchOptions_rerank() {
	dir, _ := os.MkdirTemp("", "vlc-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	docs := articles()
	ix, err := vlc.Build(ctx, filepath.Join(dir, "articles.vlc"), docs, vlc.Options{Bits: 1, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	originals := vectors{}
	for _, d := range docs {
		originals[d.ID] = d.Vector
	}
	hits, _ := ix.Search(ctx, docs[42].Vector, vlc.SearchOptions{K: 3, Rerank: originals})
	for _, h := range hits {
		fmt.Printf("%s %.4f\n", h.ID, h.Distance)
	}
	// Output:
	// article-42 0.0000
	// article-861 0.3432
	// article-942 0.3612
}
