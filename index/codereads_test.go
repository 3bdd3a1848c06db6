package index_test

import (
	"testing"

	"github.com/vlc-embed/vlc/index/devicetest"
)

// CodeReads follows the probes: over every list a query reads every
// entry's code (52 bytes at dimension 96 and 4 bits: 48 packed, 4 of
// scalars); over one list, fewer.
func TestCodeReads(t *testing.T) {
	c := devicetest.DefaultCases[0]
	b := devicetest.Build(t, t.TempDir(), c)
	all, err := b.Index.CodeReads(b.Queries, c.Lists+1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(c.N * 52); all != want {
		t.Errorf("every list: %g bytes a query, want %g", all, want)
	}
	one, err := b.Index.CodeReads(b.Queries, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if one <= 0 || one >= all/4 {
		t.Errorf("one list of %d: %g bytes a query (all: %g)", c.Lists+1, one, all)
	}
}
