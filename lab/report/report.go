// Package report writes a lab run (results.Run) as the files docs/lab.md
// describes; the bench and the mesh lab write through the same Doc.
// Everything here is a pure function of its input (rows in point order,
// maps in sorted key order), so a committed report only changes when the
// data does.
package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

const (
	// PlotWidthInches and PlotHeightInches are a single-column figure with
	// room for a legend of five transports.
	PlotWidthInches  = 6.0
	PlotHeightInches = 4.0
	// PlotDPI is the PNG resolution: 150 dpi keeps tick labels legible
	// when the image is shown at its natural size on a high-density screen.
	PlotDPI = 150

	FileJSON     = "results.json"
	FileSamples  = "samples.csv"
	FileSummary  = "summary.csv"
	FileMarkdown = "report.md"
)

// axisTitles name the x axis for the axes whose Param.Value can be placed
// on a linear x axis (any other is drawn as categories), in the units the
// scenario package fixes.
var axisTitles = map[string]string{
	"rtt":        "RTT (ms)",
	"rtt_ratio":  "RTT ratio (primary:secondary)",
	"rate":       "rate per path (Mbit/s)",
	"rate_ratio": "rate ratio (primary:secondary)",
	"loss":       "mean loss rate (%)",
}

// allAxes is the run's axes in Params order. A Run written without Axes
// (an older or hand-made file) takes them from its first point.
func allAxes(run *results.Run) []string {
	if len(run.Axes) > 0 {
		return run.Axes
	}
	var out []string
	for _, p := range run.Points {
		for _, q := range p.Params {
			if !slices.Contains(out, q.Axis) {
				out = append(out, q.Axis)
			}
		}
	}
	return out
}

// hasValue reports whether an axis is a network axis: transport and
// scheduler are part of a transport's identity (its label), never an x axis
// or a figure of their own.
func hasValue(axis string) bool { return axis != "transport" && axis != "scheduler" }

// sweepAxes are the network axes of the run.
func sweepAxes(run *results.Run) []string {
	return slices.DeleteFunc(slices.Clone(allAxes(run)), func(a string) bool { return !hasValue(a) })
}

// summaryOf is the point's goodput summary, made from the samples where the
// Run (by hand or an older runner) has none; without samples its fields
// are NaN, not 0.
func summaryOf(p *results.Point) *stats.Summary {
	if p.Goodput.N > 0 {
		return &p.Goodput
	}
	xs := make([]float64, len(p.Samples))
	for i, s := range p.Samples {
		xs[i] = s.GoodputMbps
	}
	s := stats.Summarize(xs)
	return &s
}

// metrics are what the figures plot, each where a figure has it: a
// metric's name is in its plots' file names, its title is their y label.
var (
	goodput      = pointColumn{"goodput", "goodput (Mbit/s)", summaryOf}
	addedDelay   = latencyColumn("added-delay-p95", "added delay, p95 (ms)", func(l *results.LatencySummary) *stats.Summary { return &l.AddedP95Ms })
	realtimeMiss = realtimeColumn("realtime-miss", "real-time packets lost or late (%)", func(r *results.RealtimeSummary) *stats.Summary { return &r.MissPct })
	metrics      = []pointColumn{goodput, addedDelay, realtimeMiss}
)

// measured reports whether the point has a mean of m to plot.
func measured(p *results.Point, m pointColumn) bool {
	s := m.of(p)
	return s != nil && p.Error == "" && s.N > 0 && !math.IsNaN(s.Mean) && !math.IsInf(s.Mean, 0)
}

// keysOf is the sorted union of the keys of each x's map m(x).
func keysOf[T, V any](xs []T, m func(*T) map[string]V) []string {
	set := map[string]bool{}
	for i := range xs {
		for k := range m(&xs[i]) {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// sharePaths is the sorted union of every point's PathShares keys.
func sharePaths(run *results.Run) []string {
	return keysOf(run.Points, func(p *results.Point) map[string]float64 { return p.PathShares })
}

// sizeString writes a download size the way the scenario files do.
func sizeString(n int64) string {
	switch {
	case n <= 0:
		return "unknown"
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB (%d bytes)", n>>20, n)
	case n%1_000_000 == 0:
		return fmt.Sprintf("%d MB (%d bytes)", n/1_000_000, n)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB (%d bytes)", n>>10, n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Document is the run's report as a Doc, with the campaign's own Markdown.
func Document(run *results.Run) *Doc {
	return &Doc{
		JSON:     run,
		CSV:      []CSV{{FileSamples, sampleRows(run)}, {FileSummary, summaryRows(run)}},
		Plot:     func(dir string) ([]string, error) { return Plot(run, dir) },
		Markdown: func(w io.Writer, plots []string) error { return Markdown(w, run, plots) },
	}
}
