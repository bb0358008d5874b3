package runner

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/testbed"
)

// Path events ([[events]]): during each download the runner changes the
// paths at the scenario's times, samples what every path delivers towards
// the client, and afterwards puts every path back as the scenario built it.
const (
	// EventSampleInterval is how often the paths' delivered bytes are read.
	EventSampleInterval = 10 * time.Millisecond
	// EventSettle is the pause after a download whose events left a path
	// changed and were undone, so that the transport has its paths back
	// (a path returns within about a second) before the next download.
	EventSettle = 3 * time.Second
)

// pathSample is every path's delivered bytes (Plan.Paths order) at t since
// the download started.
type pathSample struct {
	t     time.Duration
	bytes []uint64
}

// eventRun applies one download's events and samples the paths.
type eventRun struct {
	tb     *testbed.Testbed
	events []scenario.Event
	paths  []string
	start  time.Time
	stop   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	fired   []time.Duration // when each event fired; len = events fired
	samples []pathSample
	errs    []error
}

// startEvents begins the timeline of events now (the download's start).
func startEvents(tb *testbed.Testbed, events []scenario.Event) *eventRun {
	e := &eventRun{tb: tb, events: events, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
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
	e.mu.Lock()
	e.samples = append(e.samples, s)
	e.mu.Unlock()
}

func (e *eventRun) loop() {
	defer close(e.done)
	tick := time.NewTicker(EventSampleInterval)
	defer tick.Stop()
	next := 0
	for {
		for next < len(e.events) && time.Since(e.start) >= e.events[next].At {
			err := applyEvent(e.tb, e.events[next], false)
			e.mu.Lock()
			e.fired = append(e.fired, time.Since(e.start))
			if err != nil {
				e.errs = append(e.errs, err)
			}
			e.mu.Unlock()
			e.sample()
			next++
		}
		select {
		case <-e.stop:
			return
		case <-tick.C:
			e.sample()
		}
	}
}

// applyEvent makes ev's change, or undoes it (undo: the state before it).
func applyEvent(tb *testbed.Testbed, ev scenario.Event, undo bool) error {
	switch ev.Action {
	case scenario.ActionCut, scenario.ActionRestore:
		if (ev.Action == scenario.ActionCut) != undo {
			return tb.Cut(ev.Link)
		}
		return tb.Restore(ev.Link)
	case scenario.ActionDown, scenario.ActionUp:
		if (ev.Action == scenario.ActionDown) != undo {
			return tb.SetPathDown(ev.Link)
		}
		return tb.SetPathUp(ev.Link)
	case scenario.ActionReaddress:
		return tb.Readdress(ev.Link, undo)
	}
	return errors.New("runner: unknown event action " + ev.Action)
}

// finish stops the timeline at the download's end (d after its start),
// undoes the events that fired, newest first, and returns the outcomes.
// changed reports whether an undo did anything, the caller then lets the
// transport settle.
func (e *eventRun) finish(d time.Duration) (out []results.EventOutcome, phases []results.Phase, changed bool, err error) {
	close(e.stop)
	<-e.done
	e.sample()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, u := range leftChanged(e.events[:len(e.fired)]) {
		e.errs = append(e.errs, applyEvent(e.tb, u, true))
		changed = true
	}
	out, phases = eventOutcomes(e.events, e.fired, e.paths, e.samples, d)
	return out, phases, changed, errors.Join(e.errs...)
}

// leftChanged returns, for what the fired events left changed, the event
// whose undo puts it back: a path still cut, still down, or moved.
func leftChanged(fired []scenario.Event) []scenario.Event {
	st := map[string]scenario.PathState{}
	var order []string
	for _, ev := range fired {
		if _, seen := st[ev.Link]; !seen {
			order = append(order, ev.Link)
		}
		st[ev.Link], _ = st[ev.Link].Apply(ev.Action)
	}
	var out []scenario.Event
	for _, link := range order {
		s := st[link]
		if s.Down {
			out = append(out, scenario.Event{Action: scenario.ActionDown, Link: link})
		}
		if s.Moved {
			out = append(out, scenario.Event{Action: scenario.ActionReaddress, Link: link})
		}
		if s.Cut {
			out = append(out, scenario.Event{Action: scenario.ActionCut, Link: link})
		}
	}
	return out
}

// eventOutcomes turns one download's timeline into what each event did
// and the paths' rates between events. events are the scenario's, fired
// the times of those that fired (a prefix), paths the path names in the
// samples' order, samples in time order, d the download's duration.
func eventOutcomes(events []scenario.Event, fired []time.Duration, paths []string, samples []pathSample, d time.Duration) ([]results.EventOutcome, []results.Phase) {
	// at is every path's bytes at the last sample not after t.
	at := func(t time.Duration) []uint64 {
		i := max(0, samplesUpTo(samples, t)-1)
		return samples[i].bytes
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
	bounds := append([]time.Duration{0}, fired...)
	bounds = append(bounds, d)
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

// samplesUpTo returns the number of samples at or before t (samples are in time
// order).
func samplesUpTo(samples []pathSample, t time.Duration) int {
	n, _ := slices.BinarySearchFunc(samples, t, func(s pathSample, t time.Duration) int {
		if s.t <= t {
			return -1
		}
		return 1
	})
	return n
}

// PhaseLabels names a scenario's phases: "before cut secondary at 3s",
// then "after" each event.
func PhaseLabels(events []scenario.Event) []string {
	if len(events) == 0 {
		return nil
	}
	out := []string{"before " + events[0].String()}
	for _, ev := range events {
		out = append(out, "after "+ev.String())
	}
	return out
}

// SummarizeEvents is a point's path events over its downloads (nil when
// it has none).
func SummarizeEvents(events []scenario.Event, samples []results.Sample) *results.EventsSummary {
	if len(events) == 0 {
		return nil
	}
	s := &results.EventsSummary{}
	var stalls []float64
	react := make([][]float64, len(events))
	fired := make([]int, len(events))
	labels := PhaseLabels(events)
	kbps := make([]map[string][]float64, len(labels))
	for i := range kbps {
		kbps[i] = map[string][]float64{}
	}
	for _, smp := range samples {
		stalls = append(stalls, smp.MaxStallMs)
		for i, o := range smp.Events {
			if i >= len(events) || !o.Fired {
				continue
			}
			fired[i]++
			if o.ReactMs != nil {
				react[i] = append(react[i], *o.ReactMs)
			}
		}
		for i, ph := range smp.Phases {
			if i < len(kbps) {
				for p, v := range ph.PathKBps {
					kbps[i][p] = append(kbps[i][p], v)
				}
			}
		}
	}
	s.MaxStallMs = stats.Summarize(stalls)
	for i, ev := range events {
		s.Events = append(s.Events, results.EventSummary{
			Event: ev.String(), Fired: fired[i], Reacted: len(react[i]), ReactMs: stats.Summarize(react[i]),
		})
	}
	for i, l := range labels {
		ph := results.PhaseSummary{Label: l, PathKBps: map[string]stats.Summary{}}
		for p, v := range kbps[i] {
			ph.PathKBps[p] = stats.Summarize(v)
		}
		s.Phases = append(s.Phases, ph)
	}
	return s
}
