package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vlc-embed/vlc"
)

func BenchmarkSingleAdd(b *testing.B) {
	ctx := context.Background()
	docs := deepDocs(b, "../testdata/deep10k/base.f16", 0, 10000)
	ix, err := vlc.Create(ctx, filepath.Join(b.TempDir(), "c.vlc"), vlc.Schema{Dim: 96})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ix.Add(ctx, []vlc.Document{docs[i%10000]}); err != nil {
			b.Fatal(err)
		}
	}
}
