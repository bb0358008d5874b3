package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/table"
)

// The latency probes' and the real-time flow's figures, as CSV columns and
// Markdown cells. A run gets the columns of what it measured.

// sampleColumn is one per-sample CSV column.
type sampleColumn struct {
	head string
	cell func(*results.Sample) string // called only on samples that have the figures
}

// pointColumn is one per-point figure: a summary over the repetitions.
type pointColumn struct {
	name, title string
	of          func(*results.Point) *stats.Summary // nil: the point has none
}

func latencyOf(p *results.Point, f func(*results.LatencySummary) *stats.Summary) *stats.Summary {
	if p.Latency == nil {
		return nil
	}
	return f(p.Latency)
}

func realtimeOf(p *results.Point, f func(*results.RealtimeSummary) *stats.Summary) *stats.Summary {
	if p.Realtime == nil {
		return nil
	}
	return f(p.Realtime)
}

var (
	latencySampleColumns = []sampleColumn{
		{"idle_rtt_ms", func(s *results.Sample) string { return table.CSV.Num(s.Latency.IdleMedianMs, -1) }},
		{"added_p50_ms", func(s *results.Sample) string { return table.CSV.Num(s.Latency.AddedP50Ms, -1) }},
		{"added_p95_ms", func(s *results.Sample) string { return table.CSV.Num(s.Latency.AddedP95Ms, -1) }},
		{"added_p99_ms", func(s *results.Sample) string { return table.CSV.Num(s.Latency.AddedP99Ms, -1) }},
		{"added_max_ms", func(s *results.Sample) string { return table.CSV.Num(s.Latency.AddedMaxMs, -1) }},
		{"probes", func(s *results.Sample) string { return strconv.Itoa(s.Latency.Probes) }},
		{"probes_lost", func(s *results.Sample) string { return strconv.Itoa(s.Latency.Lost) }},
	}
	realtimeSampleColumns = []sampleColumn{
		{"rt_sent", func(s *results.Sample) string { return strconv.Itoa(s.Realtime.Sent) }},
		{"rt_delivered", func(s *results.Sample) string { return strconv.Itoa(s.Realtime.Delivered) }},
		{"rt_loss_pct", func(s *results.Sample) string { return table.CSV.Num(s.Realtime.LossPct, -1) }},
		{"owd_p50_ms", func(s *results.Sample) string { return table.CSV.Num(s.Realtime.OWDP50Ms, -1) }},
		{"owd_p99_ms", func(s *results.Sample) string { return table.CSV.Num(s.Realtime.OWDP99Ms, -1) }},
		{"owd_max_ms", func(s *results.Sample) string { return table.CSV.Num(s.Realtime.OWDMaxMs, -1) }},
		{"rt_late_pct", func(s *results.Sample) string { return table.CSV.Num(s.Realtime.LatePct, -1) }},
		{"rt_miss_pct", func(s *results.Sample) string { return table.CSV.Num(s.Realtime.MissPct, -1) }},
		{"outer_bytes", func(s *results.Sample) string { return strconv.FormatUint(s.Realtime.OuterBytes, 10) }},
		{"outer_per_payload", func(s *results.Sample) string { return table.CSV.Num(s.Realtime.OuterPerPayload, -1) }},
	}
	bulkRecoverySampleColumns = []sampleColumn{
		{"recovery_resent_bytes", func(s *results.Sample) string { return strconv.FormatUint(s.BulkRecovery.ResentBytes, 10) }},
		{"recovery_repair_bytes", func(s *results.Sample) string { return strconv.FormatUint(s.BulkRecovery.RepairBytes, 10) }},
		{"path_loss_rate", func(s *results.Sample) string { return table.CSV.Num(s.BulkRecovery.PathLossRate, -1) }},
		{"recovery_overhead", func(s *results.Sample) string { return table.CSV.Num(s.BulkRecovery.Overhead, -1) }},
		{"overhead_bound", func(s *results.Sample) string { return table.CSV.Num(s.BulkRecovery.Bound, -1) }},
	}
	// The point figures are in percent, easier to read than fractions of
	// a few hundredths.
	bulkRecoveryColumns = []pointColumn{
		{"recovery_overhead_pct", "overhead (% of payload)", func(p *results.Point) *stats.Summary {
			return bulkRecoveryPct(p, func(r *results.BulkRecoverySummary) stats.Summary { return r.Overhead })
		}},
		{"path_loss_pct", "path loss (%)", func(p *results.Point) *stats.Summary {
			return bulkRecoveryPct(p, func(r *results.BulkRecoverySummary) stats.Summary { return r.PathLossRate })
		}},
		{"overhead_bound_pct", "bound: 2 × loss + 5 (%)", func(p *results.Point) *stats.Summary {
			return bulkRecoveryPct(p, func(r *results.BulkRecoverySummary) stats.Summary { return r.Bound })
		}},
	}
	latencyColumns = []pointColumn{
		{"idle_rtt_ms", "idle RTT (ms)", func(p *results.Point) *stats.Summary {
			return latencyOf(p, func(l *results.LatencySummary) *stats.Summary { return &l.IdleMs })
		}},
		{"added_p50_ms", "added p50 (ms)", func(p *results.Point) *stats.Summary {
			return latencyOf(p, func(l *results.LatencySummary) *stats.Summary { return &l.AddedP50Ms })
		}},
		{"added_p95_ms", "added p95 (ms)", func(p *results.Point) *stats.Summary {
			return latencyOf(p, func(l *results.LatencySummary) *stats.Summary { return &l.AddedP95Ms })
		}},
		{"added_p99_ms", "added p99 (ms)", func(p *results.Point) *stats.Summary {
			return latencyOf(p, func(l *results.LatencySummary) *stats.Summary { return &l.AddedP99Ms })
		}},
		{"probe_loss_pct", "probes lost (%)", func(p *results.Point) *stats.Summary {
			return latencyOf(p, func(l *results.LatencySummary) *stats.Summary { return &l.LossPct })
		}},
	}
	realtimeColumns = []pointColumn{
		{"rt_loss_pct", "loss (%)", func(p *results.Point) *stats.Summary {
			return realtimeOf(p, func(r *results.RealtimeSummary) *stats.Summary { return &r.LossPct })
		}},
		{"owd_p50_ms", "OWD p50 (ms)", func(p *results.Point) *stats.Summary {
			return realtimeOf(p, func(r *results.RealtimeSummary) *stats.Summary { return &r.OWDP50Ms })
		}},
		{"owd_p99_ms", "OWD p99 (ms)", func(p *results.Point) *stats.Summary {
			return realtimeOf(p, func(r *results.RealtimeSummary) *stats.Summary { return &r.OWDP99Ms })
		}},
		{"owd_max_ms", "OWD max (ms)", func(p *results.Point) *stats.Summary {
			return realtimeOf(p, func(r *results.RealtimeSummary) *stats.Summary { return &r.OWDMaxMs })
		}},
		{"rt_late_pct", "late (% of delivered)", func(p *results.Point) *stats.Summary {
			return realtimeOf(p, func(r *results.RealtimeSummary) *stats.Summary { return &r.LatePct })
		}},
		{"rt_miss_pct", "lost or late (%)", func(p *results.Point) *stats.Summary {
			return realtimeOf(p, func(r *results.RealtimeSummary) *stats.Summary { return &r.MissPct })
		}},
		{"outer_per_payload", "outer B per payload B", func(p *results.Point) *stats.Summary {
			return realtimeOf(p, func(r *results.RealtimeSummary) *stats.Summary { return &r.OuterPerPayload })
		}},
	}
)

// bulkRecoveryPct is a figure of p's bulk recovery, fractions made percent.
func bulkRecoveryPct(p *results.Point, f func(*results.BulkRecoverySummary) stats.Summary) *stats.Summary {
	if p.BulkRecovery == nil {
		return nil
	}
	s := f(p.BulkRecovery)
	for _, x := range []*float64{&s.Mean, &s.StdDev, &s.CI95, &s.Median, &s.Min, &s.Max} {
		*x *= 100
	}
	return &s
}

// withinBound says how many of p's downloads met the overhead target.
func withinBound(p *results.Point) string {
	return fmt.Sprintf("%d of %d", p.BulkRecovery.WithinBound, p.BulkRecovery.Overhead.N)
}

func anySample(run *results.Run, has func(*results.Sample) bool) bool {
	for i := range run.Points {
		for j := range run.Points[i].Samples {
			if has(&run.Points[i].Samples[j]) {
				return true
			}
		}
	}
	return false
}

// sampleColumns are the extra per-sample columns of run, with the test
// of whether a sample has them.
func sampleColumns(run *results.Run) (cols []sampleColumn, has []func(*results.Sample) bool) {
	for _, g := range []struct {
		cols []sampleColumn
		has  func(*results.Sample) bool
	}{
		{latencySampleColumns, func(s *results.Sample) bool { return s.Latency != nil }},
		{realtimeSampleColumns, func(s *results.Sample) bool { return s.Realtime != nil }},
		{bulkRecoverySampleColumns, func(s *results.Sample) bool { return s.BulkRecovery != nil }},
		{eventSampleColumns(run), func(s *results.Sample) bool { return len(s.Events) > 0 }},
	} {
		if anySample(run, g.has) {
			for _, c := range g.cols {
				cols = append(cols, c)
				has = append(has, g.has)
			}
		}
	}
	return cols, has
}

// pointColumns are the extra per-point figures of run: latency,
// real-time and bulk recovery.
func pointColumns(run *results.Run) (lat, rt, rec []pointColumn) {
	if slices.ContainsFunc(run.Points, func(p results.Point) bool { return p.Latency != nil }) {
		lat = latencyColumns
	}
	if slices.ContainsFunc(run.Points, func(p results.Point) bool { return p.Realtime != nil }) {
		rt = realtimeColumns
	}
	if slices.ContainsFunc(run.Points, func(p results.Point) bool { return p.BulkRecovery != nil }) {
		rec = bulkRecoveryColumns
	}
	return lat, rt, rec
}

// recoveryOff is the point that p's real-time bytes are compared with: the
// same network (every axis but the transport's), the same transport kind
// with recovery = "off". nil for p itself being that, or without one.
func recoveryOff(run *results.Run, p *results.Point) *results.Point {
	if p.Realtime == nil || p.Options["recovery"] == "off" {
		return nil
	}
	sameNet := func(q *results.Point) bool {
		for _, a := range sweepAxes(run) {
			x, _ := p.Param(a)
			y, _ := q.Param(a)
			if x.Text != y.Text {
				return false
			}
		}
		return true
	}
	for i := range run.Points {
		q := &run.Points[i]
		if q.Transport == p.Transport && q.Options["recovery"] == "off" && q.Realtime != nil && q.Error == "" && sameNet(q) {
			return q
		}
	}
	return nil
}

// extraBytesPct is how many more outer bytes per delivered payload byte p
// sent than its recovery-off reference, in percent (NaN without one).
func extraBytesPct(run *results.Run, p *results.Point) float64 {
	ref := recoveryOff(run, p)
	if ref == nil || !(ref.Realtime.OuterPerPayload.Mean > 0) {
		return math.NaN()
	}
	return 100 * (p.Realtime.OuterPerPayload.Mean/ref.Realtime.OuterPerPayload.Mean - 1)
}

// udpTable writes a figure's latency or real-time table (mean ± 95% CI of
// each column); extra adds cells after them.
func udpTable(w io.Writer, f *figure, title string, cols []pointColumn, extraHead string, extra func(*results.Point) string) {
	var head []string
	if f.x != "" {
		head = append(head, mdText(f.x))
	}
	head = append(head, "transport")
	for _, c := range cols {
		head = append(head, c.title)
	}
	if extraHead != "" {
		head = append(head, extraHead)
	}
	fmt.Fprintf(w, "\n%s\n\n", title)
	rows := [][]string{head}
	for _, p := range f.points {
		cells := f.rowStart(p)
		for _, c := range cols {
			cells = append(cells, mdFigure.MeanCI(c.of(p), 2))
		}
		if extraHead != "" {
			cells = append(cells, extra(p))
		}
		rows = append(rows, cells)
	}
	mdTable.Write(w, rows)
}
