// Package recovery is braid's loss recovery inside the tunnel: it keeps the payload
// of every DATA datagram until the path acknowledges it, and when the path's
// loss detector (path.Sender, RFC 9002 thresholds) declares it lost, decides
// whether to send it again — on the path where it is expected to arrive first,
// often not the one that lost it — or to give it up and tell the receiver so.
//
// The package is pure logic (no I/O, no clock; time is passed in) and allocates
// only when a path is first seen. The engine owns the buffers; the Store holds
// them by (path id, path packet number) and hands them back on ack, loss or
// path removal.
//
// # The numbers
//
// A receiver waits for a gap in a TCP flow (reorder.Recoverable) at most
//
//	Hold = TimeThreshold × max SRTT + AckDelay + Tick + min one-way delay + Margin
//
// capped at MaxHold: the loss detection time of the slowest path (RFC 9002's time
// threshold, the receiver's delayed-ack allowance and the engine's timer tick),
// then one trip over the fastest path, plus a margin. Both ends compute it from
// the round-trip times their own path estimators measure (an RTT is the same in
// both directions), so they agree without exchanging it. The sender resends a
// lost payload only if it can arrive before the receiver stops waiting:
//
//	now + oneWay(resend path) + size/rate ≤ Deadline = firstSent + oneWay(first path) + Hold
//
// where oneWay is half the path's minimum RTT plus its measured queueing delay.
// Otherwise the payload is given up, and the receiver is told with a GIVEUP frame
// (flow, flow seq), so the gap is released at once instead of after the hold.
//
// Resends are limited by a Budget: a token bucket earning Budget × every data
// byte sent, at most BudgetBurst bytes, each resend spending its size. A path
// that dies declares its whole window lost at once; the burst covers that once,
// but a path that keeps losing cannot make the tunnel send its traffic twice.
// Each payload is sent at most 1 + MaxResends times.
package recovery
