// Package cc is braid's per-path congestion control: a congestion window per
// path, optionally coupled across the paths of one session the way Multipath TCP
// couples its subflows.
//
// The package is pure logic: no I/O, no goroutines, no clock. The caller passes
// the time and the measurements (acknowledged bytes, RTT samples, losses) in, so
// the same state machines run in the tunnel and in the virtual-time simulator
// (package ccsim) that tests their behaviour.
//
// # Model
//
// One Controller per session hands out one *Path per path. Loss detection is not
// done here: the caller reports what its own detector found (braid's path.Sender
// uses per-path packet numbers with RFC 9002 packet and time thresholds, so
// reordering between paths is never loss). Per path:
//
//   - OnSent after every ack-eliciting datagram: it records whether the path was
//     limited by its window (cwnd-limited gating, see below).
//   - OnAck with the newly acknowledged bytes (byte counting, not ACK events: an
//     ACK frame covering four packets grows the window four times as much as one
//     covering one), the RTT sample and the send time of the largest acknowledged
//     packet (it ends a recovery period).
//   - OnLoss with the lost bytes and the send time of the newest lost packet: a
//     loss of a packet sent before the current recovery period began is part of
//     the same congestion event and does not reduce the window again (RFC 9002
//     §7.3.2). On a congestion event the window drops at once to the new ssthresh
//     (QUIC style; there is no retransmission to inflate the window for), and it
//     does not grow until a packet sent after the event is acknowledged.
//   - OnRTO when the path stopped answering (the tunnel: the path went Down):
//     ssthresh from the algorithm's decrease rule, window 1 segment, slow start.
//   - CanSend / Room / Window gate sending; PacingRate / PaceDelay pace it
//     ("rate" only; every other algorithm returns 0).
//
// Windows are float64 segments of Config.MSS bytes. Slow start, the recovery
// rules and the RTO response are the same for every algorithm; the algorithms
// differ in the congestion-avoidance increase and (BALIA, fully coupled, CUBIC)
// the decrease:
//
//	reno     uncoupled RFC 5681 AIMD:   +1/w_r per acked segment, halve on loss
//	cubic    uncoupled RFC 9438 CUBIC (C 0.4, β 0.7, fast convergence, Reno-friendly region)
//	lia      RFC 6356 linked increases: +min(α/w_total, 1/w_r), α = w_total·max(w/rtt²)/(Σ w/rtt)²
//	olia     Khalili et al.:            +(w_r/rtt_r²)/(Σ w/rtt)² + α_r/w_r (α_r from the path sets B, M)
//	balia    Peng et al.:               +(x_r+x_max)(4x_r+x_max)/(10·w_r·(Σx)²), cut w_r/2·min(x_max/x_r, 1.5)
//	wvegas   Cao et al. weighted Vegas: delay based, keeps ≈ TotalAlpha segments queued per session
//	coupled  fully coupled (Kelly–Voice): +1/w_total, cut w_total/2 (floor 1 segment)
//	ewtcp    Honda et al.:              +a/w_r with a = 1/N² (N = active paths), halve on loss
//	rate     loss-tolerant BBR-like rate model with pacing (rate.go): max-filtered delivery
//	         rate × min RTT, Startup/Drain/ProbeBW, in-flight cap 1.25 BDP, loss above 5 % lowers a bound;
//	         a sample below 0.8 bw over a queue drops bw to it, a probe that finds more re-enters Startup;
//	         contends with a coupled Reno-like window beside a buffer-filling flow
//	none     no window at all
//
// Sums run over the active set of one group: paths that are usable, have an RTT
// sample and share the group (Path.SetGroup: the caller's verdict that they
// share a bottleneck; every path starts in group 0, so by default all of a
// session's paths are coupled). With one active path in its group every
// coupled algorithm is Reno. All arithmetic is float64
// and recomputed from the current windows on every ACK, so the integer shortcuts
// of the Linux implementations (and their precision problems) do not arise; see
// docs/congestion.md for the formulas' sources and where this departs from them.
//
// # Cwnd-limited gating
//
// A window grows only while it is what limits the path: the bytes in flight
// before the ACK reach the window, or come within MaxBurst segments of it, or in
// slow start exceed half of it, or OnSent saw that within the last round trip. A
// tunnel often carries less than its windows allow; without the gate the windows
// (and the coupled algorithms' aggressiveness terms computed from them) would grow
// without evidence that the path can carry them.
//
// # Cost
//
// A Path's methods do not allocate; an update walks the active paths once or
// twice (a few tens of nanoseconds for 8 paths). AddPath allocates. A Controller
// and its Paths are not safe for concurrent use: the tunnel calls them under the
// session's lock.
package cc
