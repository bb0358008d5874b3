package report

import (
	"slices"
	"strconv"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/table"
)

// leadColumns are the columns both CSV files start with: the point, the
// run's axes (each axis's text, and for network axes also its numeric
// value, "rtt", "rtt_value", so that a spreadsheet can both group by the
// scenario's words and plot the numbers), then kind (the transport kind),
// label (its name in tables and plots) and options ("key=value;…" in key
// order). An axis that does not apply to the point (the scheduler of a
// transport without one) is left empty.
func leadColumns(run *results.Run) []column {
	cols := []column{{"point", func(p *results.Point) string { return strconv.Itoa(p.Index) }}}
	for _, a := range allAxes(run) {
		cols = append(cols, column{a, func(p *results.Point) string { q, _ := p.Param(a); return q.Text }})
		if hasValue(a) {
			cols = append(cols, column{a + "_value", func(p *results.Point) string {
				q, ok := p.Param(a)
				return orNone(table.CSV.Num(q.Value, -1), ok)
			}})
		}
	}
	return append(cols,
		column{"kind", func(p *results.Point) string { return p.Transport }},
		column{"label", func(p *results.Point) string { return p.Label }},
		column{"options", func(p *results.Point) string { return optionsString(p.Options) }})
}

// sampleRows is samples.csv, one row per sample: the lead columns, the
// download's (downloadSampleColumns), the bytes of each path, then those
// of the latency probes, the real-time flow, the bulk recovery and the
// path events where the run has them. Points that failed have no samples
// and so no rows; summary.csv lists them with their error.
func sampleRows(run *results.Run) [][]string {
	lead := pointRows(points(run.Points), leadColumns(run))
	cols := append(slices.Clone(downloadSampleColumns), sampleColumns(run)...)
	rows := [][]string{lead[0]}
	for _, c := range cols {
		rows[0] = append(rows[0], c.head)
	}
	for i := range run.Points {
		for _, s := range run.Points[i].Samples {
			row := slices.Clone(lead[1+i])
			for _, c := range cols {
				row = append(row, csvCell(c.cell(&s)))
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// summaryRows is summary.csv, one row per point: the lead columns, the
// goodput's n, mean, ci95, median, min, max and standard deviation, each
// path's share, then the competing flows', the latency probes', the
// real-time flow's (and outer_extra_vs_off_pct: its outer bytes per
// payload byte against the same network's transport of the same kind with
// recovery = "off"), the bulk recovery's (and within_bound: how many
// downloads' overhead was at most their bound) and the path events'
// figures as <figure>_mean and <figure>_ci95 where the run has them, and
// the error. ci95 is the half-width of the 95% Student-t interval (mean ±
// ci95), empty where it is undefined (fewer than two samples).
func summaryRows(run *results.Run) [][]string {
	num := func(x float64) string { return table.CSV.Num(x, -1) }
	cols := append(leadColumns(run), column{"n", func(p *results.Point) string { return strconv.Itoa(summaryOf(p).N) }})
	for i, h := range []string{"mean_mbps", "ci95_mbps", "median_mbps", "min_mbps", "max_mbps", "std_dev_mbps"} {
		cols = append(cols, column{h, func(p *results.Point) string {
			s := summaryOf(p)
			return num([]float64{s.Mean, s.CI95, s.Median, s.Min, s.Max, s.StdDev}[i])
		}})
	}
	for _, path := range sharePaths(run) {
		cols = append(cols, column{"share_" + path, func(p *results.Point) string {
			v, ok := p.PathShares[path]
			return orNone(num(v), ok)
		}})
	}
	if slices.ContainsFunc(run.Points, func(p results.Point) bool { return p.Competing != nil }) {
		cols = append(cols, csvColumns([]pointColumn{{"competing", "", func(p *results.Point) *stats.Summary { return p.Competing }}}, "_mbps")...)
	}
	lat, rt, rec := pointColumns(run)
	cols = append(cols, csvColumns(append(slices.Clone(lat), rt...), "")...)
	if rt != nil {
		cols = append(cols, column{"outer_extra_vs_off_pct", func(p *results.Point) string { return num(extraBytesPct(run, p)) }})
	}
	cols = append(cols, csvColumns(rec, "")...)
	if rec != nil {
		cols = append(cols, column{"within_bound", func(p *results.Point) string {
			if p.BulkRecovery == nil {
				return ""
			}
			return strconv.Itoa(p.BulkRecovery.WithinBound)
		}})
	}
	ev, _ := eventColumns(run)
	cols = append(cols, csvColumns(ev, "")...)
	return pointRows(points(run.Points), append(cols, column{"error", func(p *results.Point) string { return p.Error }}))
}

// points are pointers to ps's points.
func points(ps []results.Point) []*results.Point {
	out := make([]*results.Point, len(ps))
	for i := range ps {
		out[i] = &ps[i]
	}
	return out
}
