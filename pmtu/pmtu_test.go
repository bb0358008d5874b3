package pmtu

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const tick = 5 * time.Millisecond

// sim is a test double for the engine plus a path: it ticks every 5 ms,
// sends the probe NextProbe asks for and decides it after one RTT (ack) or
// 9/8 RTT (loss), like the path's loss detector would.
type sim struct {
	t     *testing.T
	s     *Search
	now   time.Time
	limit int           // largest payload the path carries
	rtt   time.Duration // round-trip time
	// drop, if set, additionally drops the n-th probe (0-based) that would
	// otherwise get through.
	drop func(n int) bool
	// silent, if set, makes the n-th probe never be decided (path down).
	silent func(n int) bool

	sent    []int // probe sizes in send order
	lastAck int   // size acked in the current step, 0 if none
	pending bool
	pSize   int
	pAck    bool
	pAt     time.Time
}

func newSim(t *testing.T, cfg Config, limit int) *sim {
	return &sim{t: t, s: New(cfg, t0), now: t0, limit: limit, rtt: 40 * time.Millisecond}
}

// step advances one tick: deliver a due decision, then ask for a probe.
func (m *sim) step() {
	m.t.Helper()
	m.now = m.now.Add(tick)
	m.lastAck = 0
	if m.pending && !m.now.Before(m.pAt) {
		m.pending = false
		if m.pAck {
			m.lastAck = m.pSize
			m.s.OnProbeAcked(m.pSize, m.now)
		} else {
			m.s.OnProbeLost(m.pSize, m.now)
		}
	}
	before := m.s.Size()
	n := m.s.NextProbe(m.now)
	if n == 0 {
		return
	}
	if n <= before || n <= m.s.Size() {
		m.t.Fatalf("probe %d at or below Size() %d (before %d)", n, m.s.Size(), before)
	}
	if n > m.s.cfg.Max {
		m.t.Fatalf("probe %d above Max %d", n, m.s.cfg.Max)
	}
	if m.pending {
		m.t.Fatalf("second probe %d while %d outstanding", n, m.pSize)
	}
	idx := len(m.sent)
	m.sent = append(m.sent, n)
	m.s.OnProbeSent(n, m.now)
	if m.silent != nil && m.silent(idx) {
		return
	}
	m.pending = true
	m.pSize = n
	m.pAck = n <= m.limit && (m.drop == nil || !m.drop(idx))
	if m.pAck {
		m.pAt = m.now.Add(m.rtt)
	} else {
		m.pAt = m.now.Add(m.rtt * 9 / 8)
	}
}

// runFor ticks for d.
func (m *sim) runFor(d time.Duration) {
	m.t.Helper()
	end := m.now.Add(d)
	for m.now.Before(end) {
		m.step()
	}
}

// runUntilDone ticks until the search is complete with nothing pending.
func (m *sim) runUntilDone() {
	m.t.Helper()
	for i := 0; i < 100000; i++ {
		if m.s.Done() && !m.pending {
			return
		}
		m.step()
	}
	m.t.Fatalf("search did not complete; state %s size %d sent %v", m.s.State(), m.s.Size(), m.sent)
}

func rep(size, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = size
	}
	return out
}

func seq(parts ...[]int) []int { return slices.Concat(parts...) }

func checkProbes(t *testing.T, s *Search, sent, acked, lost uint64) {
	t.Helper()
	a, b, c := s.Probes()
	if a != sent || b != acked || c != lost {
		t.Fatalf("Probes() = %d,%d,%d, want %d,%d,%d", a, b, c, sent, acked, lost)
	}
}

func TestFullSizePathOneProbe(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1472)
	if m.s.State() != "base" || m.s.Size() != 1200 {
		t.Fatalf("initial state %s size %d", m.s.State(), m.s.Size())
	}
	m.runUntilDone()
	if !slices.Equal(m.sent, []int{1472}) {
		t.Fatalf("sent %v, want [1472]", m.sent)
	}
	if m.s.Size() != 1472 || m.s.State() != "complete" || m.s.Searching() {
		t.Fatalf("size %d state %s", m.s.Size(), m.s.State())
	}
	checkProbes(t, m.s, 1, 1, 0)
	// Max is the cap: nothing more is ever probed, raise timer or not.
	m.runFor(DefaultRaiseInterval + time.Minute)
	if len(m.sent) != 1 {
		t.Fatalf("probed again after completing at Max: %v", m.sent)
	}
	if _, armed := m.s.RaiseAt(); armed {
		t.Fatal("raise timer armed at Max")
	}
}

// Black hole at 1300, Base 1200, Max 1472, Step 8. Hand-computed:
//
//	1472 x3 lost          hi=1472
//	(1200+1472)/2=1336    x3 lost  hi=1336
//	(1200+1336)/2=1268    acked    lo=1268
//	(1268+1336)/2=1302 -> 1300 acked lo=1300
//	(1300+1336)/2=1318 -> 1316 x3 lost hi=1316
//	(1300+1316)/2=1308    x3 lost  hi=1308; 1308-1300 <= 8 -> complete at 1300
var blackHole1300 = seq(rep(1472, 3), rep(1336, 3), []int{1268, 1300}, rep(1316, 3), rep(1308, 3))

func TestBlackHole1300(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1300)
	m.runUntilDone()
	if !slices.Equal(m.sent, blackHole1300) {
		t.Fatalf("sent %v\nwant %v", m.sent, blackHole1300)
	}
	if got := m.s.Size(); got != 1300 || got <= 1300-DefaultStep || got > 1300 {
		t.Fatalf("size %d, want 1300 in (1300-Step, 1300]", got)
	}
	checkProbes(t, m.s, 14, 2, 12)
	// The last loss decision completed the search at m.now.
	if at, armed := m.s.RaiseAt(); !armed || !at.Equal(m.now.Add(DefaultRaiseInterval)) {
		t.Fatalf("raise timer %v armed %v, want %v", at, armed, m.now.Add(DefaultRaiseInterval))
	}
}

// A black hole just above Base: the search ends at Base without ever
// probing Base or going below it.
func TestBlackHoleAtBase(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1200)
	m.runUntilDone()
	// 1472, 1336, (1200+1336)/2=1268, (1200+1268)/2=1234->1232,
	// (1200+1232)/2=1216, (1200+1216)/2=1208 (each x3); 1208-1200<=8.
	want := seq(rep(1472, 3), rep(1336, 3), rep(1268, 3), rep(1232, 3), rep(1216, 3), rep(1208, 3))
	if !slices.Equal(m.sent, want) {
		t.Fatalf("sent %v\nwant %v", m.sent, want)
	}
	if m.s.Size() != 1200 || !m.s.Done() {
		t.Fatalf("size %d state %s", m.s.Size(), m.s.State())
	}
}

func TestSingleRandomLossDoesNotFailSize(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1472)
	m.drop = func(n int) bool { return n == 0 }
	m.runUntilDone()
	if !slices.Equal(m.sent, []int{1472, 1472}) {
		t.Fatalf("sent %v, want [1472 1472]", m.sent)
	}
	if m.s.Size() != 1472 {
		t.Fatalf("size %d", m.s.Size())
	}
	checkProbes(t, m.s, 2, 1, 1)
}

func TestMaxProbesLossesBeforeFailure(t *testing.T) {
	// Two losses then an ack: still confirmed.
	m := newSim(t, DefaultConfig(1200, 1472), 1472)
	m.drop = func(n int) bool { return n < 2 }
	m.runUntilDone()
	if !slices.Equal(m.sent, rep(1472, 3)) || m.s.Size() != 1472 {
		t.Fatalf("sent %v size %d", m.sent, m.s.Size())
	}

	// Exactly MaxProbes losses fail the size: the 4th probe is smaller.
	m = newSim(t, DefaultConfig(1200, 1472), 1472)
	m.drop = func(n int) bool { return n < 3 }
	m.runUntilDone()
	want := []int{1472, 1472, 1472, 1336, 1404, 1436, 1452, 1460, 1464}
	// lo=1336 -> (1336+1472)/2=1404 -> (1404+1472)/2=1438->1436 ->
	// (1436+1472)/2=1454->1452 -> (1452+1472)/2=1462->1460 ->
	// (1460+1472)/2=1466->1464; 1472-1464 <= 8.
	if !slices.Equal(m.sent, want) || m.s.Size() != 1464 {
		t.Fatalf("sent %v size %d, want %v size 1464", m.sent, m.s.Size(), want)
	}

	// MaxProbes is configurable.
	cfg := DefaultConfig(1200, 1472)
	cfg.MaxProbes = 5
	m = newSim(t, cfg, 1300)
	for len(m.sent) < 6 {
		m.step()
	}
	if !slices.Equal(m.sent, seq(rep(1472, 5), []int{1336})) {
		t.Fatalf("MaxProbes=5: sent %v", m.sent)
	}
}

func TestRetryImmediatelyAfterLoss(t *testing.T) {
	s := New(DefaultConfig(1200, 1472), t0)
	if n := s.NextProbe(t0); n != 1472 {
		t.Fatalf("first probe %d", n)
	}
	if n := s.NextProbe(t0); n != 1472 {
		t.Fatalf("NextProbe not idempotent before OnProbeSent: %d", n)
	}
	s.OnProbeSent(1472, t0)
	if n := s.NextProbe(t0.Add(tick)); n != 0 {
		t.Fatalf("second probe %d while one outstanding", n)
	}
	at := t0.Add(45 * time.Millisecond)
	s.OnProbeLost(1472, at)
	if n := s.NextProbe(at); n != 1472 {
		t.Fatalf("retry %d, want 1472 immediately", n)
	}
}

func TestUndecidedProbeTimesOut(t *testing.T) {
	s := New(DefaultConfig(1200, 1472), t0)
	s.OnProbeSent(s.NextProbe(t0), t0)
	if n := s.NextProbe(t0.Add(DefaultProbeTimeout - time.Nanosecond)); n != 0 {
		t.Fatalf("probe %d before timeout", n)
	}
	checkProbes(t, s, 1, 0, 0)
	now := t0.Add(DefaultProbeTimeout)
	if n := s.NextProbe(now); n != 1472 {
		t.Fatalf("after timeout probe %d, want retry 1472", n)
	}
	checkProbes(t, s, 1, 0, 1)
	// A loss report after the timeout is not counted twice.
	s.OnProbeLost(1472, now)
	checkProbes(t, s, 1, 0, 1)

	// Three timeouts fail the size.
	for i := 0; i < 2; i++ {
		s.OnProbeSent(1472, now)
		now = now.Add(DefaultProbeTimeout)
		s.NextProbe(now)
	}
	checkProbes(t, s, 3, 0, 3)
	if n := s.NextProbe(now); n != 1336 {
		t.Fatalf("after 3 timeouts probe %d, want 1336", n)
	}

	// A late ack of a timed-out probe is still honoured.
	s.OnProbeSent(1336, now)
	now = now.Add(DefaultProbeTimeout)
	if n := s.NextProbe(now); n != 1336 {
		t.Fatalf("retry %d", n)
	}
	s.OnProbeAcked(1336, now.Add(time.Millisecond))
	if s.Size() != 1336 {
		t.Fatalf("late ack ignored: size %d", s.Size())
	}
	checkProbes(t, s, 4, 1, 3)
	if n := s.NextProbe(now.Add(time.Millisecond)); n != 1404 {
		t.Fatalf("next probe %d, want (1336+1472)/2=1404", n)
	}
}

// The sim with a path that goes silent: probes are never decided.
func TestSilentPathTimeoutSequence(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1472)
	m.silent = func(n int) bool { return n < 3 } // path down for 3 probes
	m.runUntilDone()
	// 1472 times out 3 times -> fails; then 1336 acked, and so on.
	want := []int{1472, 1472, 1472, 1336, 1404, 1436, 1452, 1460, 1464}
	if !slices.Equal(m.sent, want) || m.s.Size() != 1464 {
		t.Fatalf("sent %v size %d\nwant %v", m.sent, m.s.Size(), want)
	}
	checkProbes(t, m.s, 9, 6, 3)
}

func TestLargeLossRestartsAndIsRateLimited(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1472)
	m.runUntilDone()
	if m.s.Size() != 1472 {
		t.Fatalf("size %d", m.s.Size())
	}
	// Path now black-holes above 1300.
	m.limit = 1300
	m.s.OnLargeLoss(m.now)
	if m.s.Size() != 1200 || m.s.State() != "base" {
		t.Fatalf("after OnLargeLoss: size %d state %s", m.s.Size(), m.s.State())
	}
	if r, n := m.s.LargeLosses(); r != 1 || n != 1 {
		t.Fatalf("LargeLosses %d,%d", r, n)
	}
	restart := m.now
	m.sent = nil
	m.runUntilDone()
	if !slices.Equal(m.sent, blackHole1300) || m.s.Size() != 1300 {
		t.Fatalf("re-search sent %v size %d", m.sent, m.s.Size())
	}
	// The re-search took < 5 s (14 probes of ~45 ms); a report inside the
	// hold-off is only counted.
	if m.now.Sub(restart) >= DefaultRestartHoldoff {
		t.Fatalf("test assumption: re-search took %v", m.now.Sub(restart))
	}
	m.s.OnLargeLoss(m.now)
	if m.s.Size() != 1300 || !m.s.Done() {
		t.Fatalf("rate limit failed: size %d state %s", m.s.Size(), m.s.State())
	}
	if r, n := m.s.LargeLosses(); r != 2 || n != 1 {
		t.Fatalf("LargeLosses %d,%d, want 2,1", r, n)
	}
	// Just before the hold-off ends: still suppressed; at it: restart.
	m.s.OnLargeLoss(restart.Add(DefaultRestartHoldoff - time.Nanosecond))
	if m.s.Size() != 1300 {
		t.Fatalf("restart inside hold-off")
	}
	m.s.OnLargeLoss(restart.Add(DefaultRestartHoldoff))
	if m.s.Size() != 1200 || m.s.State() != "base" {
		t.Fatalf("no restart after hold-off: size %d state %s", m.s.Size(), m.s.State())
	}
	if r, n := m.s.LargeLosses(); r != 4 || n != 2 {
		t.Fatalf("LargeLosses %d,%d, want 4,2", r, n)
	}
}

func TestRestartDropsOutstandingProbe(t *testing.T) {
	cfg := DefaultConfig(1200, 1472)
	m := newSim(t, cfg, 1300)
	m.runUntilDone()
	s := m.s
	now := m.now
	// Mid-raise, a black hole report restarts; the old probe's ack is ignored.
	now = now.Add(DefaultRaiseInterval)
	if n := s.NextProbe(now); n != 1472 {
		t.Fatalf("raise probe %d", n)
	}
	s.OnProbeSent(1472, now)
	s.OnLargeLoss(now)
	// The old probe still occupies the single probe slot ...
	if n := s.NextProbe(now.Add(tick)); n != 0 {
		t.Fatalf("probe %d while the pre-restart probe is outstanding", n)
	}
	// ... but its ack is only counted.
	s.OnProbeAcked(1472, now.Add(time.Millisecond))
	if s.Size() != 1200 {
		t.Fatalf("stale ack after restart raised size to %d", s.Size())
	}
	s.OnProbeLost(1472, now.Add(time.Millisecond))
	checkProbes(t, s, 15, 3, 12)
	if n := s.NextProbe(now.Add(2 * tick)); n != 1472 || s.Size() != 1200 {
		t.Fatalf("after restart: probe %d size %d", n, s.Size())
	}
}

// A probe sent before a restart that is never decided frees the probe slot
// after ProbeTimeout and does not count against the new search's attempts.
func TestStaleProbeTimesOutWithoutCounting(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1300)
	m.runUntilDone()
	s := m.s
	now := m.now.Add(DefaultRaiseInterval)
	s.OnProbeSent(s.NextProbe(now), now) // raise probe 1472, never decided
	s.OnLargeLoss(now)
	if n := s.NextProbe(now.Add(DefaultProbeTimeout - time.Nanosecond)); n != 0 {
		t.Fatalf("probe %d before stale probe timed out", n)
	}
	now = now.Add(DefaultProbeTimeout)
	if n := s.NextProbe(now); n != 1472 {
		t.Fatalf("after stale timeout probe %d", n)
	}
	// A late ack of the timed-out stale probe is not honoured either.
	s.OnProbeAcked(1472, now)
	if s.Size() != 1200 {
		t.Fatalf("late ack of stale probe raised size to %d", s.Size())
	}
	var got []int
	for len(got) < 4 {
		n := s.NextProbe(now)
		got = append(got, n)
		s.OnProbeSent(n, now)
		now = now.Add(50 * time.Millisecond)
		s.OnProbeLost(n, now)
	}
	if want := []int{1472, 1472, 1472, 1336}; !slices.Equal(got, want) {
		t.Fatalf("after stale timeout sent %v, want %v", got, want)
	}
	checkProbes(t, s, 19, 2, 17) // lost: 12 + stale timeout + 4
}

func TestErrorOnlyOnRepeatedLargeLossAtBase(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1200)
	m.runUntilDone()
	if m.s.Size() != 1200 {
		t.Fatalf("size %d", m.s.Size())
	}
	now := m.now
	for i := 0; i < DefaultMaxProbes; i++ {
		if m.s.State() == "error" {
			t.Fatalf("error after %d reports", i)
		}
		m.s.OnLargeLoss(now)
		m.s.OnLargeLoss(now.Add(time.Second)) // suppressed, does not count
		now = now.Add(DefaultRestartHoldoff)
	}
	if m.s.State() != "error" || m.s.Size() != 1200 {
		t.Fatalf("state %s size %d, want error at 1200", m.s.State(), m.s.Size())
	}
	if r, n := m.s.LargeLosses(); r != 6 || n != 0 {
		t.Fatalf("LargeLosses %d,%d", r, n)
	}
	errAt := now.Add(-DefaultRestartHoldoff)
	if n := m.s.NextProbe(errAt.Add(DefaultRaiseInterval - time.Nanosecond)); n != 0 {
		t.Fatalf("probe %d in error state", n)
	}
	// After RaiseInterval the search starts over (Max first).
	if n := m.s.NextProbe(errAt.Add(DefaultRaiseInterval)); n != 1472 || m.s.State() != "searching" {
		t.Fatalf("after error: probe %d state %s", n, m.s.State())
	}
}

func TestRaiseFindsImprovedPath(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1300)
	m.runUntilDone()
	at, armed := m.s.RaiseAt()
	if !armed || !at.Equal(m.now.Add(DefaultRaiseInterval)) {
		t.Fatalf("raise at %v armed %v", at, armed)
	}
	// Path improves to 1400: nothing happens before the raise timer.
	m.limit = 1400
	m.sent = nil
	m.runFor(at.Sub(m.now) - tick)
	if len(m.sent) != 0 || !m.now.Before(at) {
		t.Fatalf("probed before raise timer: %v", m.sent)
	}
	m.step() // now == at
	if !slices.Equal(m.sent, []int{1472}) || m.s.Size() != 1300 {
		t.Fatalf("at raise timer: sent %v size %d", m.sent, m.s.Size())
	}
	m.runUntilDone()
	// 1472 x3 lost; lo=1300 (kept meanwhile), hi=1472:
	// (1300+1472)/2=1386->1384 ok; (1384+1472)/2=1428 x3 lost;
	// (1384+1428)/2=1406->1404 x3 lost; (1384+1404)/2=1394->1392 ok;
	// (1392+1404)/2=1398->1396 ok; 1404-1396 <= 8 -> 1396.
	want := seq(rep(1472, 3), []int{1384}, rep(1428, 3), rep(1404, 3), []int{1392, 1396})
	if !slices.Equal(m.sent, want) {
		t.Fatalf("raise sent %v\nwant %v", m.sent, want)
	}
	if m.s.Size() != 1396 {
		t.Fatalf("size %d, want 1396", m.s.Size())
	}

	// Full improvement: the next raise confirms Max with one probe.
	m.limit = 1472
	m.sent = nil
	m.runFor(DefaultRaiseInterval + time.Second)
	if !slices.Equal(m.sent, []int{1472}) || m.s.Size() != 1472 {
		t.Fatalf("second raise sent %v size %d", m.sent, m.s.Size())
	}
}

func TestRaiseKeepsSizeWhileProbing(t *testing.T) {
	m := newSim(t, DefaultConfig(1200, 1472), 1300)
	m.runUntilDone()
	m.sent = nil
	m.runFor(DefaultRaiseInterval + 100*time.Millisecond)
	if len(m.sent) == 0 || m.sent[0] != 1472 || !m.s.Searching() {
		t.Fatalf("raise did not start: %v %s", m.sent, m.s.State())
	}
	if m.s.Size() != 1300 {
		t.Fatalf("size dropped to %d during raise", m.s.Size())
	}
	m.runUntilDone()
	if m.s.Size() != 1300 {
		t.Fatalf("unchanged path: size %d", m.s.Size())
	}
}

func TestMaxNotAboveBase(t *testing.T) {
	for _, max := range []int{1200, 1000} {
		s := New(DefaultConfig(1200, max), t0)
		if s.Size() != 1200 || !s.Done() || s.NextProbe(t0.Add(time.Hour)) != 0 {
			t.Fatalf("max %d: size %d state %s", max, s.Size(), s.State())
		}
	}
}

func TestZeroConfigDefaults(t *testing.T) {
	s := New(Config{Base: 1200, Max: 1472}, t0)
	want := DefaultConfig(1200, 1472)
	if s.Config() != want {
		t.Fatalf("config %+v, want %+v", s.Config(), want)
	}
}

func TestIgnoresBogusCalls(t *testing.T) {
	s := New(DefaultConfig(1200, 1472), t0)
	s.OnProbeSent(1200, t0) // at Size(): never a probe
	s.OnProbeSent(1100, t0) // below Base
	s.OnProbeAcked(1472, t0)
	s.OnProbeLost(1472, t0)
	checkProbes(t, s, 0, 0, 0)
	if s.Size() != 1200 {
		t.Fatalf("size %d", s.Size())
	}
	if n := s.NextProbe(t0); n != 1472 || !s.Searching() {
		t.Fatalf("probe %d state %s", n, s.State())
	}
	s.OnProbeSent(1200, t0) // searching, but at Size()
	checkProbes(t, s, 0, 0, 0)
	s.OnProbeSent(1472, t0)
	s.OnProbeAcked(1336, t0) // not the outstanding probe
	if s.Size() != 1200 {
		t.Fatalf("ack of unsent size accepted: %d", s.Size())
	}
}

// Randomised invariants: probes are always above Size() and within Max,
// Size() stays in [Base, Max] and only an acknowledged probe (which the
// path carried) raises it.
func TestInvariantsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 200; iter++ {
		base := 1200 + r.IntN(100)
		max := base + r.IntN(400)
		cfg := DefaultConfig(base, max)
		cfg.Step = 1 + r.IntN(16)
		cfg.MaxProbes = 1 + r.IntN(4)
		limit := base + r.IntN(max-base+1)
		m := newSim(t, cfg, limit)
		lossRate := r.Float64() * 0.3
		m.drop = func(int) bool { return r.Float64() < lossRate }
		m.silent = func(int) bool { return r.Float64() < 0.05 }
		for i := 0; i < 4000; i++ {
			if r.IntN(500) == 0 {
				m.s.OnLargeLoss(m.now)
			}
			if r.IntN(800) == 0 {
				limit = base + r.IntN(max-base+1)
				m.limit = limit
			}
			prev := m.s.Size()
			m.step()
			sz := m.s.Size()
			if sz < base || sz > max {
				t.Fatalf("size %d outside [%d,%d]", sz, base, max)
			}
			// pAck was decided against the limit at send time.
			if sz > prev && sz != m.lastAck {
				t.Fatalf("size rose %d -> %d without an ack of that size", prev, sz)
			}
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	s := New(DefaultConfig(1200, 1472), t0)
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(tick)
		if n := s.NextProbe(now); n != 0 {
			s.OnProbeSent(n, now)
			if n <= 1300 {
				s.OnProbeAcked(n, now)
			} else {
				s.OnProbeLost(n, now)
			}
		}
		if s.Done() {
			s.OnLargeLoss(now.Add(DefaultRestartHoldoff))
			now = now.Add(DefaultRestartHoldoff)
		}
		_ = s.Size()
		_ = s.State()
		s.Probes()
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run", allocs)
	}
	if sent, _, _ := s.Probes(); sent < 100 {
		t.Fatalf("alloc loop exercised only %d probes", sent)
	}
}

// A probe outstanding when the error state is entered is stale: neither its
// ack nor a late ack after its timeout raises Size().
func TestStaleProbeInErrorState(t *testing.T) {
	for _, timeout := range []bool{false, true} {
		s := New(DefaultConfig(1200, 1472), t0)
		s.OnProbeSent(s.NextProbe(t0), t0)
		now := t0
		for i := 0; i < DefaultMaxProbes; i++ {
			s.OnLargeLoss(now)
			now = now.Add(DefaultRestartHoldoff)
		}
		if s.State() != "error" {
			t.Fatalf("state %s", s.State())
		}
		if timeout {
			if n := s.NextProbe(now); n != 0 {
				t.Fatalf("probe %d in error", n)
			}
			checkProbes(t, s, 1, 0, 1)
		}
		s.OnProbeAcked(1472, now)
		if s.Size() != 1200 || s.State() != "error" {
			t.Fatalf("timeout=%v: stale ack gave size %d state %s", timeout, s.Size(), s.State())
		}
	}
}
