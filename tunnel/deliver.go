package tunnel

import (
	"math/bits"
	"slices"

	"github.com/braid-vpn/braid/lanes"
)

// The order of TUN writes.
//
// A peer's reorder buffer decides, under the peer's lock, which packets go to
// the TUN device and in what order. Writing them is most of the receive side's
// cost and needs no peer state, so it happens after the lock is let go: the
// next batch of the peer (from another path's reader, or the timers) is handled
// meanwhile, and the send side is not held up by a TUN write. The packets of
// one flow must still reach the device in the order they were released, so a
// writer takes its turn in the lanes of its packets' flows before it unlocks
// (takeTurn) and writes when the earlier writers of those lanes are done
// (writeTurn). When no earlier writer holds any of its lanes (nearly always)
// the release is written in one call; else lane by lane, so that a lane held
// up by an earlier writer does not hold up the writer's other lanes. Writers
// of other flows do not wait for each other.

// takeTurn claims the place of pkts, just released by p's reorder buffer, in
// p's delivery order. Caller holds p.mu.
func (p *peer) takeTurn(t *lanes.Ticket, pkts []*packetBuf) {
	var s lanes.Set
	for _, pb := range pkts {
		s = s.Add(lanes.Of(pb.flow))
	}
	if s != 0 {
		p.delivery.Take(t, s)
	}
}

// writeTurn writes pkts to the TUN device, the packets of each lane once the
// writes released before them in that lane are done. Call it after takeTurn,
// with or without p.mu. tw may be nil (rare writes).
func (p *peer) writeTurn(t *lanes.Ticket, pkts []*packetBuf, tw *tunWrite) {
	if len(pkts) == 0 {
		return
	}
	// Most of the time no earlier writer holds any of the lanes: the release
	// is written as it is, in one call, as when it was written under p.mu.
	ready := p.delivery.Wait(t)
	if ready == t.Pending() {
		p.e.writeTUN(pkts, tw)
		p.delivery.Done(t, ready)
		return
	}
	var sorted []*packetBuf
	var at [lanes.N + 1]int32
	if tw != nil {
		sorted = tw.byLane[:0]
	}
	sorted = byLane(pkts, sorted, &at)
	for {
		for m := uint64(ready); m != 0; m &= m - 1 {
			l := bits.TrailingZeros64(m)
			p.e.writeTUN(sorted[at[l]:at[l+1]], tw)
			p.delivery.Done(t, lanes.Set(0).Add(uint(l)))
		}
		if t.Pending() == 0 {
			break
		}
		ready = p.delivery.Wait(t)
	}
	clear(pkts)
	if tw != nil {
		tw.byLane = sorted[:0]
	}
}

// byLane appends pkts to out grouped by lane, each lane's packets in their
// order in pkts (a counting sort); lane l's are out[at[l]:at[l+1]].
func byLane(pkts, out []*packetBuf, at *[lanes.N + 1]int32) []*packetBuf {
	for _, pb := range pkts {
		at[lanes.Of(pb.flow)+1]++
	}
	for l := 1; l <= lanes.N; l++ {
		at[l] += at[l-1]
	}
	out = slices.Grow(out[:0], len(pkts))[:len(pkts)]
	var fill [lanes.N]int32
	copy(fill[:], at[:lanes.N])
	for _, pb := range pkts {
		l := lanes.Of(pb.flow)
		out[fill[l]] = pb
		fill[l]++
	}
	return out
}

// writeLocked writes what a rare event (a new reorder setting, a new session)
// released, in its turn, without letting p.mu go. Caller holds p.mu.
func (p *peer) writeLocked(pkts []*packetBuf) {
	var t lanes.Ticket
	p.takeTurn(&t, pkts)
	p.writeTurn(&t, pkts, nil)
}
