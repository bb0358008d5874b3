package tunnel

import (
	"slices"
	"time"

	"github.com/braid-vpn/braid/fec"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/recovery"
	"github.com/braid-vpn/braid/reorder"
	"github.com/braid-vpn/braid/wire"
)

// Loss recovery in the engine (recovery != "off"; package recovery has the rules).
//
// Sending: transmit keeps a copy of every DATA payload in p.store under (path id,
// path seq) before sealing it. Each path's Sender tells the path's observer the
// fate of its packets: an ack releases the copy, a loss queues it on p.lostQ. The
// losses are handled after the call that found them returns (processLosses, after
// each received datagram's ACK frames and after each timer tick), so a resend never
// re-enters the Sender that is detecting: the payload goes out again on the path
// expected to deliver it first if it can still arrive before the receiver's hold
// runs out and the budget allows; otherwise it is given up, and a GIVEUP frame
// (flushGiveUps) tells the receiver to stop waiting for it. Resends bypass the
// per-peer queue and the congestion windows: they are already limited by the
// budget, and they repair what the window already admitted once.
//
// Receiving: packets of TCP flows are pushed into the reorder buffer as
// reorder.Recoverable, so their gaps are waited for up to the recovery hold
// (updateHold); other flows wait the plain reorder hold only. A GIVEUP frame
// releases its gap at once (reorder.Abandon).

// lostRef names a packet the Sender declared lost.
type lostRef struct {
	path uint16
	seq  uint32
}

// giveUpRef is a packet given up, to be announced to the receiver.
type giveUpRef struct {
	flow uint16
	seq  uint32
}

// deferredLoss is a lost payload whose resend waits for the receiver's report
// that it rebuilt it from repairs.
type deferredLoss struct {
	e     recovery.Entry[*packetBuf]
	at    time.Time
	block uint32 // the FEC block that protected it, if inBlock
	// inBlock: the encoder's ledger knew its block, so the resend goes as soon
	// as the block has lost more sources than it had repairs.
	inBlock bool
}

// retxMeta carries a resent payload's history into transmit.
type retxMeta struct {
	deadline time.Time
	orig     uint16
	resends  uint8
}

// pathObs is a path's path.Observer.
type pathObs struct {
	p  *peer
	ps *pathState
}

func (o *pathObs) Acked(seq uint32) {
	p := o.p
	if o.ps.probeSize != 0 && seq == o.ps.probeSeq {
		p.mtuAcked(o.ps, seq, time.Now())
	} else {
		p.mtuDataAcked(o.ps, seq)
	}
	if p.store == nil {
		return
	}
	e, ok := p.store.Take(o.ps.id, seq)
	if !ok {
		return
	}
	if e.Resends == 0 {
		p.fecObserve(false)
	} else {
		if orig := p.pathByID(e.Orig); orig != nil {
			orig.recovered++
		}
	}
	p.e.pool.put(e.Item)
}

func (o *pathObs) Lost(seq uint32) {
	if o.ps.probeSize != 0 && seq == o.ps.probeSeq {
		o.p.mtuLost(o.ps, seq, time.Now())
	} else {
		o.p.mtuDataLost(o.ps, seq)
	}
	if o.p.store != nil {
		o.p.lostQ = append(o.p.lostQ, lostRef{path: o.ps.id, seq: seq})
	}
}

// recoveryConfig is the recovery configuration of this engine: the Tunables'
// values, with the loss detector's and the timer's constants.
func (e *Engine) recoveryConfig() recovery.Config {
	c := e.tn.Recovery
	if c.TimeThreshold <= 0 {
		c.TimeThreshold = e.tn.Path.TimeThreshold
	}
	if c.AckDelay <= 0 {
		c.AckDelay = e.tn.Path.AckDelay
	}
	if c.Tick <= 0 {
		c.Tick = e.tn.Tick
	}
	return c.WithDefaults()
}

// setRecovery switches the session's recovery mode. Caller holds p.mu or owns p.
func (p *peer) setRecovery(m recovery.Mode) {
	if m == p.rec && (m == recovery.Off) == (p.store == nil) {
		return
	}
	p.rec = m
	if m == recovery.Off {
		p.dropRetained()
		p.store = nil
	} else if p.store == nil {
		p.recCfg = p.e.recoveryConfig()
		p.store = recovery.NewStore[*packetBuf](p.e.tn.Path.RingSize)
		p.budget = recovery.NewBudget(p.recCfg)
	}
	for _, ps := range p.paths {
		if ps != nil {
			p.attachRecovery(ps)
		}
	}
}

// attachRecovery installs (or removes) the path's observer.
func (p *peer) attachRecovery(ps *pathState) {
	// Always observed: the size search matches its probes by packet number.
	ps.obs = pathObs{p: p, ps: ps}
	ps.sender.SetObserver(&ps.obs)
}

// dropRetained recycles every retained payload and forgets pending losses and
// give-ups (a new session numbers its flows afresh; nothing old may be resent).
func (p *peer) dropRetained() {
	if p.store != nil {
		p.recycle = p.store.Drain(p.recycle[:0])
		p.recyclePut()
	}
	p.lostQ = p.lostQ[:0]
	p.giveups = p.giveups[:0]
	p.dropDeferred()
}

// dropDeferred recycles the payloads of every deferred loss.
func (p *peer) dropDeferred() {
	for i := range p.deferred {
		p.e.pool.put(p.deferred[i].e.Item)
	}
	clear(p.deferred)
	p.deferred = p.deferred[:0]
}

// dropRetainedPath recycles what is retained for one path (it is being removed).
func (p *peer) dropRetainedPath(ps *pathState) {
	ps.sender.SetObserver(nil)
	if p.store != nil {
		p.recycle = p.store.DrainPath(ps.id, p.recycle[:0])
		p.recyclePut()
	}
}

func (p *peer) recyclePut() {
	for i, pb := range p.recycle {
		p.e.pool.put(pb)
		p.recycle[i] = nil
	}
	p.recycle = p.recycle[:0]
}

func (p *peer) pathByID(id uint16) *pathState {
	if int(id) < len(p.paths) {
		return p.paths[id]
	}
	return nil
}

// retain keeps a copy of pkt, about to be sent as the next datagram of the path
// at p.infos[idx], until that datagram is acked or lost. Caller holds p.mu.
func (p *peer) retain(idx int, pkt []byte, flow uint16, seq uint32, now time.Time, rt *retxMeta) {
	ps := p.infoP[idx]
	r := p.e.pool.get()
	copy(r.b[wire.DataPrefixLen:], pkt)
	r.start, r.end = wire.DataPrefixLen, wire.DataPrefixLen+len(pkt)
	e := recovery.Entry[*packetBuf]{Item: r, Flow: flow, FlowSeq: seq, Size: len(pkt), Orig: ps.id}
	if rt != nil {
		e.Deadline, e.Orig, e.Resends = rt.deadline, rt.orig, rt.resends
	} else {
		e.Deadline = recovery.Deadline(now, &p.infos[idx], p.recHold)
		p.budget.Earn(len(pkt))
	}
	if old, evicted := p.store.Keep(ps.id, ps.sender.NextSeq(), e); evicted {
		p.e.pool.put(old)
	}
}

// processLosses resends or gives up the payloads declared lost since the last
// call. Caller holds p.mu.
func (p *peer) processLosses(w *writer, now time.Time) {
	if len(p.lostQ) == 0 {
		return
	}
	if p.store == nil {
		p.lostQ = p.lostQ[:0]
		return
	}
	if p.cur == nil {
		for _, l := range p.lostQ {
			if e, ok := p.store.Take(l.path, l.seq); ok {
				p.e.pool.put(e.Item)
			}
		}
		p.lostQ = p.lostQ[:0]
		return
	}
	p.refreshInfos(now)
	expedited := false
	// Resending may declare more losses (a wrapped ring): they are appended and
	// handled in the same loop.
	for i := 0; i < len(p.lostQ); i++ {
		l := p.lostQ[i]
		if e, ok := p.store.Take(l.path, l.seq); ok {
			// A path that went Down lost its whole window at once: an outage,
			// not the loss rate repairs are sized for.
			ps := p.pathByID(l.path)
			down := ps == nil || ps.sender.State() == path.Down
			if e.Resends == 0 && !down && !congested(ps) {
				p.fecObserve(true)
			}
			pkt := e.Item.b[e.Item.start:e.Item.end]
			if wait := p.fecWait(pkt); wait > 0 && e.Resends == 0 && !down && !reorder.PureAck(pkt) {
				block, beyond, known := p.fecEnc.Lost(fec.SourceID{Flow: e.Flow, Seq: e.FlowSeq})
				if !beyond {
					p.deferred = append(p.deferred, deferredLoss{e: e, at: now.Add(wait), block: block, inBlock: known})
					continue
				}
				// Its block cannot rebuild it: no report will come. Resend it
				// now, and the block's other deferred losses with it.
				p.recEarly++
				expedited = p.expediteBlock(block, now) || expedited
			}
			p.resendOrGiveUp(w, e, now)
		}
	}
	p.lostQ = p.lostQ[:0]
	if expedited {
		p.processDeferred(w, now)
	}
}

// expediteBlock makes the deferred losses of FEC block b due now, and reports
// whether there were any. Caller holds p.mu.
func (p *peer) expediteBlock(b uint32, now time.Time) bool {
	found := false
	for i := range p.deferred {
		if d := &p.deferred[i]; d.inBlock && d.block == b && d.at.After(now) {
			d.at, found = now, true
			p.recEarly++
		}
	}
	return found
}

// processDeferred resends or gives up the deferred losses whose wait is over
// (and drops those the receiver rebuilt). Caller holds p.mu.
func (p *peer) processDeferred(w *writer, now time.Time) {
	if len(p.deferred) == 0 {
		return
	}
	if p.cur == nil || p.store == nil {
		p.dropDeferred()
		return
	}
	p.refreshInfos(now)
	keep := p.deferred[:0]
	for _, d := range p.deferred {
		if now.Before(d.at) && !p.wasRebuilt(d.e.Flow, d.e.FlowSeq) {
			keep = append(keep, d)
			continue
		}
		p.resendOrGiveUp(w, d.e, now)
	}
	clear(p.deferred[len(keep):])
	p.deferred = keep
}

// resendOrGiveUp sends a lost payload again or gives it up. A pure TCP ack is
// given up at once: the acks sent after it say all it said, and its receiver
// does not hold them for it (reorder.PushUnordered).
func (p *peer) resendOrGiveUp(w *writer, e recovery.Entry[*packetBuf], now time.Time) {
	if p.wasRebuilt(e.Flow, e.FlowSeq) {
		// The receiver rebuilt it from repairs already.
		if orig := p.pathByID(e.Orig); orig != nil {
			orig.rebuilt++
		}
		p.e.pool.put(e.Item)
		return
	}
	size := e.Size + wire.DataPacketOverhead
	idx := -1
	if int(e.Resends) < p.recCfg.MaxResends && p.rec.Has(recovery.Retransmit) && !reorder.PureAck(e.Item.b[e.Item.start:e.Item.end]) {
		var hidden [maxPaths]bool
		masked := p.hideUnfit(size, e.Flow, now, &hidden)
		idx = recovery.Choose(p.infos, size, now, e.Deadline)
		if masked {
			p.unhide(&hidden)
		}
	}
	if idx >= 0 && !p.budget.Spend(e.Size) {
		idx = -1
		p.recBudgetOut++
	}
	if idx < 0 {
		p.giveups = append(p.giveups, giveUpRef{flow: e.Flow, seq: e.FlowSeq})
		if orig := p.pathByID(e.Orig); orig != nil {
			orig.gaveUp++
		}
		p.e.pool.put(e.Item)
		return
	}
	p.resendOn(w, idx, e, now)
}

// resendOn sends a retained payload again on the path at p.infos[idx] and
// counts it there. Caller holds p.mu.
func (p *peer) resendOn(w *writer, idx int, e recovery.Entry[*packetBuf], now time.Time) {
	ps := p.infoP[idx]
	ps.retx++
	ps.retxBytes += uint64(e.Size)
	if p.flowClass(e.Item.b[e.Item.start:e.Item.end]) != reorder.Recoverable {
		ps.retxLatencyBytes += uint64(e.Size)
	}
	p.picks = append(p.picks[:0], idx)
	p.transmit(w, e.Item, e.Flow, e.FlowSeq, now, &retxMeta{deadline: e.Deadline, orig: e.Orig, resends: e.Resends + 1})
}

// rescueMax bounds the payloads rescued per path and timer tick: a fade strands
// at most the path's window, and the resend budget bounds the total.
const rescueMax = 64

// rescueHorizon is how far ahead a rescue may arrive: any usable path will do.
const rescueHorizon = time.Minute

// rescueLate resends, on another path, payloads that have stayed in flight on
// their path far longer than its round trip: longer than twice its min RTT
// (the rate model's cap keeps a healthy path's near 1.25 min RTTs) and than
// 1.25 smoothed RTTs (a standing queue of a competing flow raises both the
// RTT and the payloads' age), plus the ack delay. Not the probe timeout: its
// four RTT variations grow with the first late acks of a fade, and rescues
// came after the receiver had released the gap.
//
// A cellular path whose capacity collapses holds what it already took in its
// buffer for seconds; the receiver gives such a gap up after its hold, and the
// inner TCP then sees a hole, resends and halves its window. As Linux MPTCP's
// opportunistic reinjection, the payload goes out again on the other path
// that delivers it first; the original stays in flight (for its path's Sender
// and controller nothing was lost), whichever copy arrives first fills the
// gap and the receiver drops the other. Resend budget and MaxResends apply as
// to any resend. Caller holds p.mu.
func (p *peer) rescueLate(w *writer, now time.Time) {
	if p.store == nil || p.cur == nil || p.store.Len() == 0 || !p.rec.Has(recovery.Retransmit) {
		return
	}
	refreshed := false
	for _, ps := range p.paths {
		if ps == nil || !ps.validated || !ps.sender.Usable() || ps.sender.MinRTT() <= 0 {
			continue
		}
		late := now.Add(-(max(2*ps.sender.MinRTT(), ps.sender.SRTT()*5/4) + p.e.tn.Path.AckDelay))
		p.overdue = ps.sender.Overdue(p.overdue[:0], ps.rescueNext, late, rescueMax)
		if len(p.overdue) == 0 {
			continue
		}
		// Each packet is looked at once: rescued or not, it stays in flight.
		ps.rescueNext = p.overdue[len(p.overdue)-1] + 1
		if !refreshed {
			p.refreshInfos(now)
			refreshed = true
		}
		if !p.rescuePath(w, ps, now) {
			return // the budget is spent
		}
	}
}

// rescuePath resends ps's overdue payloads (p.overdue) on the other path that
// delivers each first; it reports false when the budget ran out. p.infos is
// fresh.
func (p *peer) rescuePath(w *writer, ps *pathState, now time.Time) bool {
	// ps itself is no candidate for any of them.
	self := slices.Index(p.infoP[:len(p.infos)], ps)
	if self >= 0 && p.infos[self].Usable {
		p.infos[self].Usable = false
		defer func() { p.infos[self].Usable = true }()
	}
	for _, seq := range p.overdue {
		e, ok := p.store.Peek(ps.id, seq)
		if !ok || int(e.Resends) >= p.recCfg.MaxResends || reorder.PureAck(e.Item.b[e.Item.start:e.Item.end]) {
			continue
		}
		size := e.Size + wire.DataPacketOverhead
		var hidden [maxPaths]bool
		masked := p.hideUnfit(size, e.Flow, now, &hidden)
		// Unlike a resend, a rescue does not wait for its deadline: past it the
		// receiver has released the gap, but the copy still reaches the inner
		// flow long before the stranded original.
		idx := recovery.Choose(p.infos, size, now, now.Add(rescueHorizon))
		if masked {
			p.unhide(&hidden)
		}
		if idx < 0 {
			return true // no other usable path
		}
		if !p.budget.Spend(e.Size) {
			p.recBudgetOut++
			return false
		}
		p.store.Take(ps.id, seq)
		ps.rescued++
		p.resendOn(w, idx, e, now)
	}
	return true
}

// flushNotices sends the pending GIVEUP and REBUILT frames, as many per
// datagram as fit, on the path with the shortest one-way delay. They are not
// ack-eliciting: a lost GIVEUP costs the receiver its hold time, a lost REBUILT
// a needless resend, nothing more. Caller holds p.mu.
func (p *peer) flushNotices(w *writer, now time.Time) {
	if len(p.giveups) == 0 && len(p.rebuilt) == 0 {
		return
	}
	if p.cur == nil {
		p.giveups, p.rebuilt = p.giveups[:0], p.rebuilt[:0]
		return
	}
	p.refreshInfos(now)
	best := -1
	for i := range p.infos {
		if p.infos[i].Usable && (best < 0 || recovery.OneWay(&p.infos[i]) < recovery.OneWay(&p.infos[best])) {
			best = i
		}
	}
	if best < 0 {
		p.giveups, p.rebuilt = p.giveups[:0], p.rebuilt[:0]
		return
	}
	ps := p.infoP[best]
	limit := p.plainLimit(ps) - wire.InnerHeaderLen
	ng := len(p.giveups)
	for i, n := 0, ng+len(p.rebuilt); i < n; {
		pb := p.e.pool.get()
		b := pb.b[innerStart:innerStart]
		for ; i < n && len(b)+wire.GiveUpFrameLen <= limit; i++ {
			if i < ng {
				b = wire.AppendGiveUp(b, p.giveups[i].flow, p.giveups[i].seq)
			} else {
				b = wire.AppendRebuilt(b, p.rebuilt[i-ng].flow, p.rebuilt[i-ng].seq)
			}
		}
		p.sealAndQueue(w, ps, pb, len(b), false, now)
	}
	p.giveupsSent += uint64(ng)
	p.giveups, p.rebuilt = p.giveups[:0], p.rebuilt[:0]
}

// flowClass is how long the reorder buffer waits for a gap in pkt's flow: TCP
// waits for recovery, anything else (real-time datagrams) only for path skew.
func (p *peer) flowClass(pkt []byte) reorder.Class {
	if p.rec == recovery.Off || len(pkt) < 40 {
		return reorder.Plain
	}
	switch pkt[0] >> 4 {
	case 4:
		if pkt[9] == 6 {
			return reorder.Recoverable
		}
	case 6:
		if pkt[6] == 6 {
			return reorder.Recoverable
		}
	}
	return reorder.Plain
}
