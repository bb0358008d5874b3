// Package linkemu is braid's userspace link emulator: it forwards Ethernet
// frames between two interfaces of a "link node" namespace and applies, per
// direction, what `tc qdisc … netem` would — rate, queue limit, delay,
// jitter and loss (uniform or Gilbert-Elliott). The lab needs it because
// this machine's kernel has no netem; where netem exists the lab may use
// either, and the model below says where the two differ.
//
// # Use
//
// Build h1 — node — h2 with two veth pairs, turn the offloads off on the
// hosts' ends (DisableOffloads), then Start a Link on the node's two ends.
// The node needs no addresses and no forwarding: the hosts see one
// Ethernet segment with a long, narrow, lossy wire in the middle. SetShape
// changes a direction while traffic flows; Stats reports what each
// direction did; Close the Link before the namespace (its sockets keep the
// namespace alive).
//
// # Model
//
// A frame read from A (for A→B) goes through, in order:
//
//  1. Loss. The direction's LossModel judges the frame; a lost frame is
//     gone before it takes queue space or line time. This is netem's order
//     and the paper's testbed; it is not how a lossy radio link spends its
//     airtime.
//  2. Queue. A drop-tail FIFO in front of the line, limited in bytes and/or
//     frames (Shape.QueueBytes/QueuePackets, default DefaultQueuePackets
//     when a rate is set). A frame counts until its last bit is serialized.
//  3. Serialization at Shape.Rate, counting the Ethernet frame as the
//     socket sees it (header + payload; no preamble, FCS or inter-frame
//     gap — netem's rate counts the same bytes). Remainders below a
//     nanosecond carry over, so long runs keep the exact rate.
//  4. Propagation: Shape.Delay plus jitter (uniform ±Jitter or normal with
//     σ = Jitter), drawn per frame. Frames leave in order of their send
//     times, so jitter can reorder them; without jitter order is kept.
//
// Loss and jitter draw from seeded PCG streams (Shape.Seed), separate for
// loss and jitter and for the two directions: a run is reproducible frame
// for frame given the same frames, and the loss decisions do not depend on
// whether jitter is on. The pure parts (GilbertElliott, Uniform, Serializer
// and the per-direction pipe) have no I/O and are tested with hand-computed
// sequences; the Gilbert-Elliott chain follows netem's `loss gemodel p r
// 1-h 1-k` exactly, including the order of its two random draws (see
// GilbertElliott).
//
// Differences from netem worth knowing when comparing numbers:
//
//   - netem's `limit` counts every packet inside the qdisc, the delay line
//     included; QueuePackets counts only frames waiting for or in
//     serialization. A netem limit L at rate R and delay D corresponds to
//     about L - R·D/size here.
//   - netem with a rate queues packets behind the last one's send time
//     after adding the (jittered) delay, so with rate and jitter it does
//     not reorder; here jitter is applied after serialization and can
//     reorder at any rate. Without jitter the two give the same send
//     times: max(arrival + delay, previous frame's send time) + size/rate
//     either way.
//   - Not emulated: duplication, corruption, netem's gap/reorder
//     probability, correlated loss or delay, the 4-state loss model,
//     slotting, ECN marking, delay distribution tables other than uniform
//     and normal.
//
// # I/O and timing
//
// One AF_PACKET socket per interface (ETH_P_ALL, bound to the interface,
// PACKET_IGNORE_OUTGOING so the emulator never reads back what it or the
// node's stack transmits), created in the link node with netns.Do; the
// goroutines run anywhere. Each direction has a reader goroutine (one
// recvfrom per frame through Go's netpoller, into pooled buffers) and a
// sender goroutine that sleeps on a timerfd until the earliest scheduled
// frame is due and writes everything due. Go's own timers are not precise
// enough: when the process is idle the runtime sleeps in epoll with whole
// millisecond timeouts. The timerfd is a kernel hrtimer read through the
// netpoller, so a waiting sender holds no thread. The clock is Go's
// monotonic clock (CLOCK_MONOTONIC, the timerfd's clock). Per frame the
// forwarding path makes no heap allocations once the buffer pool has grown
// to the working set.
//
// # Limits
//
// Userspace scheduling sets the precision. On an idle two-core machine
// frames leave 30–60 µs after their scheduled time on average (p99 under
// 0.3 ms); with the CPUs saturated by other work, milliseconds at times.
// Stats.Lateness measures this for every frame, and an experiment should
// check it rather than trust the settings. The mean bias is small against
// the delays the lab uses (at 10 Mbit/s and 20 ms the measured mean added
// delay is within a few tens of µs of the setting), but sub-100 µs delays
// and rates where frames are a few µs apart are beyond it. Frames also
// wait in the kernel's socket queue before the reader sees them, which
// the statistics do not include. Throughput is one syscall per frame each
// way: about 300,000 frames/s per direction on this machine, enough for
// 1 Gbit/s at full-size frames but not for small-packet floods.
//
// Offloads: a veth hands super-frames (TSO/GSO/GRO) and frames with
// unfinished checksums (TX checksum offload) to AF_PACKET as they are, and
// re-injected through a packet socket they are wrong on the far side (too
// big for the MTU, or dropped for a bad checksum). Start turns the offloads
// off on A and B with the ethtool ioctl; the hosts' ends must be treated
// the same way (DisableOffloads), since their features decide what enters
// the veth. Oversized frames that still arrive are counted
// (Stats.DroppedOversize), not forwarded.
package linkemu
