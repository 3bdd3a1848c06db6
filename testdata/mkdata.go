//go:build ignore

// mkdata writes testdata/deep2k (and, given the count 10000,
// testdata/deep10k) from a copy of deep10k (the first 10,000
// rows of Deep1B, 96 dimensions, as base.fvecs, with the Deep1B queries in
// query.fvecs): the first 2,000 (or N) base vectors as float16 (base.f16), the
// first 200 queries (query.fvecs), and their exact 100 nearest neighbours
// by squared L2 over the float16 base, computed in float64
// (groundtruth.ivecs).
//
//	go run testdata/mkdata.go DEEP10K_DIR testdata/deep2k
//	go run testdata/mkdata.go DEEP10K_DIR testdata/deep10k 10000
package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/vecfile"
)

const (
	nQuery = 200
	k      = 100
)

func main() {
	if len(os.Args) != 3 && len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: go run testdata/mkdata.go SRC_DIR OUT_DIR [N]")
		os.Exit(1)
	}
	src, out := os.Args[1], os.Args[2]
	nBase := 2000
	if len(os.Args) == 4 {
		n, err := strconv.Atoi(os.Args[3])
		must(err)
		nBase = n
	}
	base := read(filepath.Join(src, "base.fvecs"), nBase)
	for _, r := range base { // what the .f16 file will hold
		for j, v := range r {
			r[j] = f16.ToFloat32(f16.FromFloat32(v))
		}
	}
	query := read(filepath.Join(src, "query.fvecs"), nQuery)
	gt := make([][]int32, len(query))
	for i, q := range query {
		type cand struct {
			id   int32
			dist float64
		}
		c := make([]cand, len(base))
		for b, x := range base {
			var s float64
			for j := range q {
				d := float64(q[j]) - float64(x[j])
				s += d * d
			}
			c[b] = cand{int32(b), s}
		}
		slices.SortFunc(c, func(a, b cand) int { return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.id, b.id)) })
		for _, x := range c[:k] {
			gt[i] = append(gt[i], x.id)
		}
	}
	must(vecfile.WriteF16(filepath.Join(out, "base.f16"), base))
	must(vecfile.WriteFvecs(filepath.Join(out, "query.fvecs"), query))
	must(vecfile.WriteIvecs(filepath.Join(out, "groundtruth.ivecs"), gt))
}

func read(path string, n int) [][]float32 {
	m, err := vecfile.Open(path, vecfile.Options{})
	must(err)
	defer m.Close()
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = m.Row(i, nil)
	}
	return rows
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
