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

// sampleRows is samples.csv, one row per sample: the lead columns, rep,
// goodput_mbps, seconds, bytes, max_stall_ms, retransmits, reordered,
// reorder_timeouts, bytes_<path>…, then the latency probes' columns
// (idle_rtt_ms, added_p50_ms, added_p95_ms, added_p99_ms, added_max_ms,
// probes, probes_lost) and the real-time flow's (rt_sent, rt_delivered,
// rt_loss_pct, owd_p50_ms, owd_p99_ms, owd_max_ms, rt_late_pct,
// rt_miss_pct, outer_bytes, outer_per_payload) and the bulk recovery's
// (recovery_resent_bytes, recovery_repair_bytes, path_loss_rate,
// recovery_overhead, overhead_bound; fractions) and the path events'
// (event<i>_at_ms, event<i>_react_ms, phase<j>_<path>_kbps) when the run
// has them. Points that failed have no samples and so no rows; summary.csv
// lists them with their error.
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

// summaryRows is summary.csv, one row per point: the lead columns, n,
// mean_mbps, ci95_mbps, median_mbps, min_mbps, max_mbps, std_dev_mbps,
// share_<path>…, [competing_…], [<figure>_mean, <figure>_ci95 for the
// latency and real-time figures, outer_extra_vs_off_pct],
// [recovery_overhead_pct_…, path_loss_pct_…, overhead_bound_pct_… (mean,
// ci95), within_bound], [max_stall_ms_…, event<i>_react_ms_…,
// phase<j>_<path>_kbps_… (mean, ci95) with [[events]]], error.
//
// within_bound counts the point's downloads whose recovery overhead was at
// most their bound. outer_extra_vs_off_pct compares a real-time point's
// outer bytes per payload byte with the same network's transport of the
// same kind with recovery = "off" (empty without one). ci95 is the
// half-width of the 95% Student-t interval (mean ± ci95), empty where it
// is undefined (fewer than two samples).
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
	cols = append(cols, csvColumns(eventColumns(run), "")...)
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
