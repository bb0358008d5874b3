// Package tuntest is an in-memory TUN device implementing tundev.Device for
// engine tests: a test plays the applications behind the TUN by injecting
// packets (Inject) that the engine then Reads, and observes what the engine
// Writes on Outbound (or with Recv).
//
// It behaves like the real device where the engine could notice: packets
// land at buffer offset, one Read returns at most BatchSize packets and
// blocks for the first one only, Close unblocks Read with os.ErrClosed.
// Written packets are copied, and dropped (counted in Stats) rather than
// blocking the engine when nobody drains Outbound, as the kernel would drop
// them; Inject blocks when the engine does not read, so a test never loses
// what it sends.
package tuntest
