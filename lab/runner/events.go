package runner

import (
	"errors"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/testbed"
)

// Path events ([[events]], docs/lab.md): the sampling interval and the
// transport's time to have its paths back after a download.
const (
	EventSampleInterval = 10 * time.Millisecond
	EventSettle         = 3 * time.Second
)

// pathSample is every path's delivered bytes (Plan.Paths order) at t.
type pathSample struct {
	t     time.Duration
	bytes []uint64
}

// eventRun applies one download's events and samples the paths. Until
// done, loop alone touches state, fired, samples and errs.
type eventRun struct {
	tb         *testbed.Testbed
	events     []scenario.Event
	paths      []string
	start      time.Time
	stop, done chan struct{}
	changed    bool                          // finish undid a change: settle waits
	state      map[string]scenario.PathState // what the fired events did to each path
	fired      []time.Duration               // when each event fired; len = events fired
	samples    []pathSample
	errs       []error
}

// startEvents begins the timeline of events now (the download's start);
// nil without events, whose finish and settle do nothing.
func startEvents(tb *testbed.Testbed, events []scenario.Event) *eventRun {
	if len(events) == 0 {
		return nil
	}
	e := &eventRun{tb: tb, events: events, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}),
		state: map[string]scenario.PathState{}}
	for _, p := range tb.Plan.Paths {
		e.paths = append(e.paths, p.Name)
	}
	e.sample()
	go e.loop()
	return e
}

func (e *eventRun) sample() {
	s := pathSample{t: time.Since(e.start), bytes: make([]uint64, len(e.paths))}
	for i, p := range e.paths {
		s.bytes[i] = e.tb.Delivered(p)
	}
	e.samples = append(e.samples, s)
}

func (e *eventRun) loop() {
	defer close(e.done)
	tick := time.NewTicker(EventSampleInterval)
	defer tick.Stop()
	for next := 0; ; {
		for ; next < len(e.events) && time.Since(e.start) >= e.events[next].At; next++ {
			ev := e.events[next]
			was := e.state[ev.Link]
			e.state[ev.Link], _ = was.Apply(ev.Action)
			e.errs = append(e.errs, setPath(e.tb, ev.Link, was, e.state[ev.Link]))
			e.fired = append(e.fired, time.Since(e.start))
			e.sample()
		}
		select {
		case <-e.stop:
			return
		case <-tick.C:
			e.sample()
		}
	}
}

// setPath takes path link from state was to state to (scenario.PathState.Apply):
// when it goes back to the scenario's, up first, back to its address (which
// re-adds its routes) next, restored last.
func setPath(tb *testbed.Testbed, link string, was, to scenario.PathState) error {
	var errs []error
	do := func(change bool, f func(string) error) {
		if change {
			errs = append(errs, f(link))
		}
	}
	do(!was.Down && to.Down, tb.SetPathDown)
	do(was.Down && !to.Down, tb.SetPathUp)
	if was.Moved != to.Moved {
		errs = append(errs, tb.Readdress(link, was.Moved))
	}
	do(!was.Cut && to.Cut, tb.Cut)
	do(was.Cut && !to.Cut, tb.Restore)
	return errors.Join(errs...)
}

// finish stops the timeline at the download's end, undoes what the events
// that fired left changed and returns the outcomes.
func (e *eventRun) finish() ([]results.EventOutcome, []results.Phase, error) {
	if e == nil {
		return nil, nil, nil
	}
	d := time.Since(e.start)
	close(e.stop)
	<-e.done
	e.sample()
	for _, link := range slices.Sorted(maps.Keys(e.state)) {
		if st := e.state[link]; st != (scenario.PathState{}) {
			e.errs = append(e.errs, setPath(e.tb, link, st, scenario.PathState{}))
			e.changed = true
		}
	}
	out, phases := eventOutcomes(e.events, e.fired, e.paths, e.samples, d)
	return out, phases, errors.Join(e.errs...)
}

// settle lets the transport have its paths back after finish undid a change.
func (e *eventRun) settle() {
	if e != nil && e.changed {
		time.Sleep(EventSettle)
	}
}

// eventOutcomes is what each event did and the paths' rates between events
// in one download of duration d: fired are the times of the events that
// fired (a prefix), paths the path names in the samples' order.
func eventOutcomes(events []scenario.Event, fired []time.Duration, paths []string, samples []pathSample, d time.Duration) ([]results.EventOutcome, []results.Phase) {
	at := func(t time.Duration) []uint64 { // every path's bytes at the last sample not after t
		return samples[max(0, sort.Search(len(samples), func(i int) bool { return samples[i].t > t })-1)].bytes
	}
	sum := func(b []uint64, which func(int) bool) (n uint64) {
		for i, v := range b {
			if which(i) {
				n += v
			}
		}
		return n
	}
	out := make([]results.EventOutcome, len(events))
	for i, ev := range events {
		out[i].Event = ev.String()
		if i >= len(fired) {
			continue
		}
		t0 := fired[i]
		out[i].Fired, out[i].AtMs = true, stats.Ms(t0)
		own := slices.Index(paths, ev.Link)
		watched := func(j int) bool { return (j == own) == (ev.Restores() || ev.Action == scenario.ActionReaddress) }
		base := sum(at(t0), watched)
		for _, s := range samples {
			if s.t > t0 && sum(s.bytes, watched)-base >= results.ReactBytes {
				r := stats.Ms(s.t - t0)
				out[i].ReactMs = &r
				break
			}
		}
	}
	bounds := slices.Concat([]time.Duration{0}, fired, []time.Duration{d})
	var phases []results.Phase
	for i := 0; i+1 < len(bounds); i++ {
		from, to := bounds[i], bounds[i+1]
		ph := results.Phase{FromMs: stats.Ms(from), ToMs: stats.Ms(to), PathKBps: map[string]float64{}}
		b0, b1 := at(from), at(to)
		for j, p := range paths {
			if to > from {
				ph.PathKBps[p] = float64(b1[j]-b0[j]) / (to - from).Seconds() / 1000
			}
		}
		phases = append(phases, ph)
	}
	return out, phases
}

// SummarizeEvents is a point's path events over its downloads (nil when
// it has none), phases "before" the first event, then "after" each.
func SummarizeEvents(events []scenario.Event, samples []results.Sample) *results.EventsSummary {
	if len(events) == 0 {
		return nil
	}
	var stalls []float64
	react := make([][]float64, len(events))
	fired := make([]int, len(events))
	kbps := make([]map[string][]float64, len(events)+1) // phase i: after event i-1
	for i := range kbps {
		kbps[i] = map[string][]float64{}
	}
	for _, smp := range samples {
		stalls = append(stalls, smp.MaxStallMs)
		for i, o := range smp.Events {
			if i < len(events) && o.Fired {
				fired[i]++
				if o.ReactMs != nil {
					react[i] = append(react[i], *o.ReactMs)
				}
			}
		}
		for i, ph := range smp.Phases[:min(len(smp.Phases), len(kbps))] {
			for p, v := range ph.PathKBps {
				kbps[i][p] = append(kbps[i][p], v)
			}
		}
	}
	s := &results.EventsSummary{MaxStallMs: stats.Summarize(stalls)}
	for i, ev := range events {
		s.Events = append(s.Events, results.EventSummary{Event: ev.String(), Fired: fired[i], Reacted: len(react[i]), ReactMs: stats.Summarize(react[i])})
	}
	for i := range kbps {
		ph := results.PhaseSummary{Label: "before " + events[0].String(), PathKBps: map[string]stats.Summary{}}
		if i > 0 {
			ph.Label = "after " + events[i-1].String()
		}
		for p, v := range kbps[i] {
			ph.PathKBps[p] = stats.Summarize(v)
		}
		s.Phases = append(s.Phases, ph)
	}
	return s
}
