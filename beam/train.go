package vlcbeam

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// SampleChunk is sampled rows of one shard: sample indices [First,
// First+Rows) of Total, each a row of dimension Dim as little-endian
// float16 (what training reads), one after another. N is the input's rows.
type SampleChunk struct {
	First, Rows int
	Total, N    int
	Dim         int
	F16         []byte
}

// maxChunkBytes bounds one SampleChunk: an element a runner must hold
// and move in one piece.
const maxChunkBytes = 16 << 20

// sampleFn emits the sampled rows of a shard, read as float16 (float32
// input rounded to nearest even, as vlc.Compress does before training).
type sampleFn struct {
	Cfg Config
}

func (f *sampleFn) ProcessElement(ctx context.Context, sh Shard, emit func(SampleChunk)) error {
	s := f.Cfg.sampleRows(sh.N)
	jlo, jhi := sampleRange(sh.Lo, sh.Hi, sh.N, s)
	if jlo == jhi {
		return nil
	}
	m, err := openShard(f.Cfg, sh)
	if err != nil {
		return err
	}
	defer m.Close()
	per := max(1, maxChunkBytes/(2*sh.Dim))
	row := make([]uint16, sh.Dim)
	for first := jlo; first < jhi; first += per {
		last := min(jhi, first+per)
		buf := make([]byte, 0, (last-first)*sh.Dim*2)
		for j := first; j < last; j++ {
			row = m.RowF16(sampleRow(j, sh.N, s), row)
			for _, v := range row {
				buf = binary.LittleEndian.AppendUint16(buf, v)
			}
		}
		emit(SampleChunk{First: first, Rows: last - first, Total: s, N: sh.N, Dim: sh.Dim, F16: buf})
	}
	return nil
}

// openShard opens the input and checks it is still the file the plan
// split.
func openShard(cfg Config, sh Shard) (*vecfile.Matrix, error) {
	m, err := vecfile.Open(cfg.Input, vecfile.Options{Dim: cfg.Dim})
	if err != nil {
		return nil, err
	}
	if m.Len() != sh.N || m.Dim() != sh.Dim {
		m.Close()
		return nil, fmt.Errorf("vlcbeam: %s changed during the build: %d x %d, planned %d x %d", cfg.Input, m.Len(), m.Dim(), sh.N, sh.Dim)
	}
	return m, nil
}

// trainFn gathers the sample into a temporary .f16 file on its worker,
// in sample order whatever order the chunks arrive in, and trains the
// model on it once: vlc.Compress writes the sample's index beside it, and
// its model (index.WriteModel: the anchors, code and list parameters,
// not the sample's codes) goes to Cfg.ModelOut atomically, so a retried
// or re-run train replaces it whole. It emits the model's path.
type trainFn struct {
	Cfg Config
}

func (f *trainFn) ProcessElement(ctx context.Context, _ int, chunks func(*SampleChunk) bool) (string, error) {
	tmp, err := os.CreateTemp("", "vlcbeam-sample-*.f16")
	if err != nil {
		return "", fmt.Errorf("vlcbeam: sample file: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var c SampleChunk
	rows, total, n, d := 0, -1, 0, 0
	for chunks(&c) {
		if total < 0 {
			total, n, d = c.Total, c.N, c.Dim
		}
		if c.Total != total || c.Dim != d || c.N != n || len(c.F16) != c.Rows*d*2 || c.First < 0 || c.First+c.Rows > total {
			return "", fmt.Errorf("vlcbeam: sample chunk [%d, +%d) of %d x %d does not fit the sample of %d x %d", c.First, c.Rows, c.Total, c.Dim, total, d)
		}
		if _, err := tmp.WriteAt(c.F16, int64(c.First)*int64(d)*2); err != nil {
			return "", fmt.Errorf("vlcbeam: sample file: %w", err)
		}
		rows += c.Rows
	}
	if rows != total {
		// Chunks cover disjoint ranges (one shard each), so a count that
		// falls short means one is missing.
		return "", fmt.Errorf("vlcbeam: sample has %d of its %d rows", rows, total)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("vlcbeam: sample file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(f.Cfg.ModelOut), 0o755); err != nil {
		return "", err
	}
	cfg := f.Cfg
	trained := tmp.Name() + ".vlc"
	defer os.Remove(trained)
	sum, err := vlc.Compress(ctx, tmp.Name(), trained, vlc.Options{
		Dim: d, Bits: cfg.Bits, Anchors: cfg.anchors(n), Code: cfg.Code, Metric: cfg.Metric,
		Seed: cfg.Seed, MaxIter: cfg.MaxIter, Backend: cfg.Backend,
		TrainSample: total, // every row of the sample, not a sample of it
	})
	if err != nil {
		return "", fmt.Errorf("vlcbeam: training on %d sampled rows: %w", total, err)
	}
	model, err := index.ReadModel(trained)
	if err != nil {
		return "", fmt.Errorf("vlcbeam: %w", err)
	}
	if err := index.WriteModel(cfg.ModelOut, model); err != nil {
		return "", fmt.Errorf("vlcbeam: %w", err)
	}
	log.Infof(ctx, "vlcbeam: trained %s on %d of %d rows: %d anchors, code %s, %d iterations, backend %s, %v",
		cfg.ModelOut, total, n, sum.Anchors, sum.Code, sum.Iterations, sum.Backend, sum.TrainTime)
	return cfg.ModelOut, nil
}
