package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

// The path events' figures ([[events]]): per point the longest stall, each
// event's reaction time and each path's rate between events; per sample
// the same, as CSV columns. The columns come from the run's events, which
// every point shares.

// eventsOf returns the first point's events summary and the paths its
// phases report, sorted (nil without events).
func eventsOf(run *results.Run) (*results.EventsSummary, []string) {
	for i := range run.Points {
		if e := run.Points[i].Events; e != nil {
			var ms []map[string]stats.Summary
			for _, ph := range e.Phases {
				ms = append(ms, ph.PathKBps)
			}
			return e, keysOf(ms...)
		}
	}
	return nil, nil
}

// eventColumns are the per-point event figures of run (nil without events).
func eventColumns(run *results.Run) []pointColumn {
	ev, paths := eventsOf(run)
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
		for _, path := range paths {
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
	ev, paths := eventsOf(run)
	if ev == nil {
		return nil
	}
	var cols []sampleColumn
	for i := range ev.Events {
		cols = append(cols,
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
	for i := range ev.Phases {
		for _, path := range paths {
			cols = append(cols, sampleColumn{fmt.Sprintf("phase%d_%s_kbps", i, path), func(s *results.Sample) any {
				if i >= len(s.Phases) {
					return nil
				}
				v, ok := s.Phases[i].PathKBps[path]
				return orNone[any](strconv.FormatFloat(v, 'f', 3, 64), ok)
			}})
		}
	}
	return cols
}
