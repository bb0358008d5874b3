package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/table"
)

// column is one column of a table of points (summary.csv and the
// Markdown's tables): its head and a point's cell.
type column struct {
	head string
	cell func(*results.Point) string
}

// pointRows is the table of points under cols, the header first.
func pointRows(points []results.Point, cols []column) [][]string {
	rows := make([][]string, 1+len(points))
	for _, c := range cols {
		rows[0] = append(rows[0], c.head)
		for i := range points {
			rows[1+i] = append(rows[1+i], c.cell(&points[i]))
		}
	}
	return rows
}

// pointColumn is a per-point summary over the repetitions: "mean ± ci"
// under title in the Markdown, <name>_mean and <name>_ci95 in summary.csv.
type pointColumn struct {
	name, title string
	of          func(*results.Point) *stats.Summary // nil: the point has none
}

// csvColumns are cols' mean and ci95 columns, unit ending their heads.
func csvColumns(cols []pointColumn, unit string) []column {
	var out []column
	for _, c := range cols {
		for i, h := range []string{"_mean", "_ci95"} {
			out = append(out, column{c.name + h + unit, func(p *results.Point) string {
				if s := c.of(p); s != nil {
					return table.CSV.Num([]float64{s.Mean, s.CI95}[i], -1)
				}
				return ""
			}})
		}
	}
	return out
}

// partColumn makes the columns of one part of a point (latency, real-time,
// bulk recovery, events): none where the point has not got the part.
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
	// The bulk recovery's figures are in percent, easier to read than
	// fractions of a few hundredths.
	bulkRecoveryColumns = []pointColumn{
		bulkRecoveryColumn("recovery_overhead_pct", "overhead (% of payload)", func(r *results.BulkRecoverySummary) *stats.Summary { return pct(r.Overhead) }),
		bulkRecoveryColumn("path_loss_pct", "path loss (%)", func(r *results.BulkRecoverySummary) *stats.Summary { return pct(r.PathLossRate) }),
		bulkRecoveryColumn("overhead_bound_pct", "bound: 2 × loss + 5 (%)", func(r *results.BulkRecoverySummary) *stats.Summary { return pct(r.Bound) }),
	}
)

// pct is a summary of fractions in percent.
func pct(s stats.Summary) *stats.Summary {
	for _, x := range []*float64{&s.Mean, &s.StdDev, &s.CI95, &s.Median, &s.Min, &s.Max} {
		*x *= 100
	}
	return &s
}

// pointColumns are the latency, real-time and bulk recovery columns, each
// where some point has them.
func pointColumns(run *results.Run) (lat, rt, rec []pointColumn) {
	some := func(cols []pointColumn) []pointColumn {
		if slices.ContainsFunc(run.Points, func(p results.Point) bool { return cols[0].of(&p) != nil }) {
			return cols
		}
		return nil
	}
	return some(latencyColumns), some(realtimeColumns), some(bulkRecoveryColumns)
}

// extraBytesPct is how many more outer bytes per delivered payload byte p
// sent than the first point of the same network and transport kind with
// recovery = "off", in percent (NaN without one, or for p being one).
func extraBytesPct(run *results.Run, p *results.Point) float64 {
	if p.Realtime == nil || p.Options["recovery"] == "off" {
		return math.NaN()
	}
	otherNet := func(q *results.Point) bool {
		return slices.ContainsFunc(sweepAxes(run), func(a string) bool { x, _ := p.Param(a); y, _ := q.Param(a); return x.Text != y.Text })
	}
	i := slices.IndexFunc(run.Points, func(q results.Point) bool {
		return q.Transport == p.Transport && q.Options["recovery"] == "off" && q.Realtime != nil && q.Error == "" && !otherNet(&q)
	})
	if i < 0 || !(run.Points[i].Realtime.OuterPerPayload.Mean > 0) {
		return math.NaN()
	}
	return 100 * (p.Realtime.OuterPerPayload.Mean/run.Points[i].Realtime.OuterPerPayload.Mean - 1)
}

// sampleColumn is one column of samples.csv: the cell is a number, a
// string, or nil for none.
type sampleColumn struct {
	head string
	cell func(*results.Sample) any
}

// orNone is v, or the zero value (nil, "") where ok is false.
func orNone[T any](v T, ok bool) (none T) {
	if ok {
		return v
	}
	return none
}

// csvCell writes a sampleColumn's cell.
func csvCell(v any) string {
	switch x := v.(type) {
	case float64:
		return table.CSV.Num(x, -1)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

var (
	// An unknown retransmission count (-1) is an empty cell rather than a
	// number that would pull a mean down.
	downloadSampleColumns = []sampleColumn{
		{"rep", func(s *results.Sample) any { return s.Rep }},
		{"goodput_mbps", func(s *results.Sample) any { return s.GoodputMbps }},
		{"seconds", func(s *results.Sample) any { return s.Seconds }},
		{"bytes", func(s *results.Sample) any { return s.Bytes }},
		{"max_stall_ms", func(s *results.Sample) any { return s.MaxStallMs }},
		{"retransmits", func(s *results.Sample) any { return orNone[any](s.Retransmits, s.Retransmits >= 0) }},
		{"reordered", func(s *results.Sample) any { return s.Reordered }},
		{"reorder_timeouts", func(s *results.Sample) any { return s.ReorderTimeouts }},
	}
	latencySampleColumns = []sampleColumn{
		{"idle_rtt_ms", func(s *results.Sample) any { return s.Latency.IdleMedianMs }},
		{"added_p50_ms", func(s *results.Sample) any { return s.Latency.AddedP50Ms }},
		{"added_p95_ms", func(s *results.Sample) any { return s.Latency.AddedP95Ms }},
		{"added_p99_ms", func(s *results.Sample) any { return s.Latency.AddedP99Ms }},
		{"added_max_ms", func(s *results.Sample) any { return s.Latency.AddedMaxMs }},
		{"probes", func(s *results.Sample) any { return s.Latency.Probes }},
		{"probes_lost", func(s *results.Sample) any { return s.Latency.Lost }},
	}
	realtimeSampleColumns = []sampleColumn{
		{"rt_sent", func(s *results.Sample) any { return s.Realtime.Sent }},
		{"rt_delivered", func(s *results.Sample) any { return s.Realtime.Delivered }},
		{"rt_loss_pct", func(s *results.Sample) any { return s.Realtime.LossPct }},
		{"owd_p50_ms", func(s *results.Sample) any { return s.Realtime.OWDP50Ms }},
		{"owd_p99_ms", func(s *results.Sample) any { return s.Realtime.OWDP99Ms }},
		{"owd_max_ms", func(s *results.Sample) any { return s.Realtime.OWDMaxMs }},
		{"rt_late_pct", func(s *results.Sample) any { return s.Realtime.LatePct }},
		{"rt_miss_pct", func(s *results.Sample) any { return s.Realtime.MissPct }},
		{"outer_bytes", func(s *results.Sample) any { return s.Realtime.OuterBytes }},
		{"outer_per_payload", func(s *results.Sample) any { return s.Realtime.OuterPerPayload }},
	}
	// Both with competing downloads: the competing flows' goodput, and
	// Jain's index with a competing braid client.
	competingSampleColumns    = []sampleColumn{{"competing_mbps", func(s *results.Sample) any { return *s.CompetingMbps }}}
	jainSampleColumns         = []sampleColumn{{"jain", func(s *results.Sample) any { return *s.Jain }}}
	bulkRecoverySampleColumns = []sampleColumn{
		{"recovery_resent_bytes", func(s *results.Sample) any { return s.BulkRecovery.ResentBytes }},
		{"recovery_repair_bytes", func(s *results.Sample) any { return s.BulkRecovery.RepairBytes }},
		{"path_loss_rate", func(s *results.Sample) any { return s.BulkRecovery.PathLossRate }},
		{"recovery_overhead", func(s *results.Sample) any { return s.BulkRecovery.Overhead }},
		{"overhead_bound", func(s *results.Sample) any { return s.BulkRecovery.Bound }},
	}
)

// leadColumns are the columns both CSV files start with: the point, each
// axis's text and for network axes its value ("rtt", "rtt_value": a
// spreadsheet can group by the words and plot the numbers), the transport.
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
		column{"options", func(p *results.Point) string {
			var kv []string // "k=v;k=v" in key order
			for _, k := range slices.Sorted(maps.Keys(p.Options)) {
				kv = append(kv, k+"="+p.Options[k])
			}
			return strings.Join(kv, ";")
		}})
}

// sampleRows is samples.csv (docs/lab.md), one row per sample: failed
// points have none (summary.csv lists them with their error). After the
// downloads' own columns come the path bytes, then each part's where some
// sample has it.
func sampleRows(run *results.Run) [][]string {
	var samples []results.Sample
	for _, p := range run.Points {
		samples = append(samples, p.Samples...)
	}
	cols := slices.Clone(downloadSampleColumns)
	for _, path := range keysOf(samples, func(s *results.Sample) map[string]uint64 { return s.PathBytes }) {
		cols = append(cols, sampleColumn{"bytes_" + path, func(s *results.Sample) any {
			b, ok := s.PathBytes[path]
			return orNone[any](b, ok)
		}})
	}
	_, evSamples := eventColumns(run)
	for _, g := range []struct {
		cols []sampleColumn
		has  func(*results.Sample) bool
	}{
		{competingSampleColumns, func(s *results.Sample) bool { return s.CompetingMbps != nil }},
		{jainSampleColumns, func(s *results.Sample) bool { return s.Jain != nil }},
		{latencySampleColumns, func(s *results.Sample) bool { return s.Latency != nil }},
		{realtimeSampleColumns, func(s *results.Sample) bool { return s.Realtime != nil }},
		{bulkRecoverySampleColumns, func(s *results.Sample) bool { return s.BulkRecovery != nil }},
		{evSamples, func(s *results.Sample) bool { return len(s.Events) > 0 }},
	} {
		if !slices.ContainsFunc(samples, func(s results.Sample) bool { return g.has(&s) }) {
			continue
		}
		for _, c := range g.cols {
			cols = append(cols, sampleColumn{c.head, func(s *results.Sample) any {
				if !g.has(s) {
					return nil
				}
				return c.cell(s)
			}})
		}
	}
	lead := pointRows(run.Points, leadColumns(run))
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

// summaryRows is summary.csv (docs/lab.md), one row per point: ci95 is the
// half-width of the 95% Student-t interval, empty where it is undefined
// (fewer than two samples).
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
	if slices.ContainsFunc(run.Points, func(p results.Point) bool { return p.Jain != nil }) {
		cols = append(cols, csvColumns([]pointColumn{{"jain", "", func(p *results.Point) *stats.Summary { return p.Jain }}}, "")...)
	}
	if slices.ContainsFunc(run.Points, func(p results.Point) bool { return p.Offered != nil }) {
		cols = append(cols, csvColumns([]pointColumn{{"offered", "", func(p *results.Point) *stats.Summary { return p.Offered }}}, "_mbps")...)
		cols = append(cols, csvColumns([]pointColumn{{"offered_use", "", func(p *results.Point) *stats.Summary { return p.OfferedUse }}}, "")...)
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
	return pointRows(run.Points, append(cols, column{"error", func(p *results.Point) string { return p.Error }}))
}

// eventColumns are the path events' columns (nil without): per point the
// longest stall, each event's reaction and each path's rate between
// events, per sample also when each event fired. They come from the first
// point with events, whose events every point shares.
func eventColumns(run *results.Run) (point []pointColumn, sample []sampleColumn) {
	first := slices.IndexFunc(run.Points, func(p results.Point) bool { return p.Events != nil })
	if first < 0 {
		return nil, nil
	}
	ev := run.Points[first].Events
	point = []pointColumn{eventsColumn("max_stall_ms", "longest stall (ms)", func(e *results.EventsSummary) *stats.Summary { return &e.MaxStallMs })}
	for i, e := range ev.Events {
		point = append(point, eventsColumn(fmt.Sprintf("event%d_react_ms", i+1), e.Event+": reaction (ms)", func(e *results.EventsSummary) *stats.Summary {
			if i >= len(e.Events) {
				return nil
			}
			return &e.Events[i].ReactMs
		}))
		sample = append(sample,
			sampleColumn{fmt.Sprintf("event%d_at_ms", i+1), func(s *results.Sample) any {
				if i >= len(s.Events) || !s.Events[i].Fired {
					return nil
				}
				return s.Events[i].AtMs
			}},
			sampleColumn{fmt.Sprintf("event%d_react_ms", i+1), func(s *results.Sample) any {
				if i >= len(s.Events) || s.Events[i].ReactMs == nil {
					return nil
				}
				return *s.Events[i].ReactMs
			}})
	}
	paths := keysOf(ev.Phases, func(ph *results.PhaseSummary) map[string]stats.Summary { return ph.PathKBps })
	for i, ph := range ev.Phases {
		for _, path := range paths {
			name := fmt.Sprintf("phase%d_%s_kbps", i, path)
			point = append(point, eventsColumn(name, path+" "+ph.Label+" (kB/s)", func(e *results.EventsSummary) *stats.Summary {
				if i < len(e.Phases) {
					if s, ok := e.Phases[i].PathKBps[path]; ok {
						return &s
					}
				}
				return nil
			}))
			sample = append(sample, sampleColumn{name, func(s *results.Sample) any {
				if i >= len(s.Phases) {
					return nil
				}
				v, ok := s.Phases[i].PathKBps[path]
				return orNone[any](strconv.FormatFloat(v, 'f', 3, 64), ok)
			}})
		}
	}
	return point, sample
}

// reacted says, per event, in how many downloads it fired and the paths
// reacted: "5 of 5, 4 of 5".
func reacted(p *results.Point) string {
	if p.Events == nil {
		return "–"
	}
	var s []string
	for _, e := range p.Events.Events {
		s = append(s, fmt.Sprintf("%d of %d", e.Reacted, e.Fired))
	}
	return strings.Join(s, ", ")
}
