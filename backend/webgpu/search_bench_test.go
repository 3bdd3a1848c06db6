//go:build webgpu

package webgpu

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/vecfile"
)

// benchEnv reads an integer setting of BenchmarkSearch.
func benchEnv(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// synthRows are nq synthetic queries of dimension d.
type synthRows struct {
	x     []float32
	nq, d int
}

func (r synthRows) Len() int { return r.nq }
func (r synthRows) Dim() int { return r.d }
func (r synthRows) Row(i int, dst []float32) []float32 {
	if dst == nil {
		dst = make([]float32, r.d)
	}
	copy(dst, r.x[i*r.d:(i+1)*r.d])
	return dst
}

// BenchmarkSearch times a batch of queries searched on the device
// (index.DeviceIndex.SearchBatch, everything included: preparing the
// queries, the kernels, the read-back and the hits) beside the same
// search on the CPU (Index.SearchBatch, all cores), and reports
// queries/s, the agreement of the device's top k with the CPU's, and the
// median milliseconds of each kernel of one batch (SearchProfiler).
//
// By default it builds a small synthetic index (VLC_BENCH_N points, 20000,
// of dimension VLC_BENCH_D, 128, in VLC_BENCH_LISTS lists, 64, at
// VLC_BENCH_BITS, 4). VLC_BENCH_INDEX=x.vlc searches an index file
// instead, with the queries of VLC_BENCH_QUERIES (.fvecs, .npy, or .f16
// with the index's dimension) or, without it, synthetic ones. Then
// VLC_BENCH_NQ (1000) queries, VLC_BENCH_NPROBE (8 and 32 when unset),
// VLC_BENCH_K (10). Paths are best absolute: the test binary runs in the
// package's folder. On a GPU machine:
//
//	CGO_ENABLED=1 go test -c -tags webgpu -o webgpu.test ./backend/webgpu
//	VLC_BENCH_INDEX=emb.vlc VLC_BENCH_QUERIES=q.fvecs VLC_BENCH_NPROBE=64 \
//	    ./webgpu.test -test.run '^$' -test.bench Search -test.benchtime 20x
func BenchmarkSearch(b *testing.B) {
	dev, err := open(true)
	if err != nil {
		b.Skip(err)
	}
	nq := benchEnv(b, "VLC_BENCH_NQ", 1000)
	var ix *index.Index
	var queries index.Rows
	name := ""
	if path := os.Getenv("VLC_BENCH_INDEX"); path != "" {
		if ix, err = index.Open(path, index.Options{}); err != nil {
			b.Fatal(err)
		}
		defer ix.Close()
		if qp := os.Getenv("VLC_BENCH_QUERIES"); qp != "" {
			m, err := vecfile.Open(qp, vecfile.Options{Dim: ix.Dim()})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			queries = m
			nq = min(nq, m.Len())
		} else {
			pts := synth.Clusters(nq, ix.Dim(), 64, 5)
			x := make([]float32, nq*ix.Dim())
			f16.DecodeRow(x, pts.Data)
			queries = synthRows{x, nq, ix.Dim()}
		}
		name = fmt.Sprintf("index=%s/n=%d/d=%d", strings.TrimSuffix(path[strings.LastIndex(path, "/")+1:], ".vlc"), ix.Len(), ix.Dim())
	} else {
		c := devicetest.Case{Name: "bench", N: benchEnv(b, "VLC_BENCH_N", 20000), Dim: benchEnv(b, "VLC_BENCH_D", 128),
			Lists: benchEnv(b, "VLC_BENCH_LISTS", 64), Bits: benchEnv(b, "VLC_BENCH_BITS", 4), Metric: index.L2, Queries: nq}
		built := devicetest.Build(b, b.TempDir(), c)
		ix, queries = built.Index, built.Queries
		name = fmt.Sprintf("n=%d/d=%d/lists=%d/bits=%d", c.N, c.Dim, c.Lists, c.Bits)
	}
	queries = firstRows{queries, nq}
	g := &grab{dev: dev}
	di, err := ix.OnDevice(g)
	if err != nil {
		b.Fatal(err)
	}
	defer di.Close()
	k := benchEnv(b, "VLC_BENCH_K", 10)
	nprobes := []int{8, 32}
	if os.Getenv("VLC_BENCH_NPROBE") != "" {
		nprobes = []int{benchEnv(b, "VLC_BENCH_NPROBE", 0)}
	}
	for _, nprobe := range nprobes {
		opt := index.SearchOptions{K: k, NProbe: nprobe}
		want, err := ix.SearchBatch(context.Background(), queries, opt)
		if err != nil {
			b.Fatal(err)
		}
		sub := fmt.Sprintf("%s/nq=%d/nprobe=%d/k=%d", name, nq, ix.EffectiveNProbe(nprobe), k)
		b.Run(sub+"/webgpu", func(b *testing.B) {
			var got [][]index.Hit
			t0 := time.Now()
			for range b.N {
				if got, err = di.SearchBatch(context.Background(), queries, opt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(nq*b.N)/time.Since(t0).Seconds(), "queries/s")
			b.StopTimer()
			b.ReportMetric(agreement(want, got), "agree@k")
			q := make([]float32, nq*ix.Dim())
			for i := range nq {
				queries.Row(i, q[i*ix.Dim():(i+1)*ix.Dim()])
			}
			if ix.Meta().Metric != index.L2 {
				return // the profile takes prepared queries; these are not
			}
			st, err := g.res.ProfileSearch(q, nq, ix.EffectiveNProbe(nprobe), k, 5)
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range st.Stages {
				b.ReportMetric(s.Ms, "ms/"+s.Name)
			}
			b.ReportMetric(st.Batched, "ms/batch")
			b.ReportMetric(float64(st.Batch), "batch")
		})
		b.Run(sub+"/cpu", func(b *testing.B) {
			t0 := time.Now()
			for range b.N {
				if _, err := ix.SearchBatch(context.Background(), queries, opt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(nq*b.N)/time.Since(t0).Seconds(), "queries/s")
		})
	}
}

// firstRows is the first n rows of r.
type firstRows struct {
	index.Rows
	n int
}

func (r firstRows) Len() int { return r.n }

// agreement is the fraction of the CPU's hits that the device's hits of
// the same query hold.
func agreement(want, got [][]index.Hit) float64 {
	same, all := 0, 0
	for i := range want {
		ids := map[int]bool{}
		for _, h := range got[i] {
			ids[h.ID] = true
		}
		for _, h := range want[i] {
			all++
			if ids[h.ID] {
				same++
			}
		}
	}
	if all == 0 {
		return 1
	}
	return float64(same) / float64(all)
}
