// Package figures draws the route study's figures (the seed's Figs 6–9)
// with gonum/plot, in the lab report's style: 6 × 4 inch figures, PNG at
// 150 dpi and SVG, greedy algorithms in solid lines, optimal ones dashed.
package figures

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/internal/plotfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/braid-vpn/braid/route"
	"github.com/braid-vpn/braid/route/study"
)

// Figure sizes and resolution: the lab report's single-column figure,
// and a square one for topologies, whose metres should look like metres.
const (
	WidthInches    = 6.0
	HeightInches   = 4.0
	TopologyInches = 6.0
	DPI            = 150
)

// Save writes p to name as PNG or SVG, chosen by the extension.
func Save(p *plot.Plot, name string, w, h vg.Length) error {
	return plotfile.Save(p, name, w, h, DPI)
}

// WriteStudy draws Figs 7, 8 and 9 of res into dir, each as PNG and SVG,
// and returns the files written. A figure without data (no Fig 7 runs,
// no Figs 8–9 topologies) is left out.
func WriteStudy(res *study.Result, dir string) ([]string, error) {
	type fig struct {
		stem string
		make func(*study.Result) (*plot.Plot, error)
		ok   bool
	}
	figs := []fig{
		{"fig7-multipath-share", Feasibility, len(res.Feasibility) > 0},
		{"fig8-routes-cdf", RouteCounts, res.Routes != nil && res.Routes.Topologies > 0},
		{"fig9-hops-cdf", HopCounts, res.Routes != nil && res.Routes.Topologies > 0},
	}
	var files []string
	w, h := vg.Length(WidthInches)*vg.Inch, vg.Length(HeightInches)*vg.Inch
	for _, f := range figs {
		if !f.ok {
			continue
		}
		p, err := f.make(res)
		if err != nil {
			return files, fmt.Errorf("figures: %s: %w", f.stem, err)
		}
		for _, ext := range []string{".png", ".svg"} {
			name := filepath.Join(dir, f.stem+ext)
			if err := Save(p, name, w, h); err != nil {
				return files, err
			}
			files = append(files, name)
		}
	}
	return files, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Padding = vg.Points(2)
	p.Add(plotter.NewGrid())
	return p
}

// colourIndex gives an algorithm the same colour in every figure: ld,
// nd, zd, then the link- and node-disjoint optimum, then the shortest
// path.
func colourIndex(name string) int {
	switch {
	case strings.HasPrefix(name, "ld"):
		return 0
	case strings.HasPrefix(name, "nd"):
		return 1
	case strings.HasPrefix(name, "zd"):
		return 2
	case name == "max-link", strings.HasPrefix(name, "opt-link"):
		return 3
	case name == "max-node", strings.HasPrefix(name, "opt-node"):
		return 4
	}
	return 5
}

// colour is the algorithm's colour; the plain shortest path is black.
func colour(name string) color.Color {
	i := colourIndex(name)
	if i == 5 {
		return color.Black
	}
	return plotutil.Color(i)
}

// style draws greedy series solid and wide and optimal ones dashed and
// narrower on top, so that where the optimum equals the greedy result
// (LD and max-link mostly do) both stay visible.
func style(l *plotter.Line, name string) {
	l.Color = colour(name)
	l.Width = vg.Points(2.2)
	if optimal(name) {
		l.Width = vg.Points(1.3)
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
}

func optimal(name string) bool {
	return strings.HasPrefix(name, "max-") || strings.HasPrefix(name, "opt-")
}

// Feasibility is Fig 7: the share of topologies with at least two
// disjoint paths against the number of nodes, one line per algorithm.
func Feasibility(res *study.Result) (*plot.Plot, error) {
	p := newPlot(fmt.Sprintf("Topologies with ≥ 2 disjoint paths (%d per node count)", res.Config.Runs),
		"nodes", "multipath topologies (%)")
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min, p.Y.Max = 0, 100
	ticks := plot.ConstantTicks{}
	for _, f := range res.Feasibility {
		ticks = append(ticks, plot.Tick{Value: float64(f.Nodes), Label: strconv.Itoa(f.Nodes)})
	}
	if len(ticks) <= 12 {
		p.X.Tick.Marker = ticks
	}
	for i, a := range study.CountSeries {
		xy := make(plotter.XYs, len(res.Feasibility))
		for k, f := range res.Feasibility {
			xy[k] = plotter.XY{X: float64(f.Nodes), Y: 100 * f.Share(a)}
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, err
		}
		style(l, string(a))
		pts.Color = colour(string(a))
		pts.Shape = plotutil.Shape(i)
		pts.Radius = vg.Points(2.5)
		p.Add(l, pts)
		p.Legend.Add(string(a), l, pts)
	}
	return p, nil
}

// cdf turns a histogram into the steps of its cumulative distribution:
// one point per value from 0 to one past the largest, so that a
// post-step line ends with a visible last step.
func cdf(h []int) plotter.XYs {
	n := 0
	for _, c := range h {
		n += c
	}
	xy := make(plotter.XYs, 0, len(h)+1)
	cum := 0
	for v, c := range h {
		cum += c
		xy = append(xy, plotter.XY{X: float64(v), Y: float64(cum) / float64(max(n, 1))})
	}
	xy = append(xy, plotter.XY{X: float64(len(h)), Y: 1})
	return xy
}

func cdfPlot(title, x string, names []string, hists [][]int, lo int) (*plot.Plot, error) {
	p := newPlot(title, x, "P(X ≤ x)")
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(6)
	p.Y.Min, p.Y.Max = 0, 1.02
	hi := 0
	for _, h := range hists {
		hi = max(hi, len(h))
	}
	p.X.Min, p.X.Max = float64(lo)-0.5, float64(hi)+0.5
	ticks := plot.ConstantTicks{}
	for v := lo; v <= hi; v++ {
		ticks = append(ticks, plot.Tick{Value: float64(v), Label: strconv.Itoa(v)})
	}
	p.X.Tick.Marker = ticks
	for i, h := range hists {
		l, err := plotter.NewLine(cdf(h))
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.PostStep
		style(l, names[i])
		p.Add(l)
		p.Legend.Add(names[i], l)
	}
	return p, nil
}

// RouteCounts is Fig 8: the distribution (CDF) of the number of paths
// each algorithm finds on the topologies where LD, ND and ZD all find two.
func RouteCounts(res *study.Result) (*plot.Plot, error) {
	r := res.Routes
	var names []string
	var hists [][]int
	for _, a := range study.CountSeries {
		names = append(names, string(a))
		hists = append(hists, r.Counts[a])
	}
	return cdfPlot(fmt.Sprintf("Number of paths (%d nodes, %d topologies)", r.Nodes, r.Topologies), "paths found", names, hists, 1)
}

// HopCounts is Fig 9: the distribution (CDF) of the hop counts of the
// shortest path, of each greedy algorithm's second path and of the
// longer path of each cheapest pair.
func HopCounts(res *study.Result) (*plot.Plot, error) {
	r := res.Routes
	names := []string{"shortest", "ld-2nd", "nd-2nd", "zd-2nd", "opt-link-2nd", "opt-node-2nd"}
	var hists [][]int
	for _, n := range names {
		hists = append(hists, r.Hops[n])
	}
	return cdfPlot(fmt.Sprintf("Hops of the two preferred paths (%d nodes, %d topologies)", r.Nodes, r.Topologies), "hops", names, hists, 1)
}

// Topology draws g like the seed's Fig 6: nodes with their IDs, links in
// grey, each path in its own colour, the source and destination marked.
// Nodes without positions are placed on a circle.
func Topology(g *route.Graph, src, dst int, paths []route.Path, title string) (*plot.Plot, error) {
	pos := positions(g)
	p := newPlot(title, "x (m)", "y (m)")
	p.Legend.Top = true
	grey := color.Gray{Y: 170}
	for _, e := range g.Edges() {
		l, err := plotter.NewLine(plotter.XYs{pos[e.A], pos[e.B]})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = grey, vg.Points(0.6)
		p.Add(l)
	}
	for i, path := range paths {
		xy := make(plotter.XYs, len(path))
		for k, v := range path {
			xy[k] = pos[v]
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = plotutil.Color(i), vg.Points(2.6)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("path %d: %d hops", i+1, path.Hops()), l)
	}
	all := make(plotter.XYs, g.Len())
	labels := make([]string, g.Len())
	for i := range g.Len() {
		all[i] = pos[i]
		labels[i] = g.ID(i)
	}
	nodes, err := plotter.NewScatter(all)
	if err != nil {
		return nil, err
	}
	nodes.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
	p.Add(nodes)
	for _, end := range []struct {
		v    int
		name string
		c    color.Color
	}{{src, "source", color.RGBA{R: 200, A: 255}}, {dst, "destination", color.RGBA{B: 200, A: 255}}} {
		s, err := plotter.NewScatter(plotter.XYs{pos[end.v]})
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: end.c, Radius: vg.Points(5), Shape: draw.BoxGlyph{}}
		p.Add(s)
		p.Legend.Add(fmt.Sprintf("%s %s", end.name, g.ID(end.v)), s)
	}
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: all, Labels: labels})
	if err != nil {
		return nil, err
	}
	lab.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(3)}
	p.Add(lab)
	// Equal scales on both axes, with room for labels and the legend.
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, q := range all {
		xmin, xmax = math.Min(xmin, q.X), math.Max(xmax, q.X)
		ymin, ymax = math.Min(ymin, q.Y), math.Max(ymax, q.Y)
	}
	span := math.Max(math.Max(xmax-xmin, ymax-ymin), 1)
	cx, cy := (xmin+xmax)/2, (ymin+ymax)/2
	half := span/2 + 0.08*span
	// Both axes span the same metres on a square canvas; the top fifth
	// is left free for the legend.
	p.X.Min, p.X.Max = cx-half-0.1*span, cx+half+0.1*span
	p.Y.Min, p.Y.Max = cy-half, cy+half+0.2*span
	return p, nil
}

// positions are the nodes' positions, or a circle when any is missing.
func positions(g *route.Graph) []plotter.XY {
	pos := make([]plotter.XY, g.Len())
	all := true
	for i := range g.Len() {
		n := g.Node(i)
		all = all && n.HasPos
		pos[i] = plotter.XY{X: n.Pos.X, Y: n.Pos.Y}
	}
	if all {
		return pos
	}
	for i := range pos {
		a := 2 * math.Pi * float64(i) / float64(len(pos))
		pos[i] = plotter.XY{X: 50 + 40*math.Cos(a), Y: 50 + 40*math.Sin(a)}
	}
	return pos
}
