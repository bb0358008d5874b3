// Package report turns a lab run (results.Run) into what a reader of the
// paper would look for: every sample as JSON and CSV so that anyone can redo
// the statistics, a per-point summary, figures in the paper's style (goodput
// in Mbit/s against the swept parameter, one series per transport, 95%
// confidence intervals as error bars) and a Markdown report that states the
// setup next to the numbers, because a goodput without its RTT, loss, size
// and repetitions cannot be compared with anything.
//
// The bench and the mesh lab write their reports through the same writer
// (Doc), filled from their own results.
//
// Everything here is a pure function of the Run: the same Run gives the same
// bytes (rows and series follow the Run's point order, maps are written in
// sorted key order), so a committed report only changes when the data does.
package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

// Figure geometry and output names. One block so that the report, the
// plots and docs/lab.md agree.
const (
	// PlotWidthInches and PlotHeightInches are a single-column figure with
	// room for a legend of five transports.
	PlotWidthInches  = 6.0
	PlotHeightInches = 4.0
	// PlotDPI is the PNG resolution: 150 dpi keeps tick labels legible
	// when the image is shown at its natural size on a high-density screen.
	PlotDPI = 150

	// File names written by WriteAll inside its directory.
	FileJSON     = "results.json"
	FileSamples  = "samples.csv"
	FileSummary  = "summary.csv"
	FileMarkdown = "report.md"
)

// Axes that are part of a transport's identity rather than of the network:
// they make series (the label already carries the scheduler), never an x
// axis or a figure of their own.
const (
	axisTransport = "transport"
	axisScheduler = "scheduler"
)

// numericAxes are the axes whose Param.Value is a quantity that can be
// placed on a linear x axis; any other axis is drawn as categories.
var numericAxes = map[string]bool{
	"rtt":        true,
	"rtt_ratio":  true,
	"rate":       true,
	"rate_ratio": true,
	"loss":       true,
}

// axisTitles name the x axis of a figure; Param.Value units are fixed by
// the scenario package (ms, ratio, Mbit/s, percent).
var axisTitles = map[string]string{
	"rtt":        "RTT (ms)",
	"rtt_ratio":  "RTT ratio (primary:secondary)",
	"rate":       "rate per path (Mbit/s)",
	"rate_ratio": "rate ratio (primary:secondary)",
	"loss":       "mean loss rate (%)",
}

// ratioAxes have their ticks labelled with the scenario's text ("1:3")
// rather than the bare number, as the paper's Table 2 writes them.
var ratioAxes = map[string]bool{"rtt_ratio": true, "rate_ratio": true}

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

// sweepAxes are the network axes: allAxes without transport and scheduler.
func sweepAxes(run *results.Run) []string {
	var out []string
	for _, a := range allAxes(run) {
		if a != axisTransport && a != axisScheduler {
			out = append(out, a)
		}
	}
	return out
}

// hasValue reports whether an axis's Param.Value carries information (the
// scenario package sets 0 for transport and scheduler).
func hasValue(axis string) bool { return axis != axisTransport && axis != axisScheduler }

// summaryOf is the point's goodput summary. The runner fills Goodput; a Run
// assembled by hand or by an older runner may not have, and then the
// samples are summarized here so that nothing downstream shows an empty
// point that has data, and a point without samples has NaN (not 0) fields.
func summaryOf(p *results.Point) stats.Summary {
	if p.Goodput.N > 0 {
		return p.Goodput
	}
	xs := make([]float64, len(p.Samples))
	for i, s := range p.Samples {
		xs[i] = s.GoodputMbps
	}
	return stats.Summarize(xs)
}

// metric is a quantity a figure plots against its x axis, one series per
// transport, as the mean and 95% interval over the point's repetitions.
type metric struct {
	name   string // in the plot's file name
	ylabel string
	// of is the point's summary, or false when the point has none.
	of func(p *results.Point) (stats.Summary, bool)
}

var (
	goodput = metric{"goodput", "goodput (Mbit/s)", func(p *results.Point) (stats.Summary, bool) { return summaryOf(p), true }}
	// addedDelay is the latency probes' 95th percentile of added delay.
	addedDelay = metric{"added-delay-p95", "added delay, p95 (ms)", func(p *results.Point) (stats.Summary, bool) {
		if p.Latency == nil {
			return stats.Summary{}, false
		}
		return p.Latency.AddedP95Ms, true
	}}
	// realtimeMiss is the real-time packets lost or late.
	realtimeMiss = metric{"realtime-miss", "real-time packets lost or late (%)", func(p *results.Point) (stats.Summary, bool) {
		if p.Realtime == nil {
			return stats.Summary{}, false
		}
		return p.Realtime.MissPct, true
	}}
	// metrics are plotted in this order, each where a figure has it.
	metrics = []metric{goodput, addedDelay, realtimeMiss}
)

// measured reports whether the point has a mean of m to plot.
func measured(p *results.Point, m metric) bool {
	s, ok := m.of(p)
	return ok && p.Error == "" && s.N > 0 && !math.IsNaN(s.Mean) && !math.IsInf(s.Mean, 0)
}

// sharePaths is the sorted union of every point's PathShares keys.
func sharePaths(run *results.Run) []string {
	var out []string
	for _, p := range run.Points {
		out = addKeys(out, p.PathShares)
	}
	slices.Sort(out)
	return out
}

// bytePaths is the sorted union of every sample's PathBytes keys.
func bytePaths(run *results.Run) []string {
	var out []string
	for _, p := range run.Points {
		for _, s := range p.Samples {
			out = addKeys(out, s.PathBytes)
		}
	}
	slices.Sort(out)
	return out
}

// addKeys appends the keys of m that out lacks.
func addKeys[V any](out []string, m map[string]V) []string {
	for k := range m {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// optionsString writes options as "k=v;k=v" in key order: one CSV cell,
// stable from run to run although Go randomizes map iteration.
func optionsString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m[k])
	}
	return b.String()
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

// WriteAll writes the whole report into dir (created if missing):
// results.json, samples.csv, summary.csv, the figures (PNG and SVG) and
// report.md, which links the figures by names relative to dir.
func WriteAll(run *results.Run, dir string) error {
	_, err := Document(run).Write(dir)
	return err
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
