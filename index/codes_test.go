package index_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"
)

// Codes hands over every row once, with its list and the code that
// decodes, under that list's anchor and parameters, to what Vector gives.
func TestCodes(t *testing.T) {
	for _, kind := range []quant.Kind{quant.KindRotated, quant.KindPQ} {
		path, _ := writeIndex(t, kind, 4, index.L2, 0)
		ix, err := index.Open(path, index.Options{})
		if err != nil {
			t.Fatal(err)
		}
		code, err := quant.New(ix.Meta().CodeSpec())
		if err != nil {
			t.Fatal(err)
		}
		if g := ix.Global(); g != nil {
			code.(quant.Trainer).SetGlobal(g)
		}
		d, pb := ix.Dim(), code.ParamBytes()
		anchors, params := ix.Anchors(), ix.Params()
		seen := make([]bool, ix.Len())
		got, want := make([]float32, d), make([]float32, d)
		err = ix.Codes(func(row, list int, c []byte) error {
			if seen[row] {
				t.Fatalf("%v: row %d handed over twice", kind, row)
			}
			seen[row] = true
			code.Decode(got, params[list*pb:(list+1)*pb], c)
			if _, err := ix.Vector(row, want); err != nil {
				return err
			}
			for j := range got {
				if got[j]+anchors[list*d+j] != want[j] {
					t.Fatalf("%v: row %d (list %d): decoded %v plus its anchor differs from Vector's %v", kind, row, list, got, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for row, ok := range seen {
			if !ok {
				t.Fatalf("%v: row %d never handed over", kind, row)
			}
		}
		// ListCodes hands over each list's rows and codes as Codes does,
		// in the same order.
		type entry struct {
			row, list int
			code      string
		}
		var all, byList []entry
		if err := ix.Codes(func(row, list int, c []byte) error {
			all = append(all, entry{row, list, string(c)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for a := range ix.Lists() {
			if err := ix.ListCodes(a, func(row int, c []byte) error {
				byList = append(byList, entry{row, a, string(c)})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(all, byList) {
			t.Errorf("%v: ListCodes list by list differs from Codes", kind)
		}
		for _, a := range []int{-1, ix.Lists()} {
			if err := ix.ListCodes(a, func(int, []byte) error { return nil }); !errors.Is(err, index.ErrArgument) {
				t.Errorf("%v: ListCodes(%d): %v, want ErrArgument", kind, a, err)
			}
		}
		ix.Close()
		if err := ix.Codes(func(int, int, []byte) error { return nil }); !errors.Is(err, index.ErrClosed) {
			t.Errorf("Codes on a closed index: %v, want ErrClosed", err)
		}
		if err := ix.ListCodes(0, func(int, []byte) error { return nil }); !errors.Is(err, index.ErrClosed) {
			t.Errorf("ListCodes on a closed index: %v, want ErrClosed", err)
		}
	}
}
