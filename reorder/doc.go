// Package reorder puts the packets of each inner flow back in order on the receive
// side of a multipath tunnel, and drops the copies the redundant scheduler sends.
//
// # Model
//
// The sender hashes each inner packet's 5-tuple into one of Config.Flows buckets
// (FlowID) and stamps the DATA frame with that flow id and a per-flow sequence number
// (+1 per packet of the flow, wrapping at 2^32). Paths of different delay deliver a
// flow's packets out of order; the inner TCP would read that as loss (three duplicate
// acks) and halve its window, which is why the MPUDP paper's blind split lost to
// MPTCP on asymmetric paths. The buffer restores order without making real losses
// stall a flow for long:
//
//   - A packet with the next expected sequence number is delivered at once, with any
//     held packets it makes contiguous.
//   - A packet ahead of a gap is held. The gap is waited for at most the hold time
//     (Fixed: Config.Hold; Adaptive: the engine's SetHold — path delay skew plus a
//     jitter margin — clamped to [MinHold, Hold]); then it is given up and the held
//     packets behind it go out. Expire does this from the engine's timer
//     (NextDeadline says when); Push does it for the flow it touches.
//   - Each flow keeps a bitmap of the sequence numbers delivered in the DedupWindow
//     behind its next expected one. A packet that arrives after its gap was given up
//     ("late") is delivered exactly once; copies are dropped, whether the original
//     was delivered or is still held.
//   - Off mode delivers everything at once but still de-duplicates.
//
// State is per flow, so a packet lost in one flow never holds back another. Memory
// is bounded: per-flow state and bitmaps, a pool of MaxHeld slots shared by all
// flows, and a heap of flows ordered by gap age. It is taken with the first
// packet and given back by Release while nothing is held (an idle session), the
// flows' positions and recent deliveries kept aside in proportion to the flows
// used. When the pool
// is full, the oldest gap of any flow is given up (Stats.Overflows) — the only way
// one flow's traffic affects another's, and it only ever releases packets early.
// Push, Expire and Flush never allocate when out has room, except the first Push
// after New or Release when no released memory is there to reuse.
//
// A gap's wait starts when its first successor arrives. When one gap is resolved
// and another follows, the second is timed from the arrival of the packet right
// behind it, so several gaps in a flow cost about one hold time, not one each.
package reorder
