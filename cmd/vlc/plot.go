package main

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/vlc-embed/vlc/eval"
	"github.com/vlc-embed/vlc/internal/regfile"
	"github.com/vlc-embed/vlc/internal/shortname"
)

// plotCurve is one index's sweep: a line through its points, in the
// order of the sweep.
type plotCurve struct {
	name   string
	points []eval.Result
}

// plotFormat returns "png" or "svg" from the extension of path.
func plotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("-plot %s: want a file name ending in .png or .svg", path)
	}
}

// Distinct, dark enough to read on white, and told apart by shape too.
var plotColors = []color.Color{
	color.RGBA{31, 119, 180, 255},  // blue
	color.RGBA{214, 39, 40, 255},   // red
	color.RGBA{44, 160, 44, 255},   // green
	color.RGBA{148, 103, 189, 255}, // purple
	color.RGBA{255, 127, 14, 255},  // orange
	color.RGBA{140, 86, 75, 255},   // brown
	color.RGBA{23, 190, 207, 255},  // cyan
	color.RGBA{127, 127, 127, 255}, // grey
}

var plotShapes = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{},
	draw.PyramidGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{},
}

const (
	plotWidth  = 18 * vg.Centimeter
	plotHeight = 12 * vg.Centimeter
	plotDPI    = 144
)

// writePlot draws recall@10 against QPS (log scale), one curve per index
// with each point labelled by its nprobe, and writes it atomically to path
// as PNG or SVG by its extension. n and d describe the data set.
func writePlot(path string, n, d int, curves []plotCurve) error {
	format, err := plotFormat(path)
	if err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("recall@10 vs QPS  (n = %d, d = %d)", n, d)
	p.X.Label.Text = "queries per second, all cores (log scale); points labelled with nprobe"
	p.Y.Label.Text = "recall@10"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = qpsTicks{}
	p.Add(plotter.NewGrid())

	minQPS, maxQPS, minRecall := math.Inf(1), math.Inf(-1), 1.0
	for i, c := range curves {
		xys := make(plotter.XYs, len(c.points))
		labels := make([]string, len(c.points))
		for j, r := range c.points {
			xys[j] = plotter.XY{X: r.QPS, Y: r.Recall10}
			labels[j] = strconv.Itoa(r.NProbe)
			minQPS, maxQPS = min(minQPS, r.QPS), max(maxQPS, r.QPS)
			minRecall = min(minRecall, r.Recall10)
		}
		col := plotColors[i%len(plotColors)]
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		line.Color = col
		line.Width = vg.Points(1.5)
		points.Color = col
		points.Shape = plotShapes[i%len(plotShapes)]
		points.Radius = vg.Points(3)
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		for k := range lab.TextStyle {
			lab.TextStyle[k].Color = col
			lab.TextStyle[k].Font = font.From(plot.DefaultFont, vg.Points(8))
		}
		lab.Offset = vg.Point{X: vg.Points(5), Y: vg.Points(3)}
		p.Add(line, points, lab)
		p.Legend.Add(c.name, line, points)
	}
	// The best corner, high recall at high speed, is where curves are not.
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), -vg.Points(4)

	// At least a factor of 4 on the QPS axis, so that it has labelled ticks.
	lo, hi := minQPS/1.25, maxQPS*1.25
	if hi/lo < 4 {
		mid := math.Sqrt(lo * hi)
		lo, hi = mid/2, mid*2
	}
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min = max(0, math.Floor((minRecall-0.02)*20)/20)
	p.Y.Max = 1

	var wt io.WriterTo
	switch format {
	case "png":
		c := vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI))
		drawPlot(p, draw.New(c))
		wt = vgimg.PngCanvas{Canvas: c}
	case "svg":
		c := vgsvg.New(plotWidth, plotHeight)
		drawPlot(p, draw.New(c))
		wt = c
	}
	if err := writeAtomic(path, wt); err != nil {
		return fmt.Errorf("-plot: %w", err)
	}
	return nil
}

// drawPlot draws p on c. It draws the X axis label itself, centred under
// the data: gonum/plot v0.16 pads the plot for that label as if it stood
// at the arithmetic middle of the axis range, which on a log scale is far
// to the right, and so shrinks the data area for nothing.
func drawPlot(p *plot.Plot, c draw.Canvas) {
	label, style := p.X.Label.Text, p.X.Label.TextStyle
	p.X.Label.Text = ""
	defer func() { p.X.Label.Text = label }()
	const margin = 8 // points on every side
	c = draw.Crop(c, margin, -margin, margin, -margin)
	h := style.Height(label) + p.X.Label.Padding
	pc := draw.Crop(c, 0, 0, h, 0)
	p.Draw(pc)
	dc := p.DataCanvas(pc)
	x := dc.Center().X
	c.FillText(style, vg.Point{X: x, Y: c.Min.Y + style.FontExtents().Descent}, label)
}

// qpsTicks marks a log axis at 1, 2 and 5 times powers of ten (labelled,
// as 20k or 1.5M) and at the other multiples (unlabelled); when the range
// holds fewer than two labelled marks, every multiple is labelled.
type qpsTicks struct{}

func (qpsTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return nil
	}
	var ticks []plot.Tick
	labelled := 0
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		p := math.Pow(10, e)
		for m := 1; m <= 9; m++ {
			v := float64(m) * p
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = humanCount(v)
				labelled++
			}
			ticks = append(ticks, t)
		}
	}
	if labelled < 2 {
		for i := range ticks {
			ticks[i].Label = humanCount(ticks[i].Value)
		}
	}
	return ticks
}

// humanCount writes 500, 20k, 1.5M.
func humanCount(v float64) string {
	f := func(x float64) string { return strconv.FormatFloat(math.Round(x*1000)/1000, 'f', -1, 64) }
	switch {
	case v >= 1e6:
		return f(v/1e6) + "M"
	case v >= 1e3:
		return f(v/1e3) + "k"
	default:
		return f(v)
	}
}

// plotTempBaseMax is the longest file name that writeAtomic's temporary
// names hold whole: ".<base>.tmp-<random>", the random part of at most 13
// digits, then has 255 bytes.
const plotTempBaseMax = shortname.Max - len(".") - len(".tmp-") - 13

// writeAtomic writes w to path through a temporary file in the same folder
// that is synced and renamed over path, so that readers never see a part
// of it; on error the temporary file is removed and path left as it was.
// A path that exists and is not a regular file is refused. The temporary
// file is ".<base>.tmp-<random>", <base> the file's name or, when longer
// than plotTempBaseMax bytes, its shortened form (shortname.Fit), so that
// a name of up to 255 bytes can be written.
func writeAtomic(path string, w io.WriterTo) error {
	if err := regfile.CheckOutput(path); err != nil { // not over a device or pipe
		return err
	}
	dir := filepath.Dir(path)
	var f *os.File
	var err error
	for range 1000 {
		name := filepath.Join(dir, "."+shortname.Fit(filepath.Base(path), plotTempBaseMax)+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	_, err = w.WriteTo(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = regfile.CheckOutput(path) // again: one may have appeared
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if runtime.GOOS != "windows" { // make the rename durable
		if d, err := os.Open(dir); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}
