// Package vlc compresses float embeddings into a small, memory-mapped,
// searchable index, and keeps it as a store a service can add to, delete
// from and filter, with its own ids and payloads.
//
//	ix, err := vlc.Build(ctx, "docs.vlc", docs, vlc.Options{Metric: "cosine"})
//	hits, err := ix.Search(ctx, query, vlc.SearchOptions{K: 10})
//	ids, err := ix.Add(ctx, more)
//	err = ix.Delete(ctx, []string{"doc-17"})
//
// Compress builds from a file (.f16, .npy, .fvecs) in place of memory;
// Open opens what either wrote. Zero options mean the CLI's defaults.
package vlc
