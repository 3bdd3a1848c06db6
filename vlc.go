// Package vlc compresses float16 embeddings into a small, memory-mapped,
// searchable index, and opens such indexes for search. It is the front door
// for Go programs; the CLI (cmd/vlc) is built on it.
//
//	sum, err := vlc.Compress(ctx, "emb.f16", "emb.vlc", vlc.Options{Dim: 768})
//	ix, err := vlc.Open("emb.vlc")
//	defer ix.Close()
//	hits, err := ix.Search(query, vlc.SearchOptions{K: 10, NProbe: 32})
package vlc

import (
	"github.com/vlc-embed/vlc/index"
)

// Aliases so that library users need only this package.
type (
	Index         = index.Index
	Hit           = index.Hit
	SearchOptions = index.SearchOptions
	Rows          = index.Rows // vectors to search for in a batch, or to re-rank against (a vecfile.Matrix is one)
)

// Open maps an index read-only and verifies every checksum once.
func Open(path string) (*Index, error) {
	return index.Open(path, index.Options{Verify: true})
}
