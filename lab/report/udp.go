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

// partColumn makes the columns of one part of a point (its latency
// probes, real-time flow, bulk recovery or events): none where the point
// has not got the part.
func partColumn[T any](part func(*results.Point) *T) func(name, title string, f func(*T) *stats.Summary) pointColumn {
	return func(name, title string, f func(*T) *stats.Summary) pointColumn {
		return pointColumn{name, title, func(p *results.Point) *stats.Summary {
			if t := part(p); t != nil {
				return f(t)
			}
			return nil
		}}
	}
}

var (
	latencyColumn      = partColumn(func(p *results.Point) *results.LatencySummary { return p.Latency })
	realtimeColumn     = partColumn(func(p *results.Point) *results.RealtimeSummary { return p.Realtime })
	bulkRecoveryColumn = partColumn(func(p *results.Point) *results.BulkRecoverySummary { return p.BulkRecovery })
	eventsColumn       = partColumn(func(p *results.Point) *results.EventsSummary { return p.Events })
)

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
		bulkRecoveryColumn("recovery_overhead_pct", "overhead (% of payload)", func(r *results.BulkRecoverySummary) *stats.Summary { return pct(r.Overhead) }),
		bulkRecoveryColumn("path_loss_pct", "path loss (%)", func(r *results.BulkRecoverySummary) *stats.Summary { return pct(r.PathLossRate) }),
		bulkRecoveryColumn("overhead_bound_pct", "bound: 2 × loss + 5 (%)", func(r *results.BulkRecoverySummary) *stats.Summary { return pct(r.Bound) }),
	}
	latencyColumns = []pointColumn{
		latencyColumn("idle_rtt_ms", "idle RTT (ms)", func(l *results.LatencySummary) *stats.Summary { return &l.IdleMs }),
		latencyColumn("added_p50_ms", "added p50 (ms)", func(l *results.LatencySummary) *stats.Summary { return &l.AddedP50Ms }),
		latencyColumn("added_p95_ms", "added p95 (ms)", func(l *results.LatencySummary) *stats.Summary { return &l.AddedP95Ms }),
		latencyColumn("added_p99_ms", "added p99 (ms)", func(l *results.LatencySummary) *stats.Summary { return &l.AddedP99Ms }),
		latencyColumn("probe_loss_pct", "probes lost (%)", func(l *results.LatencySummary) *stats.Summary { return &l.LossPct }),
	}
	realtimeColumns = []pointColumn{
		realtimeColumn("rt_loss_pct", "loss (%)", func(r *results.RealtimeSummary) *stats.Summary { return &r.LossPct }),
		realtimeColumn("owd_p50_ms", "OWD p50 (ms)", func(r *results.RealtimeSummary) *stats.Summary { return &r.OWDP50Ms }),
		realtimeColumn("owd_p99_ms", "OWD p99 (ms)", func(r *results.RealtimeSummary) *stats.Summary { return &r.OWDP99Ms }),
		realtimeColumn("owd_max_ms", "OWD max (ms)", func(r *results.RealtimeSummary) *stats.Summary { return &r.OWDMaxMs }),
		realtimeColumn("rt_late_pct", "late (% of delivered)", func(r *results.RealtimeSummary) *stats.Summary { return &r.LatePct }),
		realtimeColumn("rt_miss_pct", "lost or late (%)", func(r *results.RealtimeSummary) *stats.Summary { return &r.MissPct }),
		realtimeColumn("outer_per_payload", "outer B per payload B", func(r *results.RealtimeSummary) *stats.Summary { return &r.OuterPerPayload }),
	}
)

// pct is a summary of fractions in percent.
func pct(s stats.Summary) *stats.Summary {
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
