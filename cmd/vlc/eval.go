package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/eval"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	var sf searchFlags
	sf.register(fs, 10)
	gtPath := fs.String("gt", "", "ground truth `file` (.ivecs: the nearest base rows of each query, nearest first)")
	basePath := fs.String("base", "", "base vectors `file` to compute exact ground truth from when -gt is not given")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout (with -sweep: an array, one object per row, each with an index key too when several indexes are given)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the searches to `file` (go tool pprof; with -sweep, of the whole sweep)")
	batch := fs.Int("batch", 0, "search the queries in batches of this many, one after another (0: all in one batch)")
	warmup := fs.Int("warmup", 1, "untimed passes over the queries before the timed one (the first pass pays for faulting in the files and a GPU's buffers)")
	minTime := fs.Duration("min-time", 0, "repeat the timed passes until they take at least this long (say 2s: steadier figures for fast searches)")
	lat := fs.Bool("latency", false, "also time each query alone, one at a time on one goroutine, and print the median and 99th percentile (not with -sweep)")
	var sw sweepFlags
	sw.register(fs)
	pos, err := parse(fs, args, []string{"INDEX..."}, stdout)
	if err != nil {
		return err
	}
	if err := sw.check(fs); err != nil {
		return err
	}
	if *warmup < 0 || *minTime < 0 {
		return usageError{fmt.Errorf("-warmup %d, -min-time %v: want zero or more", *warmup, *minTime)}
	}
	if !sw.on() && len(pos) > 1 {
		return usageError{fmt.Errorf("want 1 argument(s) (INDEX), got %d: %s (several indexes need -sweep)", len(pos), strings.Join(pos, " "))}
	}
	if *gtPath == "" && *basePath == "" {
		return fmt.Errorf("one of -gt or -base is required")
	}
	if *gtPath != "" && *basePath != "" {
		return fmt.Errorf("-gt %s and -base %s both given: give the ground truth or the base vectors to compute it from, not both", *gtPath, *basePath)
	}
	if err := sf.checkDevices(); err != nil {
		return err
	}
	if sw.on() && sf.backend != "cpu" {
		return fmt.Errorf("-sweep searches on the CPU: leave out -backend %s, or -sweep", sf.backend)
	}
	if sw.on() && *lat {
		return fmt.Errorf("-latency measures one setting: leave out -sweep, or -latency")
	}
	walk, err := sf.useGraph(fs, pos[0], false)
	if err != nil && !sw.on() {
		return err
	}
	if sw.on() {
		stop, err := startProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
		return runSweep(ctx, pos, &sf, &sw, *gtPath, *basePath, *asJSON, stdout, stderr)
	}
	var (
		searcher eval.Searcher
		q, rr    *vecfile.Matrix
		gt       [][]int
		ix       *index.Index // nil for a store
		di       *index.DeviceIndex
		gs       *graph.Searcher // set where the search walks the graph
		walked   bool            // a store's search walks its segments' graphs
	)
	{
		se, err := openStoreEval(pos[0], &sf, *gtPath, *basePath)
		if err != nil {
			return err
		}
		if se != nil {
			defer se.Close()
			searcher, q, rr, gt = se.s, se.q, se.rr, se.gt
			opt := vlc.SearchOptions{}
			if walked, err = sf.storeWalk(fs, pos[0], se.s.info, &opt); err != nil {
				return err
			}
			se.s.ef, se.s.seedProbe, se.s.scanLists = opt.Ef, opt.SeedProbe, opt.ScanLists
		}
	}
	if searcher == nil {
		o, err := sf.open(pos[0])
		if err != nil {
			return err
		}
		defer o.Close()
		ix, q, rr = o.ix, o.q, o.rr
		if ix.Path() != pos[0] { // a store's one segment
			if walk, err = sf.useGraph(fs, ix.Path(), false); err != nil {
				return err
			}
		}
		if gt, err = groundTruth(*gtPath, *basePath, q, ix); err != nil {
			return err
		}
		var release func()
		if di, release, err = sf.onDevice(ix, stderr); err != nil {
			return err
		}
		defer release()
		searcher = ix
		if di != nil {
			searcher = di
		}
		if walk {
			if gs, err = sf.graphSearcher(ix); err != nil {
				return err
			}
			searcher = gs
		}
	}
	stop, err := startProfile(*cpuProfile)
	if err != nil {
		return err
	}
	res, err := eval.Measure(ctx, searcher, q, gt, eval.Options{Search: sf.options(rr, sf.k), Latency: *lat, Batch: *batch, Warmup: *warmup, MinTime: *minTime})
	stop()
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	rerank := "no re-rank"
	if rr != nil {
		rerank = fmt.Sprintf("re-rank %dx", sf.rerankFactor)
	}
	if gs != nil {
		fmt.Fprintf(stdout, "queries          %d (graph, ef %d, seeds from %d list(s), %s)\n", q.Len(), gs.Width(max(sf.k, 10)), res.NProbe, rerank)
	} else if walked {
		keep := max(sf.k, 10) // eval searches for at least 10 hits
		if rr != nil {
			keep *= sf.rerankFactor
		}
		fmt.Fprintf(stdout, "queries          %d (store: graphs walked at ef %d where a segment holds one, nprobe %d elsewhere, %s)\n", q.Len(), max(cmp.Or(sf.ef, graph.DefaultEf), keep), res.NProbe, rerank)
	} else {
		fmt.Fprintf(stdout, "queries          %d (nprobe %d, %s)\n", q.Len(), res.NProbe, rerank)
	}
	fmt.Fprintf(stdout, "recall@1         %.4f\n", res.Recall1)
	fmt.Fprintf(stdout, "recall@10        %.4f\n", res.Recall10)
	where := "on all cores"
	if di != nil {
		where = "on " + sf.backend
		if sf.devices != "" {
			where += ", devices " + sf.devices
		}
	}
	if *batch > 0 {
		where += fmt.Sprintf(", batches of %d", *batch)
	}
	fmt.Fprintf(stdout, "qps              %.0f (%s %s)\n", res.QPS, res.Elapsed.Round(1e6), where)
	if *lat {
		fmt.Fprintf(stdout, "latency          p50 %.3f ms, p99 %.3f ms (one query at a time)\n", res.LatencyP50, res.LatencyP99)
	}
	if ix != nil && gs == nil {
		bs := *batch
		if bs <= 0 || bs > q.Len() {
			bs = q.Len()
		}
		cr, err := ix.CodeReads(q, res.NProbe, codeReadSample, bs)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, codeReadLines(cr, bs, res.QPS, min(q.Len(), codeReadSample), sf.device))
	}
	if di != nil {
		fmt.Fprintf(stdout, "device memory    %.1f MiB held (the index file is %.1f MiB)\n", float64(di.DeviceBytes())/(1<<20), float64(ix.Size())/(1<<20))
	}
	if ss, ok := searcher.(*storeSearcher); ok {
		fmt.Fprintf(stdout, "store            %d live vectors in %d segment(s), %d deleted rows not compacted\n", ss.info.Rows, len(ss.info.Segments), ss.info.Deleted)
		if in, err := ss.st.DeviceInfo(); err == nil && in.OnDevice > 0 {
			fmt.Fprintf(stdout, "device memory    %.1f MiB held, %d of %d segment(s) on the device\n", float64(in.Bytes)/(1<<20), in.OnDevice, in.Segments)
		}
	}
	fmt.Fprintf(stdout, "bytes/vector     %.1f\n", res.BytesPerVector)
	fmt.Fprintf(stdout, "size ratio       %.3f of float16\n", res.SizeRatio)
	return nil
}

// codeReadSample is the most queries whose probes CodeReads follows.
const codeReadSample = 1000

// codeReadLines are eval's lines on memory traffic: the bytes of codes a
// query reads alone and a batch of bs reads when its queries share each
// list (cr, from sampled queries' probes), and those rates at qps against
// the peak bandwidth of the GPU card names (n/a for a card not in
// device.MemoryBandwidth's table, or the CPU).
func codeReadLines(cr index.CodeReads, bs int, qps float64, sampled int, card string) string {
	alone, shared := cr.PerQuery*qps, cr.PerBatch*qps/float64(bs)
	line := fmt.Sprintf("codes read       %.1f KiB a query alone (the lists it probes; %d queries followed); %.1f MiB a batch of %d sharing each list",
		cr.PerQuery/1024, sampled, cr.PerBatch/(1<<20), bs)
	if cr.Followed < bs {
		line += fmt.Sprintf(" (at least: the lists %d of its queries probe)", cr.Followed)
	}
	line += fmt.Sprintf("\ncode bandwidth   %.1f GB/s at the qps above read a query at a time, %.1f GB/s shared in batches", alone/1e9, shared/1e9)
	if peak, ok := device.MemoryBandwidth(card); ok {
		return line + fmt.Sprintf(": %.1f%% and %.2f%% of the card's %.2f TB/s", 100*alone/peak, 100*shared/peak, peak/1e12)
	}
	return line + ": n/a of the card's (bandwidth not known)"
}

// groundTruth reads the first 10 true neighbours of each query from gtPath,
// or computes them exactly from basePath with the index's metric, and
// checks them against the index (eval.CheckGroundTruth, eval.Exact): an
// index of n < 10 vectors needs n ids a query.
func groundTruth(gtPath, basePath string, q *vecfile.Matrix, ix *index.Index) ([][]int, error) {
	if gtPath != "" {
		gt, err := eval.ReadGroundTruth(gtPath, q.Len(), min(10, ix.Len()))
		if err != nil {
			return nil, err
		}
		if err := eval.CheckGroundTruth(gt, q.Len(), ix.Len(), 10); err != nil {
			return nil, fmt.Errorf("%s: %w", gtPath, err)
		}
		return gt, nil
	}
	base, err := vecfile.Open(basePath, vecfile.Options{Dim: ix.Dim()})
	if err != nil {
		return nil, err
	}
	defer base.Close()
	gt, err := eval.Exact(ix, base, q, 10)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", basePath, err)
	}
	return gt, nil
}
