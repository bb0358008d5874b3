package report

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"

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

// Plot draws the run's figures into dir as PNG and SVG and returns the
// files written, PNG before SVG for each figure, in figure order.
//
// x is the first sweep axis (rtt, rtt_ratio, rate, rate_ratio, loss;
// categories for an axis without a meaningful number), y the goodput in
// Mbit/s, one series per transport label with its 95% confidence interval
// as error bars, as in the paper's figures. Each value of the further
// sweep axes gets a figure of its own; a run without a sweep axis gets one
// bar chart of its transports. Failed points are left out of the plot (the
// report's tables list them). File names are the scenario name, "goodput",
// the x axis and the other axes' values: rtt-ratio-goodput-vs-rtt_ratio-
// loss-gemodel-1pct-75pct-50pct-0pct.png.
func Plot(run *results.Run, dir string) ([]string, error) {
	var files []string
	for _, f := range figures(run) {
		for _, m := range metrics {
			if m.name != goodput.name && !f.has(m) {
				continue
			}
			var p *plot.Plot
			var err error
			if f.x == "" {
				p, err = barPlot(&f, m)
			} else {
				p, err = linePlot(run, &f, m)
			}
			stem := f.stemOf(m)
			if err != nil {
				return files, fmt.Errorf("report: figure %s: %w", stem, err)
			}
			for _, ext := range []string{".png", ".svg"} {
				name := filepath.Join(dir, stem+ext)
				if err := plotfile.Save(p, name, vg.Length(PlotWidthInches)*vg.Inch, vg.Length(PlotHeightInches)*vg.Inch, PlotDPI); err != nil {
					return files, fmt.Errorf("report: %w", err)
				}
				files = append(files, name)
			}
		}
	}
	return files, nil
}

// seriesData is one transport's points on a figure, sorted by x; it is
// the XYer and YErrorer the plotters take.
type seriesData struct {
	x, y, ci []float64
}

func (s *seriesData) Len() int                        { return len(s.x) }
func (s *seriesData) XY(i int) (float64, float64)     { return s.x[i], s.y[i] }
func (s *seriesData) YError(i int) (float64, float64) { return s.ci[i], s.ci[i] }

// errHalf is the error bar's half-height: the CI, or nothing where the CI
// is undefined (one sample), which the table then marks.
func errHalf(ci float64) float64 {
	if math.IsNaN(ci) || math.IsInf(ci, 0) || ci < 0 {
		return 0
	}
	return ci
}

func newPlot(title, ylabel string, verticalGrid bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(8)
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Legend.Padding = vg.Points(2)
	p.Legend.XOffs = -vg.Points(6)
	g := plotter.NewGrid()
	if !verticalGrid {
		g.Vertical.Color = nil
	}
	p.Add(g)
	return p
}

// fitY sets the y range from 0 to above the highest error bar, with
// headroom for a legend of n entries at the top so it does not cover the
// data.
func fitY(p *plot.Plot, top float64, legend int) {
	if !(top > 0) {
		top = 1
	}
	p.Y.Min = 0
	p.Y.Max = top * (1.08 + 0.07*float64(legend))
}

func linePlot(run *results.Run, f *figure, m metric) (*plot.Plot, error) {
	sc := scaleFor(run, f.x)
	p := newPlot(f.title, m.ylabel, true)
	if t, ok := axisTitles[f.x]; ok && sc.numeric {
		p.X.Label.Text = t
	} else {
		p.X.Label.Text = f.x
	}
	p.Legend.Top = true

	top := 0.0
	for si, label := range f.series {
		var d seriesData
		for _, pt := range f.points {
			if pt.Label != label || !measured(pt, m) {
				continue
			}
			q, ok := paramOf(pt, f.x)
			if !ok {
				continue
			}
			x, ok := sc.position(q.Text)
			if !ok {
				continue
			}
			s, _ := m.of(pt)
			d.x = append(d.x, x)
			d.y = append(d.y, s.Mean)
			d.ci = append(d.ci, errHalf(s.CI95))
			top = math.Max(top, s.Mean+errHalf(s.CI95))
		}
		if d.Len() == 0 {
			continue
		}
		sortSeries(&d)
		col := plotutil.Color(si)
		line, pts, err := plotter.NewLinePoints(&d)
		if err != nil {
			return nil, err
		}
		line.Color = col
		line.Width = vg.Points(1.2)
		pts.Color = col
		pts.Shape = plotutil.Shape(si)
		pts.Radius = vg.Points(3)
		bars, err := plotter.NewYErrorBars(&d)
		if err != nil {
			return nil, err
		}
		bars.Color = col
		bars.CapWidth = vg.Points(6)
		p.Add(line, pts, bars)
		p.Legend.Add(label, line, pts)
	}
	fitY(p, top, len(f.series))

	lo, hi := sc.pos[0], sc.pos[len(sc.pos)-1]
	if !sc.numeric {
		lo, hi = 0, float64(len(sc.pos)-1)
	}
	pad := 0.05 * (hi - lo)
	if pad == 0 {
		pad = 0.5
		if sc.numeric && lo != 0 {
			pad = math.Abs(lo) * 0.1
		}
	}
	p.X.Min, p.X.Max = lo-pad, hi+pad
	if !sc.numeric || len(sc.pos) <= maxValueTicks {
		ticks := make(plot.ConstantTicks, len(sc.pos))
		for i := range sc.pos {
			label := sc.texts[i]
			if sc.numeric && !ratioAxes[f.x] {
				label = strconv.FormatFloat(sc.pos[i], 'g', 4, 64)
			}
			ticks[i] = plot.Tick{Value: sc.pos[i], Label: label}
		}
		p.X.Tick.Marker = ticks
	}
	return p, nil
}

// sortSeries orders a series by x so that its line does not double back
// (categorical positions already arrive in order; values may not).
func sortSeries(d *seriesData) {
	for i := 1; i < len(d.x); i++ {
		for j := i; j > 0 && d.x[j] < d.x[j-1]; j-- {
			d.x[j], d.x[j-1] = d.x[j-1], d.x[j]
			d.y[j], d.y[j-1] = d.y[j-1], d.y[j]
			d.ci[j], d.ci[j-1] = d.ci[j-1], d.ci[j]
		}
	}
}

// barPlot draws a run without sweep axes: a bar per transport label with
// its interval. Each bar is its own BarChart so that it takes its series
// colour, the same as the label's line in swept figures.
func barPlot(f *figure, m metric) (*plot.Plot, error) {
	p := newPlot(f.title, m.ylabel, false)
	p.X.Label.Text = "transport"
	top := 0.0
	var d seriesData
	for si, label := range f.series {
		for _, pt := range f.points {
			if pt.Label != label || !measured(pt, m) {
				continue
			}
			s, _ := m.of(pt)
			bar, err := plotter.NewBarChart(plotter.Values{s.Mean}, vg.Points(36))
			if err != nil {
				return nil, err
			}
			bar.XMin = float64(si)
			bar.Color = plotutil.Color(si)
			bar.LineStyle.Width = vg.Points(0.5)
			p.Add(bar)
			d.x = append(d.x, float64(si))
			d.y = append(d.y, s.Mean)
			d.ci = append(d.ci, errHalf(s.CI95))
			top = math.Max(top, s.Mean+errHalf(s.CI95))
			break // one point per label without sweep axes
		}
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
	fitY(p, top, 0)
	if len(f.series) > 0 {
		p.NominalX(f.series...)
		p.X.Min, p.X.Max = -0.6, float64(len(f.series))-0.4
	}
	return p, nil
}
