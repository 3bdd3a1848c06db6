package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func (r row) str(k string) string {
	switch v := r[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func (r row) num(k string) (float64, bool) {
	v, ok := r[k].(float64)
	return v, ok
}

// cell formats a number of r for a table ("" when absent).
func (r row) cell(k string) string {
	v, ok := r.num(k)
	if !ok {
		return r.str(k)
	}
	return fmtNum(v)
}

func fmtNum(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.4g", v)
}

func ratio(a, b float64) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// series names a run of samples: system and mode, and how it started.
func (r row) series() string {
	s := r.str("system") + " " + r.str("mode")
	if st := r.str("start"); st != "" && st != "create" {
		s += " (" + st + ")"
	}
	return s
}

func kind(rows []row, k string) []row {
	var out []row
	for _, r := range rows {
		if r.str("kind") == k {
			out = append(out, r)
		}
	}
	return out
}

// report writes the tables (-md), the sample series beside them (CSV)
// and the plot of segments and bytes over adds (-png).
func report(c config, rows []row) error {
	if c.MD == "" && c.PNG == "" {
		return nil
	}
	if c.PNG != "" {
		if err := plotSamples(c.PNG, kind(rows, "sample")); err != nil {
			return fmt.Errorf("plot %s: %w", c.PNG, err)
		}
	}
	if c.MD == "" {
		return nil
	}
	csvPath := strings.TrimSuffix(c.MD, ".md") + "-segments.csv"
	var csv bytes.Buffer
	csv.WriteString("system,mode,start,adds,segments,bytes,disk_bytes,lists,add_seconds\n")
	for _, r := range kind(rows, "sample") {
		fmt.Fprintf(&csv, "%s,%s,%s,%s,%s,%s,%s,%s,%s\n", r.str("system"), r.str("mode"), r.str("start"), r.cell("adds"), r.cell("segments"), r.cell("bytes"), r.cell("disk_bytes"), r.cell("lists"), r.str("add_seconds"))
	}
	if err := writeAtomic(csvPath, csv.Bytes()); err != nil {
		return err
	}

	var md bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&md, format, args...) }
	w("# vlc's store as a RAG service uses it, beside LanceDB\n\n")
	w("Written by `go run ./bench/ragstore` (bench/ragstore/README.md says what each part does and how the data is made).\n\n")
	for _, r := range kind(rows, "run") {
		w("- Command: `%s`\n- Machine: %s, GOMAXPROCS=%s, %s; LanceDB pinned with `taskset -c %s`\n- Started: %s\n", r.str("command"), r.str("machine"), r.cell("gomaxprocs"), r.str("go"), c.Cores, r.str("started"))
	}
	for _, r := range kind(rows, "data") {
		w("- Data: %s documents x %s (testdata/deep10k's base repeated with gaussian noise, sigma %.5f a value = %.2f x the base's median nearest-neighbour distance %.4f over sqrt(dim)), payloads `{\"cat\", \"n\"}` with exact shares, %s queries; ground truth exact (float64)\n",
			r.cell("n"), r.cell("dim"), mustNum(r, "sigma"), mustNum(r, "noise"), mustNum(r, "median_nn"), r.cell("queries"))
	}
	for _, r := range kind(rows, "done") {
		w("- Whole run: %s s\n", r.cell("seconds"))
	}
	for _, r := range kind(rows, "run") {
		if l := r.str("load"); l != "" {
			w("- Load average (1, 5, 15 min) at the start: %s", l)
			for _, d := range kind(rows, "done") {
				w("; at the end: %s", d.str("load"))
			}
			w(" (the cores are shared: timings move with it)\n")
		}
	}
	if sk := kind(rows, "skip"); len(sk) > 0 {
		w("\n## Skipped or replaced\n\n")
		for _, r := range sk {
			w("- %s %s: %s\n", r.str("system"), r.str("part"), r.str("reason"))
		}
	}
	for _, r := range kind(rows, "note") {
		w("- %s %s: %s\n", r.str("system"), r.str("mode"), r.str("note"))
	}

	w("\n## Writes\n\n| system | mode | op | unit | count | seconds | per second |\n|---|---|---|---|---:|---:|---:|\n")
	for _, r := range kind(rows, "write") {
		w("| %s | %s | %s | %s | %s | %s | %s |\n", r.str("system"), r.series()[len(r.str("system"))+1:], r.str("op"), r.str("unit"), r.cell("count"), r.cell("seconds"), r.cell("per_s"))
	}

	w("\n## Size and unfiltered search: as grown, after Maintain, after compaction\n\n")
	w("Grown: at once after the last add (background work may be under way). Maintained (vlc): after Maintain, which runs the merges and training due and returns when none is left. Compacted: after Compact (vlc) or optimize with old versions removed (LanceDB).\n\n")
	w("Search: one query at a time, one client thread, k=10, default options; p50/p99 over %d passes of the queries after a warm-up pass; recall@10 against the exact top-10 of all documents. vlc's bytes are Info.Bytes (its segments), LanceDB's its stats().totalBytes; disk bytes are every file under the store's folder. LanceDB's segments are its fragments.\n\n", c.Passes)
	w("| system | mode | state | index | segments | bytes | disk bytes | bytes/vector | queries | p50 ms | p99 ms | recall@10 |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	sizes := kind(rows, "size")
	searches := kind(rows, "search")
	find := func(sys, mode, state, index, filter string) row {
		for _, s := range searches {
			if s.str("system") == sys && s.str("mode") == mode && s.str("state") == state && s.str("index") == index && s.str("filter") == filter {
				return s
			}
		}
		return nil
	}
	for _, z := range sizes {
		s := find(z.str("system"), z.str("mode"), z.str("state"), z.str("index"), "none")
		if s == nil {
			s = row{}
		}
		label := z.str("index")
		if label == "" && z.str("code") != "" {
			label = fmt.Sprintf("%s, %s lists", z.str("code"), z.cell("lists"))
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", z.str("system"), z.series()[len(z.str("system"))+1:], z.str("state"), label, z.cell("segments"), z.cell("bytes"), z.cell("disk_bytes"), z.cell("bytes_per_vector"), s.cell("queries"), s.cell("p50_ms"), s.cell("p99_ms"), s.cell("recall@10"))
	}
	w("\nOver the same store compacted (the issue asks for at most 1.15x in size and 1.5x in p50 and p99):\n\n| system | mode | index | state | bytes | p50 | p99 |\n|---|---|---|---|---:|---:|---:|\n")
	for _, g := range sizes {
		if g.str("state") == "compacted" {
			continue
		}
		for _, cz := range sizes {
			if cz.str("state") != "compacted" || cz.str("system") != g.str("system") || cz.str("mode") != g.str("mode") || cz.str("index") != g.str("index") {
				continue
			}
			gs, cs := find(g.str("system"), g.str("mode"), g.str("state"), g.str("index"), "none"), find(cz.str("system"), cz.str("mode"), "compacted", cz.str("index"), "none")
			if gs == nil || cs == nil {
				continue
			}
			w("| %s | %s | %s | %s | %s | %s | %s |\n", g.str("system"), g.series()[len(g.str("system"))+1:], g.str("index"), g.str("state"),
				ratio(mustNum(g, "bytes"), mustNum(cz, "bytes")), ratio(mustNum(gs, "p50_ms"), mustNum(cs, "p50_ms")), ratio(mustNum(gs, "p99_ms"), mustNum(cs, "p99_ms")))
		}
	}

	w("\n## Recall as the collection grows\n\n| system | mode | documents | queries | recall@10 | lists | trained | segments |\n|---|---|---:|---:|---:|---:|---|---:|\n")
	for _, r := range kind(rows, "recall") {
		lists := r.cell("lists")
		if lists == "" {
			lists = r.str("index")
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.str("system"), r.series()[len(r.str("system"))+1:], r.cell("docs"), r.cell("queries"), r.cell("recall@10"), lists, r.str("trained"), r.cell("segments"))
	}
	if tr := kind(rows, "train"); len(tr) > 0 {
		w("\nTraining:\n\n")
		for _, r := range tr {
			by := r.cell("trained_by")
			if by == "" {
				by = "not trained"
			} else {
				by = "trained by " + by + " adds (" + r.cell("lists") + " lists)"
			}
			w("- %s: %s; %s\n", r.series(), by, r.str("note"))
		}
	}

	w("\n## Filters\n\nrecall@10 against the exact top-10 of each filter's matching documents; time against the same store's unfiltered search.\n\n")
	w("| system | mode | state | index | filter | share | via | recall@10 | p50 ms | p99 ms | p50 / unfiltered |\n|---|---|---|---|---|---:|---|---:|---:|---:|---:|\n")
	for _, s := range searches {
		if s.str("filter") == "none" {
			continue
		}
		un := find(s.str("system"), s.str("mode"), s.str("state"), s.str("index"), "none")
		rel := ""
		if un != nil {
			rel = ratio(mustNum(s, "p50_ms"), mustNum(un, "p50_ms"))
		}
		w("| %s | %s | %s | %s | %s | %s%% | %s | %s | %s | %s | %s |\n", s.str("system"), s.series()[len(s.str("system"))+1:], s.str("state"), s.str("index"), s.str("filter"),
			fmtNum(100*mustNum(s, "share")), s.str("filter_impl"), s.cell("recall@10"), s.cell("p50_ms"), s.cell("p99_ms"), rel)
	}
	w("\nLanceDB's recall@10 with IVF_PQ is what `createIndex(\"vector\")` gives with its default partitions, sub-vectors and nprobes, without refine.\n")
	w("\nSegments and bytes over adds: [%s](%s) (plot), [%s](%s) (the samples).\n", filepath.Base(c.PNG), filepath.Base(c.PNG), filepath.Base(csvPath), filepath.Base(csvPath))
	return writeAtomic(c.MD, md.Bytes())
}

func mustNum(r row, k string) float64 {
	v, _ := r.num(k)
	return v
}

// plotSamples draws segments (top) and bytes a document (bottom) over
// the adds, one line per system and mode.
func plotSamples(path string, samples []row) error {
	var names []string
	byName := map[string][]row{}
	for _, r := range samples {
		n := r.series()
		if byName[n] == nil {
			names = append(names, n)
		}
		byName[n] = append(byName[n], r)
	}
	slices.Sort(names)
	top, bottom := plot.New(), plot.New()
	top.Title.Text = "Segments (vlc) and fragments (LanceDB) as documents are added"
	top.Y.Label.Text = "segments"
	top.Y.Scale = plot.LogScale{}
	top.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	bottom.Title.Text = "Bytes a document (vlc: Info.Bytes; LanceDB: stats().totalBytes)"
	bottom.Y.Label.Text = "bytes / document"
	bottom.Y.Min = 0
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Label.Text = "documents added"
		p.Legend.Top, p.Legend.Left = true, true
		p.Add(plotter.NewGrid())
	}
	for i, n := range names {
		seg, per := plotter.XYs{}, plotter.XYs{}
		for _, r := range byName[n] {
			adds, s, b := mustNum(r, "adds"), mustNum(r, "segments"), mustNum(r, "bytes")
			if adds <= 0 {
				continue
			}
			seg = append(seg, plotter.XY{X: adds, Y: math.Max(s, 1)})
			per = append(per, plotter.XY{X: adds, Y: b / adds})
		}
		if len(seg) == 0 {
			continue
		}
		col := plotutil.Color(i)
		for _, pp := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{top, seg}, {bottom, per}} {
			l, err := plotter.NewLine(pp.xys)
			if err != nil {
				return err
			}
			l.Color = col
			l.Width = vg.Points(1.5)
			l.Dashes = plotutil.Dashes(i)
			pp.p.Add(l)
			pp.p.Legend.Add(n, l)
		}
	}
	if len(names) == 0 {
		top.Title.Text += " (no samples)"
	}
	const width, height = 8 * vg.Inch, 9 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	plots := [][]*plot.Plot{{top}, {bottom}}
	canvases := plot.Align(plots, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return err
	}
	return writeAtomic(path, buf.Bytes())
}
