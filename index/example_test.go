package index_test

import (
	"fmt"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// Open an index without reading it all (header, table and sizes checked;
// Verify reads the rest later), describe it, and search it with an exact
// re-rank against the vectors it was built from.
func ExampleOpen() {
	ix, err := index.Open("../testdata/golden/v1.vlc", index.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	m := ix.Meta()
	fmt.Printf("%d vectors of dimension %d in %d lists, %s, metric %s\n", ix.Len(), ix.Dim(), m.M, m.CodeSpec(), m.Metric)
	if err := ix.Verify(); err != nil {
		fmt.Println(err)
		return
	}

	vectors, err := vecfile.Open("../testdata/golden/small.f16", vecfile.Options{Dim: 16})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer vectors.Close()
	hits, err := ix.Search(vectors.Row(7, nil), index.SearchOptions{K: 2, NProbe: 8, Rerank: vectors})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("nearest to row 7: row %d at distance %g\n", hits[0].ID, hits[0].Distance)
	// Output:
	// 256 vectors of dimension 16 in 8 lists, rotated, 8 bits per dimension, metric l2
	// nearest to row 7: row 7 at distance 0
}
