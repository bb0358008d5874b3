// Package pmtu implements a per-path datagram-size search in the spirit of
// Datagram Packetization Layer PMTU Discovery (DPLPMTUD, RFC 8899).
//
// A Search is a pure state machine: it does no I/O, owns no clock (every
// call takes the current time), never allocates after New and is fully
// deterministic. The engine drives it:
//
//   - on every timer tick it calls NextProbe; when that returns a size n > 0
//     it sends one padded, ack-eliciting probe datagram whose UDP payload is
//     exactly n bytes and calls OnProbeSent(n, now);
//   - when the path's loss detector decides about that probe it calls
//     OnProbeAcked or OnProbeLost;
//   - when ordinary data datagrams larger than Base are lost while smaller
//     ones are acknowledged it calls OnLargeLoss (black hole suspicion);
//   - it never sends a datagram larger than Size().
//
// # States
//
// The states follow RFC 8899 section 5.2:
//
//	"base"      Size() == Base, no search started yet (after New or after a
//	            black-hole restart). The next NextProbe starts the search.
//	"searching" probing sizes above Size(); one probe outstanding at a time.
//	"complete"  the search converged; Size() is in use. If Size() < Max the
//	            raise timer (RaiseInterval, RFC 8899 PMTU_RAISE_TIMER) is
//	            armed and the search resumes when it expires.
//	"error"     OnLargeLoss kept arriving although Size() was already Base.
//	            No probes are sent; Size() stays Base. After RaiseInterval the
//	            search restarts from "base".
//
// # BASE is assumed, not probed
//
// RFC 8899 confirms BASE_PLPMTU with a probe before searching. Here Base is
// taken as working without a probe, because datagrams of about Base bytes
// already carry the session's handshake and traffic: if they did not get
// through, the path would not be up. A probe of a size at or below Size() is
// therefore never sent, and Size() never drops below Base. The ERROR state is
// entered only on repeated black-hole reports while already at Base
// (MaxProbes reports, each outside the restart hold-off).
//
// # Search order
//
// The first probe is Max (optimistic). Most paths carry the full size
// (typically 1500-byte Ethernet MTU end to end), so one acknowledged probe
// finishes the search in a single round trip, instead of the
// log2((Max-Base)/Step) round trips a binary search would always need (about
// 5 for 1200..1472 with Step 8). When Max does not
// get through, the cost is MaxProbes lost probes, and the failure supplies an
// exact upper bound for the binary search that follows.
//
// The search keeps lo (largest acknowledged size, equal to Size()) and hi
// (smallest size that failed MaxProbes times). While hi-lo > Step it probes
// mid = (lo+hi)/2 rounded down to a multiple of 4 (kept strictly between lo
// and hi). An acknowledged probe sets lo = mid (and Size() immediately grows,
// so the engine can use it while the search goes on); MaxProbes losses of the
// same size set hi = mid. When hi-lo <= Step the search completes at lo. A
// single lost probe does not fail a size: the same size is probed again on
// the very next NextProbe (the loss decision already took about an RTT), and
// only MaxProbes losses in a row count as a failure.
//
// A probe that is neither acknowledged nor declared lost within ProbeTimeout
// (for example because the path went down) is treated as lost. If its
// acknowledgement still arrives later it is honoured: an acknowledgement
// proves the size got through.
//
// # Raise
//
// After completing below Max, the search waits RaiseInterval and then probes
// Max again, keeping the confirmed Size() meanwhile. If Max is acknowledged,
// Size() becomes Max; otherwise a binary search between Size() and Max runs
// again, finding any intermediate improvement. The old upper bound is
// forgotten on purpose: the path may have changed.
//
// # Black holes
//
// OnLargeLoss with Size() > Base means datagrams we were told work are now
// being dropped: Size() falls back to Base at once and the search starts
// again from "base" (Max first). To keep a lossy path from flapping, a report
// that arrives within RestartHoldoff of the last acted-on report is only
// counted; reports delivered shortly after a restart also usually describe
// datagrams sent before it. A probe outstanding at a restart (or when the
// error state is entered) becomes stale: it keeps the single probe slot until
// it is decided or times out, so two probes are never in flight, but its
// result is only counted and never raises Size().
package pmtu
