package cc

import (
	"testing"
	"time"
)

// Hand-computed cases of the "rate" model. MSS 1000 bytes throughout, RTT and
// min RTT 40 ms.

const rmss = 1000

var rtt40 = 40 * time.Millisecond

func newRatePath(t *testing.T, cfg Config) (*Controller, *Path) {
	t.Helper()
	cfg.MSS = rmss
	c, err := New(Rate, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, c.AddPath(0, t0)
}

// roundAck acknowledges bytes at t0 + k·40 ms; the newest acked packet was sent
// at the previous such time, at or after the round's start, so every call ends
// exactly one round. rate is the delivery-rate sample it carries (0 = none).
func roundAck(p *Path, k int, bytes, prior int, rate float64) time.Time {
	now := t0.Add(time.Duration(k) * rtt40)
	p.OnAck(Ack{Now: now, Bytes: bytes, PriorInFlight: prior, RTT: rtt40, SRTT: rtt40, MinRTT: rtt40,
		LargestSent: now.Add(-rtt40), DeliveryRate: rate})
	return now
}

// inProbeBW puts p into ProbeBW phase 2 (gain 1) with bandwidth bw.
func inProbeBW(p *Path, bw float64) {
	p.OnAck(Ack{Now: t0, RTT: rtt40, SRTT: rtt40, MinRTT: rtt40})
	p.rs.mode, p.rs.filled, p.rs.phase, p.rs.phaseStart = rateProbeBW, true, 2, t0
	for i := range p.rs.bwRound {
		p.rs.bwRound[i] = bw
	}
	p.rs.bw = bw
}

func TestRateBandwidthFilter(t *testing.T) {
	_, p := newRatePath(t, Config{})
	roundAck(p, 1, rmss, 0, 1e6)
	for k := 2; k <= 10; k++ {
		roundAck(p, k, rmss, 0, 5e5)
	}
	if st := p.Stats(); st.BW != 1e6 {
		t.Fatalf("after 10 rounds bw %v, want the max 1e6 still in the window", st.BW)
	}
	roundAck(p, 11, rmss, 0, 5e5)
	if st := p.Stats(); st.BW != 5e5 {
		t.Fatalf("after 11 rounds bw %v, want 5e5 (the 1e6 round left the 10-round window)", st.BW)
	}
	// An app-limited sample below the estimate is ignored, above it counts.
	now := t0.Add(11*rtt40 + time.Millisecond)
	p.OnAck(Ack{Now: now, Bytes: rmss, RTT: rtt40, LargestSent: now.Add(-50 * time.Millisecond), DeliveryRate: 1e5, AppLimited: true})
	if p.Stats().BW != 5e5 {
		t.Errorf("app-limited 1e5 changed bw to %v", p.Stats().BW)
	}
	p.OnAck(Ack{Now: now, Bytes: rmss, RTT: rtt40, LargestSent: now.Add(-50 * time.Millisecond), DeliveryRate: 7e5, AppLimited: true})
	if p.Stats().BW != 7e5 {
		t.Errorf("app-limited 7e5 above the estimate: bw %v, want 7e5", p.Stats().BW)
	}
}

func TestRateStartupDrainProbeBW(t *testing.T) {
	_, p := newRatePath(t, Config{})
	if st := p.Stats(); st.Mode != "startup" || !st.SlowStart || p.PacingRate() != 0 {
		t.Fatalf("fresh path: mode %q, pacing %v; want startup, unpaced before an RTT", st.Mode, p.PacingRate())
	}
	// Nominal Startup rate before a bandwidth sample: 2.77 × 10 segments / 40 ms.
	p.OnAck(Ack{Now: t0, RTT: rtt40, SRTT: rtt40, MinRTT: rtt40})
	near(t, "nominal pacing rate", p.PacingRate(), 2.77*10*rmss/0.040)

	// bw doubles for 4 rounds, then stays at 8e5: rounds ending with acks 6, 7, 8
	// grew less than 25 %, the third ends Startup. Lots in flight: Drain.
	rates := []float64{1e5, 2e5, 4e5, 8e5, 8e5, 8e5, 8e5}
	for k, r := range rates {
		roundAck(p, k+1, rmss, 100000, r)
		if p.rs.mode != rateStartup {
			t.Fatalf("left startup at round %d", k+1)
		}
		// Startup paces at 2.77 × bw, and not below the window's nominal
		// rate while it has not filled the pipe.
		near(t, "startup pacing", p.PacingRate(), 2.77*max(r, float64(p.Window())/rtt40.Seconds()))
	}
	roundAck(p, 8, rmss, 100000, 8e5)
	if st := p.Stats(); st.Mode != "drain" {
		t.Fatalf("mode %q after 3 rounds without growth, want drain", st.Mode)
	}
	near(t, "drain pacing", p.PacingRate(), 0.35*8e5)
	// BDP = 8e5 × 0.040 = 32000 bytes; 32000 in flight after the ack ends Drain.
	now := t0.Add(8*rtt40 + time.Millisecond)
	p.OnAck(Ack{Now: now, Bytes: rmss, PriorInFlight: 33000, RTT: rtt40, MinRTT: rtt40, LargestSent: now.Add(-rtt40)})
	if st := p.Stats(); st.Mode != "probe_bw" || st.Phase != 2 {
		t.Fatalf("mode %q phase %d, want probe_bw phase 2", st.Mode, st.Phase)
	}
	// Gain cycle: one phase per min RTT, 2 → … → 7 → 0 (1.25) → 1 (0.75) → 2.
	want := []struct {
		phase int
		gain  float64
	}{{3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {0, 1.25}, {1, 0.75}, {2, 1}}
	start := now
	for i, w := range want {
		early := start.Add(time.Duration(i+1)*rtt40 - time.Microsecond)
		p.OnAck(Ack{Now: early, Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: early.Add(-rtt40), DeliveryRate: 8e5})
		if p.rs.phase == w.phase {
			t.Fatalf("phase %d reached before a full min RTT", w.phase)
		}
		at := start.Add(time.Duration(i+1) * rtt40)
		p.OnAck(Ack{Now: at, Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: at.Add(-rtt40), DeliveryRate: 8e5})
		if p.rs.phase != w.phase {
			t.Fatalf("step %d: phase %d, want %d", i, p.rs.phase, w.phase)
		}
		near(t, "probe_bw pacing", p.PacingRate(), w.gain*8e5)
	}
}

// Every cap below has one segment more than the BDP arithmetic: the ack's own
// segment, which opens an ack-aggregation epoch and counts as aggregation (as
// in BBR; see TestRateAckAggregation).
func TestRateCapArithmetic(t *testing.T) {
	// bw 1.25e6 B/s (10 Mbit/s) × 40 ms = 50000 B = 50 segments.
	_, p := newRatePath(t, Config{})
	inProbeBW(p, 1.25e6)
	p.cwnd = 100
	ack := func() {
		now := t0.Add(time.Millisecond)
		p.OnAck(Ack{Now: now, Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
	}
	ack()
	if w := p.Window(); w != 65500 { // 1.25 × 50 + 2 + 1 segments
		t.Errorf("ProbeBW cap %d bytes, want 65500", w)
	}
	if r := p.Room(60000); r != 5500 {
		t.Errorf("room %d, want 5500", r)
	}
	// The cap grows by what is acked, never beyond the target.
	p.cwnd = 60
	ack()
	if p.cwnd != 61 {
		t.Errorf("cwnd %v after acking one segment below the target, want 61", p.cwnd)
	}
	// CapGain 1: 50 + 2 + 1 segments; a tiny bandwidth: the floor of 4
	// segments (aggregation counts at most bw × 100 ms, 100 bytes).
	_, q := newRatePath(t, Config{CapGain: 1})
	inProbeBW(q, 1.25e6)
	q.cwnd = 100
	q.OnAck(Ack{Now: t0.Add(time.Millisecond), Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
	if w := q.Window(); w != 53000 {
		t.Errorf("CapGain 1: cap %d, want 53000", w)
	}
	inProbeBW(q, 1000) // BDP 40 bytes
	q.OnAck(Ack{Now: t0.Add(time.Millisecond), Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
	if w := q.Window(); w != 4000 {
		t.Errorf("floor: cap %d, want 4000", w)
	}
}

// The cap is sized on the smallest full-size RTT sample (Ack.FullSize), not
// on a probe's: probes at 30 ms and data at 40 ms give CapGain 1 a cap of
// 1.25e6 × 40 ms + 2 + 1 segments = 53 segments, not 40.5 (+1: the acked
// segment's aggregation, see TestRateCapArithmetic).
func TestRateFullSizeMinRTT(t *testing.T) {
	_, q := newRatePath(t, Config{CapGain: 1})
	probe := 30 * time.Millisecond
	inProbeBW(q, 1.25e6)
	q.OnAck(Ack{Now: t0.Add(time.Millisecond), RTT: probe, MinRTT: probe})
	q.cwnd = 100
	q.OnAck(Ack{Now: t0.Add(2 * time.Millisecond), Bytes: rmss, RTT: probe, MinRTT: probe, LargestSent: t0.Add(-time.Second)})
	if w := q.Window(); w != 40500 {
		t.Fatalf("no full-size sample yet: cap %d, want 1.25e6 × 30 ms + 3000 = 40500", w)
	}
	q.cwnd = 100
	q.OnAck(Ack{Now: t0.Add(3 * time.Millisecond), Bytes: rmss, RTT: rtt40, FullSize: true, MinRTT: probe, LargestSent: t0.Add(-time.Second)})
	if w := q.Window(); w != 53000 {
		t.Errorf("full-size min 40 ms: cap %d, want 53000", w)
	}
	if st := q.Stats(); st.MinRTT != rtt40 {
		t.Errorf("min RTT %v, want the full-size 40 ms", st.MinRTT)
	}
}

// Two active paths of equal bandwidth split the 2-segment allowance and the
// aggregation's (one acked segment, see TestRateCapArithmetic): 62.5 + 1 + 0.5.
func TestRateCoupledAllowance(t *testing.T) {
	c, p := newRatePath(t, Config{})
	q := c.AddPath(1, t0)
	inProbeBW(p, 1.25e6)
	inProbeBW(q, 1.25e6)
	at := t0
	p.cwnd = 100
	at = at.Add(time.Millisecond) // one segment per ms, below bw: each ack opens an epoch
	p.OnAck(Ack{Now: at, Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
	if w := p.Window(); w != 64000 {
		t.Errorf("coupled cap %d, want 64000", w)
	}
	// q three times as fast: p's share 1/4 → 62.5 + 0.5 + 0.25 segments.
	q.rs.bw = 3.75e6
	p.cwnd = 100
	at = at.Add(time.Millisecond) // one segment per ms, below bw: each ack opens an epoch
	p.OnAck(Ack{Now: at, Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
	if w := p.Window(); w != 63250 {
		t.Errorf("coupled cap %d with a quarter share, want 63250", w)
	}
	q.SetUsable(false)
	p.cwnd = 100
	at = at.Add(time.Millisecond) // one segment per ms, below bw: each ack opens an epoch
	p.OnAck(Ack{Now: at, Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
	if w := p.Window(); w != 65500 {
		t.Errorf("alone again: cap %d, want 65500", w)
	}
}

func TestRatePacingBucket(t *testing.T) {
	_, p := newRatePath(t, Config{})
	inProbeBW(p, 1.25e6) // gain 1: 1.25e6 B/s; depth 5 ms = 6250 bytes
	if r := p.PacingRate(); r != 1.25e6 {
		t.Fatalf("pacing rate %v", r)
	}
	now := t0.Add(time.Second)
	for i := 0; i < 6; i++ {
		if d := p.PaceDelay(now, rmss); d != 0 {
			t.Fatalf("packet %d of a full bucket delayed %v", i, d)
		}
		p.OnSent(rmss, (i+1)*rmss, now)
	}
	// 250 bytes left: 750 more take 750/1.25e6 s = 600 µs.
	if d := p.PaceDelay(now, rmss); d != 600*time.Microsecond {
		t.Errorf("delay %v, want 600µs", d)
	}
	if d := p.PaceDelay(now.Add(599*time.Microsecond), rmss); d != time.Microsecond {
		t.Errorf("delay %v 599µs later, want 1µs", d)
	}
	if d := p.PaceDelay(now.Add(600*time.Microsecond), rmss); d != 0 {
		t.Errorf("delay %v after 600µs, want 0", d)
	}
	// A long idle period fills the bucket to its depth only: 6 packets, then wait.
	later := now.Add(time.Second)
	for i := 0; i < 6; i++ {
		p.OnSent(rmss, rmss, later)
	}
	if d := p.PaceDelay(later, rmss); d != 600*time.Microsecond {
		t.Errorf("after idle: delay %v, want 600µs (depth 6250 bytes)", d)
	}
	// Depth is at least two segments: at 1e5 B/s 5 ms is 500 bytes.
	_, q := newRatePath(t, Config{})
	inProbeBW(q, 1e5)
	q.OnSent(rmss, rmss, now)
	if d := q.PaceDelay(now, rmss); d != 0 {
		t.Errorf("second segment of a 2-segment bucket delayed %v", d)
	}
	q.OnSent(rmss, 2*rmss, now)
	if d := q.PaceDelay(now, rmss); d != 10*time.Millisecond {
		t.Errorf("delay %v, want 1000/1e5 s = 10ms", d)
	}
	// PacingBurst 20 ms: 25 segments at once, then 1000/1.25e6 s.
	_, r := newRatePath(t, Config{PacingBurst: 20 * time.Millisecond})
	inProbeBW(r, 1.25e6) // depth 25000 bytes
	for i := 0; i < 25; i++ {
		r.OnSent(rmss, rmss, now)
	}
	if d := r.PaceDelay(now, rmss); d != 800*time.Microsecond {
		t.Errorf("PacingBurst 20ms: delay %v after 25 segments, want 800µs", d)
	}
}

// lossWindow reports lost packets, then one ACK frame acknowledging acked
// packets that ends a round (and so may close the loss window).
func lossWindow(p *Path, k int, lost, acked int) {
	now := t0.Add(time.Duration(k) * time.Second)
	if lost > 0 {
		p.OnLoss(Loss{Now: now, Bytes: lost * rmss, LargestSent: now.Add(-rtt40)})
	}
	p.OnAck(Ack{Now: now, Bytes: acked * rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: now.Add(-rtt40), DeliveryRate: 8e5})
}

func TestRateLossResponse(t *testing.T) {
	_, p := newRatePath(t, Config{})
	inProbeBW(p, 8e5)
	// 1 lost of 101 and 5 of 105 (4.8 %): random-loss levels, no change.
	lossWindow(p, 1, 1, 100)
	lossWindow(p, 2, 5, 100)
	if st := p.Stats(); st.BWBound != 0 || st.CongestionEvents != 0 || p.PacingRate() != 8e5 {
		t.Fatalf("loss below the threshold changed the model: %+v", st)
	}
	// 6 of 106 (5.7 %): bound 0.7 × 8e5.
	lossWindow(p, 3, 6, 100)
	if st := p.Stats(); st.BWBound != 5.6e5 || st.CongestionEvents != 1 || p.PacingRate() != 5.6e5 {
		t.Fatalf("after a lossy window: bound %v, events %d, pacing %v; want 5.6e5, 1, 5.6e5", st.BWBound, st.CongestionEvents, p.PacingRate())
	}
	// + 80: each window's 100 segments acked at once are ack aggregation,
	// counted up to bw × 100 ms = 80 segments.
	near(t, "cap with the bound", p.cwnd, 1.25*5.6e5*0.040/rmss+2+80)
	// Sustained: 0.7 × 5.6e5.
	lossWindow(p, 4, 20, 100)
	near(t, "second bound", p.Stats().BWBound, 3.92e5)
	// Windows under 100 packets are not judged: 50 lost of 90 waits, then 100 packets close it.
	lossWindow(p, 5, 50, 40)
	near(t, "bound unchanged by a short window", p.Stats().BWBound, 3.92e5)
	lossWindow(p, 6, 0, 10)
	near(t, "third bound", p.Stats().BWBound, 0.7*3.92e5)
	// Recovery: each clean window × 1.25 until the bound no longer binds.
	b := p.Stats().BWBound
	for k := 7; b > 0; k++ {
		lossWindow(p, k, 0, 100)
		want := b * 1.25
		if want >= 8e5 {
			want = 0
		}
		near(t, "recovering bound", p.Stats().BWBound, want)
		b = want
	}
	if p.PacingRate() != 8e5 {
		t.Errorf("recovered pacing %v, want 8e5", p.PacingRate())
	}
	// Floor: the bound never goes below 4 segments per min RTT (1e5 B/s).
	for k := 20; k < 40; k++ {
		lossWindow(p, k, 50, 100)
	}
	near(t, "bound floor", p.Stats().BWBound, 4*rmss/0.040)
}

// LossThreshold is tunable: at 0.1, 6 of 106 does nothing, 12 of 112 binds.
func TestRateLossThresholdConfig(t *testing.T) {
	_, p := newRatePath(t, Config{LossThreshold: 0.1})
	inProbeBW(p, 8e5)
	lossWindow(p, 1, 6, 100)
	if p.Stats().BWBound != 0 {
		t.Fatalf("6 of 106 bound the model at threshold 0.1")
	}
	lossWindow(p, 2, 12, 100)
	if p.Stats().BWBound != 5.6e5 {
		t.Fatalf("12 of 112: bound %v, want 5.6e5", p.Stats().BWBound)
	}
}

// Heavy loss in Startup ends it.
func TestRateLossEndsStartup(t *testing.T) {
	_, p := newRatePath(t, Config{})
	roundAck(p, 1, rmss, 0, 4e5)
	lossWindow(p, 2, 20, 100)
	if st := p.Stats(); st.Mode == "startup" || st.BWBound != 0.7*4e5 {
		t.Errorf("mode %q bound %v after 17 %% loss in startup", st.Mode, st.BWBound)
	}
}

func TestRateRTO(t *testing.T) {
	_, p := newRatePath(t, Config{})
	inProbeBW(p, 8e5)
	lossWindow(p, 1, 20, 100)
	p.OnRTO(t0.Add(2 * time.Second))
	st := p.Stats()
	if st.Mode != "startup" || st.BW != 0 || st.BWBound != 0 || st.RTOs != 1 || p.Window() != rmss {
		t.Fatalf("after an RTO: %+v, window %d; want startup, no estimate, one segment", st, p.Window())
	}
	near(t, "pacing after an RTO", p.PacingRate(), 2.77*1*rmss/0.040)
	if p.Room(0) != rmss || p.CanSend(1, rmss) {
		t.Errorf("window of one segment: room %d", p.Room(0))
	}
	// The next ack raises the cap to the 4-segment floor; min RTT is kept.
	now := t0.Add(3 * time.Second)
	p.OnAck(Ack{Now: now, Bytes: rmss, RTT: rtt40, LargestSent: now.Add(-rtt40)})
	if p.Window() != 4*rmss || p.Stats().MinRTT != rtt40 {
		t.Errorf("window %d min RTT %v, want 4000 and 40ms", p.Window(), p.Stats().MinRTT)
	}
	p.Reset(now)
	if st := p.Stats(); st.Mode != "startup" || st.BW != 0 || p.Window() != 10*rmss {
		t.Errorf("after Reset: %+v window %d", st, p.Window())
	}
}

// Only "rate" paces; the new Ack fields change nothing for the others.
func TestPacingOnlyForRate(t *testing.T) {
	for _, alg := range Names() {
		if alg == Rate {
			continue
		}
		c, _ := New(alg, Config{MSS: rmss})
		p := c.AddPath(0, t0)
		q := c.AddPath(1, t0)
		for i := 1; i <= 50; i++ {
			now := t0.Add(time.Duration(i) * time.Millisecond)
			a := Ack{Now: now, Bytes: rmss, PriorInFlight: p.Window(), RTT: rtt40, SRTT: rtt40, LargestSent: now.Add(-rtt40)}
			p.OnSent(rmss, p.Window(), now)
			q.OnSent(rmss, q.Window(), now)
			q.OnAck(a)
			a.DeliveryRate, a.AppLimited, a.MinRTT = 1e9, true, time.Millisecond
			p.OnAck(a)
			if p.PacingRate() != 0 || p.PaceDelay(now, 1<<20) != 0 {
				t.Fatalf("%s paces", alg)
			}
		}
		if p.Stats() != q.Stats() || p.Window() != q.Window() {
			t.Errorf("%s: the rate inputs changed the window: %+v vs %+v", alg, p.Stats(), q.Stats())
		}
	}
}

// The first sample makes the estimate even when app-limited (as in BBR): a
// path whose inner traffic never fills the window would otherwise have no
// estimate, no cap, and a window grown by every ack. Later app-limited samples
// may only raise it.
func TestRateFirstSampleAppLimited(t *testing.T) {
	_, p := newRatePath(t, Config{})
	p.OnAck(Ack{Now: t0, Bytes: rmss, RTT: rtt40, SRTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-rtt40), DeliveryRate: 3e5, AppLimited: true})
	if bw := p.Stats().BW; bw != 3e5 {
		t.Fatalf("bw %v after a first app-limited sample of 3e5, want 3e5", bw)
	}
	w := p.Window()
	now := t0.Add(time.Millisecond)
	p.OnAck(Ack{Now: now, Bytes: rmss, RTT: rtt40, SRTT: rtt40, MinRTT: rtt40, LargestSent: now.Add(-rtt40), DeliveryRate: 2e5, AppLimited: true})
	if bw := p.Stats().BW; bw != 3e5 {
		t.Errorf("a lower app-limited sample moved bw to %v", bw)
	}
	// Startup's cap: 2 × bw × (min RTT + ack allowance) / MSS + 2 segments — a
	// window no longer grows without bound.
	if target := p.rateTarget(); target <= 0 || float64(w) > (target+1)*rmss {
		t.Errorf("window %d bytes, target %v segments: want a finite target the window respects", w, target)
	}
}

// A fresh path's first samples are app-limited and tiny (handshake,
// keepalives, an inner flow's first segments): in Startup they must not pace
// the window below its nominal rate, Startup's gain × window / SRTT, or an
// inner slow start waits in the tunnel's queue for a round trip. Once Startup
// has filled the pipe, gain × bw paces again.
func TestRateStartupPacingNotBelowWindow(t *testing.T) {
	_, p := newRatePath(t, Config{})
	nominal := rateStartupGain * float64(p.Window()) / rtt40.Seconds() // 10 segments per 40 ms, × 2.77
	p.OnAck(Ack{Now: t0, Bytes: 100, RTT: rtt40, SRTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-rtt40), DeliveryRate: 5e3, AppLimited: true})
	if bw := p.Stats().BW; bw != 5e3 {
		t.Fatalf("bw %v after an app-limited sample of 5e3, want 5e3", bw)
	}
	if r := p.PacingRate(); r < nominal*0.99 {
		t.Errorf("Startup pacing %.0f B/s after a tiny first sample, want at least the window's nominal %.0f", r, nominal)
	}
	// Once Startup has filled the pipe, pacing follows the estimate again
	// (here Drain ends at once, nothing being in flight: ProbeBW, at most
	// 1.25 × bw).
	p.rs.filled = true
	p.rateModes(t0.Add(time.Millisecond))
	if r, want := p.PacingRate(), 1.25*5e3; p.rs.mode == rateStartup || r > want*1.01 {
		t.Errorf("mode %v, pacing %.0f B/s after Startup, want at most %.0f", p.rs.mode, r, want)
	}
}

// A cap of one BDP (CapGain 1, the tunnel's: 50 + 2 segments at 10 Mbit/s,
// 40 ms, + 1 for the acked segment's aggregation) is raised to the probing
// gain while ProbeBW probes (62.5 + 2 + 1), so the probe is paced, not held at
// the ack clock.
func TestRateCapProbe(t *testing.T) {
	_, p := newRatePath(t, Config{CapGain: 1})
	inProbeBW(p, 1.25e6)
	at := t0
	ack := func() {
		p.cwnd = 100
		at = at.Add(time.Millisecond)
		p.OnAck(Ack{Now: at, Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
	}
	ack()
	if w := p.Window(); w != 53000 {
		t.Errorf("cruise: cap %d bytes, want 53000", w)
	}
	p.rs.phase, p.rs.phaseStart = 0, at.Add(time.Millisecond) // the 1.25 phase
	ack()
	if w := p.Window(); w != 65500 {
		t.Errorf("probing: cap %d bytes, want 65500", w)
	}
}

// Acks that run ahead of the bandwidth estimate raise the cap by as much
// (BBR's extra_acked). A first ack opens an epoch and counts its own segment
// (CapGain 1: 52000 + 1000); 10 segments acked at once 1 ms later, where bw
// delivers 1250 bytes, make 11000 - 1250 = 9750 bytes of aggregation: 61750.
// Ten rounds of acks slower than bw bring it back to one segment.
func TestRateAckAggregation(t *testing.T) {
	_, p := newRatePath(t, Config{CapGain: 1})
	inProbeBW(p, 1.25e6)
	at := t0.Add(time.Millisecond)
	ack := func() {
		p.cwnd = 100
		p.OnAck(Ack{Now: at, Bytes: rmss, RTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
	}
	ack() // opens the epoch
	if w := p.Window(); w != 53000 {
		t.Fatalf("one ack: cap %d, want 53000", w)
	}
	at = at.Add(time.Millisecond)
	for range 10 {
		ack()
	}
	if w := p.Window(); w != 61750 {
		t.Fatalf("10 segments at once: cap %d, want 61750", w)
	}
	for k := 1; k <= 2*rateAggRounds; k++ {
		roundAck(p, k, rmss, 0, 1.25e6)
	}
	p.cwnd = 100
	roundAck(p, 2*rateAggRounds+1, rmss, 0, 1.25e6)
	if w := p.Window(); w != 53000 {
		t.Errorf("after %d rounds without aggregation: cap %d, want 53000", 2*rateAggRounds+1, w)
	}
}

// rttAck delivers an RTT sample (and bytes acked) at t, with the window full
// before it; no bandwidth sample, no round end (nothing was sent after the
// round began).
func rttAck(p *Path, t time.Time, rtt time.Duration, bytes int) {
	p.OnAck(Ack{Now: t, Bytes: bytes, PriorInFlight: int(p.cwnd * rmss), RTT: rtt, SRTT: rtt, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
}

// Contention, hand-computed: bw 1e6 B/s, min RTT 40 ms, so the detection window
// is max(10 × 40 ms, 250 ms) = 400 ms and the slack max(40/4, 5) = 10 ms: a
// window whose smallest RTT is above 50 ms has a standing queue.
func TestRateContention(t *testing.T) {
	_, p := newRatePath(t, Config{})
	inProbeBW(p, 1e6)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	// A queue that empties once a window (one 45 ms sample) is the model's own.
	for ms := 40; ms <= 2000; ms += 40 {
		r := 80 * time.Millisecond
		if ms%400 == 200 {
			r = 45 * time.Millisecond
		}
		rttAck(p, at(ms), r, 0)
	}
	if p.Stats().Mode != "probe_bw" {
		t.Fatalf("a queue that empties every window: mode %q, want probe_bw", p.Stats().Mode)
	}

	// 80 ms throughout: the window starting at 2040 ms closes at 2440 (first
	// standing window), the next at 2840: contention.
	for ms := 2040; ms < 2840; ms += 40 {
		rttAck(p, at(ms), 80*time.Millisecond, 0)
		if p.Stats().Mode != "probe_bw" {
			t.Fatalf("contention at %d ms, want it at 2840 (two standing windows)", ms)
		}
	}
	// Two standing windows: first a drain to half the BDP (20 segments of
	// 1000 bytes) for max(200 ms, 2 SRTT); the queue stays (80 ms at 3040):
	// contention.
	rttAck(p, at(2840), 80*time.Millisecond, 0)
	p.cwnd = 52 // as if cruising at the model's cap, 1.25 × 40 + 2
	rttAck(p, at(2900), 80*time.Millisecond, rmss)
	if p.Stats().Mode != "probe_bw" || !p.rs.draining() || p.cwnd != 20 {
		t.Fatalf("after two standing windows: mode %q, draining %v, cap %v; want probe_bw, a drain and 20", p.Stats().Mode, p.rs.draining(), p.cwnd)
	}
	rttAck(p, at(3040), 80*time.Millisecond, 0)
	if p.Stats().Mode != "contend" {
		t.Fatalf("after the drain: mode %q, want contend", p.Stats().Mode)
	}
	// cw = max(cwnd, bw × SRTT) = 1e6 × 0.08 / 1000 = 80 segments, above the
	// model's cap 1.25 × 40 + 2 = 52.
	near(t, "contention window", p.rs.cw, 80)
	// An ack of one segment: cw += 0.75 · 3(0.3)/1.7 · 1/80; the cap grows by
	// the acked segment toward it; pacing 1.2 × cw / SRTT beats gain × bw.
	// It slow-starts: an ack of one segment adds one; the cap grows by the
	// acked segment toward it; pacing 1.2 × cw / SRTT beats gain × bw.
	p.cwnd = 60 // as if grown past the model's cap already
	rttAck(p, at(3050), 80*time.Millisecond, rmss)
	near(t, "cw after one ack in slow start", p.rs.cw, 81)
	near(t, "cap after one ack", p.cwnd, 61)
	near(t, "contention pacing", p.PacingRate(), max(1.2*81*rmss/0.080, rateGains[p.rs.phase]*1e6))

	// A loss ends the slow start and cuts cw by 0.7 once per round trip: a
	// second loss of a packet sent before the cut changes nothing.
	p.OnLoss(Loss{Now: at(3100), Bytes: rmss, LargestSent: at(3090)})
	near(t, "cw after a loss", p.rs.cw, 0.7*81)
	p.OnLoss(Loss{Now: at(3110), Bytes: rmss, LargestSent: at(3095)})
	near(t, "cw after a loss of the same round", p.rs.cw, 0.7*81)
	// Then it grows by 3(0.3)/1.7 / cw per acked segment (alone in the
	// coupling set: Reno's 1/cw, scaled to CUBIC's Reno-friendly increase).
	rttAck(p, at(3120), 80*time.Millisecond, rmss)
	ai := 3 * 0.3 / 1.7
	near(t, "cw after one ack in avoidance", p.rs.cw, 0.7*81+ai/(0.7*81))
	// An ack while the path is not window-limited (5 segments in flight of a
	// larger cap, none sent limited lately) does not grow it.
	cw := p.rs.cw
	p.limitedSet = false
	p.OnAck(Ack{Now: at(3130), Bytes: rmss, PriorInFlight: 5 * rmss, RTT: 80 * time.Millisecond, SRTT: 80 * time.Millisecond, MinRTT: rtt40, LargestSent: t0})
	near(t, "cw after an ack that was not window-limited", p.rs.cw, cw)

	// 8 s after entering, the drain check: for max(200 ms, 2 × 80 ms) the cap
	// is half the BDP (20). The queue stays (80 ms): contention goes on.
	rttAck(p, at(11040), 80*time.Millisecond, 0)
	rttAck(p, at(11100), 80*time.Millisecond, rmss)
	if p.Stats().Mode != "contend" || p.cwnd != 20 {
		t.Fatalf("during the drain check: mode %q cap %v, want contend and 20", p.Stats().Mode, p.cwnd)
	}
	rttAck(p, at(11240), 80*time.Millisecond, 0)
	if !p.rs.contending() {
		t.Fatalf("after the drain check found a queue: cw not in force")
	}
	// The next check (8 s later) sees the queue empty: the model takes over.
	rttAck(p, at(19240), 80*time.Millisecond, 0)
	rttAck(p, at(19300), 45*time.Millisecond, 0)
	if p.Stats().Mode != "probe_bw" {
		t.Fatalf("the drain check saw 45 ms: mode %q, want probe_bw", p.Stats().Mode)
	}
}

// On a slow path the cruising cap is the 4-segment floor, more than a BDP:
// bw 1.25e5 B/s (1 Mbit/s) and min RTT 40 ms make a BDP of 5 segments of
// 1000 bytes, so a drain to half of it (2.5) must go below the floor, or it
// drains nothing and the model contends against its own queue.
func TestRateDrainBelowFloorOnSlowPaths(t *testing.T) {
	_, p := newRatePath(t, Config{})
	inProbeBW(p, 1.25e5)
	p.cwnd = rateMinCap + 2
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for ms := 40; ; ms += 40 {
		rttAck(p, at(ms), 80*time.Millisecond, rmss)
		if p.rs.draining() {
			break
		}
		if ms > 2000 {
			t.Fatal("no drain after 2 s of standing queue")
		}
	}
	for ms := 0; ms < 3; ms++ { // acks during the drain move the window to the drain's cap
		rttAck(p, at(900+ms), 80*time.Millisecond, rmss)
	}
	if p.cwnd != 2.5 {
		t.Fatalf("drain on a 1 Mbit/s path: cap %v segments, want 2.5 (half the BDP, below the floor of %v)", p.cwnd, rateMinCap)
	}
}

// A standing queue that empties when the model drains was its own (a slow
// multi-hop path where the cap's extra segments stand above the slack): no
// contention, and the next detection takes windows twice as long, until a
// window crosses an empty queue again. Hand-computed as in TestRateContention:
// windows of 400 ms, slack 10 ms, drains of 200 ms.
func TestRateOwnQueueDoesNotContend(t *testing.T) {
	_, p := newRatePath(t, Config{})
	inProbeBW(p, 1e6)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// firstDrain feeds 80 ms samples every 40 ms from ms on and returns when
	// the drain began.
	firstDrain := func(ms int) int {
		for ; ms < 10000; ms += 40 {
			rttAck(p, at(ms), 80*time.Millisecond, 0)
			if p.rs.draining() {
				return ms
			}
		}
		t.Fatal("no drain within 10 s of standing queue")
		return 0
	}
	// Windows from 40 ms: closed at 440 and 840; the drain begins at 840.
	if d := firstDrain(40); d != 840 {
		t.Fatalf("drain at %d ms, want 840 (two 400 ms windows)", d)
	}
	// The queue empties during the drain: the model's own.
	rttAck(p, at(880), 45*time.Millisecond, 0)
	if p.rs.draining() || p.Stats().Mode != "probe_bw" || p.rs.qBackoff != 2 {
		t.Fatalf("a drain that emptied the queue: draining %v, mode %q, backoff %v; want no drain, probe_bw, 2", p.rs.draining(), p.Stats().Mode, p.rs.qBackoff)
	}
	// Windows of 800 ms from 920: closed at 1720 and 2520.
	if d := firstDrain(920); d != 2520 {
		t.Fatalf("second drain at %d ms, want 2520 (two 800 ms windows)", d)
	}
	rttAck(p, at(2560), 45*time.Millisecond, 0)
	if p.rs.qBackoff != 4 {
		t.Fatalf("backoff %v after the second drain that emptied the queue, want 4", p.rs.qBackoff)
	}
	// A window (1600 ms from 2600) that crosses an empty queue resets it.
	for ms := 2600; ms <= 4200; ms += 40 {
		r := 80 * time.Millisecond
		if ms == 3000 {
			r = 45 * time.Millisecond
		}
		rttAck(p, at(ms), r, 0)
	}
	if p.rs.qBackoff != 1 || p.rs.draining() {
		t.Fatalf("after a window that crossed an empty queue: backoff %v, draining %v; want 1 and no drain", p.rs.qBackoff, p.rs.draining())
	}
}

// TestRateRiseReentersStartup: a sample of the probe (here in its 0.75 phase)
// of 1.2e6 at bw 1e6 (≥ rateReprobeGrowth × the bw the probe began with)
// re-enters Startup at gain 2.77 with the full-bandwidth check restarted; one
// of 1.05e6 leaves the cycle as it was (cruise, phase 2, a min RTT later).
// (Before, the 1.2e6 sample made the cycle probe again at 1.25: at most 25 %
// growth per two min RTTs, 20 min RTTs for a 10× rise.)
func TestRateRiseReentersStartup(t *testing.T) {
	for _, tc := range []struct {
		sample  float64
		startup bool
	}{{1.2e6, true}, {1.05e6, false}} {
		_, p := newRatePath(t, Config{})
		inProbeBW(p, 1e6)
		p.rs.phase, p.rs.probeBw = 0, 1e6
		at := func(k int) time.Time { return t0.Add(time.Duration(k)*rtt40 + time.Millisecond) }
		p.OnAck(Ack{Now: at(1), RTT: rtt40, SRTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
		if p.rs.phase != 1 {
			t.Fatalf("one min RTT into the probe: phase %d, want 1", p.rs.phase)
		}
		p.OnAck(Ack{Now: at(1).Add(time.Millisecond), Bytes: rmss, RTT: rtt40, SRTT: rtt40, MinRTT: rtt40,
			LargestSent: t0.Add(-time.Second), DeliveryRate: tc.sample})
		p.OnAck(Ack{Now: at(2), RTT: rtt40, SRTT: rtt40, MinRTT: rtt40, LargestSent: t0.Add(-time.Second)})
		st := p.Stats()
		if tc.startup {
			if st.Mode != "startup" || p.rs.fullBw != tc.sample || p.rs.fullBwCount != 0 {
				t.Errorf("sample %.2g: mode %s, fullBw %.3g; want startup from 1.2e6", tc.sample, st.Mode, p.rs.fullBw)
			}
			near(t, "pacing in the re-entered Startup", st.PacingRate, rateStartupGain*1.2e6)
		} else if st.Mode != "probe_bw" || st.Phase != 2 {
			t.Errorf("sample %.2g: mode %s phase %d, want probe_bw phase 2", tc.sample, st.Mode, st.Phase)
		}
	}
}

// TestRateFallDrains: at bw 1e6 and min RTT 40 ms, a sample of 2e5 whose ack
// saw 100 ms (a queue far above the 10 ms slack) is a fall: bw becomes 2e5 at
// once, the 0.75 phase begins and holds while 40000 bytes are in flight (more
// than the new BDP, 8000), at most 40000/2e5 = 200 ms; once they are down to
// the BDP a probe follows. The same sample over an empty queue (40 ms), or
// in the 0.75 phase of the cycle, or below 0.8 × bw only by noise (8.5e5),
// changes nothing.
func TestRateFallDrains(t *testing.T) {
	ack := func(p *Path, now time.Time, rtt time.Duration, rate float64, inflight int) {
		p.OnAck(Ack{Now: now, Bytes: rmss, PriorInFlight: inflight + rmss, RTT: rtt, SRTT: rtt, MinRTT: rtt40,
			LargestSent: t0.Add(-time.Second), DeliveryRate: rate})
	}
	for _, tc := range []struct {
		name  string
		rtt   time.Duration
		rate  float64
		phase int
		fall  bool
	}{
		{"queue", 100 * time.Millisecond, 2e5, 3, true},
		{"empty queue", rtt40, 2e5, 3, false},
		{"0.75 phase", 100 * time.Millisecond, 2e5, 1, false},
		{"noise", 100 * time.Millisecond, 8.5e5, 3, false},
	} {
		_, p := newRatePath(t, Config{})
		inProbeBW(p, 1e6)
		p.rs.phase = tc.phase
		now := t0.Add(10 * time.Millisecond)
		ack(p, now, tc.rtt, tc.rate, 40000)
		st := p.Stats()
		if !tc.fall {
			if st.BW != 1e6 || st.Phase != tc.phase {
				t.Errorf("%s: bw %.3g phase %d, want 1e6 and phase %d unchanged", tc.name, st.BW, st.Phase, tc.phase)
			}
			continue
		}
		if st.BW != 2e5 || st.Phase != 1 || !p.rs.fallUntil.Equal(now.Add(200*time.Millisecond)) {
			t.Fatalf("%s: bw %.3g phase %d, drain until %v; want 2e5, 1, +200ms", tc.name, st.BW, st.Phase, p.rs.fallUntil.Sub(now))
		}
		near(t, "pacing while draining the fall", st.PacingRate, 0.75*2e5)
		// A min RTT later, still 40000 in flight: the drain holds.
		ack(p, now.Add(rtt40), 100*time.Millisecond, 0, 40000)
		if p.rs.phase != 1 {
			t.Errorf("%s: phase %d with 40000 bytes in flight, want 1 (draining)", tc.name, p.rs.phase)
		}
		// Down to the BDP (8000 bytes): the probe follows.
		ack(p, now.Add(2*rtt40), 45*time.Millisecond, 0, 8000)
		if p.rs.phase != 0 || !p.rs.fallUntil.IsZero() || p.rs.probeBw != 2e5 {
			t.Errorf("%s: after the drain phase %d, probeBw %.3g; want the probe (0) from 2e5", tc.name, p.rs.phase, p.rs.probeBw)
		}
	}
}

// TestRateStartingUpAndContending: StartingUp holds in a path's first Startup
// only, not in one re-entered on a rise (the model found the path before), nor
// after it; Contending holds while the model contends with a buffer-filling flow.
func TestRateStartingUpAndContending(t *testing.T) {
	_, p := newRatePath(t, Config{})
	if !p.StartingUp() || p.Contending() {
		t.Fatalf("fresh path: StartingUp %v, Contending %v; want true, false", p.StartingUp(), p.Contending())
	}
	inProbeBW(p, 1e6)
	p.rs.found = true
	if p.StartingUp() {
		t.Error("StartingUp in ProbeBW")
	}
	p.rs.mode = rateStartup // re-entered on a rise
	if p.StartingUp() {
		t.Error("StartingUp in a re-entered Startup")
	}
	p.rs.mode, p.rs.contend = rateProbeBW, true
	if !p.Contending() {
		t.Error("Contending false while the model contends")
	}
	var c *Path
	if c.StartingUp() || c.Contending() {
		t.Error("a nil path starts up or contends")
	}
}

// TestRateFilterSlotsOnShortPaths: on a path whose round trip (0.1 ms) is far
// shorter than the interval a delivery-rate sample spans (10 ms), a slot of the
// bandwidth filter lasts RateInterval, so the estimate holds between samples
// instead of emptying after ten bare rounds (which dropped the window to its
// 4-segment floor on a veth). Without RateInterval the old behaviour shows.
func TestRateFilterSlotsOnShortPaths(t *testing.T) {
	const rtt = 100 * time.Microsecond
	run := func(interval time.Duration) (bwMid, bwLate float64, cwndMid float64) {
		_, p := newRatePath(t, Config{RateInterval: interval})
		p.OnAck(Ack{Now: t0, RTT: rtt, SRTT: rtt, MinRTT: rtt})
		p.rs.mode, p.rs.filled, p.rs.phase, p.rs.phaseStart = rateProbeBW, true, 2, t0
		// One sample of 1e8 B/s, then 9 ms of rounds (90) with none.
		now := t0
		for k := 1; k <= 91; k++ {
			now = t0.Add(time.Duration(k) * rtt)
			var rate float64
			if k == 1 {
				rate = 1e8
			}
			p.OnAck(Ack{Now: now, Bytes: rmss, PriorInFlight: 50 * rmss, RTT: rtt, SRTT: rtt, MinRTT: rtt,
				LargestSent: now.Add(-rtt), DeliveryRate: rate})
		}
		bwMid, cwndMid = p.Stats().BW, p.cwnd
		// 10 more slots of RateInterval with no sample: the estimate leaves.
		for k := 1; k <= 11; k++ {
			now = now.Add(interval + rtt)
			p.OnAck(Ack{Now: now, Bytes: rmss, RTT: rtt, SRTT: rtt, MinRTT: rtt, LargestSent: now.Add(-rtt)})
		}
		return bwMid, p.Stats().BW, cwndMid
	}
	bw, late, cwnd := run(10 * time.Millisecond)
	if bw != 1e8 || cwnd <= rateMinCap {
		t.Errorf("RateInterval 10 ms: after 90 bare rounds bw %v cwnd %v, want 1e8 kept and the window above its floor", bw, cwnd)
	}
	if late != 0 {
		t.Errorf("RateInterval 10 ms: bw %v after 11 bare slots, want 0 (the sample aged out)", late)
	}
	if bw, _, cwnd := run(0); bw != 0 || cwnd != rateMinCap {
		t.Errorf("RateInterval 0 (slots of one round): bw %v cwnd %v after 90 bare rounds, want 0 and the %v-segment floor", bw, cwnd, rateMinCap)
	}
}
