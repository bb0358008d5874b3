package report

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/internal/plotfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/braid-vpn/braid/lab/results"
)

// maxValueTicks is the most swept values that get a tick each; beyond it
// the labels would collide and gonum's own ticks read better.
const maxValueTicks = 12

// Plot draws each figure's metrics into dir as PNG and SVG (a bar chart
// where the run has no sweep axis; failed points left out) and returns the
// files written, PNG before SVG, in figure order. File names are the
// scenario, the metric, the x axis and the other axes' values:
// rtt-ratio-goodput-vs-rtt_ratio-loss-gemodel-1pct-75pct-50pct-0pct.png.
func Plot(run *results.Run, dir string) ([]string, error) {
	var files []string
	for _, f := range figures(run) {
		for _, m := range metrics {
			if m.name != goodput.name && !slices.ContainsFunc(f.points, func(p results.Point) bool { return measured(&p, m) }) {
				continue
			}
			draw := linePlot
			if f.x == "" {
				draw = barPlot
			}
			p, err := draw(run, &f, m)
			if err != nil {
				return files, fmt.Errorf("report: figure %s: %w", f.stemOf(m), err)
			}
			saved, err := SavePlot(p, dir, f.stemOf(m))
			files = append(files, saved...)
			if err != nil {
				return files, fmt.Errorf("report: %w", err)
			}
		}
	}
	return files, nil
}

// SavePlot writes p into dir as stem.png (to embed in Markdown) and
// stem.svg (to print) and returns the files written.
func SavePlot(p *plot.Plot, dir, stem string) ([]string, error) {
	var files []string
	for _, ext := range []string{".png", ".svg"} {
		name := filepath.Join(dir, stem+ext)
		if err := plotfile.Save(p, name, vg.Length(PlotWidthInches)*vg.Inch, vg.Length(PlotHeightInches)*vg.Inch, PlotDPI); err != nil {
			return files, fmt.Errorf("%s: %w", name, err)
		}
		files = append(files, name)
	}
	return files, nil
}

// Series is one line of a figure with its error bars.
type Series struct {
	plotter.XYs
	plotter.YErrors
}

// Add appends a point whose error bar is ci, none where ci is undefined
// (one sample): a NaN bar would make the figure's y range NaN.
func (s *Series) Add(x, y, ci float64) {
	if math.IsNaN(ci) || math.IsInf(ci, 0) || ci < 0 {
		ci = 0
	}
	s.XYs = append(s.XYs, plotter.XY{X: x, Y: y})
	s.YErrors = append(s.YErrors, struct{ Low, High float64 }{ci, ci})
}

// newPlot starts a figure in the lab's style; bar charts' categories need
// no vertical grid lines.
func newPlot(title, ylabel string, verticalGrid bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(8)
	p.Y.Label.Text = ylabel
	p.Legend.Padding = vg.Points(2)
	p.Legend.XOffs = -vg.Points(6)
	g := plotter.NewGrid()
	if !verticalGrid {
		g.Vertical.Color = nil
	}
	p.Add(g)
	return p
}

// fitY sets y from 0 (an axis that does not start at 0 exaggerates
// differences) to above the highest error bar (the top of what p.Add
// added), with headroom for a legend of that many entries at the top.
func fitY(p *plot.Plot, legend int) {
	top := p.Y.Max
	if !(top > 0) {
		top = 1
	}
	p.Y.Min = 0
	p.Y.Max = top * (1.08 + 0.07*float64(legend))
}

// LineFigure is a figure of lines, as the campaigns and the mesh lab draw
// them.
type LineFigure struct {
	Title, XLabel, YLabel string
	// Series are drawn under Labels, each in its colour and marker with
	// its error bars; an empty one is left out but keeps its colour and
	// its place in the legend's headroom.
	Labels []string
	Series []Series
	// Dashed are the series drawn with a dashed line.
	Dashed     []bool
	XMin, XMax float64
	// Ticks are the x axis's; gonum's own when nil.
	Ticks []plot.Tick
}

// Plot draws the figure.
func (f *LineFigure) Plot() (*plot.Plot, error) {
	p := newPlot(f.Title, f.YLabel, true)
	p.X.Label.Text = f.XLabel
	p.Legend.Top = true
	for i := range f.Series {
		d := &f.Series[i]
		if d.Len() == 0 {
			continue
		}
		line, pts, err := plotter.NewLinePoints(d)
		if err != nil {
			return nil, err
		}
		bars, err := plotter.NewYErrorBars(d)
		if err != nil {
			return nil, err
		}
		col := plotutil.Color(i)
		line.Color, line.Width = col, vg.Points(1.2)
		if i < len(f.Dashed) && f.Dashed[i] {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		pts.Color, pts.Shape, pts.Radius = col, plotutil.Shape(i), vg.Points(3)
		bars.Color, bars.CapWidth = col, vg.Points(6)
		p.Add(line, pts, bars)
		p.Legend.Add(f.Labels[i], line, pts)
	}
	fitY(p, len(f.Labels))
	p.X.Min, p.X.Max = f.XMin, f.XMax
	if f.Ticks != nil {
		p.X.Tick.Marker = plot.ConstantTicks(f.Ticks)
	}
	return p, nil
}

// linePlot draws m against the figure's x axis, a series per transport.
func linePlot(run *results.Run, f *figure, m pointColumn) (*plot.Plot, error) {
	ticks, numeric := scaleFor(run, f.x)
	lf := LineFigure{Title: f.title, XLabel: f.x, YLabel: m.title, Labels: f.series, Series: make([]Series, len(f.series))}
	if numeric {
		lf.XLabel = axisTitles[f.x]
	}
	for si, label := range f.series {
		for _, t := range ticks {
			for _, pt := range f.points {
				if q, ok := pt.Param(f.x); ok && pt.Label == label && q.Text == t.Label && measured(&pt, m) {
					s := m.of(&pt)
					lf.Series[si].Add(t.Value, s.Mean, s.CI95)
				}
			}
		}
	}
	lo, hi := ticks[0].Value, ticks[len(ticks)-1].Value
	pad := 0.05 * (hi - lo)
	if pad == 0 {
		pad = 0.5
		if numeric && lo != 0 {
			pad = math.Abs(lo) * 0.1
		}
	}
	lf.XMin, lf.XMax = lo-pad, hi+pad
	if !numeric || len(ticks) <= maxValueTicks {
		for _, t := range ticks {
			// A ratio keeps the scenario's text ("1:3"), as the paper writes it.
			if numeric && !strings.HasSuffix(f.x, "_ratio") {
				t.Label = strconv.FormatFloat(t.Value, 'g', 4, 64)
			}
			lf.Ticks = append(lf.Ticks, t)
		}
	}
	return lf.Plot()
}

// barPlot draws a run without sweep axes, a bar per transport. Each bar is
// its own BarChart so that it takes the colour of the label's line in
// swept figures.
func barPlot(_ *results.Run, f *figure, m pointColumn) (*plot.Plot, error) {
	p := newPlot(f.title, m.title, false)
	p.X.Label.Text = "transport"
	var d Series
	for si, label := range f.series {
		i := slices.IndexFunc(f.points, func(pt results.Point) bool { return pt.Label == label && measured(&pt, m) })
		if i < 0 {
			continue // one point per label without sweep axes
		}
		s := m.of(&f.points[i])
		bar, err := plotter.NewBarChart(plotter.Values{s.Mean}, vg.Points(36))
		if err != nil {
			return nil, err
		}
		bar.XMin = float64(si)
		bar.Color = plotutil.Color(si)
		bar.LineStyle.Width = vg.Points(0.5)
		p.Add(bar)
		d.Add(float64(si), s.Mean, s.CI95)
	}
	if d.Len() > 0 {
		bars, err := plotter.NewYErrorBars(&d)
		if err != nil {
			return nil, err
		}
		bars.CapWidth = vg.Points(8)
		bars.Width = vg.Points(1.2)
		p.Add(bars)
	}
	fitY(p, 0)
	p.NominalX(f.series...) // a figure has a point, so a series
	p.X.Min, p.X.Max = -0.6, float64(len(f.series))-0.4
	return p, nil
}

// figure is one plot and its table: the points that share every sweep
// value except the x axis's.
type figure struct {
	base, key, title string          // base and key make the file names (stemOf)
	x                string          // "" without a sweep axis (a bar chart)
	points           []results.Point // failed ones too, for the tables
	series           []string        // the labels in order of first appearance
}

// scaleFor is a tick per distinct text of axis over the whole run, so that
// every figure has the same ticks: at its Param.Value if numeric, else at
// 0, 1, … in order of first appearance. An axis is numeric only if no two
// of its texts share a value (a uniform and a Gilbert-Elliott loss of the
// same mean would otherwise be drawn as one setting).
func scaleFor(run *results.Run, axis string) (ticks []plot.Tick, numeric bool) {
	for i := range run.Points {
		q, ok := run.Points[i].Param(axis)
		if ok && !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Label == q.Text }) {
			ticks = append(ticks, plot.Tick{Value: q.Value, Label: q.Text})
		}
	}
	_, numeric = axisTitles[axis]
	for i, t := range ticks {
		if math.IsNaN(t.Value) || math.IsInf(t.Value, 0) || slices.ContainsFunc(ticks[:i], func(u plot.Tick) bool { return u.Value == t.Value }) {
			numeric = false
		}
	}
	if numeric {
		slices.SortStableFunc(ticks, func(a, b plot.Tick) int { return cmp.Compare(a.Value, b.Value) })
		return ticks, true
	}
	for i := range ticks {
		ticks[i].Value = float64(i)
	}
	return ticks, false
}

// figures splits the run: x is the first sweep axis, a figure per
// combination of the other sweep axes' values.
func figures(run *results.Run) []figure {
	sweep := sweepAxes(run)
	var x string
	if len(sweep) > 0 {
		x, sweep = sweep[0], sweep[1:]
	}
	var figs []figure
	index := map[string]int{} // by the other axes' texts
	for i := range run.Points {
		p := &run.Points[i]
		var texts, title []string
		key := ""
		if x != "" {
			key = "-vs-" + sanitize(x)
		}
		for _, a := range sweep {
			q, _ := p.Param(a)
			texts = append(texts, q.Text)
			key += "-" + sanitize(a) + "-" + sanitize(q.Text)
			title = append(title, a+" = "+q.Text)
		}
		fi, ok := index[strings.Join(texts, "\x00")]
		if !ok {
			if slices.ContainsFunc(figs, func(f figure) bool { return f.key == key }) {
				key += "-" + strconv.Itoa(len(figs)+1)
			}
			fi, index[strings.Join(texts, "\x00")] = len(figs), len(figs)
			f := figure{base: cmp.Or(sanitize(run.Scenario), "run"), key: key, title: run.Scenario, x: x}
			if len(title) > 0 {
				f.title += ": " + strings.Join(title, ", ")
			}
			figs = append(figs, f)
		}
		f := &figs[fi]
		f.points = append(f.points, *p)
		if !slices.Contains(f.series, p.Label) {
			f.series = append(f.series, p.Label)
		}
	}
	return figs
}

// stemOf is the file name, without extension, of the figure's plot of m.
func (f *figure) stemOf(m pointColumn) string { return f.base + "-" + m.name + f.key }

// sanitize makes a file-name part from scenario text, "1%" and "1:3"
// readable as "1pct" and "1to3".
func sanitize(s string) string {
	s = strings.NewReplacer("%", "pct", ":", "to", "/", "-per-").Replace(strings.ToLower(s))
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_')
	}), "-")
}
