package index_test

import (
	"testing"

	"github.com/vlc-embed/vlc/index/devicetest"
)

// CodeReads follows the probes: over every list a query, and a batch,
// reads every entry's code (52 bytes at dimension 96 and 4 bits: 48
// packed, 4 of scalars); over one list, a query reads fewer and a batch
// the lists its queries probe between them.
func TestCodeReads(t *testing.T) {
	c := devicetest.DefaultCases[0]
	b := devicetest.Build(t, t.TempDir(), c)
	all, err := b.Index.CodeReads(b.Queries, c.Lists+1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(c.N * 52); all.PerQuery != want || all.PerBatch != want || all.Followed != c.Queries {
		t.Errorf("every list: %+v, want %g bytes a query and a batch of %d", all, want, c.Queries)
	}
	one, err := b.Index.CodeReads(b.Queries, 1, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	if one.PerQuery <= 0 || one.PerQuery >= all.PerQuery/4 || one.Followed != 1 {
		t.Errorf("one list of %d: %+v (all: %+v)", c.Lists+1, one, all)
	}
	// A batch of them reads more than one query and at most every list.
	few, err := b.Index.CodeReads(b.Queries, 1, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if few.PerBatch <= few.PerQuery || few.PerBatch > all.PerQuery || few.Followed != 50 {
		t.Errorf("a batch of 50 over one list each: %+v (every list: %g bytes)", few, all.PerQuery)
	}
}
