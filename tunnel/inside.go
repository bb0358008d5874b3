package tunnel

import (
	"errors"
	"net/netip"
	"os"
	"time"

	"github.com/braid-vpn/braid/reorder"
	"github.com/braid-vpn/braid/wire"
)

// routineInside reads packets from the TUN device and sends them out over the paths.
func (e *Engine) routineInside() {
	defer e.wg.Done()
	bs := e.tun.BatchSize()
	pbs := make([]*packetBuf, bs)
	bufs := make([][]byte, bs)
	sizes := make([]int, bs)
	w := newBatchWriter(e)
	var route lastLookup
	for {
		for i := range pbs {
			if pbs[i] == nil {
				pbs[i] = e.pool.get()
			}
			bufs[i] = pbs[i].b
		}
		n, err := e.tun.Read(bufs, sizes, wire.DataPrefixLen)
		if e.isClosing() {
			return
		}
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// Too many GSO segments and similar per-read errors lose that read only.
			e.log.Debug("tun read", "err", err)
			if n == 0 {
				time.Sleep(time.Millisecond)
				continue
			}
		}
		e.counters.tunReads.Add(1)
		e.counters.tunReadPkts.Add(uint64(n))
		now := time.Now()
		e.mu.RLock()
		var cur *peer
		for i := 0; i < n; i++ {
			pb := pbs[i]
			pb.start, pb.end = wire.DataPrefixLen, wire.DataPrefixLen+sizes[i]
			p := e.routeOut(pb.b[pb.start:pb.end], &route)
			if p == nil {
				continue // counted by routeOut; the buffer is reused
			}
			if p != cur {
				if cur != nil {
					w.seal()
					cur.mu.Unlock()
				}
				cur = p
				cur.mu.Lock()
				cur.refreshInfos(now)
			}
			if cur.sendPacket(w, pb, now) {
				pbs[i] = nil // ownership passed to the writer
			}
		}
		if cur != nil {
			w.seal()
			cur.mu.Unlock()
		}
		e.mu.RUnlock()
		w.flush()
	}
}

// routeOut returns the peer an inner packet goes to, or nil (counted) when none.
func (e *Engine) routeOut(pkt []byte, route *lastLookup) *peer {
	dst, ok := innerDst(pkt)
	if !ok {
		e.counters.drop(dropBadInner)
		return nil
	}
	var p *peer
	if e.role == Client {
		p = e.server
	} else {
		p = route.lookup(e.allowed.Load(), dst)
	}
	if p == nil {
		e.counters.drop(dropNoRoute)
	}
	return p
}

// sendPacket schedules and sends one inner packet (already at pb.start). It returns
// true if pb was consumed. Caller holds p.mu.
func (p *peer) sendPacket(w *writer, pb *packetBuf, now time.Time) bool {
	if p.cur == nil {
		p.e.counters.drop(dropNoSession)
		if p.isSrv && p.hs == nil {
			p.initiateLocked(now, false)
		}
		return false
	}
	if p.cc != nil {
		return p.sendGated(w, pb, now)
	}
	pkt := pb.b[pb.start:pb.end]
	n := len(pkt)
	flow := reorder.FlowID(pkt, len(p.flowSq))
	seq := p.flowSq[flow]
	p.flowSq[flow]++
	p.pick(n+wire.DataPacketOverhead, flow, now)
	if len(p.picks) == 0 {
		p.e.counters.drop(dropNoPath)
		return false
	}
	p.transmit(w, pb, flow, seq, now, nil)
	return true
}

// transmit sends pb, packet seq of its flow, on the paths in p.picks (copies for
// all but the last). With recovery on each datagram's payload is retained; rt is
// the history of a resent payload (nil for a new one). Caller holds p.mu.
func (p *peer) transmit(w *writer, pb *packetBuf, flow uint16, seq uint32, now time.Time, rt *retxMeta) {
	pkt := pb.b[pb.start:pb.end]
	n := len(pkt)
	frameLen := wire.DataFrameHeaderLen + n
	dataAt := wire.DataHeaderLen + wire.InnerHeaderLen
	repairs := 0
	p.lastData, p.released = now, false
	for k, idx := range p.picks {
		ps := p.infoP[idx]
		out := pb
		if k < len(p.picks)-1 {
			// Redundant copies: all but the last pick get a copy, the last uses pb.
			out = p.e.pool.get()
			copy(out.b[dataAt+wire.DataFrameHeaderLen:], pkt)
		}
		if p.store != nil {
			p.retain(idx, pkt, flow, seq, now, rt)
		}
		wire.PutDataFrameHeader(out.b[dataAt:], flow, seq, n)
		if k == 0 && rt == nil && p.fecEnc != nil {
			repairs = p.fecSource(out.b[dataAt:dataAt+frameLen], pkt, flow, seq, now)
		}
		b := p.appendAcks(out.b[dataAt+frameLen:dataAt+frameLen], frameLen, ps, now)
		p.infos[idx].InFlight += n
		p.sealAndQueue(w, ps, out, frameLen+len(b), true, now)
	}
	if repairs > 0 {
		p.sendRepairs(w, repairs, now)
	}
}

// innerDst returns the destination address of an IPv4 or IPv6 packet.
func innerDst(pkt []byte) (netip.Addr, bool) { return innerAddr(pkt, 16, 24) }

// innerSrc returns the source address of an IPv4 or IPv6 packet.
func innerSrc(pkt []byte) (netip.Addr, bool) { return innerAddr(pkt, 12, 8) }

// innerAddr reads the address at offset off4 of an IPv4 header or off6 of an IPv6
// header, after checking the version and that the header is there.
func innerAddr(pkt []byte, off4, off6 int) (netip.Addr, bool) {
	if len(pkt) < 1 {
		return netip.Addr{}, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4([4]byte(pkt[off4 : off4+4])), true
	case 6:
		if len(pkt) < 40 {
			return netip.Addr{}, false
		}
		return netip.AddrFrom16([16]byte(pkt[off6 : off6+16])), true
	}
	return netip.Addr{}, false
}
