package runner

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/scenario"
)

// A download of 1 s over two paths: the secondary is cut at 300 ms and
// restored at 600 ms. Every 100 ms, the primary delivers 10 kB, the
// secondary 10 kB before the cut, nothing while cut, and 5 kB then 15 kB
// a sample after its return.
func TestEventOutcomes(t *testing.T) {
	ms100 := func(n int) time.Duration { return time.Duration(n) * 100 * time.Millisecond }
	sec := []uint64{0, 10, 20, 30, 30, 30, 30, 35, 50, 65, 80} // kB at 0, 100, … 1000 ms
	var samples []pathSample
	for i, s := range sec {
		samples = append(samples, pathSample{t: ms100(i), bytes: []uint64{uint64(i) * 10_000, s * 1000}})
	}
	events := []scenario.Event{
		{At: ms100(3), Action: scenario.ActionCut, Link: "secondary"},
		{At: ms100(6), Action: scenario.ActionRestore, Link: "secondary"},
		{At: ms100(20), Action: scenario.ActionDown, Link: "primary"}, // after the end
	}
	fired := []time.Duration{ms100(3) + time.Millisecond, ms100(6) + time.Millisecond}
	out, phases := eventOutcomes(events, fired, []string{"primary", "secondary"}, samples, ms100(10))
	if len(out) != 3 || len(phases) != 3 {
		t.Fatalf("%d outcomes, %d phases; want 3 and 3", len(out), len(phases))
	}
	// The cut: the other path (primary) carries 20 kB after it, at the
	// sample of 500 ms: 199 ms. The restore: the secondary carries 20 kB
	// since 30 kB at 600 ms, i.e. 50 kB, at 800 ms: 199 ms.
	for i, want := range []float64{199, 199} {
		o := out[i]
		if !o.Fired || o.ReactMs == nil || math.Abs(*o.ReactMs-want) > 1e-9 {
			t.Errorf("event %d: %+v (react %v), want fired, react %v ms", i, o, o.ReactMs, want)
		}
	}
	if out[2].Fired || out[2].ReactMs != nil || out[2].Event != "down primary at 2s" {
		t.Errorf("unfired event: %+v", out[2])
	}
	// Phases: 0–301 ms: the secondary delivered 30 kB (samples at 0 and
	// 300 ms) in 0.301 s; 301–601: nothing; 601–1000: 80 − 30 kB.
	for i, want := range []float64{30 / 0.301, 0, 50 / 0.399} {
		if got := phases[i].PathKBps["secondary"]; math.Abs(got-want) > 1e-9 {
			t.Errorf("phase %d: secondary %.3f kB/s, want %.3f", i, got, want)
		}
	}
	if phases[2].FromMs != 601 || phases[2].ToMs != 1000 {
		t.Errorf("last phase %v–%v ms", phases[2].FromMs, phases[2].ToMs)
	}

	// The same timeline, the secondary never returning: no reaction.
	flat := slices.Clone(samples)
	for i := 6; i < len(flat); i++ {
		flat[i] = pathSample{t: flat[i].t, bytes: []uint64{flat[i].bytes[0], 30_000}}
	}
	out, _ = eventOutcomes(events, fired, []string{"primary", "secondary"}, flat, ms100(10))
	if out[1].ReactMs != nil {
		t.Errorf("a path that carried nothing after its return reacted in %v ms", *out[1].ReactMs)
	}
}

func TestSummarizeEvents(t *testing.T) {
	events := []scenario.Event{{At: time.Second, Action: scenario.ActionCut, Link: "secondary"}}
	r := func(v float64) *float64 { return &v }
	smp := []results.Sample{
		{MaxStallMs: 100, Events: []results.EventOutcome{{Fired: true, ReactMs: r(10)}},
			Phases: []results.Phase{{PathKBps: map[string]float64{"secondary": 1}}, {PathKBps: map[string]float64{"secondary": 0}}}},
		{MaxStallMs: 300, Events: []results.EventOutcome{{Fired: true}}},
		{MaxStallMs: 200, Events: []results.EventOutcome{{Fired: false}}},
	}
	s := SummarizeEvents(events, smp)
	if s == nil || s.MaxStallMs.Mean != 200 || len(s.Events) != 1 || s.Events[0].Fired != 2 || s.Events[0].Reacted != 1 || s.Events[0].ReactMs.Mean != 10 {
		t.Fatalf("summary %+v", s)
	}
	if len(s.Phases) != 2 || s.Phases[0].Label != "before cut secondary at 1s" || s.Phases[1].Label != "after cut secondary at 1s" || s.Phases[0].PathKBps["secondary"].N != 1 {
		t.Errorf("phases %+v", s.Phases)
	}
	if SummarizeEvents(nil, smp) != nil {
		t.Error("a summary without events")
	}
}

// The events of a scenario change real paths during real downloads and are
// undone after each: a path cut and restored, an interface taken down and
// up, an address moved. Kernel MPTCP over both paths (no braid needed).
func TestEventsInNamespaces(t *testing.T) {
	run := runInNamespaces(t, "events.toml", "braid-rev", `
[experiment]
size = "4MiB"
reps = 2
[[links]]
name = "secondary"
mtu = 1280
rate = "10Mbit"
rtt = "20ms"
queue_limit = 16
[[transports]]
name = "mptcp-direct"
[[events]]
at = "300ms"
action = "cut"
link = "secondary"
[[events]]
at = "800ms"
action = "restore"
link = "secondary"
[[events]]
at = "1s"
action = "readdress"
link = "primary"
`)
	p := run.Points[0]
	if p.Error != "" || len(p.Samples) != 2 || p.Events == nil {
		t.Fatalf("error %q, %d samples, events %+v", p.Error, len(p.Samples), p.Events)
	}
	for _, smp := range p.Samples {
		t.Logf("rep %d: %.2f Mbit/s, longest stall %.0f ms, events %+v, phases %+v", smp.Rep, smp.GoodputMbps, smp.MaxStallMs, smp.Events, smp.Phases)
		if len(smp.Events) != 3 || len(smp.Phases) != 4 || !smp.Events[0].Fired || !smp.Events[1].Fired {
			t.Fatalf("rep %d: events %+v", smp.Rep, smp.Events)
		}
		if at := smp.Events[0].AtMs; at < 300 || at > 350 {
			t.Errorf("cut fired at %.1f ms, want 300–350", at)
		}
		// Only what the emulator already held crosses the secondary once
		// it is cut: its queue, the frame on the wire, the delay line
		// (rate × one-way delay) and what one sampling interval before
		// the cut counts in.
		const frame, rate = 1280 + 14, 10e6 / 8
		held := float64(16+2)*frame + rate*(10*time.Millisecond+EventSampleInterval).Seconds()
		ph := smp.Phases[1]
		if got := ph.PathKBps["secondary"] * (ph.ToMs - ph.FromMs); got > held { // kB/s × ms = bytes
			t.Errorf("the cut secondary delivered %.0f bytes in %.0f ms, more than the %.0f it held (%.1f kB/s before the cut)", got, ph.ToMs-ph.FromMs, held, smp.Phases[0].PathKBps["secondary"])
		}
	}
	// Undone: the second download started on the scenario's paths again,
	// so the secondary carried traffic before its cut both times.
	for _, smp := range p.Samples {
		if v := smp.Phases[0].PathKBps["secondary"]; v <= 0 {
			t.Errorf("rep %d: the secondary carried nothing before its cut", smp.Rep)
		}
	}
}
