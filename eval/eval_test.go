package eval_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/eval"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

const deep = "../testdata/deep2k/"

// Recall counts the true ids among the first k hits, per query.
func TestRecall(t *testing.T) {
	hits := [][]index.Hit{{{ID: 3}, {ID: 1}, {ID: 9}}, {{ID: 5}, {ID: 6}}}
	gt := [][]int{{1, 3, 4}, {7, 5, 6}}
	for _, c := range []struct {
		k    int
		want float64
	}{{1, 0}, {2, 0.75}, {3, 2.0 / 3}} {
		if got := eval.Recall(hits, gt, c.k); got != c.want {
			t.Errorf("recall@%d %v, want %v", c.k, got, c.want)
		}
	}
}

func TestNProbes(t *testing.T) {
	for _, c := range []struct {
		lists  int
		values []int
		want   []int
	}{
		{45, nil, []int{1, 2, 4, 8, 16, 32, 45}},
		{1, nil, []int{1}},
		{64, nil, []int{1, 2, 4, 8, 16, 32, 64}},
		{45, []int{8, 1, 1000, 8}, []int{1, 8, 45}},
	} {
		if got := eval.NProbes(c.lists, c.values); !slices.Equal(got, c.want) {
			t.Errorf("NProbes(%d, %v) = %v, want %v", c.lists, c.values, got, c.want)
		}
	}
}

// ReadGroundTruth names the file and the row that cannot serve.
func TestReadGroundTruth(t *testing.T) {
	gt, err := eval.ReadGroundTruth(deep+"groundtruth.ivecs", 200, 10)
	if err != nil || len(gt) != 200 || gt[0][0] != 1636 {
		t.Fatalf("deep2k: %d rows, first %v, %v", len(gt), gt[0][:3], err)
	}
	short := filepath.Join(t.TempDir(), "short.ivecs")
	if err := vecfile.WriteIvecs(short, [][]int32{{1, 2, 3}, {4, 5}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		queries, k int
		want       string
	}{{3, 1, "2 rows for 3 queries"}, {2, 3, "row 1 has 2 ids"}} {
		if _, err := eval.ReadGroundTruth(short, c.queries, c.k); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d queries, k %d: %v, want %q", c.queries, c.k, err, c.want)
		}
	}
}

// Measure on deep2k: recall as exact search finds it when every list is
// scanned, the index's own size, and repeated passes for MinTime.
func TestMeasure(t *testing.T) {
	out := filepath.Join(t.TempDir(), "deep2k.vlc")
	if _, err := vlc.Compress(context.Background(), deep+"base.f16", out, vlc.Options{Dim: 96, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(out, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	q, err := vecfile.Open(deep+"query.fvecs", vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	gt, err := eval.ReadGroundTruth(deep+"groundtruth.ivecs", q.Len(), 10)
	if err != nil {
		t.Fatal(err)
	}
	res, err := eval.Measure(context.Background(), ix, q, gt, eval.Options{Search: index.SearchOptions{K: 1, NProbe: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(out)
	t.Logf("%+v", res)
	if res.Recall10 < 0.99 || res.Recall1 < 0.99 || res.NProbe != 45 || res.K != 1 || res.Queries != q.Len() {
		t.Errorf("every list scanned: %+v; want recall >= 0.99 at nprobe 45, k 1, one pass", res)
	}
	if res.BytesPerVector != float64(st.Size())/2000 || res.SizeRatio != float64(st.Size())/(2000*96*2) {
		t.Errorf("size: %v bytes/vector, ratio %v; the file has %d bytes", res.BytesPerVector, res.SizeRatio, st.Size())
	}
	res, err = eval.Measure(context.Background(), ix, q, gt, eval.Options{Search: index.SearchOptions{K: 10, NProbe: 1}, MinTime: 20e6})
	if err != nil {
		t.Fatal(err)
	}
	if res.Queries%q.Len() != 0 || res.Elapsed < 20e6 || res.Recall10 > 0.7 {
		t.Errorf("nprobe 1 for 20 ms: %+v", res)
	}
	if res.LatencyP50 != 0 || res.LatencyP99 != 0 {
		t.Errorf("latency measured without Options.Latency: %+v", res)
	}
	res, err = eval.Measure(context.Background(), ix, q, gt, eval.Options{Search: index.SearchOptions{K: 10, NProbe: 8}, Latency: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.LatencyP50 <= 0 || res.LatencyP99 < res.LatencyP50 || res.LatencyP99 > 1e3*res.Elapsed.Seconds() {
		t.Errorf("latency p50 %v ms, p99 %v ms (the batch pass took %v)", res.LatencyP50, res.LatencyP99, res.Elapsed)
	}
	if _, err := eval.Measure(context.Background(), ix, q, gt[:10], eval.Options{}); err == nil {
		t.Error("ground truth for 10 of 200 queries: no error")
	}
}

// smallIndex compresses n random rows of dimension 8 and opens the index;
// it returns the index and the vectors' file.
func smallIndex(t *testing.T, n int, seed uint64) (*index.Index, string) {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.fvecs"), filepath.Join(dir, "out.vlc")
	rng := rand.New(rand.NewPCG(seed, 1))
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, 8)
		for j := range rows[i] {
			rows[i][j] = float32(rng.NormFloat64())
		}
	}
	if err := vecfile.WriteFvecs(in, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := vlc.Compress(context.Background(), in, out, vlc.Options{Anchors: 1}); err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(out, index.Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix, in
}

// Inputs that cannot measure an index are refused with a sentinel and
// the row, never measured as a meaningless recall: ground truth with too
// few rows or ids, ids negative, beyond the index, read from a float
// file, or repeated; base vectors of another size than the index.
func TestEvalBadInput(t *testing.T) {
	ix, in := smallIndex(t, 500, 1)
	q := mustOpen(t, in)
	good := index.Exact(q, q, 10, index.L2)
	row := func(i int, r []int) [][]int {
		gt := slices.Clone(good)
		gt[i] = r
		return gt
	}
	floats := make([]int, 10) // the bits of float32 values read as ids
	for j := range floats {
		floats[j] = int(int32(math.Float32bits(float32(j) + 0.5)))
	}
	for _, c := range []struct {
		name   string
		gt     [][]int
		detail string
	}{
		{"too few rows", good[:100], "100 rows for 500 queries"},
		{"too few ids", row(3, []int{1, 2, 3}), "row 3 has 3 ids"},
		{"negative id", row(7, []int{0, 1, 2, 3, 4, 5, -1, 7, 8, 9}), "row 7, id 6 is -1"},
		{"id n", row(8, []int{500, 1, 2, 3, 4, 5, 6, 7, 8, 9}), "row 8, id 0 is 500"},
		{"float file", row(0, floats), "row 0, id 0 is 1056964608"},
		{"repeated id", row(9, []int{1, 2, 3, 1, 5, 6, 7, 8, 9, 10}), "row 9: id 1 repeated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := eval.Measure(context.Background(), ix, q, c.gt, eval.Options{Search: index.SearchOptions{K: 10, NProbe: 1}})
			if !errors.Is(err, eval.ErrGroundTruth) || !strings.Contains(err.Error(), c.detail) {
				t.Errorf("Measure: %v, want ErrGroundTruth with %q", err, c.detail)
			}
		})
	}
	_, bigIn := smallIndex(t, 1000, 2)
	if _, err := eval.Exact(ix, mustOpen(t, bigIn), q, 10); !errors.Is(err, eval.ErrBase) || !strings.Contains(err.Error(), "1000 base vectors, the index holds 500") {
		t.Errorf("Exact with 1000 base rows for 500: %v, want ErrBase", err)
	}
}

// On an index of n < 10 vectors, recall@10 counts right answers out of
// the n there are: a search that returns all n scores 1, not n/10.
func TestRecallFewerThanK(t *testing.T) {
	for _, n := range []int{1, 3, 9} {
		ix, in := smallIndex(t, n, 3)
		q := mustOpen(t, in)
		gt, err := eval.Exact(ix, q, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		res, err := eval.Measure(context.Background(), ix, q, gt, eval.Options{Search: index.SearchOptions{K: 10, NProbe: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Recall10 != 1 {
			t.Errorf("n = %d: recall@10 %v, want 1 (every vector returned)", n, res.Recall10)
		}
	}
	if got := eval.Recall([][]index.Hit{{{ID: 0}, {ID: 2}}}, [][]int{{2, 1, 0}}, 10); got != 2.0/3 {
		t.Errorf("2 of 3 true ids found: recall@10 %v, want 2/3", got)
	}
}

func mustOpen(t *testing.T, path string) *vecfile.Matrix {
	t.Helper()
	m, err := vecfile.Open(path, vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
