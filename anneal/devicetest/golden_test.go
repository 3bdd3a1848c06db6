package devicetest

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the goldens in testdata from the host's reference code")

// The host's reference code still makes the goldens that GPU kernels are
// held to: k-means++ (kmeans.PlusPlusRounds, kmeans.BlockSums, vec.L2) and
// the rotated code's encoding (quant.Rotated.EncodeList). A change here
// must be followed by the kernels, or be undone; after a deliberate one,
// run `go test -run TestGoldens -update` in this folder, and the CUDA
// tests on a GPU.
func TestGoldens(t *testing.T) {
	testenv.SkipLong(t)
	var pp, enc []string
	for _, c := range ppCases {
		pp = append(pp, hostPlusPlus(c))
	}
	for _, c := range encCases {
		enc = append(enc, hostEncode(c)...)
	}
	for _, g := range []struct {
		name, head string
		lines      []string
	}{
		{"plusplus.golden", "# k-means++ picks, and hashes of the distances and block sums of every round (kmeans.PlusPlusRounds).", pp},
		{"rotated.golden", "# The rotated code's bytes (codes, then list parameters) as quant.Rotated.EncodeList writes them.", enc},
	} {
		want := g.head + "\n" + strings.Join(g.lines, "\n") + "\n"
		path := "testdata/" + g.name
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
			for i := range max(len(gl), len(wl)) {
				if at(gl, i) != at(wl, i) {
					t.Errorf("%s line %d:\n got  %s\n host %s", path, i+1, at(gl, i), at(wl, i))
					break
				}
			}
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(missing)"
}
