package langchaingo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
	"github.com/vlc-embed/vlc/integrations/langchaingo"
)

// A store in a file: the first AddDocuments builds the index, a search
// filters by metadata and keeps hits scoring at least 0.3 (cosine
// similarity), which drops "vlc is a Go module" (no word in common). The embedder here hashes words; use any LangChainGo
// embedder (embeddings.NewEmbedder over an LLM client).
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "vlc-langchaingo")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	embedder := &fakeEmbedder{dim: 256}

	store, err := langchaingo.New(filepath.Join(dir, "notes.vlc"), embedder)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	_, err = store.AddDocuments(ctx, []schema.Document{
		{PageContent: "vlc compresses embeddings", Metadata: map[string]any{"topic": "vlc"}},
		{PageContent: "vlc searches compressed embeddings on the CPU", Metadata: map[string]any{"topic": "vlc"}},
		{PageContent: "vlc is a Go module", Metadata: map[string]any{"topic": "vlc"}},
		{PageContent: "LangChainGo chains language models", Metadata: map[string]any{"topic": "llm"}},
		{PageContent: "embeddings of language models", Metadata: map[string]any{"topic": "llm"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	docs, err := store.SimilaritySearch(ctx, "compressed embeddings", 3,
		vectorstores.WithFilters(map[string]any{"topic": "vlc"}),
		vectorstores.WithScoreThreshold(0.3))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range docs {
		fmt.Printf("%.2f %s %v\n", d.Score, d.PageContent, d.Metadata)
	}

	// As a retriever of a chain:
	retriever := vectorstores.ToRetriever(store, 1)
	docs, _ = retriever.GetRelevantDocuments(ctx, "chains")
	fmt.Println(docs[0].PageContent)
	// Output:
	// 0.53 vlc searches compressed embeddings on the CPU map[topic:vlc]
	// 0.41 vlc compresses embeddings map[topic:vlc]
	// LangChainGo chains language models
}
