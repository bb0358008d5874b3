package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

// eventColumns are the path events' figures ([[events]]; nil without):
// per point the longest stall, each event's reaction time and each path's
// rate between events, and per sample when each event fired, the reaction
// and the rates. The columns come from the first point's events, which
// every point shares.
func eventColumns(run *results.Run) (point []pointColumn, sample []sampleColumn) {
	var ev *results.EventsSummary
	for i := range run.Points {
		if ev = run.Points[i].Events; ev != nil {
			break
		}
	}
	if ev == nil {
		return nil, nil
	}
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
	var ms []map[string]stats.Summary
	for _, ph := range ev.Phases {
		ms = append(ms, ph.PathKBps)
	}
	paths := keysOf(ms...)
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
