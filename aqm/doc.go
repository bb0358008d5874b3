// Package aqm is the active queue management of the tunnel's per-peer queue:
// CoDel (RFC 8289) decides when the queue is persistently too long, and
// MarkCE (RFC 3168) turns that decision into a Congestion Experienced mark on
// the inner IP packet when its sender understands ECN.
//
// The package is pure logic: no I/O, no goroutines, no clock. The caller
// passes the time into every call, so tests drive it with simulated time.
// Nothing allocates per packet.
//
// # Why CoDel
//
// When congestion control is on, inner packets that no path's window admits
// wait in the peer's queue in front of the paths (tunnel's ccQueue, the queue
// this package is written for; wiring it in is the tunnel's job, which must
// then also keep the queue's backlog in bytes). The
// paths' windows cap what braid puts on the paths, so when the inner flows
// want more than the paths carry, the excess piles up in this queue, not in
// the paths' routers: the inner TCP's bottleneck is braid, and its congestion
// signal has to come from there, while the queue is still short. A queue that only drops on overflow (Tunables.CCQueuePackets)
// lets a bulk flow fill it, so every inner flow sharing the peer waits behind
// it, and the signal arrives late and as a burst of losses. Dropping by age
// (Tunables.CCQueueDelay) bounds the delay but still lets it sit at the bound.
//
// CoDel keeps the standing queue short while letting bursts through. It looks
// at the sojourn time of the packet leaving the head, which does not depend on
// the drain rate; that matters here because the drain rate is the sum of the
// paths' windows, which changes whenever a path joins, leaves or changes its
// rate, so a threshold in bytes or packets would be wrong most of the time.
// A burst that drains within Interval is never touched; a queue whose sojourn
// time stays at or above Target for a whole Interval gets one drop, then
// drops at Interval/sqrt(count) for as long as it stays there, which is the
// rate that brings a Reno-like flow's window down gently (its throughput
// goes as 1/sqrt(p)).
//
// # Target and Interval
//
// Interval (100ms) is the time the inner sender needs to hear of a drop and
// react, so it should be about the largest inner RTT of the traffic it
// carries: shorter and CoDel drops again before the first drop has taken
// effect; longer and a queue persists longer than necessary. The inner RTT
// through braid is the path RTT plus the receiver's reorder wait, which for
// terrestrial paths is well below 100ms; peers behind satellite links may want
// more. Target (5ms) is the queue delay CoDel tolerates for good, RFC 8289's
// 5-10% of Interval: enough to keep the paths' windows filled between the
// ACK frames that open them, small next to the RTT that the inner flows
// already pay. MinBytes (1500) is RFC 8289's maxpacket rule: a backlog of one
// packet or less is not a queue that dropping can shorten.
//
// # Drop or mark
//
// When OnDequeue reports true, the caller tries MarkCE on the packet. A packet
// whose IP header says ECT(0) or ECT(1) is marked CE (its IPv4 header checksum
// updated incrementally, RFC 1624) and sent: the inner receiver echoes the
// mark and the inner sender backs off as for a loss, without the loss. One
// that is already CE stays as it is and is sent. Any other packet (Not-ECT,
// not IP, truncated) is dropped, and the caller asks OnDequeue about the next
// one at once, RFC 8289's dequeue loop. After a mark the caller does not loop:
// the marked packet is sent, as Linux's codel does.
//
// # Departures from RFC 8289
//
// OnDequeue answers for one packet at a time, so RFC 8289's dequeue loop is
// the caller's. Two details follow from that:
//
//   - When a drop falls due in the dropping state, the next one is scheduled
//     (drop_next = control_law(drop_next, count)) at once. RFC 8289 schedules
//     it only after checking that the following packet is still above target;
//     if it is not, the state is left either way, and the only effect of the
//     early scheduling is a drop_next one control-law gap later, seen solely
//     by the 16×Interval test of the count-reuse rule. Linux's codel does the
//     same for a marked packet.
//   - After the drop that enters the dropping state, RFC 8289 sends the next
//     packet without asking whether it is ok to drop; if it is below target,
//     the state is left at the packet after it. OnDequeue asks at once and
//     leaves the state one packet earlier. The packets dropped and sent are
//     the same: that packet is never dropped (drop_next is an Interval away),
//     and the packet after it cannot be ok to drop, because first_above_time
//     was just cleared.
//
// backlog is passed in bytes excluding the packet being dequeued, as RFC
// 8289's bytes() after base_dequeue. Time is a time.Time rather than RFC
// 8289's integer with 0 as "unset", so the state carries a flag for
// first_above_time. count saturates at 2^32-1 instead of wrapping. The
// control law uses math.Sqrt, not Linux's Newton-step reciprocal.
//
// Config.Patient, off by default, departs on purpose: a drop that falls due
// while the backlog is more than a tenth below its peak since the last drop
// is put off once, by one control-law gap, at the same count. The flows are
// answering the last drop; a TCP slow start answers over two round trips
// (one still filling the queue, one draining it), more than the first gap
// when the queue is a large part of the round trip, and RFC 8289's schedule
// then cuts it twice. The tunnel's queue uses it (docs/congestion.md).
package aqm
