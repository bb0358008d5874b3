package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/table"
)

// The path events' figures ([[events]]): per point the longest stall, each
// event's reaction time and each path's rate between events; per sample
// the same, as CSV columns. The columns come from the run's events, which
// every point shares.

// eventsOf returns the first point's events summary (nil without events).
func eventsOf(run *results.Run) *results.EventsSummary {
	for i := range run.Points {
		if e := run.Points[i].Events; e != nil {
			return e
		}
	}
	return nil
}

// eventPaths lists the paths the phases report, sorted.
func eventPaths(ev *results.EventsSummary) []string {
	var out []string
	for _, ph := range ev.Phases {
		out = addKeys(out, ph.PathKBps)
	}
	slices.Sort(out)
	return out
}

// eventColumns are the per-point event figures of run (nil without events).
func eventColumns(run *results.Run) []pointColumn {
	ev := eventsOf(run)
	if ev == nil {
		return nil
	}
	cols := []pointColumn{eventsColumn("max_stall_ms", "longest stall (ms)", func(e *results.EventsSummary) *stats.Summary { return &e.MaxStallMs })}
	for i, e := range ev.Events {
		cols = append(cols, eventsColumn(fmt.Sprintf("event%d_react_ms", i+1), e.Event+": reaction (ms)", func(e *results.EventsSummary) *stats.Summary {
			if i >= len(e.Events) {
				return nil
			}
			return &e.Events[i].ReactMs
		}))
	}
	for i, ph := range ev.Phases {
		for _, path := range eventPaths(ev) {
			cols = append(cols, eventsColumn(fmt.Sprintf("phase%d_%s_kbps", i, path), path+" "+ph.Label+" (kB/s)", func(e *results.EventsSummary) *stats.Summary {
				if i >= len(e.Phases) {
					return nil
				}
				if s, ok := e.Phases[i].PathKBps[path]; ok {
					return &s
				}
				return nil
			}))
		}
	}
	return cols
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

// eventSampleColumns are the per-download event columns of run.
func eventSampleColumns(run *results.Run) []sampleColumn {
	ev := eventsOf(run)
	if ev == nil {
		return nil
	}
	var cols []sampleColumn
	for i := range ev.Events {
		cols = append(cols,
			sampleColumn{fmt.Sprintf("event%d_at_ms", i+1), func(s *results.Sample) string {
				if i >= len(s.Events) || !s.Events[i].Fired {
					return ""
				}
				return table.CSV.Num(s.Events[i].AtMs, -1)
			}},
			sampleColumn{fmt.Sprintf("event%d_react_ms", i+1), func(s *results.Sample) string {
				if i >= len(s.Events) || s.Events[i].ReactMs == nil {
					return ""
				}
				return table.CSV.Num(*s.Events[i].ReactMs, -1)
			}})
	}
	for i := range ev.Phases {
		for _, path := range eventPaths(ev) {
			cols = append(cols, sampleColumn{fmt.Sprintf("phase%d_%s_kbps", i, path), func(s *results.Sample) string {
				if i >= len(s.Phases) {
					return ""
				}
				v, ok := s.Phases[i].PathKBps[path]
				if !ok {
					return ""
				}
				return strconv.FormatFloat(v, 'f', 3, 64)
			}})
		}
	}
	return cols
}
