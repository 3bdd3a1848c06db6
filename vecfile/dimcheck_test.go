package vecfile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// divisors returns the divisors of n in [lo, hi].
func divisors(n, lo, hi int) []int {
	var out []int
	for p := max(lo, 1); p <= min(n, hi); p++ {
		if n%p == 0 {
			out = append(out, p)
		}
	}
	return out
}

// openDim opens path at dim and reports whether the dimension was
// refused as likely wrong; any other error fails the test.
func openDim(t *testing.T, path string, dim int) (refused bool, err error) {
	t.Helper()
	m, err := Open(path, Options{Dim: dim})
	if err == nil {
		m.Close()
		return false, nil
	}
	if !errors.Is(err, ErrLikelyDim) {
		t.Fatalf("Open(%s, dim %d): %v, want nil or ErrLikelyDim", path, dim, err)
	}
	if !errors.Is(err, ErrDim) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("Open(%s, dim %d): %v: does not match ErrDim or start with the path", path, dim, err)
	}
	return true, err
}

// TestLikelyDimDeep: the 2,000 Deep1B rows of testdata (96 dimensions)
// open at 96 and are refused at 48, 192 and 32, the error naming the
// file, the dimension given and 96.
func TestLikelyDimDeep(t *testing.T) {
	path := filepath.Join(deepDir, "base.f16")
	if refused, err := openDim(t, path, 96); refused {
		t.Fatalf("dim 96 refused: %v", err)
	}
	for _, c := range []struct {
		dim  int
		want []string
	}{
		{48, []string{"dimension 48", "mix values of different coordinates", "repeat every 96 values", "likely 96, not 48"}},
		{32, []string{"dimension 32", "mix values", "likely 96, not 32"}},
		{192, []string{"dimension 192", "each row holds 2 vectors of 96", "likely 96, not 192"}},
		{384, []string{"dimension 384", "each row holds 4 vectors of 96", "likely 96, not 384"}},
	} {
		refused, err := openDim(t, path, c.dim)
		if !refused {
			t.Errorf("dim %d accepted", c.dim)
			continue
		}
		t.Logf("dim %d: %v", c.dim, err)
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("dim %d: %q lacks %q", c.dim, err, w)
			}
		}
	}
	// Every other divisor of the file's 192,000 values that leaves at
	// least 32 rows: those whose columns mix the most are refused.
	var accepted []int
	for _, d := range divisors(2000*96, 2, 2000*96/32) {
		if d == 96 {
			continue
		}
		if refused, _ := openDim(t, path, d); !refused {
			accepted = append(accepted, d)
		}
	}
	t.Logf("wrong dimensions accepted: %v", accepted)
}

// TestLikelyDimNoStructure: values without per-coordinate structure
// (independent normal values) and clustered values at their own
// dimension open at every dimension tried.
func TestLikelyDimNoStructure(t *testing.T) {
	dir := t.TempDir()
	rnd := filepath.Join(dir, "random.f16")
	if err := WriteF16(rnd, randRows(3000, 64, 1)); err != nil {
		t.Fatal(err)
	}
	for _, d := range divisors(3000*64, 2, 3000*64/32) {
		if refused, err := openDim(t, rnd, d); refused {
			t.Errorf("random values refused at dim %d: %v", d, err)
		}
	}
	// 20 clusters: each coordinate's mean differs (a finite number of
	// random centres), so the values have structure at period 48.
	r := rand.New(rand.NewPCG(2, 2))
	centres := randRows(20, 48, 3)
	rows := make([][]float32, 4000)
	for i := range rows {
		c := centres[r.IntN(len(centres))]
		rows[i] = make([]float32, 48)
		for j := range rows[i] {
			rows[i][j] = c[j] + 0.3*float32(r.NormFloat64())
		}
	}
	clustered := filepath.Join(dir, "clustered.f16")
	if err := WriteF16(clustered, rows); err != nil {
		t.Fatal(err)
	}
	if refused, err := openDim(t, clustered, 48); refused {
		t.Errorf("clustered values refused at their dim 48: %v", err)
	}
	if refused, _ := openDim(t, clustered, 96); !refused {
		t.Errorf("clustered values accepted at dim 96, two rows of 48")
	}
}

// TestLikelyDimRealData: each .fvecs file of the folders below
// $VLC_TEST_DATA (a list of folders, such as TEXMEX data sets in their
// own subfolders: base.fvecs, query.fvecs), written as .f16, opens at its
// dimension, and so do its first 32, 50, 100, 500 and 2,000 rows. Every
// other divisor of its size is tried and the ones
// accepted logged; half and twice its dimension must be refused.
func TestLikelyDimRealData(t *testing.T) {
	roots := filepath.SplitList(os.Getenv("VLC_TEST_DATA"))
	if len(roots) == 0 {
		t.Skip("VLC_TEST_DATA is not set (folders of .fvecs data sets)")
	}
	var files []string
	for _, root := range roots {
		for _, pat := range []string{"*.fvecs", "*/*.fvecs"} {
			m, _ := filepath.Glob(filepath.Join(root, pat))
			files = append(files, m...)
		}
	}
	if len(files) == 0 {
		t.Fatalf("no .fvecs files under %v", roots)
	}
	for _, f := range files {
		src, err := Open(f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		n, dim := min(src.Len(), 20000), src.Dim()
		rows := make([][]float32, n)
		for i := range rows {
			rows[i] = src.Row(i, nil)
		}
		src.Close()
		path := filepath.Join(t.TempDir(), "v.f16")
		if err := WriteF16(path, rows); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s (%d x %d)", f, n, dim)
		if refused, err := openDim(t, path, dim); refused {
			t.Errorf("%s: refused at its dimension: %v", name, err)
		}
		// The first rows alone, a noisier sample, at the right dimension.
		for _, k := range []int{32, 50, 100, 500, 2000} {
			part := filepath.Join(t.TempDir(), "part.f16")
			if err := WriteF16(part, rows[:min(k, n)]); err != nil {
				t.Fatal(err)
			}
			if refused, err := openDim(t, part, dim); refused {
				t.Errorf("%s: its first %d rows refused at their dimension: %v", name, k, err)
			}
		}
		var accepted, refusedDims []int
		for _, d := range divisors(n*dim, 2, min(n*dim/32, 8*dim)) {
			if d == dim {
				continue
			}
			if refused, _ := openDim(t, path, d); refused {
				refusedDims = append(refusedDims, d)
			} else {
				accepted = append(accepted, d)
			}
			if (d == dim/2 || d == 2*dim) && !slices.Contains(refusedDims, d) {
				t.Errorf("%s: dimension %d accepted", name, d)
			}
		}
		t.Logf("%s: %d wrong dimensions refused, accepted: %v", name, len(refusedDims), accepted)
	}
}

// BenchmarkOpenF16 opens a raw .f16 file, the dimension check included
// (it reads a sample of at most 2^16 values at these sizes).
func BenchmarkOpenF16(b *testing.B) {
	for _, c := range []struct {
		name string
		path string
		dim  int
	}{
		{"deep2k/n=2000/d=96", filepath.Join(deepDir, "base.f16"), 96},
		{"deep10k/n=10000/d=96", "../testdata/deep10k/base.f16", 96},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				m, err := Open(c.path, Options{Dim: c.dim})
				if err != nil {
					b.Fatal(err)
				}
				m.Close()
			}
		})
	}
}
