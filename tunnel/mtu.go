package tunnel

import (
	"time"

	"github.com/braid-vpn/braid/mss"
	"github.com/braid-vpn/braid/pmtu"
	"github.com/braid-vpn/braid/wire"
)

// Each path finds the largest datagram it carries by itself (package pmtu, in the
// spirit of RFC 8899: padded probes, no ICMP), because paths differ (PPPoE, LTE,
// tunnels in tunnels) and a link that silently drops large datagrams would
// otherwise swallow every full-size packet scheduled on it while its small
// probes and acks keep it looking alive. The engine then
//
//   - never sends a datagram larger than a path's confirmed size on that path,
//     unless no usable path is large enough (then it sends anyway: a start-up
//     packet is better tried than dropped);
//   - clamps the MSS of TCP SYNs it delivers to its TUN device to what all its
//     usable paths carry, so that new inner connections send segments every path
//     can take (the SYN's MSS limits what the far end sends back to us, and our
//     paths are what carries it);
//   - says once in the log, and in status, when no path can carry the configured
//     inner MTU.

// mtuLimits returns the search bounds of a path: the smallest datagram assumed to
// pass (what an IP MTU of 1280, IPv6's minimum, leaves for the UDP payload) and
// the largest worth trying.
func (p *peer) mtuLimits(ps *pathState) (base, max int) {
	ipUDP := 48 // IPv6 + UDP
	if ps.ep.Remote.Addr().Unmap().Is4() {
		ipUDP = 28
	}
	max = min(p.e.tn.OuterMTU-ipUDP, wire.MaxDatagram, bufSize(p.e.mtu)-innerStart)
	return min(1280-ipUDP, max), max
}

// attachMTU starts a path's size search.
func (p *peer) attachMTU(ps *pathState, now time.Time) {
	base, max := p.mtuLimits(ps)
	ps.mtu = pmtu.New(pmtu.DefaultConfig(base, max), now)
	ps.probeSize = 0
}

// mtuTick sends the path's next size probe, if one is due. Caller holds p.mu.
func (p *peer) mtuTick(w *writer, ps *pathState, now time.Time) {
	if ps.mtu == nil || !ps.sender.Usable() {
		return
	}
	// One probe at a time: the search answers 0 while one is outstanding, and
	// declares it lost itself when it stays undecided (the path went quiet).
	size := ps.mtu.NextProbe(now)
	if size == 0 {
		return
	}
	p.sendProbe(w, ps, size, now)
}

// sendProbe sends a PING padded to a datagram of exactly size bytes on ps.
func (p *peer) sendProbe(w *writer, ps *pathState, size int, now time.Time) {
	n := size - wire.DataOverhead - wire.InnerHeaderLen
	pb := p.e.pool.get()
	if n < wire.PingFrameLen || innerStart+n+wire.TagLen > len(pb.b) {
		p.e.pool.put(pb)
		return
	}
	b := wire.AppendPing(pb.b[innerStart:innerStart])
	clear(pb.b[innerStart+len(b) : innerStart+n]) // PADDING frames to the end
	ps.probeSeq, ps.probeSize = ps.sender.NextSeq(), size
	ps.mtu.OnProbeSent(size, now)
	if p.sealAndQueue(w, ps, pb, n, true, now) {
		// The probe leaves now, alone: in a GSO run with the ping below (a
		// run may end in a shorter datagram) it would travel as one segmented
		// buffer, which a veth forwards whatever the far end's MTU, and a
		// size that the path cannot carry would be confirmed.
		w.seal()
		p.e.sendQueued(ps.cs)
		// A small ping right behind it: when its ack comes back without the
		// probe's, the probe is declared lost within about a round trip,
		// even on an idle path.
		p.sendControl(w, ps, now, framePing, [wire.ChallengeLen]byte{})
	}
}

// mtuAcked and mtuLost are told of every decided packet of ps (path.Observer).
func (p *peer) mtuAcked(ps *pathState, seq uint32, now time.Time) {
	if ps.probeSize != 0 && seq == ps.probeSeq {
		ps.mtu.OnProbeAcked(ps.probeSize, now)
		ps.probeSize = 0
	}
}

func (p *peer) mtuLost(ps *pathState, seq uint32, now time.Time) {
	if ps.probeSize != 0 && seq == ps.probeSeq {
		ps.mtu.OnProbeLost(ps.probeSize, now)
		ps.probeSize = 0
	}
}

// Black holes that open later (a route change mid-session) are noticed from the
// data: largeLossRun losses in a row of datagrams larger than the search's base,
// with a smaller datagram acked in between, and no larger one, make the search
// start over from the base (pmtu rate-limits such restarts). Congestion drops
// large and small datagrams alike, so it rarely looks like this.
const largeLossRun = 6

func (p *peer) mtuDataAcked(ps *pathState, seq uint32) {
	if ps.mtu == nil || ps.largeLost == 0 {
		return
	}
	if ps.sender.SizeOf(seq) > ps.mtu.Config().Base {
		ps.largeLost, ps.smallAcked = 0, false
		return
	}
	ps.smallAcked = true
	p.mtuBlackHole(ps)
}

func (p *peer) mtuDataLost(ps *pathState, seq uint32) {
	if ps.mtu == nil || ps.sender.SizeOf(seq) <= ps.mtu.Config().Base {
		return
	}
	ps.largeLost++
	p.mtuBlackHole(ps)
}

func (p *peer) mtuBlackHole(ps *pathState) {
	if ps.largeLost >= largeLossRun && ps.smallAcked {
		_, before := ps.mtu.LargeLosses()
		ps.mtu.OnLargeLoss(time.Now())
		ps.largeLost, ps.smallAcked = 0, false
		if _, after := ps.mtu.LargeLosses(); after > before {
			p.e.log.Info("path drops large datagrams; searching its size again", "peer", p.name, "path", ps.id)
		}
	}
}

// refreshMTU recomputes the largest datagram every usable path carries and the
// MSS to clamp inner SYNs to (0: no clamp, every path carries full-size
// packets). Caller holds p.mu.
func (p *peer) refreshMTU() {
	full := p.e.mtu + wire.DataPacketOverhead // the largest datagram braid builds
	// On the stack, not the heap: this runs every tick.
	var buf [maxPaths]pathSize
	sizes := buf[:0]
	for _, ps := range p.paths {
		if ps != nil && ps.validated && ps.sender.Usable() && ps.mtu != nil {
			sizes = append(sizes, pathSize{ps.mtu.Size(), ps.mtu.Done()})
		}
	}
	least, settled := leastSize(sizes)
	p.mss4, p.mss6 = 0, 0
	if least > 0 && least < full {
		inner := least - wire.DataPacketOverhead
		p.mss4, p.mss6 = mss.For(inner, false), mss.For(inner, true)
		if settled && !p.mtuWarned {
			p.mtuWarned = true
			p.e.log.Warn("a path carries less than the inner MTU; inner TCP segments are clamped to fit every path",
				"peer", p.name, "inner_mtu", p.e.mtu, "path_inner_mtu", inner)
		}
	}
}

// pathSize is a usable path's confirmed datagram size and whether its search
// has converged.
type pathSize struct {
	size int
	done bool
}

// leastSize is the smallest confirmed size (0 for no path) and whether every
// search had converged. A search in progress counts with what it has confirmed
// so far, its base at first: an inner TCP connection keeps the MSS of its SYN
// for its whole life, and one opened while a path's size is still unknown
// would otherwise send segments that path may turn out not to carry, and so
// use only the other paths until it ends (lab paths-mtu: the first download of
// a session, 8.9 Mbit/s on one path instead of 17.3 on two).
func leastSize(paths []pathSize) (least int, settled bool) {
	settled = true
	for _, p := range paths {
		if least == 0 || p.size < least {
			least = p.size
		}
		settled = settled && p.done
	}
	return least, settled
}

// clampSYN lowers the MSS of an inner TCP SYN about to be delivered.
func (p *peer) clampSYN(pkt []byte) {
	if p.mss4 == 0 || len(pkt) == 0 {
		return
	}
	if pkt[0]>>4 == 6 {
		mss.Clamp(pkt, p.mss6)
	} else {
		mss.Clamp(pkt, p.mss4)
	}
}

// plainLimit is the largest plaintext (inner header and frames) a datagram on ps
// may carry: within the outer MTU and, once known, the path's datagram size.
func (p *peer) plainLimit(ps *pathState) int {
	ipUDP := 48 // IPv6 + UDP
	if ps.ep.Remote.Addr().Unmap().Is4() {
		ipUDP = 28
	}
	limit := p.e.tn.OuterMTU - ipUDP
	if s := ps.datagramLimit(); s > 0 {
		limit = min(limit, s)
	}
	return limit - wire.DataOverhead
}

// datagramLimit is the largest datagram ps is known to carry (0 before the search).
func (ps *pathState) datagramLimit() int {
	if ps.mtu == nil {
		return 0
	}
	return ps.mtu.Size()
}
