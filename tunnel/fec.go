package tunnel

import (
	"sync"
	"time"

	"github.com/braid-vpn/braid/fec"
	"github.com/braid-vpn/braid/recovery"
	"github.com/braid-vpn/braid/reorder"
	"github.com/braid-vpn/braid/wire"
)

// Forward error correction in the engine (recovery "auto" or "fec"; package fec
// has the code and the rate rule).
//
// Sending: every new DATA frame (not resends or redundant copies) goes into the
// peer's fec.Encoder before it is sealed, TCP packets and the others (e.g.
// real-time datagrams, pings) in blocks of their own; when a block closes (k
// packets, or its first packet's wait: fec.DefaultBulkDelay for TCP, whose gaps
// the receiver holds for recovery anyway, fec.DefaultMaxDelay for the others)
// its repair frames go out at once, each in its own ack-eliciting datagram,
// round robin over the usable paths so that a burst on one path does not take a
// block's data and repairs together. The rate
// (k, m) follows the loss the paths' Senders report for DATA datagrams
// (fec.Controller, Bulk policy): no repairs on clean paths. Repairs bypass the
// per-peer queue, as resends do.
//
// Receiving: every DATA frame is also given to the peer's fec.Decoder (created
// with the first repair, since it holds about 2 MB); repairs go to it too. A
// rebuilt packet is delivered as if received, and reported to the sender in a
// REBUILT frame so that it is not also resent. The path still counts it lost:
// its statistics, the congestion model and the repair rate see every loss.

// fecRateEvery is how often the repair rate is chosen anew from the estimate.
const fecRateEvery = 100 * time.Millisecond

// fecWait is how long the resend of a lost payload, inner packet pkt, waits
// for the receiver to report it rebuilt, while repairs are being sent: its
// block closes at most 25 ms (fec.DefaultBulkDelay) after the payload left,
// the repairs and the report then take about the round trip the loss
// detection took already, plus a timer tick on each side. 0 without repairs,
// and 0 for a packet of a latency-sensitive flow (not TCP): it is resent at
// once, at the cost of a copy the receiver may have rebuilt already (the loss
// rate × the flow's bytes). Waiting put it past any real-time deadline
// whenever its block could not be rebuilt and the ledger did not know (a lost
// repair): detection, 10 ms of block, two ticks and the resend's one-way delay
// made 59–62 ms on a 10 ms path (lab, recovery-realtime: 8 packets of 31250
// later than 40 ms).
func (p *peer) fecWait(pkt []byte) time.Duration {
	if !p.repairing() || p.flowClass(pkt) != reorder.Recoverable {
		return 0
	}
	return p.fecWaitMax()
}

// repairing reports whether repairs are being sent.
func (p *peer) repairing() bool { return p.fecEnc != nil && !p.fecEnc.Rate().Off() }

// fecWaitMax is a TCP packet's fecWait while repairs are sent. Both ends add
// it to the hold whenever the session runs FEC: the receiver cannot tell when
// the sender's repair rate is on.
func (p *peer) fecWaitMax() time.Duration { return fec.DefaultBulkDelay + 2*p.e.tn.Tick }

// setFEC creates or drops the encoder for the session's mode. Caller holds p.mu
// or owns p.
func (p *peer) setFEC(m recovery.Mode) {
	if !m.Has(recovery.FEC) {
		p.fecEnc, p.fecDec = nil, nil
		return
	}
	if p.fecEnc == nil {
		p.fecEnc = fec.NewEncoder(fec.EncoderConfig{
			MaxPayload: wire.DataFrameHeaderLen + p.e.mtu,
			MaxFrame:   p.e.tn.OuterMTU - 28 - wire.DataOverhead - wire.InnerHeaderLen,
		})
		p.fecCtl = fec.Controller{Policy: fec.Bulk, Spread: 1, Cost: repairCost(p.e.mtu)}
	}
}

// repairCost is fec.Controller.Cost at inner MTU mtu: a full-size repair
// frame against the user payload of a full-size TCP packet (IPv4 and TCP
// headers without options: the cap stays on the generous side).
func repairCost(mtu int) float64 {
	return float64(fec.RepairLen(1, fec.LenPrefix+wire.DataFrameHeaderLen+mtu)) / float64(max(mtu-40, 1))
}

// fecReset forgets blocks in progress (a new session numbers flows afresh).
func (p *peer) fecReset() {
	if p.fecEnc != nil {
		p.fecEnc.Reset()
	}
	if p.fecDec != nil {
		p.fecDec.Reset()
	}
	p.rebuilt = p.rebuilt[:0]
	clear(p.rebuiltBy[:])
	p.rebuiltPos = 0
}

// congested reports whether the path has a standing queue (one-way delay more
// than half its minimum RTT plus 5 ms above its minimum): a loss there is most
// likely a drop at a full buffer. Repairs are for losses that happen whatever
// is sent; adding them for congestion drops would add to the congestion, so
// such losses do not feed the repair rate (resends still repair them).
func congested(ps *pathState) bool {
	st := ps.sender.Stats()
	return st.QueueDelay > st.MinRTT/2+5*time.Millisecond
}

// fecObserve feeds one DATA datagram's fate to the repair-rate controller.
func (p *peer) fecObserve(lost bool) {
	if p.fecEnc != nil {
		p.fecCtl.Observe(lost)
	}
}

// fecSource adds a DATA frame (header and packet pkt, before sealing) to the
// open block and returns how many repairs are ready to go. A TCP packet may wait
// longer for its block to close: the receiver holds its flow's gaps for recovery.
func (p *peer) fecSource(frame, pkt []byte, flow uint16, seq uint32, now time.Time) int {
	bulk := p.flowClass(pkt) == reorder.Recoverable
	return p.fecEnc.Add(fec.SourceID{Flow: flow, Seq: seq}, frame, now, bulk)
}

// fecTick closes the blocks whose first packet has waited long enough (the
// bulk and the latency-sensitive one may both be due), sends their repairs, and
// revises the rate. Caller holds p.mu.
func (p *peer) fecTick(w *writer, now time.Time) {
	if p.fecEnc == nil || p.cur == nil {
		return
	}
	if now.Sub(p.fecRateAt) >= fecRateEvery {
		p.fecEnc.SetRate(p.fecCtl.Rate())
		p.fecRateAt = now
	}
	for n := p.fecEnc.Tick(now); n > 0; n = p.fecEnc.Tick(now) {
		p.refreshInfos(now)
		p.sendRepairs(w, n, now)
	}
}

// sendRepairs sends the encoder's n ready repair frames. Caller holds p.mu and
// has refreshed p.infos.
func (p *peer) sendRepairs(w *writer, n int, now time.Time) {
	for i := 0; i < n; i++ {
		pb := p.e.pool.get()
		b := p.fecEnc.AppendRepair(pb.b[innerStart:innerStart], i)
		if len(b) == 0 || len(b) > len(pb.b)-innerStart-wire.TagLen || &b[0] != &pb.b[innerStart] {
			p.e.pool.put(pb) // cannot happen with MaxFrame below the buffer size
			continue
		}
		var hidden [maxPaths]bool
		// Repairs belong to no one flow: on a server they stay off tiers that
		// joined for saturation (noFlow is never asked for, see hideTiers).
		masked := p.hideUnfit(wire.DataOverhead+wire.InnerHeaderLen+len(b), noFlow, now, &hidden)
		idx := p.nextRepairPath()
		if masked {
			p.unhide(&hidden)
		}
		if idx < 0 {
			p.e.pool.put(pb)
			return
		}
		ps := p.infoP[idx]
		ps.repairs++
		ps.repairBytes += uint64(len(b))
		if !p.fecEnc.ReadyBulk() {
			ps.repairLatencyBytes += uint64(len(b))
		}
		p.infos[idx].InFlight += len(b)
		p.sealAndQueue(w, ps, pb, len(b), true, now)
		if ps.cc != nil {
			p.infos[idx].CwndRoom = p.roomOf(ps, ps.sender.InFlight(), now)
		}
	}
}

// repairSpread bounds the paths repairs rotate over: those whose one-way delay
// is within this of the fastest path's. Spreading a block's repairs protects
// against a burst on one path; a repair that arrives much later than the data
// it protects is no better than a resend.
const repairSpread = 10 * time.Millisecond

// nextRepairPath picks, after the one the previous repair took, the next
// usable path whose one-way delay is within repairSpread of the fastest.
func (p *peer) nextRepairPath() int {
	fastest := time.Duration(-1)
	for i := range p.infos {
		if ow := recovery.OneWay(&p.infos[i]); p.infos[i].Usable && (fastest < 0 || ow < fastest) {
			fastest = ow
		}
	}
	// A repair is extra load: it goes where the path's model has room
	// (CwndRoom < 0: no controller); without this a path losing packets to
	// congestion would get more repairs, hence more congestion. When no model
	// has room, a repair may exceed a window by its own size, but not on a path
	// with a standing queue, nor on a standby path of an access link (whose lead
	// carries the data). Skipped, a block's repairs left its losses to resends,
	// each of which holds the flow for a round trip: in the lab (1 % loss,
	// 20–40 ms) 17 % of the repairs were skipped and resends were 0.17 % of the
	// payload; sent, 0.07 %, for 1 % more repairs.
	if i := p.rotateRepair(fastest, func(i int) bool { return p.infos[i].CwndRoom != 0 }); i >= 0 {
		return i
	}
	return p.rotateRepair(fastest, func(i int) bool {
		ps := p.infoP[i]
		return !p.standby(ps) && !congested(ps)
	})
}

// rotateRepair returns the first usable path after the previous repair's, within
// repairSpread of fastest, that ok accepts (-1: none), and moves the rotation on.
func (p *peer) rotateRepair(fastest time.Duration, ok func(int) bool) int {
	n := len(p.infos)
	for k := 0; k < n; k++ {
		i := (p.fecNext + k) % n
		if p.infos[i].Usable && recovery.OneWay(&p.infos[i]) <= fastest+repairSpread && ok(i) {
			p.fecNext = i + 1
			return i
		}
	}
	return -1
}

// fecRepair takes a received repair frame; packets it rebuilds are delivered.
func (in *inbound) fecRepair(p *peer, r *fec.Repair, now time.Time) {
	if p.fecDec == nil {
		if !p.rec.Has(recovery.FEC) {
			return
		}
		// No DATA frame larger than a receive buffer gets here (larger
		// datagrams are dropped as oversized), so the decoder's slots need not
		// hold more: sized for wire.MaxPacket they took 81 MB of heap.
		p.fecDec = getDecoder(p.e.pool.size)
	}
	if n := p.fecDec.AddRepair(r, now); n > 0 {
		in.deliverRebuilt(p, n, now)
	}
}

// pooledDecoder is a decoder an idle peer gave back, with the payload size it
// was made for.
type pooledDecoder struct {
	d    *fec.Decoder
	size int
}

// decoders recycles the decoders of idle peers (releaseIdle): about 2 MB each.
var decoders sync.Pool

// getDecoder returns a reset decoder for payloads up to size.
func getDecoder(size int) *fec.Decoder {
	if pd, _ := decoders.Get().(*pooledDecoder); pd != nil && pd.size == size {
		return pd.d
	}
	return fec.NewDecoder(fec.DecoderConfig{MaxPayload: size})
}

// putDecoder gives back a reset decoder getDecoder made for size (one that
// does not fit the next get is left to the collector).
func putDecoder(d *fec.Decoder, size int) { decoders.Put(&pooledDecoder{d: d, size: size}) }

// fecData gives a received DATA frame to the decoder.
func (in *inbound) fecData(p *peer, frame []byte, flow uint16, seq uint32, now time.Time) {
	if p.fecDec == nil {
		return
	}
	if n := p.fecDec.AddSource(fec.SourceID{Flow: flow, Seq: seq}, frame); n > 0 {
		in.deliverRebuilt(p, n, now)
	}
}

// deliverRebuilt delivers the decoder's n rebuilt DATA frames and queues their
// REBUILT reports.
func (in *inbound) deliverRebuilt(p *peer, n int, now time.Time) {
	for i := 0; i < n; i++ {
		id, frame := p.fecDec.Rebuilt(i)
		pb := p.e.pool.get()
		if len(frame) > len(pb.b)-innerStart {
			p.e.pool.put(pb)
			continue
		}
		copy(pb.b[innerStart:], frame)
		f, _, err := wire.NextFrame(pb.b[innerStart : innerStart+len(frame)])
		if err != nil || f.Type != wire.FrameData || f.Flow != id.Flow || f.FlowSeq != id.Seq {
			p.e.pool.put(pb)
			p.e.counters.drop(dropMalformed)
			continue
		}
		p.fecUsed++
		p.rebuilt = append(p.rebuilt, giveUpRef{flow: f.Flow, seq: f.FlowSeq})
		if !in.deliver(p, pb, innerStart+wire.DataFrameHeaderLen, f, now) {
			p.e.pool.put(pb)
		}
	}
}

// rebuiltKey packs (flow, seq) with a presence bit, so the ring's zero entries
// match nothing.
func rebuiltKey(flow uint16, seq uint32) uint64 { return 1<<48 | uint64(flow)<<32 | uint64(seq) }

// peerRebuilt records the peer's report that it rebuilt (flow, seq).
func (p *peer) peerRebuilt(flow uint16, seq uint32) {
	p.rebuiltBy[p.rebuiltPos%len(p.rebuiltBy)] = rebuiltKey(flow, seq)
	p.rebuiltPos++
}

// wasRebuilt reports whether the peer said it rebuilt (flow, seq) recently.
func (p *peer) wasRebuilt(flow uint16, seq uint32) bool {
	k := rebuiltKey(flow, seq)
	for _, r := range p.rebuiltBy {
		if r == k {
			return true
		}
	}
	return false
}

// fecRxTick expires the decoder's stale blocks; what that still rebuilds is
// appended to toTUN. Caller holds p.mu.
func (p *peer) fecRxTick(now time.Time, toTUN []*packetBuf) []*packetBuf {
	if p.fecDec == nil {
		return toTUN
	}
	if n := p.fecDec.Tick(now); n > 0 {
		in := inbound{e: p.e, toTUN: toTUN}
		in.deliverRebuilt(p, n, now)
		toTUN = in.toTUN
	}
	return toTUN
}
