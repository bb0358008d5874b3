// Package path measures each network path of a braid session and decides
// whether it is in service.
//
// The package is pure logic: no I/O, no goroutines, no clock. The engine
// passes the time into every call, so tests drive it with simulated time.
//
// # Model
//
// Every datagram on a path carries a per-path sequence number (seq, +1 per
// datagram, wrapping mod 2^32) and the sender's microsecond clock (txUs). The
// receiving side keeps one Receiver per peer path; it records seqs in a
// 64-bit window below the largest seen and sends back Ack frames. The sending
// side keeps one Sender per path; it remembers sent packets in a fixed ring
// indexed by seq and turns Acks into measurements:
//
//   - RTT: RFC 6298 smoothing (srtt, rttvar, RTO) of samples taken when the
//     largest acked seq is newly acked and the ack covers an ack-eliciting
//     packet. The receiver's reported ack delay is subtracted unless that
//     would go below the (windowed) minimum RTT, as in RFC 9002 §5.3.
//   - Loss: RFC 9002 packet threshold (ReorderThreshold seqs below the
//     largest acked) and time threshold (TimeThreshold × max(srtt, latest
//     RTT)), the latter re-checked by OnTimer. Because seqs are per path,
//     packets of one flow overtaking each other on different paths are
//     never loss. The loss rate is an EWMA, once per round of one srtt, of
//     lost and total ack-eliciting packets; its ratio weights busy rounds
//     more than quiet ones.
//   - Delivery rate: bytes acked over intervals of at least one srtt,
//     max-filtered over RateWindow. Intervals in which the pipe ran empty
//     only measure the application, so they may raise the estimate but not
//     lower it. With no new samples the last estimate stays.
//   - One-way delay: each Ack carries owdRaw = rxUs - txUs of its largest
//     packet, the forward delay plus an unknown clock offset that is the same
//     for every path of a session. Samples are unwrapped with int32
//     differences, smoothed (gain 1/8), min-filtered over OWDWindow; queue
//     delay is smoothed minus minimum, and the trend is the least-squares
//     slope of bucketed samples over about two srtt.
//
// A congestion controller (package cc) takes its signals from here rather than
// detecting loss itself: OnAck returns what the ack newly acknowledged (ack-eliciting
// bytes, the RTT sample, when the newest of those packets was sent), and TakeLoss
// what was declared lost since the last call, with the send time of the newest lost
// packet, so that losses from before a window reduction are not counted again.
//
// Packets that are not ack-eliciting (pure acks) occupy seqs and are credited
// when an ack covers them, but they are never declared lost and do not
// count toward in-flight bytes or liveness: nobody promised to ack them soon.
//
// # Liveness
//
//	Probing ──first RTT sample: usable; ActivateAcks samples──▶ Active ⇄ Degraded (loss rate)
//	   ▲                                                          │          │
//	   └──── ack of a packet sent after going Down ◀── Down ◀─────┴──────────┘ (no acks)
//
// A path goes Down when the ack-eliciting packets sent after the largest
// acked one go unanswered. "Sent after the largest acked" matters: a single
// lost packet followed by acknowledged ones is loss, not an outage.
//
//   - Busy rule: DownBusyPackets such packets were sent close together (the
//     path carries traffic), the last of them is overdue (older than
//     srtt+4·rttvar+AckDelay) and the first is older than
//     clamp(DownBusyRTTs·srtt+4·rttvar, DownBusyMin, DownBusyMax). The
//     first unanswered packet leaves when the path broke (or up to one
//     one-way delay earlier, when acks were lost), so a busy path is Down
//     within DownBusyMax (350ms) of breaking, plus one OnTimer tick —
//     provided an ack normally takes less than that
//     (srtt+4·rttvar+AckDelay ≤ DownBusyMax). On slower paths the overdue
//     test dominates: nobody can tell an outage from a slow ack sooner.
//   - Idle rule: the first unanswered packet is older than DownIdle.
//     OnTimer asks for a PING whenever no ack-eliciting packet went out for
//     ProbeInterval, so an idle path sends its first unanswered probe at
//     most ProbeInterval after breaking and is Down within
//     ProbeInterval+DownIdle (1.8s); a lone lost probe never takes it down.
//
// Long before either rule fires the path is suspect (SuspectSince): its two
// oldest such packets are both older than the probe timeout. The engine stops
// scheduling on a suspect path while another one answers; the state machine does
// not change.
//
// Going Down declares everything outstanding lost (for TakeLost, not for the
// loss rate), and OnTimer asks for a probe at once and then every
// ProbeInterval. The first ack of a packet sent after the path went Down
// moves it to Probing with fresh estimators; it is usable again with that
// sample and Active after ActivateAcks samples. Acks of packets sent before
// the outage do not revive a path: they only prove it worked back then.
//
// # Keepalive
//
// There is no separate keepalive. Idle probing sends an ack-eliciting PING
// on every path that has been quiet for ProbeInterval, Down paths included.
// The outbound PING refreshes the path's NAT/firewall binding on its own, and
// the ack coming back (the engine answers on the path the PING arrived on)
// refreshes it in the other direction, every ProbeInterval — far more often
// than the usual 30 s to 2 min UDP binding timeouts. A binding that was lost
// anyway is re-created by the next probe, which is also how the path comes
// back.
//
// # Acknowledgements
//
// A Receiver acks after AckEvery ack-eliciting packets, after AckDelay, when
// an ack-eliciting packet opens or fills a hole, and at once for a PING: the
// engine calls OnPing after OnPacket for a datagram carrying a PING. An Ack
// describes the largest seq and the 64 below it; packets further back that
// were never acked are declared lost by the sender's thresholds.
//
// # Cost
//
// OnSent, OnAck, OnTimer, OnPacket, BuildAck and Stats do not allocate in
// steady state. The sent ring (entries of 16 bytes plus a 4-byte queue slot)
// starts at 64 entries and OnSent doubles it, up to RingSize, when the slot a
// packet needs still holds one in flight or within an ack's reach; Shrink
// gives it back on an idle path. A packet whose slot is reused before any
// verdict (the ring at RingSize) counts as lost.
package path
