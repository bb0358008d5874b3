// Package linkemu is braid's userspace link emulator (docs/lab.md, "Link
// emulator"). Per direction a frame is judged by the loss model (uniform or
// Gilbert-Elliott) before it takes queue space or line time, as in netem,
// and by a Schedule's loss bursts; then queued drop-tail and serialized at
// the rate (Serializer, or a shared Medium) or in the delivery
// opportunities of a Mahimahi Trace; then sent after the delay (or the
// Schedule's at departure) plus jitter, in order of send time, so jitter
// can reorder. Loss and jitter draw from separate PCG streams per
// direction, so the loss decisions do not depend on whether jitter is on.
//
// Differences from netem: netem's `limit` also counts the delay line (a
// limit L at rate R and delay D is about L - R·D/size here); netem with a
// rate does not reorder under jitter (without jitter both send at
// max(arrival + delay, previous send) + size/rate). Not emulated:
// duplication, corruption, reorder gaps, correlated loss or delay, the
// 4-state loss model, slotting, ECN, delay tables other than uniform and
// normal.
//
// Each direction has a reader goroutine (one recvfrom per frame on an
// AF_PACKET socket that ignores what the node itself sends) and a sender
// that sleeps on a timerfd, an hrtimer (Go's timers wake up to a millisecond
// late when the process is idle); once the buffer pool has grown, forwarding
// allocates nothing. On an idle two-core machine frames leave 30–60 µs after
// their scheduled time (p99 under 0.3 ms), milliseconds under CPU
// contention: check Stats.Lateness rather than trust the settings. About
// 300,000 frames/s per direction.
//
// Offloads: a veth hands AF_PACKET super-frames (TSO/GSO/GRO) and frames
// with unfinished checksums, which re-injected are too big for the MTU or
// dropped for a bad checksum. Start turns the offloads off on A and B
// (through the kernel's ethtool interface, no program needed); the peers
// decide what enters the veths, so whoever builds the topology turns theirs
// off too (DisableOffloads). Oversized frames that still arrive are counted
// (Stats.DroppedOversize), not forwarded. Close a Link before its namespace: its sockets keep the
// namespace alive.
package linkemu
