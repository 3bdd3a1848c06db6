package vlcbeam

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// The tests run the pipeline on Prism, Beam's local runner, in this
// process (loopback: its SDK workers are goroutines here, so the test
// hook below reaches them), on the 10,000 Deep1B rows of testdata.
const (
	deepBase  = "../testdata/deep10k/base.f16"
	deepQuery = "../testdata/deep10k/query.fvecs"
	deepDim   = 96
)

func TestMain(m *testing.M) {
	beam.Init()
	os.Exit(m.Run())
}

// run builds cfg on Prism and returns the pipeline's error.
func run(t *testing.T, cfg Config) error {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	if _, err := Build(s, cfg); err != nil {
		t.Fatalf("Build: %v", err)
	}
	start := time.Now()
	_, err := prism.Execute(context.Background(), p)
	t.Logf("Prism: %d shards, %v (err %v)", cfg.Shards, time.Since(start).Round(time.Millisecond), err)
	return err
}

// model trains, once for the package's tests, a model on deep10k by the
// single-process path (a sample of 4,000 rows), and returns its path.
var model = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "vlcbeam-model")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "model.vlc")
	_, err = vlc.Compress(context.Background(), deepBase, path, vlc.Options{Dim: deepDim, Seed: 1, TrainSample: 4000})
	return path, err
})

// modelFile writes the model of the test model's index to a model
// file (vlc model), once, and returns its path.
var modelFile = sync.OnceValues(func() (string, error) {
	ix, err := model()
	if err != nil {
		return "", err
	}
	m, err := index.ReadModel(ix)
	if err != nil {
		return "", err
	}
	path := filepath.Join(filepath.Dir(ix), "model.model")
	return path, index.WriteModel(path, m)
})

func testModel(t *testing.T) string {
	t.Helper()
	path, err := model()
	if err != nil {
		t.Fatalf("training the test model: %v", err)
	}
	return path
}

// reference is the single-process build: every row of deep10k encoded
// in one vlc.Compress under modelPath.
func reference(t *testing.T, modelPath string) string {
	t.Helper()
	return referenceOf(t, deepBase, deepDim, modelPath)
}

func referenceOf(t *testing.T, input string, dim int, modelPath string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reference.vlc")
	if _, err := vlc.Compress(context.Background(), input, path, vlc.Options{Dim: dim, AnchorsFrom: modelPath}); err != nil {
		t.Fatalf("single-process build: %v", err)
	}
	return path
}

// sameFile fails t unless the files at got and want hold the same bytes.
func sameFile(t *testing.T, got, want string) {
	t.Helper()
	a, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("%s (%d bytes) differs from %s (%d bytes)", got, len(a), want, len(b))
	}
}

// sameIndex fails t unless got and want are the same bytes; where they
// differ it says whether searches would tell (every query's hits).
func sameIndex(t *testing.T, got, want string) {
	t.Helper()
	a, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		return
	}
	t.Errorf("%s (%d bytes) differs from the single-process build (%d bytes)", got, len(a), len(b))
	if d := searchDiff(t, got, want); d != "" {
		t.Errorf("and searches differ: %s", d)
	}
}

// searchDiff compares the hits (ids and distances) of every deep10k
// query on two indexes, at nprobe 16, and describes the first
// difference.
func searchDiff(t *testing.T, a, b string) string {
	t.Helper()
	q, err := vecfile.Open(deepQuery, vecfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var ix [2]*vlc.Store
	for i, p := range []string{a, b} {
		if ix[i], err = vlc.Open(p); err != nil {
			t.Fatal(err)
		}
		defer ix[i].Close()
	}
	opt := vlc.SearchOptions{K: 10, NProbe: 16}
	for i := range q.Len() {
		x := q.Row(i, nil)
		ha, err := ix[0].Search(context.Background(), x, opt)
		if err != nil {
			t.Fatal(err)
		}
		hb, err := ix[1].Search(context.Background(), x, opt)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ha) != fmt.Sprint(hb) {
			return fmt.Sprintf("query %d: %v, want %v", i, ha, hb)
		}
	}
	return ""
}

// With a model given, the pipeline's index is the single-process build's,
// byte for byte, whatever the number of shards (8 of 1,250 rows; 3 of
// 3,333 and 3,334; one) and whether the model is an index or a model
// file, and the work folder is removed.
func TestBuildWithModel(t *testing.T) {
	m := testModel(t)
	file, err := modelFile()
	if err != nil {
		t.Fatal(err)
	}
	want := reference(t, m)
	for _, c := range []struct {
		name   string
		model  string
		shards int
	}{{"shards=8", m, 8}, {"shards=3", m, 3}, {"shards=1", m, 1}, {"model-file/shards=3", file, 3}} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "deep10k.vlc")
			cfg := Config{Input: deepBase, Dim: deepDim, Output: out, Shards: c.shards, Model: c.model}
			if err := run(t, cfg); err != nil {
				t.Fatal(err)
			}
			sameIndex(t, out, want)
			if _, err := os.Stat(out + ".parts"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("work folder left behind: %v", err)
			}
			if _, err := os.Stat(out + ".model"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a model was written though one was given: %v", err)
			}
		})
	}
}

// A float32 .npy input (deep10k's values, which float16 holds exactly):
// no -dim, the rows read as float32 and encoded as the single-process
// build encodes them.
func TestBuildNpy(t *testing.T) {
	m := testModel(t)
	in, err := vecfile.Open(deepBase, vecfile.Options{Dim: deepDim})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]float32, in.Len())
	for i := range rows {
		rows[i] = in.Row(i, nil)
	}
	in.Close()
	dir := t.TempDir()
	npy := filepath.Join(dir, "deep10k.npy")
	if err := vecfile.WriteNpy(npy, rows, "<f4"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "deep10k.vlc")
	if err := run(t, Config{Input: npy, Output: out, Shards: 8, Model: m}); err != nil {
		t.Fatal(err)
	}
	sameIndex(t, out, referenceOf(t, npy, 0, m))
}

// Trained in the pipeline, on 3,000 evenly spaced rows gathered from 8
// shards: the model is what vlc.Compress trains on those rows written in
// order by this test, and the index what the single-process build
// encodes under that model.
func TestBuildTrains(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "deep10k.vlc")
	cfg := Config{Input: deepBase, Dim: deepDim, Output: out, Shards: 8, SampleRows: 3000, Bits: 4, Code: "rotated", Seed: 7}
	if err := run(t, cfg); err != nil {
		t.Fatal(err)
	}
	modelPath := out + ".model"

	// The sample, by hand: rows floor(j*n/s).
	in, err := vecfile.Open(deepBase, vecfile.Options{Dim: deepDim})
	if err != nil {
		t.Fatal(err)
	}
	n := in.Len()
	var sample []byte
	for j := range cfg.SampleRows {
		for _, v := range in.RowF16(j*n/cfg.SampleRows, nil) {
			sample = binary.LittleEndian.AppendUint16(sample, v)
		}
	}
	in.Close()
	samplePath := filepath.Join(dir, "sample.f16")
	if err := os.WriteFile(samplePath, sample, 0o644); err != nil {
		t.Fatal(err)
	}
	wantModel := filepath.Join(dir, "want-model.vlc")
	sum, err := vlc.Compress(context.Background(), samplePath, wantModel, vlc.Options{Dim: deepDim, Anchors: 100, Bits: 4, Code: "rotated", Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("model: %d rows, %d anchors, %s code, %d iterations", sum.N, sum.Anchors, sum.Code, sum.Iterations)
	m, err := index.ReadModel(wantModel)
	if err != nil {
		t.Fatal(err)
	}
	wantModelFile := filepath.Join(dir, "want.model")
	if err := index.WriteModel(wantModelFile, m); err != nil {
		t.Fatal(err)
	}
	sameFile(t, modelPath, wantModelFile)
	sameIndex(t, out, reference(t, modelPath))
	sameIndex(t, out, reference(t, wantModel))
}

// encodeAttempts counts the calls of testHookEncode per shard, before
// the write.
type encodeAttempts struct {
	mu sync.Mutex
	n  map[int]int
}

func (a *encodeAttempts) add(shard int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[int]int{}
	}
	a.n[shard]++
	return a.n[shard]
}

var errInjected = errors.New("injected failure")

// One shard's encode fails on its first attempt, before or after it
// writes its segment. Prism does not retry a failed bundle (its README:
// "Prism doesn't retry failed bundles, and simply fails the job
// instead"), so the run fails after that one attempt, and the output
// already there is left as it was. Run again, the pipeline replaces what
// the failed run left and writes the single-process build's bytes: every
// stage writes whole files under fixed names, so re-running (or, on a
// runner that retries, retrying) a stage is safe.
func TestFailedShardRerun(t *testing.T) {
	m := testModel(t)
	want := reference(t, m)
	for _, written := range []bool{false, true} {
		t.Run(fmt.Sprintf("after-write=%v", written), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "deep10k.vlc")
			old := []byte("an index from an earlier build")
			if err := os.WriteFile(out, old, 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := Config{Input: deepBase, Dim: deepDim, Output: out, Shards: 8, Model: m}
			const failing = 3
			var attempts encodeAttempts
			testHookEncode = func(sh Shard, w bool) error {
				if w != written || sh.Index != failing {
					return nil
				}
				if attempts.add(sh.Index) == 1 {
					return fmt.Errorf("shard %d: %w", sh.Index, errInjected)
				}
				return nil
			}
			defer func() { testHookEncode = nil }()

			err := run(t, cfg)
			if err == nil {
				t.Fatal("the run with a failing shard succeeded")
			}
			t.Logf("failed run: %.300v", err)
			if got := attempts.n[failing]; got != 1 {
				t.Errorf("Prism attempted the failing shard %d times; this test documents that it does not retry", got)
			}
			if b, err := os.ReadFile(out); err != nil || !bytes.Equal(b, old) {
				t.Errorf("the failed run changed the output: %q, %v", b, err)
			}

			if err := run(t, cfg); err != nil {
				t.Fatalf("re-run: %v", err)
			}
			if got := attempts.n[failing]; got != 2 {
				t.Errorf("shard %d: %d attempts in all, want 2", failing, got)
			}
			sameIndex(t, out, want)
			if _, err := os.Stat(out + ".parts"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("work folder left behind: %v", err)
			}
		})
	}
}

// What a runner that retries, or runs a straggler twice, does to a
// stage, done here by calling the DoFns directly (Prism never repeats
// one): two attempts of one shard's encode at once, then the commit
// twice and the cleanup twice. Each repeat writes the same bytes or
// finds its work done.
func TestStagesRepeat(t *testing.T) {
	m := testModel(t)
	want := reference(t, m)
	cfg, err := Config{Input: deepBase, Dim: deepDim, Output: filepath.Join(t.TempDir(), "deep10k.vlc"), Shards: 4, Model: m}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var segs []Segment
	for i, r := range shardRanges(10000, cfg.Shards) {
		sh := Shard{Index: i, Count: cfg.Shards, Lo: r[0], Hi: r[1], N: 10000, Dim: deepDim}
		var got [2]Segment
		var errs [2]error
		var wg sync.WaitGroup
		for a := range 2 {
			wg.Go(func() { got[a], errs[a] = (&encodeFn{Cfg: cfg}).ProcessElement(ctx, sh, m) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || got[0] != got[1] {
			t.Fatalf("shard %d encoded twice at once: %v, %v; %+v, %+v", i, errs[0], errs[1], got[0], got[1])
		}
		segs = append(segs, got[0], got[0]) // delivered twice, too
	}
	iter := func() func(*Segment) bool {
		i := 0
		return func(s *Segment) bool {
			if i == len(segs) {
				return false
			}
			*s, i = segs[i], i+1
			return true
		}
	}
	var r Result
	for attempt := range 2 {
		r, err = (&commitFn{Cfg: cfg}).ProcessElement(ctx, 0, iter())
		if err != nil {
			t.Fatalf("commit, attempt %d: %v", attempt+1, err)
		}
		if r.Rows != 10000 || len(r.Segments) != cfg.Shards {
			t.Fatalf("commit, attempt %d: %+v", attempt+1, r)
		}
		sameIndex(t, cfg.Output, want)
	}
	for attempt := range 2 {
		if _, err := (&cleanupFn{Cfg: cfg}).ProcessElement(ctx, r); err != nil {
			t.Fatalf("cleanup, attempt %d: %v", attempt+1, err)
		}
	}
	if _, err := os.Stat(cfg.WorkDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("work folder left behind: %v", err)
	}
}
