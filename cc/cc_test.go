package cc

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The vectors below are the spec's (shared/reference/multipath-cc.md §1–§9),
// state S0: w1 = 10 segments with RTT 20 ms, w2 = 20 segments with RTT 100 ms,
// MSS 1400, both in congestion avoidance, N = 2. Expected values are written as
// the spec gives them; where a value is derived here the arithmetic is spelled
// out next to it, independently of the code under test.

const mss = 1400

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// s0 returns a controller running alg with two active paths in state S0.
func s0(t *testing.T, alg string) (*Controller, *Path, *Path) {
	t.Helper()
	c, err := New(alg, Config{MSS: mss})
	if err != nil {
		t.Fatal(err)
	}
	p1 := setup(c, 0, 10, ms(20))
	p2 := setup(c, 1, 20, ms(100))
	if c.ActivePaths() != 2 {
		t.Fatalf("%d active paths, want 2", c.ActivePaths())
	}
	return c, p1, p2
}

// setup adds path id with window w (segments) in congestion avoidance and an RTT.
func setup(c *Controller, id int, w float64, rtt time.Duration) *Path {
	p := c.AddPath(id, t0)
	p.OnAck(Ack{Now: t0, RTT: rtt, SRTT: rtt}) // an RTT sample, nothing acked
	p.cwnd = w
	p.ssthresh = w / 2 // congestion avoidance
	return p
}

// ackOne acknowledges one full segment on a window-limited path and returns the
// window change in segments.
func ackOne(p *Path, now time.Time) float64 {
	before := p.cwnd
	rtt := time.Duration(p.srtt * float64(time.Second))
	p.OnAck(Ack{Now: now, Bytes: mss, PriorInFlight: p.Window(), RTT: rtt, SRTT: rtt, LargestSent: now.Add(-rtt)})
	return p.cwnd - before
}

// lose declares one packet lost that was sent after every earlier congestion event.
func lose(p *Path, now time.Time) {
	p.OnLoss(Loss{Now: now, Bytes: mss, LargestSent: now.Add(-time.Millisecond)})
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	tol := 1e-6 * math.Abs(want)
	if tol == 0 {
		tol = 1e-12
	}
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.9g, want %.9g", what, got, want)
	}
}

func TestIncreaseVectors(t *testing.T) {
	for _, tc := range []struct {
		alg        string
		d1, d2     float64 // segments per acked segment
		b1, b2     float64 // the same in bytes
		loss1      float64 // window after a loss on path 1 (from S0)
		loss2      float64 // window after a loss on path 2 (from S0)
		lossDetail string
	}{
		{Reno, 0.1, 0.05, 140, 70, 5, 10, "halve"},
		// LIA: alpha = 30·25000/700² = 75/49; alpha/w_total = 5/98 = 0.0510204; path 2's
		// TCP cap 1/20 binds.
		{LIA, 5.0 / 98, 0.05, 71.4285714, 70, 5, 10, "halve"},
		// BALIA: x = 500, 200 pkt/s; path 1: 1000·2500/(10·10·490000); path 2:
		// 700·1300/(10·20·490000). Loss: path 1 10−5·1 = 5, path 2 20−10·1.5 = 5.
		{BALIA, 0.0510204082, 0.00928571429, 71.4285714, 13.0, 5, 5, "w - w/2·min(xmax/x, 1.5)"},
		// EWTCP a = 1/N² = 1/4: 0.25/10, 0.25/20.
		{EWTCP, 0.025, 0.0125, 35, 17.5, 5, 10, "halve"},
		// Fully coupled: 1/w_total = 1/30; loss: max(10−30/2, 1) = 1, 20−15 = 5.
		{Coupled, 1.0 / 30, 1.0 / 30, 46.6666667, 46.6666667, 1, 5, "w - w_total/2, floor 1"},
	} {
		t.Run(tc.alg, func(t *testing.T) {
			_, p1, p2 := s0(t, tc.alg)
			d1 := ackOne(p1, t0.Add(time.Second))
			_, p1b, p2b := s0(t, tc.alg) // fresh state: the first ack changed w1
			_ = p1b
			d2 := ackOne(p2b, t0.Add(time.Second))
			near(t, "Δw1", d1, tc.d1)
			near(t, "Δw2", d2, tc.d2)
			near(t, "Δw1 bytes", d1*mss, tc.b1)
			near(t, "Δw2 bytes", d2*mss, tc.b2)

			_, p1, _ = s0(t, tc.alg)
			lose(p1, t0.Add(time.Second))
			near(t, "w1 after loss ("+tc.lossDetail+")", p1.cwnd, tc.loss1)
			if p1.Stats().SlowStart || !p1.inRecovery {
				t.Errorf("after a loss: slow start %v, recovery %v; want congestion avoidance in recovery", p1.Stats().SlowStart, p1.inRecovery)
			}
			_, _, p2 = s0(t, tc.alg)
			lose(p2, t0.Add(time.Second))
			near(t, "w2 after loss", p2.cwnd, tc.loss2)
		})
	}
}

func TestRenoRTO(t *testing.T) {
	_, p1, p2 := s0(t, Reno)
	p1.OnRTO(t0.Add(time.Second))
	p2.OnRTO(t0.Add(time.Second))
	near(t, "w1", p1.cwnd, 1)
	near(t, "w2", p2.cwnd, 1)
	near(t, "ssthresh1", p1.ssthresh, 5)
	near(t, "ssthresh2", p2.ssthresh, 10)
	if p1.Ssthresh() != 5*mss || p1.Window() != mss {
		t.Errorf("bytes: ssthresh %d window %d, want %d %d", p1.Ssthresh(), p1.Window(), 5*mss, mss)
	}
	if !p1.Stats().SlowStart {
		t.Error("not in slow start after an RTO")
	}
}

func TestOLIAVectors(t *testing.T) {
	// Vector A: l = 1.4e6 B on path 1, 1.4e7 B on path 2 ⇒ q1 = 1.4e6/0.02² = 3.5e9 >
	// q2 = 1.4e7/0.1² = 1.4e9 ⇒ B = {1}, M = {2} (largest window), C = {1};
	// alpha1 = +1/(2·1), alpha2 = −1/(2·1).
	// path 1: 25000/490000 + 0.5/10 = 0.1010204; path 2: 2000/490000 − 0.5/20 = −0.0209184.
	t.Run("A", func(t *testing.T) {
		_, p1, p2 := s0(t, OLIA)
		p1.l1, p2.l1 = 1.4e6, 1.4e7
		near(t, "Δw1", ackOne(p1, t0.Add(time.Second)), 0.101020408)
		_, p1, p2 = s0(t, OLIA)
		p1.l1, p2.l1 = 1.4e6, 1.4e7
		d2 := ackOne(p2, t0.Add(time.Second))
		near(t, "Δw2", d2, -0.0209183673)
		near(t, "Δw2 bytes", d2*mss, -29.2857143)
	})
	// Vector B: l2 = 1.4e8 B on path 2 ⇒ q2 = 1.4e10 is the best and path 2 also has the
	// largest window ⇒ C = ∅ ⇒ all alphas 0: 25000/490000 and 2000/490000.
	t.Run("B", func(t *testing.T) {
		_, p1, p2 := s0(t, OLIA)
		p1.l1, p2.l1 = 1.4e6, 1.4e8
		near(t, "Δw1", ackOne(p1, t0.Add(time.Second)), 0.0510204082)
		_, p1, p2 = s0(t, OLIA)
		p1.l1, p2.l1 = 1.4e6, 1.4e8
		near(t, "Δw2", ackOne(p2, t0.Add(time.Second)), 0.00408163265)
	})
	t.Run("loss", func(t *testing.T) {
		_, p1, p2 := s0(t, OLIA)
		p1.l1, p1.l2 = 1000, 7000
		lose(p1, t0.Add(time.Second))
		near(t, "w1", p1.cwnd, 5)
		if p1.l1 != 7000 || p1.l2 != 0 {
			t.Errorf("loss interval after a loss: l1 %v l2 %v, want 7000 0 (shifted)", p1.l1, p1.l2)
		}
		// Nothing acknowledged since: a second event must not shift again.
		p1.OnLoss(Loss{Now: t0.Add(2 * time.Second), Bytes: mss, LargestSent: t0.Add(2 * time.Second)})
		if p1.l1 != 7000 {
			t.Errorf("l1 = %v after an event with nothing acked since the last, want 7000", p1.l1)
		}
		lose(p2, t0.Add(time.Second))
		near(t, "w2", p2.cwnd, 10)
	})
}

// OLIA's alphas sum to zero: Σ_r (Δw_r − first term_r)·w_r = 0, for windows with a
// collected path and for identical paths alike.
func TestOLIAAlphaSumZero(t *testing.T) {
	c, err := New(OLIA, Config{MSS: mss})
	if err != nil {
		t.Fatal(err)
	}
	ws := []float64{10, 20, 20, 7}
	rtts := []time.Duration{ms(20), ms(100), ms(50), ms(30)}
	ls := []float64{1e6, 1e5, 2e5, 9e6}
	var ps []*Path
	for i := range ws {
		p := setup(c, i, ws[i], rtts[i])
		p.l1 = ls[i]
		ps = append(ps, p)
	}
	sumX := 0.0
	for i := range ws {
		sumX += ws[i] / rtts[i].Seconds()
	}
	total, nonzero := 0.0, 0
	for i, p := range ps {
		first := ws[i] / (rtts[i].Seconds() * rtts[i].Seconds()) / (sumX * sumX)
		alpha := (c.oliaIncrease(p) - first) * ws[i]
		if math.Abs(alpha) > 1e-12 {
			nonzero++
		}
		total += alpha
	}
	// Path 3 (l 9e6 at 30 ms: q = 1e10) is the best and not the largest ⇒ C = {3};
	// paths 1 and 2 (w 20) are M ⇒ alphas +1/4, −1/8, −1/8, 0.
	if nonzero != 3 || math.Abs(total) > 1e-12 {
		t.Errorf("alphas: %d nonzero, sum %g; want 3 nonzero summing to 0", nonzero, total)
	}
}

func TestCubicVectors(t *testing.T) {
	// Path 2: first loss at w = 20 ⇒ W_max 20, cwnd = ssthresh = 0.7·20 = 14,
	// K = cbrt((20−14)/0.4) = cbrt(15) = 2.466212 s.
	_, p1, p2 := s0(t, Cubic)
	loss := t0.Add(time.Second)
	lose(p2, loss)
	near(t, "w2", p2.cwnd, 14)
	near(t, "ssthresh2", p2.ssthresh, 14)
	near(t, "W_max", p2.cub.wMax, 20)
	// K is computed when congestion avoidance resumes: ack a packet sent after the loss.
	rtt := ms(100)
	p2.OnAck(Ack{Now: loss, Bytes: mss, PriorInFlight: p2.Window(), RTT: rtt, SRTT: rtt, LargestSent: loss.Add(time.Microsecond)})
	near(t, "K", p2.cub.k, 2.466212074)
	for _, v := range []struct{ t, w float64 }{{1, 18.739188}, {2, 19.959467}, {2.466212074, 20}, {3, 20.060837}} {
		near(t, "W_cubic", math.Round(p2.cubicW(v.t)*1e6)/1e6, v.w)
	}
	// At t = 0 with RTT 0.1 s: target = W_cubic(0.1) = 14.700670 ⇒ the concave step is
	// (14.700670−14)/14 = +0.050048 per segment, faster than W_est's 0.529412/14 =
	// 0.037815: the cubic region governs path 2 (first ack below).
	p2.cwnd = 14
	near(t, "target(0)", p2.cubicTarget(0), 14.7006698)
	near(t, "concave step", (p2.cubicTarget(0)-14)/14, 0.0500478)
	// RFC 9438 §4.3 literally: at the very first ack (t = 0) W_cubic(0) = 14 < W_est =
	// 14 + 0.037815, so that one ack is Reno-friendly; 50 ms later W_cubic has passed
	// W_est and the concave step applies.
	_, _, p2 = s0(t, Cubic)
	lose(p2, loss)
	p2.OnAck(Ack{Now: loss, Bytes: mss, PriorInFlight: p2.Window(), RTT: rtt, SRTT: rtt, LargestSent: loss.Add(time.Microsecond)})
	near(t, "first ack (Reno-friendly)", p2.cwnd, 14+0.529411765/14)
	w := p2.cwnd
	p2.OnAck(Ack{Now: loss.Add(ms(50)), Bytes: mss, PriorInFlight: p2.Window(), RTT: rtt, SRTT: rtt, LargestSent: loss.Add(ms(1))})
	k := math.Cbrt(15)
	target := 0.4*math.Pow(0.05+0.1-k, 3) + 20 // W_cubic(t + RTT), within [w, 1.5w]
	near(t, "second ack (concave)", p2.cwnd, w+(target-w)/w)

	// Path 1: loss at 10 ⇒ 7, K = cbrt(7.5) = 1.957434; target at t = 0 (RTT 20 ms)
	// 7.091021 ⇒ +0.013003, but W_est grows 0.529412/7 = 0.075630 per segment: the
	// Reno-friendly region governs the short-RTT path.
	lose(p1, loss)
	near(t, "w1", p1.cwnd, 7)
	p1.OnAck(Ack{Now: loss, Bytes: mss, PriorInFlight: p1.Window(), RTT: ms(20), SRTT: ms(20), LargestSent: loss.Add(time.Microsecond)})
	near(t, "K1", p1.cub.k, 1.95743382)
	near(t, "Δw1", p1.cwnd-7, 0.0756302521)
	for i := 1; i <= 20; i++ { // one RTT of acks later it is still W_est
		p1.OnAck(Ack{Now: loss.Add(time.Duration(i) * time.Millisecond), Bytes: mss, PriorInFlight: p1.Window(), RTT: ms(20), SRTT: ms(20), LargestSent: loss.Add(ms(1))})
	}
	if p1.cwnd != p1.cub.wEst {
		t.Errorf("path 1 window %v is not W_est %v after an RTT: the Reno-friendly region must govern", p1.cwnd, p1.cub.wEst)
	}

	// Fast convergence: a loss at 18 with W_max 20 ⇒ W_max = 18·1.7/2 = 15.3, cwnd 12.6.
	_, p1, _ = s0(t, Cubic)
	p1.cwnd, p1.cub.wMax = 18, 20
	lose(p1, loss)
	near(t, "W_max (fast convergence)", p1.cub.wMax, 15.3)
	near(t, "cwnd", p1.cwnd, 12.6)
}

func TestWVegasVectors(t *testing.T) {
	c, err := New(WVegas, Config{MSS: mss})
	if err != nil {
		t.Fatal(err)
	}
	p1 := setup(c, 0, 10, ms(25))
	p2 := setup(c, 1, 20, ms(110))
	round := func(p *Path, rtt time.Duration, at time.Time) {
		// Three samples in the round, the last ends it (its packet was sent after
		// the round began). The first two find the path app-limited, so slow start
		// does not move the window before the round's verdict.
		for i := 0; i < 3; i++ {
			sent, inflight := p.veg.roundStart.Add(-time.Millisecond), 0
			if i == 2 {
				sent, inflight = p.veg.roundStart.Add(time.Millisecond), p.Window()
			}
			p.OnAck(Ack{Now: at, Bytes: mss, PriorInFlight: inflight, RTT: rtt, SRTT: rtt, LargestSent: sent})
		}
	}
	start := func(p *Path, base time.Duration) {
		p.veg.baseRTT = base.Seconds()
		p.veg.roundStart = t0
		p.veg.sumRTT, p.veg.cntRTT = 0, 0
	}

	// Slow start: base 20 ms, mean 25 ms, cwnd 10: diff = floor(10·5/25) = 2 > gamma 1
	// ⇒ cwnd = min(10, floor(10·20/25)+1 = 9), ssthresh = min(∞, 8) = 8.
	p1.ssthresh = math.Inf(1)
	start(p1, ms(20))
	round(p1, ms(25), t0.Add(time.Second))
	near(t, "SS cwnd", p1.cwnd, 9)
	near(t, "SS ssthresh", p1.ssthresh, 8)

	// Congestion avoidance with alpha 2, path 2's rate current (cwnd 20, rtt 110 ms:
	// 181.82 pkt/s): diff 2 ≥ alpha ⇒ rate1 = 10/0.025 = 400 ⇒ weight 400/581.82 =
	// 0.6875 ⇒ alpha1 = floor(6.875) = 6; diff 2 < 6 ⇒ cwnd 11.
	p1.cwnd, p1.ssthresh = 10, 5
	p1.veg.alpha = 2
	p2.veg.instantRate = 20 / 0.110
	start(p1, ms(20))
	round(p1, ms(25), t0.Add(2*time.Second))
	near(t, "weight1", p1.veg.weight, 0.6875)
	near(t, "alpha1", p1.veg.alpha, 6)
	near(t, "CA cwnd", p1.cwnd, 11)
	// Path 2 (base 100, rtt 110, cwnd 20): diff = floor(1.818) = 1 < alpha 2 ⇒ +1;
	// weight 181.82/581.82 = 0.3125 ⇒ alpha floor(3.125) = 3 once it updates.
	p2.cwnd, p2.ssthresh = 20, 10
	start(p2, ms(100))
	round(p2, ms(110), t0.Add(2*time.Second))
	near(t, "path 2 cwnd (diff 1 < 2)", p2.cwnd, 21)
	p2.cwnd, p2.veg.alpha = 20, 1 // force diff ≥ alpha to see the weight
	p1.veg.instantRate = 400
	start(p2, ms(100))
	round(p2, ms(110), t0.Add(3*time.Second))
	near(t, "weight2", p2.veg.weight, 0.3125)
	near(t, "alpha2", p2.veg.alpha, 3)

	// Drain: stored queue delay 2 ms, now 5 ms ≥ 2·2 ⇒ after the CA step (cwnd 11),
	// cwnd = floor(11·20/(2·25)) = 4 and the stored delay resets.
	p1.cwnd, p1.ssthresh = 10, 5
	p1.veg.alpha = 6
	start(p1, ms(20))
	p1.veg.queueDelay = 0.002
	round(p1, ms(25), t0.Add(4*time.Second))
	near(t, "drained cwnd", p1.cwnd, 4)
	if p1.veg.queueDelay != 0 {
		t.Errorf("queue delay %v after a drain, want 0 (unset)", p1.veg.queueDelay)
	}

	// No queue at all (mean RTT = base RTT) never drains.
	p1.cwnd, p1.ssthresh = 10, 5
	start(p1, ms(25))
	round(p1, ms(25), t0.Add(5*time.Second))
	near(t, "cwnd with an empty queue", p1.cwnd, 11)
}

// With one active path every coupled algorithm is Reno; with N identical paths LIA,
// BALIA and EWTCP all increase by 1/(N²·w), fully coupled by 1/(N·w), OLIA (no
// collected path) by 1/(N²·w); LIA never beats Reno.
func TestDegenerateCases(t *testing.T) {
	for _, alg := range []string{LIA, OLIA, BALIA, EWTCP, Coupled} {
		c, _ := New(alg, Config{MSS: mss})
		p := setup(c, 0, 12, ms(40))
		near(t, alg+" N=1", ackOne(p, t0.Add(time.Second)), 1.0/12)
	}
	for _, alg := range []string{LIA, OLIA, BALIA, EWTCP, Coupled} {
		c, _ := New(alg, Config{MSS: mss})
		var ps []*Path
		for i := 0; i < 3; i++ {
			ps = append(ps, setup(c, i, 12, ms(40)))
		}
		want := 1.0 / (9 * 12)
		if alg == Coupled {
			want = 1.0 / 36
		}
		near(t, alg+" 3 identical paths", c.coupledIncrease(ps[1]), want)
	}
	c, _ := New(LIA, Config{MSS: mss})
	var ps []*Path
	for i, w := range []float64{3, 50, 17, 8} {
		ps = append(ps, setup(c, i, w, ms(float64(5+40*i))))
	}
	for _, p := range ps {
		if inc := c.coupledIncrease(p); inc > 1/p.cwnd+1e-15 {
			t.Errorf("LIA increase %v on a path of %v segments exceeds Reno's %v", inc, p.cwnd, 1/p.cwnd)
		}
	}
}

func TestSlowStartByteCounting(t *testing.T) {
	c, _ := New(Reno, Config{MSS: mss})
	p := c.AddPath(0, t0)
	// One ack covering four segments grows the window by four (not one).
	p.OnAck(Ack{Now: t0, Bytes: 4 * mss, PriorInFlight: 10 * mss, RTT: ms(50), LargestSent: t0.Add(-ms(50))})
	near(t, "cwnd", p.cwnd, 14)
	// Crossing ssthresh: leftover segments go to congestion avoidance.
	p.ssthresh = 15
	p.OnAck(Ack{Now: t0, Bytes: 3 * mss, PriorInFlight: 14 * mss, RTT: ms(50), LargestSent: t0.Add(-ms(50))})
	near(t, "cwnd across ssthresh", p.cwnd, 15+2.0/15)
}

func TestCwndLimitedGating(t *testing.T) {
	for _, alg := range []string{Reno, Cubic, LIA, WVegas} {
		c, _ := New(alg, Config{MSS: mss})
		p := c.AddPath(0, t0)
		// 20 segments of window, 2 in flight: the application, not the window, limits.
		p.cwnd = 20
		for i := 0; i < 50; i++ {
			now := t0.Add(time.Duration(i) * ms(10))
			p.OnAck(Ack{Now: now, Bytes: mss, PriorInFlight: 2 * mss, RTT: ms(50), LargestSent: now.Add(-ms(50))})
		}
		if p.cwnd != 20 {
			t.Errorf("%s: window grew to %v while app-limited", alg, p.cwnd)
		}
		// A send that filled the window within the last RTT lets the next ack grow it.
		now := t0.Add(time.Second)
		p.OnSent(mss, 20*mss, now)
		p.OnAck(Ack{Now: now.Add(ms(10)), Bytes: mss, PriorInFlight: 2 * mss, RTT: ms(50), LargestSent: now})
		if p.cwnd <= 20 {
			t.Errorf("%s: window did not grow after a window-limited send", alg)
		}
	}
}

func TestRecoveryEpisodes(t *testing.T) {
	_, p, _ := s0(t, Reno)
	ev := t0.Add(time.Second)
	lose(p, ev)
	near(t, "after the event", p.cwnd, 5)
	// Losses of packets sent before the event are the same event.
	p.OnLoss(Loss{Now: ev.Add(ms(5)), Bytes: 3 * mss, LargestSent: ev.Add(-ms(10))})
	near(t, "after an old loss", p.cwnd, 5)
	// No growth while in recovery, even when window-limited.
	p.OnAck(Ack{Now: ev.Add(ms(10)), Bytes: mss, PriorInFlight: 5 * mss, RTT: ms(20), LargestSent: ev.Add(-ms(1))})
	near(t, "acked in recovery", p.cwnd, 5)
	// An ack of a packet sent after the event ends recovery, and grows the window.
	p.OnAck(Ack{Now: ev.Add(ms(30)), Bytes: mss, PriorInFlight: 5 * mss, RTT: ms(20), LargestSent: ev.Add(ms(1))})
	near(t, "after recovery", p.cwnd, 5+1.0/5)
	// A loss of a packet sent after the event is a new event.
	p.OnLoss(Loss{Now: ev.Add(ms(40)), Bytes: mss, LargestSent: ev.Add(ms(2))})
	near(t, "second event", p.cwnd, 2.6)
	// And the floor holds.
	p.OnLoss(Loss{Now: ev.Add(ms(90)), Bytes: mss, LargestSent: ev.Add(ms(80))})
	near(t, "floor", p.cwnd, 2)
	if st := p.Stats(); st.CongestionEvents != 3 {
		t.Errorf("%d congestion events, want 3", st.CongestionEvents)
	}
}

func TestActiveSet(t *testing.T) {
	c, _ := New(LIA, Config{MSS: mss})
	p0 := c.AddPath(0, t0)
	p1 := c.AddPath(3, t0)
	if c.ActivePaths() != 0 {
		t.Fatalf("paths without an RTT sample are active")
	}
	p0.OnAck(Ack{Now: t0, RTT: ms(10)})
	p1.OnAck(Ack{Now: t0, RTT: ms(10)})
	if c.ActivePaths() != 2 {
		t.Fatalf("%d active, want 2", c.ActivePaths())
	}
	p1.SetUsable(false)
	if c.ActivePaths() != 1 {
		t.Fatalf("%d active after one became unusable, want 1", c.ActivePaths())
	}
	p1.SetUsable(true)
	c.RemovePath(p0)
	if c.ActivePaths() != 1 || c.Path(0) != nil || c.Path(3) != p1 {
		t.Fatalf("after removal: %d active, path 0 %v", c.ActivePaths(), c.Path(0))
	}
	if again := c.AddPath(0, t0); again == p0 || again.srtt != 0 {
		t.Fatalf("re-adding a removed id must give a fresh path")
	}
}

func TestNoneAndNames(t *testing.T) {
	c, err := New(None, Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := c.AddPath(0, t0)
	if c.Enabled() || !p.CanSend(1<<30, 1500) || p.Ssthresh() != -1 {
		t.Errorf("none limits something: enabled %v", c.Enabled())
	}
	_, err = New("bbr", Config{})
	if err == nil || !strings.Contains(err.Error(), `"bbr"`) || !strings.Contains(err.Error(), strings.Join(Names(), ", ")) {
		t.Errorf("unknown name error %v does not name it and list the valid ones", err)
	}
	for _, n := range Names() {
		if _, err := New(n, Config{}); err != nil {
			t.Errorf("New(%q): %v", n, err)
		}
	}
}

func TestRoomAndCanSend(t *testing.T) {
	c, _ := New(Reno, Config{MSS: 1000})
	p := c.AddPath(0, t0) // 10 segments = 10000 bytes
	if p.Window() != 10000 || p.Room(9000) != 1000 || !p.CanSend(9000, 1000) || p.CanSend(9001, 1000) {
		t.Errorf("window %d room %d", p.Window(), p.Room(9000))
	}
	p.OnRTO(t0)
	if !p.CanSend(0, 1000) || p.CanSend(1, 1000) {
		t.Errorf("window of one segment: empty pipe must admit one segment, a nonempty one nothing more")
	}
}

// SetGroup: paths of different groups are not coupled. In S0 with the two
// paths in different groups every coupled algorithm's increase and decrease
// is Reno's (1/w per segment, halve on loss); back in one group the coupled
// vectors of TestIncreaseVectors apply again. Wvegas and "rate" sums use the
// same group lists (rateShare below).
func TestSetGroupDecouples(t *testing.T) {
	for _, alg := range []string{LIA, OLIA, BALIA, EWTCP, Coupled} {
		t.Run(alg, func(t *testing.T) {
			c, p1, p2 := s0(t, alg)
			p2.SetGroup(7)
			if c.ActivePaths() != 2 || p2.Group() != 7 || p1.Group() != 0 {
				t.Fatalf("%d active, groups %d, %d", c.ActivePaths(), p1.Group(), p2.Group())
			}
			near(t, "Δw1 alone in group 0", ackOne(p1, t0.Add(time.Second)), 0.1)
			near(t, "Δw2 alone in group 7", ackOne(p2, t0.Add(time.Second)), 0.05)
			_, p1, p2 = s0(t, alg)
			p1.SetGroup(3)
			lose(p1, t0.Add(time.Second))
			near(t, "w1 after loss, alone", p1.cwnd, 5)
			// Together again (group 3 both): LIA's 5/98 on path 1.
			_, p1, p2 = s0(t, alg)
			p1.SetGroup(3)
			p2.SetGroup(3)
			if alg == LIA {
				near(t, "Δw1 coupled in group 3", ackOne(p1, t0.Add(time.Second)), 5.0/98)
			}
		})
	}
	// "rate": the cap's fixed allowance is split only within a group.
	c, _ := New(Rate, Config{MSS: mss})
	a, b := c.AddPath(0, t0), c.AddPath(1, t0)
	for _, p := range []*Path{a, b} {
		p.OnAck(Ack{Now: t0, RTT: ms(40), DeliveryRate: 1e6})
	}
	near(t, "share in one group", c.rateShare(a), 0.5)
	b.SetGroup(1)
	near(t, "share in separate groups", c.rateShare(a), 1)
	// An inactive path keeps its group and joins that group's set later.
	b.SetUsable(false)
	b.SetGroup(0)
	if c.ActivePaths() != 1 {
		t.Fatalf("%d active, want 1", c.ActivePaths())
	}
	b.SetUsable(true)
	near(t, "share back in group 0", c.rateShare(a), 0.5)
}

// A detector hands out fresh group ids as paths come and go: groups no path
// belongs to any more are forgotten, not kept for the session's life.
func TestSetGroupForgetsEmptyGroups(t *testing.T) {
	c, p1, p2 := s0(t, LIA)
	for g := uint32(1); g <= 100; g++ {
		p2.SetGroup(g)
	}
	if len(c.groups) > 3 || p2.Group() != 100 || p1.Group() != 0 || c.ActivePaths() != 2 {
		t.Errorf("%d groups kept after 100 regroupings (want group 0, the last one and at most one stale); groups %d, %d, %d active",
			len(c.groups), p1.Group(), p2.Group(), c.ActivePaths())
	}
}
