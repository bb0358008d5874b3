// Package sched decides, per packet, which path(s) of a multipath session carry it.
//
// # Model
//
// The engine fills one PathInfo per path from its estimators (SRTT, one-way delays
// relative to the session's other paths, delivery rate, bytes in flight, congestion
// room) and calls Pick for every packet. Pick returns indices into that slice: one
// path for most schedulers, all of them for redundant, none when nothing is usable.
// Schedulers are pure logic: no I/O, no goroutines, time is passed in, and Pick never
// allocates (per-path state lives in fixed arrays indexed by PathInfo.ID < MaxPaths).
//
// # Why several schedulers
//
// Lukaszewski & Xie (Multipath Transport for VPNs) found that a blind per-packet
// 50/50 split over paths of unequal delay reorders so much that the inner TCP loses to
// MPTCP, that shifting traffic to the short path (75/25, 90/10) recovers most of it,
// and proposed splitting by RTT; rate asymmetry they left open. The schedulers here
// span that space so the lab can reproduce and compare:
//
//   - roundrobin: one packet per path in turn (the paper's 50/50, deterministic).
//   - weighted: random per-packet split with configured weights (the prototype).
//   - rtt-aware: random split with weights ∝ 1/SRTT (the paper's proposal).
//   - minrtt: lowest SRTT among paths with window room (MPTCP's default).
//   - earliest-arrival (default): the path where the packet is expected to arrive
//     first, from a virtual per-path queue, measured queueing, rate and base one-way
//     delay; it handles unequal delays and unequal rates together. See edpf.go.
//   - redundant: every path (loss masking at the cost of capacity; the receiver
//     de-duplicates).
//
// # Unusable and degraded paths
//
// Paths with Usable=false are never picked. Degraded paths (lossy but alive) are a
// fallback: used only when no healthy usable path exists. The exception is weighted,
// where the operator's split wins over health (see weighted.go).
package sched
