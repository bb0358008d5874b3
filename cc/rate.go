package cc

import (
	"math"
	"time"
)

// The "rate" algorithm: a BBR-like, loss-tolerant model of what a path carries
// (docs/congestion.md, section "rate"). It follows BBRv1's structure
// (draft-cardwell-iccrg-bbr-congestion-control-00: max-filtered bottleneck
// bandwidth, min RTT, Startup, Drain, ProbeBW with an eight-phase gain cycle)
// with BBRv3's Startup and Drain gains, an in-flight cap near one BDP instead of
// two, and a loss response in the spirit of BBRv2/v3's bw_lo: sustained loss
// above Config.LossThreshold lowers a bound on the bandwidth, random loss below
// it changes nothing. There is no ProbeRTT: the minimum RTT comes from the caller
// (the tunnel's 10 s windowed minimum), and the 0.75 phase of every gain cycle
// drains what the 1.25 phase queued, so the path's own queue does not inflate it.
//
// Coupling: the fixed part of the in-flight cap (2 segments) is split among the
// active paths of the path's group (Path.SetGroup) in proportion to their
// bandwidth estimates, so a session's paths through one bottleneck together
// hold what one path would (rateShare).
//
// Contention: beside a loss-based flow that keeps the bottleneck's queue
// standing, a cap near one BDP of the true min RTT would starve; the model then
// contends with a coupled, Reno-like window until a periodic drain finds the
// queue empty without it (rateQueue).

// Model constants (documented in docs/congestion.md).
const (
	rateStartupGain    = 2.77 // BBRv3's Startup pacing gain (≈ 4·ln 2)
	rateDrainGain      = 0.35 // BBRv3's Drain pacing gain
	rateStartupCapGain = 2.0  // in-flight cap gain in Startup and Drain (BBRv3's cwnd gain)
	rateBwRounds       = 10   // rounds of the bandwidth max filter
	rateFullBwGrowth   = 1.25 // Startup ends when bw grows less than this ...
	rateFullBwRounds   = 3    // ... for this many rounds with a sample
	rateMinCap         = 4.0  // segments: floor of the in-flight cap
	rateCapExtra       = 2.0  // segments added to the cap (ack aggregation)
	rateLossBeta       = 0.7  // bound = β × bw on a lossy window (BBRv2/v3's β)
	rateLossGrowth     = 1.25 // bound grows by this per clean window
	rateLossWindow     = 100  // packets (acked + lost) a loss-rate window holds at least
	ratePhases         = 8
	rateReprobeGrowth  = 1.1                    // a probe that raised bw by this much re-enters Startup (capacity rose)
	rateFallRatio      = 0.8                    // a sample below this × bw over a standing queue: capacity fell
	rateAggRounds      = 5                      // rounds per slot of the ack-aggregation filter (two slots; Linux BBR's)
	rateAggMax         = 100 * time.Millisecond // ack aggregation counted at most bw × this (Linux BBR's)

	// Contention with buffer-filling flows (docs/congestion.md, "Contention").
	rateQueueRTTs      = 10                     // detection window in min RTTs (a gain cycle and a bit) ...
	rateQueueWindowMin = 250 * time.Millisecond // ... and at least this long
	rateQueueWindows   = 2                      // consecutive windows with a standing queue enter contention
	rateContendBeta    = 0.7                    // the contention window's decrease (CUBIC's β)
	// rateContendAI is the contention window's increase per RTT in segments:
	// 3(1−β)/(1+β), CUBIC's Reno-friendly increase for β = 0.7 (RFC 9438
	// §4.3). At 5/8 of it (before 2026-12-07) the lab's tunnel took 0.56 × a
	// CUBIC flow's goodput at a shared bottleneck; with the whole of it, and
	// the tunnel's queue kept fed in contention (tunnel.retuneQueue), 0.94 ×.
	// The simulator, where the paced window loses fewer packets than an
	// unpaced competitor, gives it 1.2–1.6 × a Reno flow (docs/congestion.md).
	rateContendAI       = 3 * (1 - rateContendBeta) / (1 + rateContendBeta)
	rateContendPacing   = 1.2                    // pacing gain over window/SRTT in contention (Linux's, in CA)
	rateDrainCheckEvery = 8 * time.Second        // contention: how often the model drains to look for an empty queue
	rateDrainCheckMin   = 200 * time.Millisecond // ... for at least this long (BBR's ProbeRTT duration)
	rateDrainCapGain    = 0.5                    // in-flight cap of a drain, in BDPs (BBRv2's ProbeRTT cwnd gain) ...
	rateDrainMinCap     = 2.0                    // ... and at least this many segments (below rateMinCap: see draining)
	rateQueueBackoffMax = 16                     // a drain that empties a standing queue doubles the detection window, up to this factor
)

// rateGains is ProbeBW's pacing-gain cycle, one phase per min RTT.
var rateGains = [ratePhases]float64{1.25, 0.75, 1, 1, 1, 1, 1, 1}

type rateMode uint8

const (
	rateStartup rateMode = iota
	rateDrain
	rateProbeBW
)

func (m rateMode) String() string {
	switch m {
	case rateStartup:
		return "startup"
	case rateDrain:
		return "drain"
	}
	return "probe_bw"
}

// modeName is the mode shown in Stats: the state machine's, or "contend"
// while a buffer-filling flow holds the bottleneck's queue.
func (rs *rateState) modeName() string {
	if rs.contend {
		return "contend"
	}
	return rs.mode.String()
}

// rateState is the per-path state of the rate model. Bandwidths in bytes/s,
// times in seconds unless typed.
type rateState struct {
	mode rateMode

	// Bandwidth max filter: the largest sample of each of the last rateBwRounds
	// slots (slot bwSlot%rateBwRounds), and their maximum. A slot is a round,
	// but at least Config.RateInterval long (from slotStart): on a path whose
	// round trip is shorter than the interval a delivery-rate sample spans
	// (the tunnel's: at least 10 ms), ten rounds emptied the filter between
	// two samples and the model fell back to its minimum window (a veth at
	// 0.06 ms: 4 segments, 460 Mbit/s where 1.5 Gbit/s went through).
	bwRound   [rateBwRounds]float64
	bwSlot    uint64
	slotStart time.Time
	bw        float64
	// Rounds: a round ends when a packet sent at or after roundStart is acked.
	round      uint64
	roundStart time.Time
	roundBwSet bool // a non-app-limited sample arrived this round

	// Startup's full-bandwidth detection.
	fullBw      float64
	fullBwCount int
	filled      bool
	// found: a Startup has filled the pipe once since the path began (or
	// since an RTO reset it). Before that, pacing is not below the window's
	// nominal rate (ratePacingRate); a Startup re-entered on a rise of
	// capacity starts from a measured bw and a window that may hold a queue.
	found bool

	// ProbeBW's gain cycle.
	phase      int
	phaseStart time.Time
	probeBw    float64 // bw when the last probing phase began; 0 = none since ProbeBW began
	// fallUntil: after a fall of capacity (rateCapacity) the 0.75 phase
	// holds until the bytes in flight are down to the new BDP, at most until
	// then (zero: no fall being drained).
	fallUntil time.Time

	// Loss response: bytes acked and lost in the current loss window, and the
	// bandwidth bound (0 = none).
	winAcked, winLost float64
	bound             float64
	lossEvents        uint64

	minRTT   float64 // the caller's windowed min RTT, seconds; 0 = unknown
	inflight int     // bytes in flight as last reported

	// Contention: a standing queue the model did not build. qMin is the
	// smallest RTT sample (s) of the detection window that began at qStart,
	// qHigh how many windows in a row had a standing queue.
	qMin   float64
	qStart time.Time
	qHigh  int
	// Before contending the model drains to rateDrainCapGain BDPs until
	// verifyUntil: a queue that then empties was its own (on a slow multi-hop
	// path the cap's few extra segments stand above the slack), and the
	// detection window grows by qBackoff (1 when zero) so the check does not
	// cost the path a drain every half second.
	verifyUntil time.Time
	qBackoff    float64
	// contend: a buffer-filling flow shares the bottleneck; cw (segments) is
	// the AIMD window that then holds the path's share, last cut at cwCut.
	contend bool
	cw      float64
	cwCut   time.Time
	cwSlow  bool // slow start: cw grows by every acked segment until the first loss
	// In contention the model drains to its own BDP every rateDrainCheckEvery
	// (from drainAt) to see whether the queue empties without it.
	drainAt    time.Time
	drainUntil time.Time

	// Ack aggregation (BBR's extra_acked): bytes acked since ackEpoch beyond
	// what bw delivers in that time, max-filtered over two slots of
	// rateAggRounds rounds.
	ackEpoch      time.Time
	ackEpochBytes float64
	agg           [2]float64
	aggSlot       int
	aggRound      uint64

	// Pacing token bucket (bytes).
	tokens   float64
	tokensAt time.Time
	tokensOK bool
}

func (p *Path) rateReset(now time.Time) {
	p.rs = rateState{roundStart: now, slotStart: now}
}

// rateMinRTT is the min RTT the model uses: the smallest full-size sample
// (Ack.FullSize) once there is one, else the caller's, else the path's own
// minimum sample, else the smoothed RTT (seconds; 0 = none).
func (p *Path) rateMinRTT() float64 {
	switch {
	case p.fullMinRTT > 0:
		return p.fullMinRTT
	case p.rs.minRTT > 0 && p.minRTT > 0:
		return min(p.rs.minRTT, p.minRTT)
	case p.rs.minRTT > 0:
		return p.rs.minRTT
	case p.minRTT > 0:
		return p.minRTT
	}
	return p.srtt
}

// rateBw is the bandwidth the model works with: the filtered estimate, lowered
// to the loss bound.
func (p *Path) rateBw() float64 {
	bw := p.rs.bw
	if p.rs.bound > 0 && p.rs.bound < bw {
		bw = p.rs.bound
	}
	return bw
}

// rateBDP is rateBw × min RTT in bytes (0 = unknown).
func (p *Path) rateBDP() float64 {
	if r := p.rateMinRTT(); r > 0 {
		return p.rateBw() * (r + p.c.cfg.AckAllowance.Seconds())
	}
	return 0
}

func (p *Path) ratePacingGain() float64 {
	switch p.rs.mode {
	case rateStartup:
		return rateStartupGain
	case rateDrain:
		return rateDrainGain
	}
	return rateGains[p.rs.phase]
}

// rateTarget is the in-flight cap the window moves toward, in segments (0 =
// unknown: no bandwidth sample yet).
func (p *Path) rateTarget() float64 {
	bdp := p.rateBDP()
	if bdp <= 0 {
		return 0
	}
	g := p.c.cfg.CapGain
	switch {
	case p.rs.mode != rateProbeBW:
		g = rateStartupCapGain
	case rateGains[p.rs.phase] > 1:
		// The probing phase sends above the estimate: a cap of CapGain (1)
		// would hold it at the ack clock and the probe would never see more
		// (on a 100 ms path, 5 % per cycle at most).
		g = max(g, rateGains[p.rs.phase])
	}
	// The fixed allowance and the ack aggregation's are split among the
	// session's paths by share, as one path would hold them (rateShare). In
	// contention the contention window holds the share instead.
	share := p.c.rateShare(p)
	t := g*bdp/p.c.mss + rateCapExtra*share
	if p.rs.contending() {
		t = max(t, rateMinCap, p.rs.cw)
	} else {
		t = max(t+p.rateAggExtra()*share, rateMinCap)
	}
	if p.rs.draining() {
		t = min(t, max(rateDrainCapGain*bdp/p.c.mss, rateDrainMinCap))
	}
	return t
}

// rateShare is p's share of its group's bandwidth estimates (Σ over the
// group's active paths; 1 for a path outside the set or alone in it). The
// fixed part of the in-flight cap is split by it, so a session's paths through
// one bottleneck (one group, Path.SetGroup) together hold what one path would.
func (c *Controller) rateShare(p *Path) float64 {
	if p.alone() {
		return 1
	}
	sum := 0.0
	for _, q := range p.peers() {
		sum += q.rateBw()
	}
	if sum <= 0 {
		return 1
	}
	return p.rateBw() / sum
}

// ratePacingRate is the pacing rate in bytes/s: gain × bw; before the first
// bandwidth sample, Startup's gain × window / SRTT (BBR's nominal rate); 0 while
// nothing is known (the window alone limits).
//
// Until a first Startup has filled the pipe the rate is never below the
// nominal rate of the window (as in BBR, whose pacing rate only rises before
// it has found the bottleneck's bandwidth): a fresh path's first samples come from the
// handshake, keepalives and the first packets of an inner flow, all
// app-limited and tiny, and gain × such a bw paced a cold 10 Mbit/s path at
// 0.3 Mbit/s. The inner TCP's first 10–28 segments then waited up to 60 ms in
// the tunnel's queue, its slow start (HyStart) read that as a full pipe and
// left at 28 segments, and on three 10 Mbit/s, 50 ms paths the first
// download took 2 s to reach the rate the window allows from the start. The
// window still bounds what is in flight; this only keeps it from being
// spread over more than a round trip.
func (p *Path) ratePacingRate() float64 {
	bw := p.rateBw()
	if bw <= 0 {
		return p.rateNominal()
	}
	r := p.ratePacingGain() * bw
	if p.rs.contending() && p.srtt > 0 {
		r = max(r, rateContendPacing*p.rs.cw*p.c.mss/p.srtt)
	}
	if p.rs.mode == rateStartup && !p.rs.found {
		r = max(r, p.rateNominal())
	}
	return r
}

// rateNominal is Startup's gain × window / SRTT in bytes/s (0 before an RTT).
func (p *Path) rateNominal() float64 {
	if p.srtt <= 0 {
		return 0
	}
	return rateStartupGain * p.cwnd * p.c.mss / p.srtt
}

func (p *Path) rateSent(bytes, inflight int, now time.Time) {
	p.rs.inflight = inflight
	if p.limitedBy(inflight) {
		p.limitedAt, p.limitedSet = now, true
	}
	r := p.ratePacingRate()
	if r <= 0 {
		return
	}
	depth := p.refill(now, r)
	p.rs.tokens = max(p.rs.tokens-float64(bytes), -depth)
}

// refill credits the bucket for the time since the last refill at rate r and
// returns its depth.
func (p *Path) refill(now time.Time, r float64) float64 {
	depth := max(r*p.c.cfg.PacingBurst.Seconds(), 2*p.c.mss)
	switch {
	case !p.rs.tokensOK:
		p.rs.tokens, p.rs.tokensOK = depth, true
		p.rs.tokensAt = now
	case now.After(p.rs.tokensAt):
		p.rs.tokens = min(p.rs.tokens+r*now.Sub(p.rs.tokensAt).Seconds(), depth)
		p.rs.tokensAt = now
	default:
		p.rs.tokens = min(p.rs.tokens, depth)
	}
	return depth
}

func (p *Path) rateAck(a *Ack) {
	rs := &p.rs
	if a.MinRTT > 0 {
		rs.minRTT = a.MinRTT.Seconds()
	}
	if a.PriorInFlight > 0 || a.Bytes > 0 {
		rs.inflight = max(a.PriorInFlight-a.Bytes, 0)
	}
	rs.winAcked += float64(a.Bytes)

	// Round accounting: the ack of a packet sent at or after the round's start
	// ends the round.
	sent := a.LargestSent
	if sent.IsZero() {
		sent = a.Now.Add(-a.RTT)
	}
	if a.Bytes > 0 && !sent.Before(rs.roundStart) {
		p.rateRoundEnd(a.Now)
	}

	// Bandwidth sample. An app-limited one (the sender had less to send than
	// the path took) only counts when it exceeds the estimate — as in BBR, the
	// first one too: without it a path whose traffic never fills the window
	// would have no estimate, hence no cap, and a window grown by every ack
	// without bound would fill the bottleneck's buffer while every interval
	// still looked app-limited. (Intervals of probes alone never reach here.)
	if v := a.DeliveryRate; v > 0 && (!a.AppLimited || v > rs.bw) {
		slot := &rs.bwRound[rs.bwSlot%rateBwRounds]
		*slot = max(*slot, v)
		rs.bw = max(rs.bw, v)
		if !a.AppLimited {
			rs.roundBwSet = true
		}
	}

	if v := a.DeliveryRate; v > 0 && !a.AppLimited && a.RTT > 0 {
		p.rateCapacity(a.Now, v, a.RTT.Seconds())
	}
	p.rateAggregation(a)
	p.rateModes(a.Now)
	if a.RTT > 0 {
		p.rateQueue(a.Now, a.RTT.Seconds())
	}
	if p.rs.contending() && a.Bytes > 0 {
		p.contendGrow(a)
	}
	p.rateWindow(float64(a.Bytes) / p.c.mss)
}

// rateCapacity follows a change of the path's capacity from a delivery-rate
// sample v (not app-limited) and the RTT sample of its ack, in ProbeBW
// outside contention and its drains (there a competitor, or the model itself,
// sets what it delivers):
//
//   - Fall: v is below rateFallRatio × bw while the RTT stands above the
//     min RTT by more than the slack (emptyQueue). The path delivers less than
//     the model sends and the difference queues, so the sample is the
//     capacity now, not app-limited traffic: bw drops to it at once (the max
//     filter's ten rounds would hold the old rate, and the cap the queue, for
//     seconds of inflated round trips), and the 0.75 phase holds until the
//     bytes in flight are down to the new BDP (or for as long as the new rate
//     takes to carry them), then a probe looks at once whether the capacity
//     came back. The 1.25 probe's own queue comes with samples at bw, not
//     below it, and random loss lowers samples by its rate only, so neither
//     passes; samples that arrive in the 0.75 phase are left out (it paces
//     below bw on purpose), unless a fall is being drained.
//   - Rise: a sample of the probe (the 1.25 phase and the two after it, as the
//     samples lag a round trip) at least rateReprobeGrowth × the bw the probe
//     began with: the path carried what the probe added, so there may be much
//     more. The model re-enters Startup (gain 2.77 per round until bw grows
//     less than 25 % in 3 rounds, then Drain), which finds a 10× rise in a few
//     rounds where one 1.25 probe per gain cycle took 20.
func (p *Path) rateCapacity(now time.Time, v, rtt float64) {
	rs := &p.rs
	mr := p.rateMinRTT()
	if rs.mode != rateProbeBW || rs.contend || rs.draining() || mr <= 0 {
		return
	}
	falling := !rs.fallUntil.IsZero()
	switch {
	case v < rateFallRatio*rs.bw && (rs.phase != 1 || falling) && !p.emptyQueue(rtt, mr):
		rs.bwRound = [rateBwRounds]float64{}
		rs.bwRound[rs.bwSlot%rateBwRounds] = v
		rs.bw = v
		// The ack aggregation measured against the old rate would hold the
		// cap (and the queue) up.
		rs.agg = [2]float64{}
		rs.ackEpoch = time.Time{}
		rs.phase, rs.phaseStart = 1, now
		rs.fallUntil = now.Add(time.Duration(max(mr, float64(rs.inflight)/v) * float64(time.Second)))
	case !falling && rs.probeBw > 0 && rs.phase <= 2 && v >= rateReprobeGrowth*rs.probeBw:
		rs.mode, rs.filled = rateStartup, false
		rs.fullBw, rs.fullBwCount = rs.bw, 0
		rs.probeBw = 0
	}
}

// rateAggregation measures how far acks run ahead of the bandwidth estimate
// (BBR's extra_acked): an ack epoch starts whenever the acks fall behind bw,
// and the bytes acked in it beyond bw × its age are the path's aggregation. On
// a path whose hops share a medium with the acks coming back (the mesh lab's
// radio paths), acks arrive in bursts behind data frames and the sender must
// keep sending through the gaps between them.
func (p *Path) rateAggregation(a *Ack) {
	rs := &p.rs
	if a.Bytes <= 0 || rs.bw <= 0 {
		return
	}
	if rs.round-rs.aggRound >= rateAggRounds {
		rs.aggSlot = 1 - rs.aggSlot
		rs.agg[rs.aggSlot] = 0
		rs.aggRound = rs.round
	}
	// As in BBR, the ack that opens an epoch counts: one ack's bytes are
	// aggregation even where acks come smoothly (what an ack delay explains
	// is taken off in rateAggExtra).
	expected := rs.bw * a.Now.Sub(rs.ackEpoch).Seconds()
	if rs.ackEpoch.IsZero() || rs.ackEpochBytes+float64(a.Bytes) <= expected {
		rs.ackEpoch, rs.ackEpochBytes, expected = a.Now, 0, 0
	}
	rs.ackEpochBytes += float64(a.Bytes)
	extra := min(rs.ackEpochBytes-expected, rs.bw*rateAggMax.Seconds())
	rs.agg[rs.aggSlot] = max(rs.agg[rs.aggSlot], extra)
}

// rateAggExtra is the cap's allowance for ack aggregation in segments: the
// filtered aggregation less what the receiver's ack delay accounts for
// already (AckAllowance is in the BDP).
func (p *Path) rateAggExtra() float64 {
	rs := &p.rs
	agg := max(rs.agg[0], rs.agg[1]) - p.rateBw()*p.c.cfg.AckAllowance.Seconds()
	return max(agg, 0) / p.c.mss
}

// contendGrow grows the contention window for an ack: slow start until the
// first loss, then as one Reno flow (rateContendAI per round trip); both are
// coupled across the contending paths of the path's group so that paths through one
// bottleneck together grow as one flow — the slow start in proportion to the
// path's share of the contention windows, the increase by RFC 6356's LIA. It
// grows only while it limits the path (RFC 7661): an inner flow slower than
// its share would otherwise let it grow without bound, and the first burst
// after would flood the shared queue.
func (p *Path) contendGrow(a *Ack) {
	rs := &p.rs
	if !p.cwndLimited(a) {
		return
	}
	n := float64(a.Bytes) / p.c.mss
	if rs.cwSlow {
		sum := 0.0
		for _, q := range p.peers() {
			sum += contendWin(q)
		}
		rs.cw += n * rs.cw / max(sum, rs.cw) // p itself may be outside the active set
	} else {
		rs.cw += rateContendAI * p.c.lia(p, contendWin) * n
	}
	rs.cw = min(rs.cw, p.c.cfg.MaxWindow)
}

// contendWin is the contention window of a path that contends now, else 0.
func contendWin(q *Path) float64 {
	if q.rs.contending() {
		return q.rs.cw
	}
	return 0
}

// contending reports whether the contention window holds the path now (in
// contention and not draining to look for an empty queue).
func (rs *rateState) contending() bool { return rs.contend && rs.drainUntil.IsZero() }

// draining: the model holds its cap at rateDrainCapGain BDPs to see whether
// the path's queue empties without it (before contending, or contention's
// periodic check). The drain may go below rateMinCap: on a path slower than
// about 2 Mbit/s four segments are more than a BDP and the cruising cap is
// the floor itself, whose own standing queue (25 ms at 1 Mbit/s) is above
// the slack; a drain held at the floor drained nothing, and the model
// contended against its own queue (lab, rate-ratio 1:0.1: the 1 Mbit/s path
// at 250 ms of RTT for 16 s of a download).
func (rs *rateState) draining() bool {
	return !rs.verifyUntil.IsZero() || (rs.contend && !rs.drainUntil.IsZero())
}

// queueSlack is how far above the min RTT the smallest RTT of a detection
// window may be without a standing queue: a quarter of the min RTT, at least
// 5 ms, plus the receiver's ack delay (AckAllowance).
func (p *Path) queueSlack(minRTT float64) float64 {
	return max(minRTT/4, 0.005) + p.c.cfg.AckAllowance.Seconds()
}

// emptyQueue says whether an RTT sample crossed an empty queue: it is within
// the slack of the min RTT, or within one segment's transmission at the
// estimated bandwidth plus the ack delay, whichever is more. The min RTT may
// come from a probe or an ack of a few dozen bytes, while a full segment
// takes mss/bw on the wire: 12 ms at 1 Mbit/s, more than the slack, so that
// a slow path saw a standing queue in every window and, draining, never saw
// it empty. Above about 3 Mbit/s the slack is the larger and nothing changes.
func (p *Path) emptyQueue(rtt, mr float64) bool {
	slack := p.queueSlack(mr)
	if bw := p.rateBw(); bw > 0 {
		slack = max(slack, p.c.mss/bw+p.c.cfg.AckAllowance.Seconds())
	}
	return rtt <= mr+slack
}

// rateQueue looks for a standing queue the model did not build. The model
// keeps at most a few milliseconds queued and its 0.75 phase drains them once
// a gain cycle, so in a window of rateQueueRTTs min RTTs some packet crosses an
// empty queue (emptyQueue); when none did in rateQueueWindows windows in a
// row, the model drains (rateVerify). If the queue outlives the drain, a
// buffer-filling flow (a loss-based TCP) holds the bottleneck's queue, and a
// cap near one BDP would give it nearly all the link. The path then contends:
// a window that slow-starts from what the path carries to the first loss, then
// grows as one Reno flow would, coupled across the session's contending paths,
// and is cut by 0.7 per loss event, holds its share (a newcomer's slow start
// is how a TCP flow takes its share from a running one; without it the
// coupled increase alone took longer than a download to get there). Every
// rateDrainCheckEvery it drains again for a while; if the queue then empties,
// the competitor is gone and the model takes over again.
func (p *Path) rateQueue(now time.Time, rtt float64) {
	rs := &p.rs
	mr := p.rateMinRTT()
	if rs.mode != rateProbeBW || mr <= 0 {
		rs.qStart, rs.qHigh, rs.verifyUntil = time.Time{}, 0, time.Time{}
		return
	}
	if rs.contend {
		p.rateDrainCheck(now, rtt, mr)
		return
	}
	if !rs.verifyUntil.IsZero() {
		p.rateVerify(now, rtt, mr)
		return
	}
	if rs.qStart.IsZero() {
		rs.qStart, rs.qMin = now, rtt
	}
	rs.qMin = min(rs.qMin, rtt)
	win := max(rateQueueRTTs*mr, rateQueueWindowMin.Seconds()) * max(rs.qBackoff, 1)
	if now.Sub(rs.qStart).Seconds() < win {
		return
	}
	if !p.emptyQueue(rs.qMin, mr) {
		rs.qHigh++
	} else {
		// A window that crossed an empty queue: whatever stood before is gone.
		rs.qHigh, rs.qBackoff = 0, 1
	}
	rs.qStart, rs.qMin = now, rtt
	if rs.qHigh >= rateQueueWindows {
		rs.qHigh = 0
		rs.verifyUntil = now.Add(p.drainTime())
	}
}

// drainTime is how long a drain lasts: rateDrainCheckMin, at least 2 SRTT.
func (p *Path) drainTime() time.Duration {
	return max(rateDrainCheckMin, time.Duration(2*p.srtt*float64(time.Second)))
}

// rateVerify runs the drain that precedes contention: an RTT sample that
// crossed an empty queue (emptyQueue) means the queue was the model's own,
// and the next detection waits twice as long; a drain without one enters
// contention.
func (p *Path) rateVerify(now time.Time, rtt, mr float64) {
	rs := &p.rs
	if p.emptyQueue(rtt, mr) {
		rs.verifyUntil, rs.qStart = time.Time{}, time.Time{}
		rs.qBackoff = min(max(rs.qBackoff, 1)*2, rateQueueBackoffMax)
		return
	}
	if now.Before(rs.verifyUntil) {
		return
	}
	rs.verifyUntil = time.Time{}
	rs.contend, rs.qBackoff = true, 1
	// Start from what the path carries now: the bandwidth estimate over the
	// RTT the queue makes.
	rs.cw = max(p.cwnd, p.rateBw()*p.srtt/p.c.mss)
	rs.cwCut, rs.cwSlow = now, true
	rs.drainAt = now.Add(rateDrainCheckEvery)
	rs.drainUntil = time.Time{}
}

// rateDrainCheck runs contention's periodic check: for drainTime the cap is
// the drain's (rateTarget); an RTT sample that crossed an empty queue
// (emptyQueue) during it ends contention.
func (p *Path) rateDrainCheck(now time.Time, rtt, mr float64) {
	rs := &p.rs
	if rs.drainUntil.IsZero() {
		if now.Before(rs.drainAt) {
			return
		}
		rs.drainUntil = now.Add(p.drainTime())
		return
	}
	if p.emptyQueue(rtt, mr) {
		rs.contend = false
		rs.drainUntil = time.Time{}
		rs.qStart = time.Time{}
		return
	}
	if !now.Before(rs.drainUntil) {
		rs.drainUntil = time.Time{}
		rs.drainAt = now.Add(rateDrainCheckEvery)
	}
}

// rateRoundEnd closes a round: Startup's growth check, the loss window, and,
// once the slot is Config.RateInterval old, the bandwidth filter's next slot.
func (p *Path) rateRoundEnd(now time.Time) {
	rs := &p.rs
	if !rs.filled && rs.roundBwSet {
		if rs.bw >= rs.fullBw*rateFullBwGrowth {
			rs.fullBw, rs.fullBwCount = rs.bw, 0
		} else if rs.fullBwCount++; rs.fullBwCount >= rateFullBwRounds {
			rs.filled = true
		}
	}
	rs.roundBwSet = false
	p.rateLossWindow()

	rs.round++
	rs.roundStart = now
	if now.Sub(rs.slotStart) < p.c.cfg.RateInterval {
		return
	}
	rs.slotStart = now
	rs.bwSlot++
	rs.bwRound[rs.bwSlot%rateBwRounds] = 0
	rs.bw = 0
	for _, v := range rs.bwRound {
		rs.bw = max(rs.bw, v)
	}
}

// rateLossWindow evaluates the loss window at a round's end once it holds
// rateLossWindow packets: loss above the threshold lowers the bound to β times
// the bandwidth in use; a clean window raises it, and removes it once it no
// longer binds.
func (p *Path) rateLossWindow() {
	rs := &p.rs
	total := rs.winAcked + rs.winLost
	if total < rateLossWindow*p.c.mss {
		return
	}
	if rs.winLost > p.c.cfg.LossThreshold*total {
		floor := 0.0
		if r := p.rateMinRTT(); r > 0 {
			floor = rateMinCap * p.c.mss / r
		}
		if bw := p.rateBw(); bw > 0 {
			rs.bound = max(rateLossBeta*bw, floor)
			rs.lossEvents++
		}
		if rs.mode == rateStartup {
			rs.filled = true
		}
	} else if rs.bound > 0 {
		rs.bound *= rateLossGrowth
		if rs.bound >= rs.bw {
			rs.bound = 0
		}
	}
	rs.winAcked, rs.winLost = 0, 0
}

// rateModes runs the state machine: Startup → Drain → ProbeBW and the gain cycle.
func (p *Path) rateModes(now time.Time) {
	rs := &p.rs
	if rs.mode == rateStartup && rs.filled {
		rs.mode, rs.found = rateDrain, true
	}
	if rs.mode == rateDrain {
		if bdp := p.rateBDP(); bdp > 0 && float64(rs.inflight) <= bdp {
			rs.mode = rateProbeBW
			// Enter the cycle in a cruise phase; paths start at different ones.
			rs.phase = 2 + p.id%(ratePhases-2)
			rs.phaseStart = now
		}
		return
	}
	if rs.mode != rateProbeBW {
		return
	}
	d := p.rateMinRTT()
	if d <= 0 || now.Sub(rs.phaseStart).Seconds() < d {
		return
	}
	if !rs.fallUntil.IsZero() {
		// Draining after a fall (rateCapacity): until the bytes in flight
		// are down to the new BDP, then probe whether the capacity came back.
		if bdp := p.rateBDP(); float64(rs.inflight) > bdp && now.Before(rs.fallUntil) {
			return
		}
		rs.fallUntil = time.Time{}
		rs.phase = ratePhases - 1
	}
	rs.phase = (rs.phase + 1) % ratePhases
	if rs.phase == 0 {
		rs.probeBw = rs.bw
	}
	rs.phaseStart = now
}

// rateWindow moves the in-flight cap toward its target by the acked segments n
// (BBR's cwnd rule: it grows by what was acked, and once the pipe was filled
// never beyond the target).
func (p *Path) rateWindow(n float64) {
	rs := &p.rs
	target := p.rateTarget()
	switch {
	case rs.filled:
		p.cwnd = min(p.cwnd+n, target)
	case target == 0 || p.cwnd < target:
		p.cwnd += n
	}
	floor := rateMinCap
	if rs.draining() {
		floor = rateDrainMinCap
	}
	p.cwnd = min(max(p.cwnd, floor), p.c.cfg.MaxWindow)
}

func (p *Path) rateLoss(l *Loss) {
	rs := &p.rs
	rs.winLost += float64(l.Bytes)
	rs.inflight = max(rs.inflight-l.Bytes, 0)
	if !rs.contend {
		return
	}
	// In contention a loss is the shared queue overflowing: cut the window
	// once per round trip, as a loss-based flow does (the cap stays at least
	// the model's own, rateTarget).
	if p.lossSent(l).After(rs.cwCut) {
		rs.cw = max(rs.cw*rateContendBeta, rateMinCap)
		rs.cwCut, rs.cwSlow = l.Now, false
		rs.lossEvents++
	}
}

func (p *Path) rateRTO(now time.Time) {
	minRTT := p.rs.minRTT
	p.rateReset(now)
	p.rs.minRTT = minRTT
	p.cwnd = 1
}

// StartingUp reports whether the "rate" model is in its first Startup: it
// has not yet found what the path carries, so a queue in front of it is its
// own doing, not a sign that the traffic is too much. A Startup re-entered on
// a rise of capacity does not count: the model found the path before (false
// for every other algorithm).
func (p *Path) StartingUp() bool {
	return p != nil && p.c.alg == algRate && p.rs.mode == rateStartup && !p.rs.found
}

// Contending reports whether the "rate" model holds the path against a
// buffer-filling flow (rateQueue): the path's RTT then stands on that flow's
// queue, not on the model's own (false for every other algorithm).
func (p *Path) Contending() bool {
	return p != nil && p.c.alg == algRate && p.rs.contend
}

// PacingRate returns the rate in bytes/s at which the path should send, 0 when
// it is not paced (every algorithm but "rate", and "rate" before it knows an RTT).
func (p *Path) PacingRate() float64 {
	if p == nil || p.c.alg != algRate {
		return 0
	}
	return p.ratePacingRate()
}

// PaceDelay returns 0 when a datagram of size bytes may leave now, else how long
// until the pacing token bucket holds enough for it. The bucket fills at
// PacingRate and holds Config.PacingBurst of it (at least two segments); OnSent
// takes from it. Unpaced paths always return 0.
func (p *Path) PaceDelay(now time.Time, size int) time.Duration {
	if p == nil || p.c.alg != algRate {
		return 0
	}
	r := p.ratePacingRate()
	if r <= 0 {
		return 0
	}
	p.refill(now, r)
	need := float64(size) - p.rs.tokens
	if need <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(need / r * 1e9))
}
