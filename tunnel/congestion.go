package tunnel

import (
	"slices"
	"time"

	"github.com/braid-vpn/braid/aqm"
	"github.com/braid-vpn/braid/cc"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/reorder"
	"github.com/braid-vpn/braid/wire"
)

// Congestion control in the engine (congestion != "none").
//
// Each peer has one cc.Controller and each of its paths a cc.Path. The path's
// Sender stays the only loss detector: the engine hands the controller what an
// ACK frame newly acknowledged (ack-eliciting bytes, RTT sample, send time of the
// newest acked packet) and what the Sender declared lost (bytes, send time of the
// newest lost packet), after every ACK frame and every timer tick. A path that
// goes Down counts as an RTO; one that comes back starts afresh.
//
// Sending is gated by the windows through the scheduler: a full path is no
// candidate (sched.PathInfo.CwndRoom). When every usable path is full the packet
// waits in the peer's queue, bounded in packets (Tunables.CCQueuePackets, more are
// dropped on arrival) and in time (Tunables.CCQueueDelay, older ones are dropped);
// both drops are counted. The queue (queue.go: sparse flows first, then the
// bulk ring in order; order within a flow holds) drains whenever an ACK frame or
// the timer may have opened a window. Packets get their per-flow sequence number when
// they leave, so a packet dropped from the queue leaves no gap for the receiver's
// reorder buffer to wait on. Probes, challenges and acks are never gated.

// ccConfig is the controller configuration for this engine: segments are the
// largest datagram the engine builds, so one segment always admits one packet.
func (e *Engine) ccConfig() cc.Config {
	c := e.tn.CC
	if c.MSS <= 0 {
		c.MSS = max(e.mtu+wire.DataPacketOverhead, e.tn.OuterMTU-28)
	}
	if c.AckAllowance <= 0 {
		c.AckAllowance = e.tn.Path.AckDelay
	}
	if c.CapGain <= 0 {
		c.CapGain = TunnelCapGain
	}
	if c.RateInterval <= 0 {
		c.RateInterval = e.tn.Path.MinRateInterval
		if c.RateInterval <= 0 {
			c.RateInterval = path.DefaultConfig().MinRateInterval
		}
	}
	if c.MaxWindow <= 0 {
		ring := e.tn.Path.RingSize
		if ring <= 0 {
			ring = path.DefaultConfig().RingSize
		}
		c.MaxWindow = float64(ring) * 3 / 4
	}
	return c
}

// setCongestion installs the controller for name ("none": no controller). A
// controller that already runs the algorithm is kept (a rekey re-applies the same
// parameters). Caller holds p.mu or owns p.
func (p *peer) setCongestion(name string, now time.Time) error {
	if name == cc.None {
		if p.cc != nil {
			p.cc = nil
			for _, ps := range p.paths {
				if ps != nil {
					ps.cc = nil
				}
			}
			p.flushQueue(dropCCQueueExpired)
		}
		return nil
	}
	if p.cc != nil && p.cc.Name() == name {
		return nil
	}
	ctl, err := cc.New(name, p.e.ccConfig())
	if err != nil {
		return err
	}
	p.cc = ctl
	if p.ccq.codel == nil {
		p.ccq.init(p.e.tn.CCQueuePackets, len(p.flowSq), p.e.tn.CoDel)
		p.queueMaxAge, p.queueJudge = p.e.tn.CCQueueDelay, true // until the next refreshInfos
	}
	for _, ps := range p.paths {
		if ps != nil {
			p.attachCC(ps, now)
		}
	}
	return nil
}

// attachCC gives a path its congestion state. Caller holds p.mu.
func (p *peer) attachCC(ps *pathState, now time.Time) {
	if p.cc == nil {
		ps.cc = nil
		return
	}
	ps.cc = p.cc.AddPath(int(ps.id), now)
	ps.ccDown = false
	p.ccState(ps, now)
	p.sbdAttach(ps)
}

// ccState follows the path's liveness: Down is an RTO (the window collapses and
// the path leaves the coupling set), coming back starts the path afresh (it may
// be a different route now). Caller holds p.mu.
func (p *peer) ccState(ps *pathState, now time.Time) {
	down := ps.sender.State() == path.Down
	if down != ps.ccDown {
		if down {
			ps.cc.OnRTO(now)
		} else {
			ps.cc.Reset(now)
		}
		ps.ccDown = down
	}
	ps.cc.SetUsable(ps.validated && ps.sender.Usable())
}

// ccLosses hands the controller what the Sender declared lost since the last call.
// Losses from going Down were answered by the RTO already.
func (p *peer) ccLosses(ps *pathState, r *path.AckResult, now time.Time) {
	n, b, newest := ps.sender.TakeLoss()
	// Datagrams sent before the path moved went to the old endpoint: their
	// loss says nothing of the new route, whose state starts over.
	if n > 0 && !ps.ccDown && (ps.ccFrom.IsZero() || newest.After(ps.ccFrom)) {
		ps.cc.OnLoss(cc.Loss{Now: now, Bytes: b, LargestSent: newest})
	}
	p.sbdSample(ps, r, n, now)
}

// ccAck feeds one ACK frame's outcome to the controller. prior is the bytes in
// flight before the frame. Caller holds p.mu.
func (p *peer) ccAck(ps *pathState, prior int, r path.AckResult, now time.Time) {
	p.ccState(ps, now)
	if r.Bytes > 0 || r.RTT > 0 || r.RateSample > 0 {
		ps.cc.OnAck(cc.Ack{Now: now, Bytes: r.Bytes, PriorInFlight: prior, RTT: r.RTT, FullSize: r.FullSize, SRTT: ps.sender.SRTT(), LargestSent: r.NewestSent,
			DeliveryRate: r.RateSample, AppLimited: r.RateAppLimited, MinRTT: r.MinRTT})
	}
	p.ccLosses(ps, &r, now)
}

// ccTick runs after the path's timer: time-threshold losses, liveness changes.
func (p *peer) ccTick(ps *pathState, now time.Time) {
	p.ccState(ps, now)
	p.ccLosses(ps, nil, now)
}

// roomOf is what the scheduler may still put on ps: its window room, or none
// while its pacer holds the next full-sized datagram back.
//
// The rate model measures each path on its own, which is only right when a
// path's estimate is its link's: paths of a full mesh that cross one access link
// each measure their share of it, their max-filtered shares add up to more than
// the link carries, and a cap shared between them (tried first) either let that
// queue stand or, once the cap bound, let every share shrink the others' round
// after round until the link ran at a tenth of its rate. So with "rate" one path
// per access link carries data — its lead, a healthy usable one with about the
// lowest min RTT — and the others of that link stand by, validated and probed,
// ready when it fails (standby). Window algorithms keep their per-path windows (the coupled ones
// couple them themselves).
func (p *peer) roomOf(ps *pathState, inflight int, now time.Time) int {
	room := ps.cc.Room(inflight)
	if room > 0 && p.cc.Name() == cc.Rate && p.standby(ps) {
		room = 0
	}
	if room <= 0 && p.cc.Name() == cc.Rate {
		// The model's own cap holds the path back. Unless the path shows a
		// queue (path.Sender judges that), what it delivers now measures the
		// cap, not the path: a sample taken so must not lower the estimate,
		// or a cap a little short of the ack clock would shrink the estimate,
		// hence the cap, round after round.
		ps.sender.MarkAppLimited()
	}
	if room > 0 && ps.cc.PaceDelay(now, p.e.mtu+wire.DataPacketOverhead) > 0 {
		return 0
	}
	// A window already overfull (in flight above it after a cut, or resends on
	// top) has no room; a negative value would tell the scheduler "no
	// controller" (sched.PathInfo.CwndRoom) and open the path wide.
	return max(room, 0)
}

// electLeads picks each access link's lead (see roomOf) once per refresh of
// the scheduler's view, not per packet. The lead is a usable path of the link,
// healthy (not Degraded) if one is, with the lowest base RTT within a margin:
// another path takes over when the lead is unusable, when it is Degraded and
// the other is not, or when the other's base RTT (path.Sender.BaseRTT, the
// smallest sample since the path came up) is lower by more than 1/4 (at least
// leadMinMargin) — paths of one link with about the same delay must not take
// turns (a standby path's RTT comes from small probes, the lead's from
// full-sized data). The windowed min RTT would make them: with a competitor's
// queue standing for longer than its window, a probe that crossed a dip of
// that queue took the lead, and the new lead started its model afresh, every
// few seconds. A path that takes the lead starts its model afresh:
// what it learnt from probes alone (no bandwidth, a window grown by their
// acks) is no estimate.
func (p *peer) electLeads(now time.Time) {
	if p.cc == nil || p.cc.Name() != cc.Rate {
		return
	}
	var done [maxPaths / 64]uint64
	for _, ps := range p.paths {
		if ps == nil || ps.link == 0 || done[ps.link/64]&(1<<(ps.link%64)) != 0 {
			continue
		}
		done[ps.link/64] |= 1 << (ps.link % 64)
		old := p.leads[ps.link]
		lead := old
		if lead != nil && !p.canLead(lead, ps.link) {
			lead = nil
		}
		for _, o := range p.paths {
			if o != nil && o != lead && p.canLead(o, ps.link) && (lead == nil || betterLead(o, lead)) {
				lead = o
			}
		}
		if lead != old {
			p.leads[ps.link] = lead
			if lead != nil {
				lead.cc.Reset(now)
			}
		}
	}
}

// standby reports whether ps is not its access link's lead (see electLeads).
func (p *peer) standby(ps *pathState) bool {
	lead := p.leads[ps.link]
	return ps.link != 0 && lead != nil && lead != ps
}

// canLead reports whether o is a usable path of link (one waiting for the first
// ack from the endpoint it moved to carries no data, see migrate).
func (p *peer) canLead(o *pathState, link int) bool {
	return o.link == link && p.paths[o.id] == o && o.cc != nil && o.validated && o.sender.Usable() && !o.amp
}

// leadMinMargin is the least by which a path's min RTT must be lower than the
// lead's to take the lead of its access link.
const leadMinMargin = 5 * time.Millisecond

// betterLead reports whether o should take the lead from cur.
func betterLead(o, cur *pathState) bool {
	od, cd := o.sender.State() == path.Degraded, cur.sender.State() == path.Degraded
	if od != cd {
		return cd
	}
	ro, rc := o.sender.BaseRTT(), cur.sender.BaseRTT()
	switch {
	case ro == 0:
		return false
	case rc == 0:
		return true
	}
	return ro < rc-max(rc/4, leadMinMargin)
}

// sendOutcome says what became of a packet offered to the paths.
type sendOutcome uint8

const (
	sentOK   sendOutcome = iota
	sentFull             // usable paths exist but every window is full
	sentNone             // no usable path
)

// sendGated sends pb, or queues it when packets already wait or every window is
// full, when congestion control is on. It returns true if pb was consumed. Caller holds p.mu
// and has refreshed p.infos.
func (p *peer) sendGated(w *writer, pb *packetBuf, now time.Time) bool {
	flow := reorder.FlowID(pb.b[pb.start:pb.end], len(p.flowSq))
	if p.ccq.len() > 0 {
		p.drainQueue(w, now, false)
		if p.ccq.len() > 0 {
			p.enqueue(pb, flow, now)
			return true
		}
	}
	switch p.offer(w, pb, flow, now) {
	case sentOK:
		p.ccq.sojourn -= p.ccq.sojourn / 16 // left at once: a zero wait
		// Nothing waits and the path used could take more: it now carries
		// what the inner traffic offers, not what it could, and its delivery
		// rate must not be taken for its capacity (the paths passed over are
		// marked in offer).
		for _, i := range p.picks {
			if p.infos[i].CwndRoom > 0 {
				p.infoP[i].sender.MarkAppLimited()
			}
		}
		return true
	case sentFull:
		p.enqueue(pb, flow, now)
		return true
	}
	p.e.counters.drop(dropNoPath)
	return false
}

func (p *peer) enqueue(pb *packetBuf, flow uint16, now time.Time) {
	if !p.ccq.push(ccEntry{pb: pb, at: now, flow: flow}) {
		p.e.counters.drop(dropCCQueueFull)
		p.e.pool.put(pb)
	}
}

// offer schedules one packet of flow (not yet numbered in it) and sends it if a
// path has room.
func (p *peer) offer(w *writer, pb *packetBuf, flow uint16, now time.Time) sendOutcome {
	size := pb.end - pb.start + wire.DataPacketOverhead
	p.pick(size, flow, now)
	p.markPassedOver()
	if len(p.picks) == 0 {
		for i := range p.infos {
			if p.infos[i].Usable {
				return sentFull
			}
		}
		return sentNone
	}
	seq := p.flowSq[flow]
	p.flowSq[flow]++
	p.transmit(w, pb, flow, seq, now, nil)
	for _, idx := range p.picks {
		ps := p.infoP[idx]
		in := ps.sender.InFlight()
		p.infos[idx].InFlight = in
		p.infos[idx].CwndRoom = p.roomOf(ps, in, now)
	}
	return sentOK
}

// markPassedOver marks app-limited every usable path with room that the
// scheduler did not pick: the traffic it carries now is the scheduler's
// choice (earliest-arrival keeps a packet for a faster path that frees up
// soon rather than send it on a slow one), not the path's capacity. Unmarked,
// a slow path's estimate fell to the share it was given, its pacing with it,
// and it was given less still (two paths of 20 and 100 ms: 10 instead of 17
// Mbit/s).
func (p *peer) markPassedOver() {
	for i := range p.infos {
		if !p.infos[i].Usable || p.infos[i].CwndRoom <= 0 || slices.Contains(p.picks, i) {
			continue
		}
		p.infoP[i].sender.MarkAppLimited()
	}
}

// drainQueue sends waiting packets (queue.go's order) while windows admit them and
// drops those that waited too long. refresh rebuilds the scheduler's view first (callers
// outside the TUN batch, whose view is stale). Caller holds p.mu.
func (p *peer) drainQueue(w *writer, now time.Time, refresh bool) {
	if p.ccq.len() == 0 {
		return
	}
	if p.cur == nil || p.cc == nil {
		p.flushQueue(dropNoSession)
		return
	}
	refreshed := !refresh
	q := &p.ccq
	maxAge, judge := p.queueMaxAge, p.queueJudge
	for r := q.next(); r != nil; r = q.next() {
		e := r.front()
		wait := now.Sub(e.at)
		if wait > maxAge {
			p.e.counters.drop(dropCCQueueExpired)
			p.e.pool.put(e.pb)
			q.pop(r)
			continue
		}
		if !refreshed {
			p.refreshInfos(now)
			refreshed = true
		}
		// CoDel judges a bulk packet as it is about to leave (only once some
		// path can take it: a packet that stays did not leave).
		if !p.canOffer() {
			return
		}
		if r == &q.bulk && !judge {
			q.codel.OnEmpty(now)
		} else if r == &q.bulk && q.codel.OnDequeue(wait, r.bytes-(e.pb.end-e.pb.start), now) {
			if !aqm.MarkCE(e.pb.b[e.pb.start:e.pb.end]) {
				q.drops++
				p.e.counters.drop(dropCoDel)
				p.e.pool.put(e.pb)
				q.pop(r)
				continue
			}
			q.marks++
		}
		if p.offer(w, e.pb, e.flow, now) != sentOK {
			return
		}
		q.sojourn += (wait - q.sojourn) / 16
		q.pop(r)
	}
	q.codel.OnEmpty(now)
}

// longSRTTSlack: on paths whose SRTT exceeds it by more than the target, the
// queue's CoDel target is the SRTT less this (retuneQueue).
const longSRTTSlack = 60 * time.Millisecond

// queueTarget is the queue's CoDel target for the tunables' target base and
// the largest SRTT of the usable paths (see retuneQueue).
func queueTarget(base, srtt time.Duration) time.Duration {
	return max(base, srtt*3/10, srtt-longSRTTSlack)
}

// flowRTT is one usable path's part in the round trip the queue's CoDel fits
// to (retuneQueue): its SRTT, but at most twice its min RTT when that is known
// and the path's model is not contending. A cellular path whose capacity falls
// under what its deep buffer holds has an SRTT of a second or more for a while;
// fitted to it, CoDel's target and the expiry age followed it up, CoDel
// stopped judging in effect, and the queue stood for up to 1.5 s in front of
// the other path (lab, real-lte-lte). A competitor's standing queue raises the
// SRTT for as long as it stands, and the inner flows' round trips with it: a
// contending path keeps its SRTT, for the reason retuneQueue gives.
func flowRTT(srtt, minRTT time.Duration, contending bool) time.Duration {
	if minRTT > 0 && !contending {
		return min(srtt, 2*minRTT)
	}
	return srtt
}

// retuneQueue fits the queue's CoDel to the inner flows' round trip, srtt (the
// largest flowRTT of the usable paths), and sets the age at which a waiting
// packet expires and whether CoDel may judge: not while a usable path's model
// is in its first Startup and has no room (startup) — the queue is then
// the model's, still finding what the path carries, and one drop in an inner
// flow's slow start set its ssthresh to 19 segments on a 100 ms path, 4 s of a
// 16 MiB download spent growing back. A path whose Startup has room is not
// what the queue waits for, and a Startup re-entered on a rise of capacity
// has found the path once: a full mesh's second path over one link, which
// carries little and so never leaves its first Startup, had kept CoDel silent
// for whole downloads (lab, real-lte-lte: 43 CoDel drops against 875 expired
// packets in five).
// While a usable path's model contends with a competitor's standing queue
// (contending), its contention window holds the tunnel's share of the
// bottleneck and grows only while it limits the path (RFC 7661): the queue
// must keep it fed through the inner flow's own cuts, each of which takes 3/10
// of a window out of the queue. With the usual target (at most the SRTT less
// 60 ms) the queue ran empty a quarter of the time and CoDel's drops cut the
// inner flow on top of the window's cuts: the tunnel took 0.56 × a CUBIC
// competitor's goodput (lab, recovery-shared, braid only, seed 20261206, n =
// 5, 3.10 ± 0.54 Mbit/s). Silent, the queue stood at the expiry age (mean 119
// ms, 614 expired packets): 4.29 ± 0.82 (1.02 ×). With a target of one SRTT and
// an interval of two, as here: 4.12 ± 0.78 (0.94 ×), a mean queue of 64 ms and
// nothing expired (both with the window's whole Reno-friendly increase,
// cc.rateContendAI).
// CoDel's interval must be on the order of the flows' RTT (RFC 8289 §4.4):
// with the tunables' 100 ms an inner flow over a 150 ms path (a competitor's
// standing queue, a long route) was dropped more than once a round trip and
// fell to a fraction of its share. So the interval is at least that SRTT, the
// target at least 3/10 of it (a flow cut by CUBIC's 0.7 then keeps most of the
// path busy) and, on long paths, at least the SRTT less longSRTTSlack: there a
// TCP gap's wait for its repairs (a block's wait plus a one-way delay, 60–75 ms
// at 100 ms) stops the inner flow's acks for longer than 3/10 of a round trip of
// queue covers (lab, 1 % loss on two 100 ms paths, seed 20261126, n = 5, paired:
// 9.67 ± 3.25 → 11.95 ± 2.15 Mbit/s, every download faster; a target of SRTT/2
// gave 12.94 ± 1.16 there but at 40 ms put 2 of 10 latency downloads above 40 ms
// of p95 added delay, hence the slack: 20–40 ms paths keep 20 ms). The expiry
// age (CCQueueDelay) grows in proportion to the interval. Paths under 67 ms
// keep the tunables' values. Called once per refreshInfos, not per packet.
// Caller holds p.mu.
func (p *peer) retuneQueue(srtt time.Duration, startup, contending bool) {
	if p.ccq.codel == nil {
		return
	}
	cfg := p.e.tn.CoDel
	if cfg.Interval <= 0 {
		cfg.Interval = aqm.DefaultInterval
	}
	target, interval := queueFit(cfg, srtt, contending)
	p.ccq.codel.Retune(target, interval)
	p.queueMaxAge = p.e.tn.CCQueueDelay * interval / cfg.Interval
	p.queueJudge = !startup
}

// queueFit is the queue's CoDel target and interval for the tunables' cfg (an
// interval set) and srtt, in contention or not (see retuneQueue).
func queueFit(cfg aqm.Config, srtt time.Duration, contending bool) (target, interval time.Duration) {
	if contending {
		return max(cfg.Target, srtt), max(cfg.Interval, 2*srtt)
	}
	return queueTarget(cfg.Target, srtt), max(cfg.Interval, srtt)
}

// canOffer reports whether some usable path has room now.
func (p *peer) canOffer() bool {
	for i := range p.infos {
		if p.infos[i].Usable && p.infos[i].CwndRoom > 0 {
			return true
		}
	}
	return false
}

// flushQueue drops every waiting packet, counted under reason.
func (p *peer) flushQueue(reason dropReason) {
	for r := p.ccq.next(); r != nil; r = p.ccq.next() {
		p.e.counters.drop(reason)
		p.e.pool.put(r.front().pb)
		p.ccq.pop(r)
	}
}
