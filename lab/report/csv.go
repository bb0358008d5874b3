package report

import (
	"encoding/json"
	"io"
	"slices"
	"strconv"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/table"
)

// WriteJSON writes the run as one indented JSON document: the complete
// record, from which every other output can be made again.
func WriteJSON(w io.Writer, run *results.Run) error { return writeJSON(w, run) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// pointHeader is the columns both CSV files start with: the point, the
// run's axes (each axis's text, and for network axes also its numeric
// value, "rtt", "rtt_value", so that a spreadsheet can both group by the
// scenario's words and plot the numbers) and the transport, then more.
func pointHeader(axes []string, more ...string) []string {
	h := []string{"point"}
	for _, a := range axes {
		h = append(h, a)
		if hasValue(a) {
			h = append(h, a+"_value")
		}
	}
	return append(append(h, "kind", "label", "options"), more...)
}

// pointCells are p's cells under pointHeader; an axis that does not apply
// to the point (the scheduler of a transport without one) is left empty.
func pointCells(p *results.Point, axes []string) []string {
	c := []string{strconv.Itoa(p.Index)}
	for _, a := range axes {
		q, ok := p.Param(a)
		if !ok {
			c = append(c, "")
			if hasValue(a) {
				c = append(c, "")
			}
			continue
		}
		c = append(c, q.Text)
		if hasValue(a) {
			c = append(c, table.CSV.Num(q.Value, -1))
		}
	}
	return append(c, p.Transport, p.Label, optionsString(p.Options))
}

// WriteCSV writes one row per sample:
//
//	point, <axis>, <axis>_value…, kind, label, options, rep, goodput_mbps,
//	seconds, bytes, max_stall_ms, retransmits, reordered, reorder_timeouts,
//	bytes_<path>…, then the latency probes' columns (idle_rtt_ms,
//	added_p50_ms, added_p95_ms, added_p99_ms, added_max_ms, probes,
//	probes_lost) and the real-time flow's (rt_sent, rt_delivered,
//	rt_loss_pct, owd_p50_ms, owd_p99_ms, owd_max_ms, rt_late_pct,
//	rt_miss_pct, outer_bytes, outer_per_payload) and the bulk recovery's
//	(recovery_resent_bytes, recovery_repair_bytes, path_loss_rate,
//	recovery_overhead, overhead_bound; fractions) and the path events'
//	(event<i>_at_ms, event<i>_react_ms, phase<j>_<path>_kbps) when the
//	run has them
//
// kind is the transport kind, label its name in tables and plots, options
// "key=value;…" in key order. An unknown retransmission count (-1 in the
// Run) is an empty cell rather than a number that would pull a mean down.
// Points that failed have no samples and so no rows; WriteSummaryCSV lists
// them with their error.
func WriteCSV(w io.Writer, run *results.Run) error { return writeCSV(w, sampleRows(run)) }

func sampleRows(run *results.Run) [][]string {
	axes := allAxes(run)
	paths := bytePaths(run)
	head := pointHeader(axes, "rep", "goodput_mbps", "seconds", "bytes",
		"max_stall_ms", "retransmits", "reordered", "reorder_timeouts")
	for _, p := range paths {
		head = append(head, "bytes_"+p)
	}
	extra, has := sampleColumns(run)
	for _, c := range extra {
		head = append(head, c.head)
	}
	rows := [][]string{head}
	for i := range run.Points {
		p := &run.Points[i]
		fixed := pointCells(p, axes)
		for _, s := range p.Samples {
			row := append([]string(nil), fixed...)
			retr := ""
			if s.Retransmits >= 0 {
				retr = strconv.FormatInt(s.Retransmits, 10)
			}
			row = append(row,
				strconv.Itoa(s.Rep),
				table.CSV.Num(s.GoodputMbps, -1),
				table.CSV.Num(s.Seconds, -1),
				strconv.FormatInt(s.Bytes, 10),
				table.CSV.Num(s.MaxStallMs, -1),
				retr,
				strconv.FormatUint(s.Reordered, 10),
				strconv.FormatUint(s.ReorderTimeouts, 10),
			)
			for _, path := range paths {
				if b, ok := s.PathBytes[path]; ok {
					row = append(row, strconv.FormatUint(b, 10))
				} else {
					row = append(row, "")
				}
			}
			for i, c := range extra {
				if has[i](&s) {
					row = append(row, c.cell(&s))
				} else {
					row = append(row, "")
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// figureHeads are the mean and ci95 columns of each figure.
func figureHeads(cols []pointColumn) []string {
	var head []string
	for _, c := range cols {
		head = append(head, c.name+"_mean", c.name+"_ci95")
	}
	return head
}

// figureCells are p's mean and ci95 cells of each column (empty when p has
// no such figure).
func figureCells(cols []pointColumn, p *results.Point) []string {
	var cells []string
	for _, c := range cols {
		if s := c.of(p); s != nil {
			cells = append(cells, table.CSV.Num(s.Mean, -1), table.CSV.Num(s.CI95, -1))
		} else {
			cells = append(cells, "", "")
		}
	}
	return cells
}

// WriteSummaryCSV writes one row per point:
//
//	point, <axis>, <axis>_value…, kind, label, options, n, mean_mbps,
//	ci95_mbps, median_mbps, min_mbps, max_mbps, std_dev_mbps, share_<path>…,
//	[competing_…], [<figure>_mean, <figure>_ci95 for the latency and
//	real-time figures, outer_extra_vs_off_pct], [recovery_overhead_pct_…,
//	path_loss_pct_…, overhead_bound_pct_… (mean, ci95), within_bound],
//	[max_stall_ms_…, event<i>_react_ms_…, phase<j>_<path>_kbps_… (mean,
//	ci95) with [[events]]], error
//
// within_bound counts the point's downloads whose recovery overhead was at
// most their bound.
//
// outer_extra_vs_off_pct compares a real-time point's outer bytes per
// payload byte with the same network's transport of the same kind with
// recovery = "off" (empty without one).
//
// ci95 is the half-width of the 95% Student-t interval (mean ± ci95), empty
// where it is undefined (fewer than two samples).
func WriteSummaryCSV(w io.Writer, run *results.Run) error { return writeCSV(w, summaryRows(run)) }

func summaryRows(run *results.Run) [][]string {
	axes := allAxes(run)
	paths := sharePaths(run)
	head := pointHeader(axes, "n", "mean_mbps", "ci95_mbps", "median_mbps",
		"min_mbps", "max_mbps", "std_dev_mbps")
	for _, p := range paths {
		head = append(head, "share_"+p)
	}
	comp := slices.ContainsFunc(run.Points, func(p results.Point) bool { return p.Competing != nil })
	if comp {
		head = append(head, "competing_mean_mbps", "competing_ci95_mbps")
	}
	lat, rt, rec := pointColumns(run)
	figs := append(slices.Clone(lat), rt...)
	head = append(head, figureHeads(figs)...)
	if rt != nil {
		head = append(head, "outer_extra_vs_off_pct")
	}
	head = append(head, figureHeads(rec)...)
	if rec != nil {
		head = append(head, "within_bound")
	}
	evCols := eventColumns(run)
	head = append(head, figureHeads(evCols)...)
	head = append(head, "error")
	rows := [][]string{head}
	for i := range run.Points {
		p := &run.Points[i]
		s := summaryOf(p)
		row := append(pointCells(p, axes), strconv.Itoa(s.N))
		for _, x := range []float64{s.Mean, s.CI95, s.Median, s.Min, s.Max, s.StdDev} {
			row = append(row, table.CSV.Num(x, -1))
		}
		for _, path := range paths {
			if v, ok := p.PathShares[path]; ok {
				row = append(row, table.CSV.Num(v, -1))
			} else {
				row = append(row, "")
			}
		}
		if comp {
			if p.Competing != nil {
				row = append(row, table.CSV.Num(p.Competing.Mean, -1), table.CSV.Num(p.Competing.CI95, -1))
			} else {
				row = append(row, "", "")
			}
		}
		row = append(row, figureCells(figs, p)...)
		if rt != nil {
			row = append(row, table.CSV.Num(extraBytesPct(run, p), -1))
		}
		row = append(row, figureCells(rec, p)...)
		if rec != nil {
			within := ""
			if p.BulkRecovery != nil {
				within = strconv.Itoa(p.BulkRecovery.WithinBound)
			}
			row = append(row, within)
		}
		row = append(row, figureCells(evCols, p)...)
		row = append(row, p.Error)
		rows = append(rows, row)
	}
	return rows
}
