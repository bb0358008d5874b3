// Package fec is braid's forward erasure correction: repair frames
// (wire.FrameRepair) that let a receiver rebuild lost DATA payloads which
// retransmission cannot bring in time (long-RTT paths, real-time flows).
//
// Pure logic: no I/O, no goroutines, no clock (time is passed in), nothing
// allocated per packet in steady state. Three parts:
//
//   - Encoder (sender): the engine gives it every payload it sends (Add); it
//     groups them in blocks and, when a block closes, makes m repair frames
//     (AppendRepair).
//   - Decoder (receiver): the engine gives it every payload it receives
//     (AddSource) and every repair frame (ParseRepair, AddRepair); it returns the
//     payloads it rebuilt (Rebuilt).
//   - Controller: from per-packet loss events (Observe) it chooses the block size
//     k and the repairs m (Rate, Choose) for Encoder.SetRate.
//
// # Why block Reed–Solomon
//
// A block code RS(k+m) rebuilds any m losses among k+m symbols, which is
// optimal (MDS), and klauspost/reedsolomon does the GF(2^8) work with SIMD. Its
// cost is latency: a block waits for k sources. Sliding-window codes (RLC,
// Tetrys, RFC 8681) decode on the fly with lower latency but need per-packet
// coefficient state and a GF solver we would write by hand. Here the latency is
// bounded instead: bulk (TCP) and latency-sensitive sources fill blocks of
// their own, and a block also closes when its first source has waited its
// lane's delay — MaxDelay (10 ms by default) for latency-sensitive flows, so a
// real-time flow waits at most that for its repairs, BulkDelay (25 ms) for
// bulk flows, whose gaps the receiver holds for recovery anyway — and a block
// closed early gets the repairs the controller planned for its actual size
// (Rate.M[n]; Rate.Bulk[n] and the bulk credit, within the overhead cap, for
// bulk blocks). At 10–20 Mbit/s a 10 ms block holds a dozen sources: one
// repair is 8 % overhead, two 16 %; a 25 ms bulk block fills to k = 32. A
// shared block would give every bulk source in it a real-time flow's repairs
// whenever a latency-sensitive packet (a ping every 10 ms) joined it.
//
// # Symbols
//
// Source symbol i of a block is len u16 | payload | zeros, padded to the
// block's longest payload + 2 (the symbol length); repairs are RS parity over
// those symbols (the library's default systematic Vandermonde-derived matrix
// over GF(2^8): both ends must use the same reedsolomon coding, i.e. this
// module's version). A rebuilt symbol carries its own true length, so padding
// is removed on decode. The payload is opaque to fec, but both ends must feed
// the same bytes: the engine feeds the plaintext DATA frame (header + inner
// packet), so a rebuilt payload is a DATA frame that wire.NextFrame parses and
// the normal deliver path takes as if received.
//
// # Repair frame (type byte included, big-endian)
//
//	0      1           5    6    7     8       9            11
//	| 0x08 | block u32 | k  | m  | idx | nruns | symlen u16 | runs | symbol (symlen) |
//	run: | flow u16 | seq u32 | count u8 |   (RunLen = 7)
//
// k (1..MaxK=32) sources, m (1..MaxM=8) repairs, idx < m this repair's index.
// DATA frames do not change, so each repair names its block's sources: the runs
// (1..k of them, counts ≥ 1 summing to k) list them as flow:seq … flow:seq+count-1
// and their order is the shard order (source shard i is the i-th id). The
// encoder groups each flow's consecutive sequence numbers into one run, so a
// block of interleaved flows costs one run per flow, not per packet. A repair
// frame is RepairHeaderLen (11) + 7·nruns + symlen bytes and is
// self-delimiting; ParseRepair checks every field and never panics (fuzzed).
// The block id counts blocks per sender and wraps; the decoder uses serial
// arithmetic and takes repairs for the last DecoderConfig.Blocks blocks only.
//
// # Controller
//
// Loss is modelled as a Gilbert process (LossEstimator): loss rate p and mean
// burst length B from P(lost | previous lost) = 1 - 1/B; B = 1/(1-p) is
// independent loss, and the model is then exactly the binomial one of
// recovery.md. For each block length n ≤ MaxK+MaxM a dynamic program gives
// P(X = j), the chance that j of n symbols are lost; RS(k+m) fails when X > m,
// and the residual loss per source is Σ_{j>m} j/(k+m)·P(X = j) (checked against
// recovery.md: RS(20+2) at 1 % fails 1.3e-3, residual 1.9e-4; RS(20+4) 3.6e-6,
// 7.6e-7; at 2 % RS(6+2) 1.6e-4, RS(8+3) 1.7e-5).
//
// Choose's rule: no repairs below Policy.MinLoss (0.1 %), or before the
// Controller has MinSamples (100) outcomes. Otherwise, among 1 ≤ k ≤ Policy.MaxK,
// 1 ≤ m ≤ MaxM with m/k + residual ≤ CapBase + CapPerLoss·p (the residual is
// resent, so the cap is on both), the lowest overhead m/k that meets Target
// (ties: lower residual); if none does, the lowest residual within the cap. Only
// when no rate keeps both within the cap (a cap below the loss rate) does it
// bound m/k alone. Classes:
//
//	Bulk:     Target 1e-3, cap 5 % + 2·p, MaxK 32   (1 %: RS(32+2), 6.25 %)
//	RealTime: Target 1e-4, cap 35 %,      MaxK 16   (2 %: RS(15+3), 20 %)
//
// For a block closed early with n < k sources, Rate.M[n] is the fewest repairs
// (at most M[k]) that meet the target for n sources.
//
// Bursts: the engine should spread a block's repairs over the usable paths
// (repair i on path i mod paths), never all behind one another on the path
// that just lost; the controller does not assume it. It assumes the block's
// symbols meet the loss process `Spread` packets apart (Controller.Spread,
// default 1: back to back, the worst case), so measured bursts translate into
// more repairs; an engine that interleaves (e.g. sends the repairs of block b
// only after those of b-1 went out on other paths) may pass its depth.
//
// # Engine wiring (not done here)
//
//   - Sender, per peer under p.mu: after sealing a DATA frame, Encoder.Add(id,
//     frame bytes, now); for each of the returned n repairs, AppendRepair into a
//     fresh datagram (inner header + frame, ack-eliciting, not counted as a
//     DATA packet for flow sequencing) and send it on a path picked for it
//     (spread as above), before the next Add/Tick. Timer tick: Encoder.Tick(now)
//     (Deadline says when). Do not feed retransmissions or redundant copies.
//     Set EncoderConfig.MaxFrame to the room one frame has in a datagram, and
//     keep the TUN MTU ≥ 11 + 7 + 2 bytes below the DATA room, else full-size
//     packets go unprotected.
//   - Rate: Controller.Observe(lost) for each DATA datagram the path Senders
//     declare acked or lost (session-wide); every tick (or on change)
//     Encoder.SetRate(Controller.Rate()). Rebuilt packets do not reach the path
//     Senders, so congestion control still sees every loss.
//   - Receiver, under p.mu: Decoder.AddSource(id, frame bytes) for each DATA
//     frame received (before reorder.Push); on FrameRepair, ParseRepair then
//     AddRepair(&r, now); push every Rebuilt payload through deliver (source
//     check, reorder) as if received. Tick(now) on the timer. Create the Decoder
//     on the first repair; Reset both ends in resetFlows (fresh session). Count
//     Stats in the status/metrics.
//   - wire.NextFrame does not know FrameRepair: parse it with ParseRepair (which
//     returns the rest of the plaintext) before calling NextFrame.
//
// # Limits
//
//   - k ≤ 32, m ≤ 8; payloads ≤ MaxPayload (1509 by default, the same or larger
//     at the receiver); longer ones are sent unprotected.
//   - A repair is about as long as the longest payload of its block plus
//     13 + 7·nruns bytes.
//   - The decoder remembers SourceSlots (1024) payloads first in, first out: they
//     must cover rate × (MaxDelay + path delay spread), else sources are
//     counted missing (rebuilt again, or the block is wrongly unrecoverable).
//     Memory: (SourceSlots + Blocks·8) × (MaxPayload+2) ≈ 2 MB per peer by
//     default; the encoder ≈ 60 KB.
//   - Reconstruction allocates inside reedsolomon (≈ 90 small objects for
//     RS(20+2): the k×k inverse is built afresh, because its inversion cache
//     grows with every loss pattern seen and so is off). Only blocks that lost
//     something pay it; encoding and loss-free decoding allocate nothing.
//   - Unrecoverable counts blocks the decoder heard of (at least one repair
//     arrived); a block that lost all its repairs is invisible to it.
//   - Rebuilt payloads are counted by the engine's reorder buffer like any
//     other; one that arrives after the buffer gave up its gap is dropped
//     there as late.
package fec
