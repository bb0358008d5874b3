package tunnel

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn/conntest"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/fec"
	"github.com/braid-vpn/braid/internal/testenv"
)

// lossyRig is the engine rig with both client paths losing the fraction loss
// of their datagrams in each direction, 5 and 15 ms one way.
func lossyRig(t *testing.T, params Params, loss float64) *rig {
	r := newRig(t, rigOpts{params: params})
	r.net.SetLink(cliAddr1, srvAddr1.Addr(), conntest.LinkOptions{Delay: 5 * time.Millisecond, Loss: loss})
	r.net.SetLink(srvAddr1.Addr(), cliAddr1, conntest.LinkOptions{Delay: 5 * time.Millisecond, Loss: loss})
	r.net.SetLink(cliAddr2, srvAddr2.Addr(), conntest.LinkOptions{Delay: 15 * time.Millisecond, Loss: loss})
	r.net.SetLink(srvAddr2.Addr(), cliAddr2, conntest.LinkOptions{Delay: 15 * time.Millisecond, Loss: loss})
	return r
}

// drainSrvTUN reads what the server's TUN gets for d and passes the sequence
// number of each TCP segment to seen.
func drainSrvTUN(r *rig, d time.Duration, seen func(seq uint32)) {
	deadline := time.After(d)
	for {
		select {
		case pkt := <-r.srvTun.Outbound():
			if len(pkt) >= 40 && pkt[9] == 6 {
				seen(binary.BigEndian.Uint32(pkt[24:]))
			}
		case <-deadline:
			return
		}
	}
}

// sendTCPFlow sends n segments of one TCP flow client → server, paced so that
// no queue overflows, and returns the sequence numbers the server's TUN got, in
// the order it got them.
func sendTCPFlow(t *testing.T, r *rig, n int) []uint32 {
	t.Helper()
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	payload := make([]byte, 1000)
	var got []uint32
	collect := func(d time.Duration) {
		drainSrvTUN(r, d, func(seq uint32) { got = append(got, seq) })
	}
	for i := 0; i < n; i++ {
		r.cliATun.Inject(tcp4(inCliA, inSrv, 4000, 80, uint32(i), payload))
		if i%20 == 19 {
			collect(10 * time.Millisecond)
		}
	}
	collect(1500 * time.Millisecond)
	return got
}

// checkOrder fails t unless the segments in got arrived in order, but for as
// many as the server's reorder buffer counted late. A segment whose resend is
// lost too can outlast the hold (on a loaded machine the timers run late): its
// gap is given up and the segment is delivered when it comes, behind its
// successors, and counted late. Anything else behind a successor is a bug.
func checkOrder(t *testing.T, r *rig, got []uint32) {
	t.Helper()
	late := r.srv.Status().Peers[0].ReorderStats.Late
	var behind uint64
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			if behind++; behind > late {
				t.Fatalf("delivery %d is segment %d after %d: out of order (%d behind a successor, %d counted late)", i, got[i], got[i-1], behind, late)
			}
		}
	}
}

// With 4 % loss on both paths, recovery delivers the segments of a TCP flow in
// order, and the status shows the resends; without it segments go missing.
// Recovery is bounded in time (a resend that cannot arrive before the receiver
// stops waiting is given up and announced), so with random loss a segment
// whose resend is lost too may be given up: at most 1 % may be missing, and
// only as many as the sender counts as given up (residual).
func TestEngineRecoversLoss(t *testing.T) {
	testenv.SkipIfEmulated(t, "times wall-clock behaviour: recovery gives up resends that miss their deadline, and an emulated CPU missed enough to leave 10 of 600 segments out where ≤ 6 may be (under qemu-mips on a busy host)")
	const n = 600
	r := lossyRig(t, Params{}, 0.04)
	got := sendTCPFlow(t, r, n)
	checkOrder(t, r, got)
	st := r.cliA.Status().Peers[0]
	if st.Recovery != "retransmit+fec" || st.RecoveryStats == nil {
		t.Fatalf("status: recovery %q %+v", st.Recovery, st.RecoveryStats)
	}
	var resent, recovered, residual uint64
	for _, pa := range st.Paths {
		if pa.Recovery != nil {
			resent += pa.Recovery.Retransmitted
			recovered += pa.Recovery.Recovered
			residual += pa.Recovery.Residual
		}
	}
	if missing := n - len(got); missing > n/100 || uint64(missing) > residual {
		t.Errorf("recovery on: %d of %d segments missing, %d given up by the sender (want ≤ %d, each one given up)", missing, n, residual, n/100)
	}
	// About 4 % of 600 data datagrams are lost on the way out.
	if resent < 5 || recovered < 5 {
		t.Errorf("resent %d, recovered %d: recovery did not do the work", resent, recovered)
	}
	t.Logf("resent %d, recovered %d, hold %.1f ms, fec %q, rebuilt at the server %d", resent, recovered, st.RecoveryStats.HoldMs,
		st.RecoveryStats.FEC, r.srv.Status().Peers[0].RecoveryStats.Rebuilt)
	// A TCP flow's resends and repairs are bulk overhead; a UDP flow's after it
	// are the latency-sensitive flows' (counted apart).
	retx, retxLat, rep, repLat := recoveryBytes(st)
	if retx == 0 || retxLat != 0 || repLat != 0 {
		t.Errorf("TCP flow: resent %d bytes (%d latency-sensitive), repairs %d (%d latency-sensitive); want only bulk", retx, retxLat, rep, repLat)
	}
	for i := range n {
		r.cliATun.Inject(udp4(inCliA, inSrv, 5000, 5000, make([]byte, 200)))
		if i%20 == 19 {
			drainSrvTUN(r, 10*time.Millisecond, func(uint32) {})
		}
	}
	drainSrvTUN(r, time.Second, func(uint32) {})
	retx2, retxLat2, rep2, repLat2 := recoveryBytes(r.cliA.Status().Peers[0])
	if retxLat2 == 0 || retxLat2 != retx2-retx || repLat2 == 0 || repLat2 != rep2-rep {
		t.Errorf("UDP flow: resent %d more bytes, %d latency-sensitive; %d more repair bytes, %d latency-sensitive; want all of them, > 0",
			retx2-retx, retxLat2, rep2-rep, repLat2)
	}

	off := lossyRig(t, Params{Recovery: "off"}, 0.04)
	if got := sendTCPFlow(t, off, n); len(got) > n-5 {
		t.Errorf("recovery off: %d of %d delivered; the loss should show (is the link lossy?)", len(got), n)
	}
}

// recoveryBytes sums the paths' resent and repair bytes and the latency-sensitive part of each.
func recoveryBytes(st control.PeerStatus) (retx, retxLat, rep, repLat uint64) {
	for _, pa := range st.Paths {
		if pa.Recovery != nil {
			retx += pa.Recovery.RetransmittedBytes
			retxLat += pa.Recovery.RetransmittedLatencyBytes
			rep += pa.Recovery.RepairSentBytes
			repLat += pa.Recovery.RepairSentLatencyBytes
		}
	}
	return retx, retxLat, rep, repLat
}

// A TCP flow's pure acks are not held behind its gaps (reorder.PushUnordered):
// while a lost segment waits for its resend, the acks sent after it reach the
// server's TUN at once, ahead of the data held behind the gap, each once; the
// data still arrives in order, but for segments counted late.
func TestEnginePureAcksPassGaps(t *testing.T) {
	testenv.SkipIfEmulated(t, "times wall-clock behaviour: the acks must reach the TUN within 5 ms collection windows while data waits for resends, which an emulated CPU missed (198 of 300 under qemu-mips on a busy host)")
	const n = 300
	r := lossyRig(t, Params{}, 0.08)
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	// Each step sends data segment i, then a pure ack whose sequence field says
	// which step it belongs to (i | 1<<31).
	type got struct {
		step uint32
		ack  bool
	}
	var order []got
	collect := func(d time.Duration) {
		drainSrvTUN(r, d, func(seq uint32) {
			order = append(order, got{step: seq &^ (1 << 31), ack: seq&(1<<31) != 0})
		})
	}
	payload := make([]byte, 1000)
	for i := uint32(0); i < n; i++ {
		r.cliATun.Inject(tcp4(inCliA, inSrv, 4000, 80, i, payload))
		ack := tcp4(inCliA, inSrv, 4000, 80, i|1<<31, nil)
		ack[33] = 0x10 // ACK
		r.cliATun.Inject(ack)
		if i%10 == 9 {
			collect(5 * time.Millisecond)
		}
	}
	collect(1500 * time.Millisecond)

	var data []uint32
	var lastData int64 = -1
	acks := map[uint32]bool{}
	overtook := 0
	for _, g := range order {
		if !g.ack {
			data = append(data, g.step)
			lastData = max(lastData, int64(g.step))
			continue
		}
		if acks[g.step] {
			t.Fatalf("ack of step %d delivered twice", g.step)
		}
		acks[g.step] = true
		if int64(g.step) > lastData {
			// Sent after data segment g.step, delivered before it.
			overtook++
		}
	}
	if overtook == 0 {
		t.Errorf("no pure ack overtook a data segment held behind a gap (%d deliveries, %d acks): acks wait for gaps", len(order), len(acks))
	}
	if len(acks) < n*8/10 {
		t.Errorf("%d of %d acks delivered", len(acks), n)
	}
	checkOrder(t, r, data)
	t.Logf("%d of %d acks overtook held data; %d acks, data up to %d", overtook, n, len(acks), lastData)
}

// A lost pure ack is given up at once, never resent: the acks after it say all
// it said.
func TestEngineGivesUpLostPureAcks(t *testing.T) {
	const n = 300
	r := lossyRig(t, Params{}, 0.08)
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	delivered := 0
	collect := func(d time.Duration) { drainSrvTUN(r, d, func(uint32) { delivered++ }) }
	for i := uint32(0); i < n; i++ {
		ack := tcp4(inCliA, inSrv, 4000, 80, i, nil)
		ack[33] = 0x10
		r.cliATun.Inject(ack)
		if i%10 == 9 {
			collect(5 * time.Millisecond)
		}
	}
	collect(time.Second)
	var resent, residual uint64
	for _, pa := range r.cliA.Status().Peers[0].Paths {
		if pa.Recovery != nil {
			resent += pa.Recovery.Retransmitted
			residual += pa.Recovery.Residual
		}
	}
	if resent != 0 || residual == 0 {
		t.Errorf("pure acks: %d resent, %d given up; want none resent, the lost ones given up", resent, residual)
	}
	if delivered < n*8/10 || delivered > n {
		t.Errorf("%d of %d acks delivered", delivered, n)
	}
	t.Logf("%d of %d delivered, %d given up", delivered, n, residual)
}

// When a FEC block loses more sources than it had repairs, the receiver cannot
// rebuild them, so the sender resends them at once rather than waiting for a
// REBUILT report (status: early_resends); the flow still arrives in order.
func TestEngineResendsUnrebuildableBlocksEarly(t *testing.T) {
	testenv.SkipIfEmulated(t, "times wall-clock behaviour: 97 % of an 800-packet flow must arrive within its deadlines, which an emulated CPU missed (442–712 of 800 under qemu on a busy host)")
	const n = 800
	r := lossyRig(t, Params{}, 0.12)
	waitUsable(t, r.cliA, "server", 2)
	// Repairs capped near 3 % of the payload (32+1): at 12 % loss most blocks
	// lose more sources than their one repair.
	p := r.cliA.server
	p.mu.Lock()
	if p.fecEnc == nil {
		p.mu.Unlock()
		t.Fatal("no FEC encoder with recovery auto")
	}
	p.fecCtl.Policy = fec.Policy{Target: 1e-3, MinLoss: 1e-3, MaxK: fec.MaxK, CapBase: 0.035}
	p.mu.Unlock()
	got := sendTCPFlow(t, r, n)
	checkOrder(t, r, got)
	rs := r.cliA.Status().Peers[0].RecoveryStats
	if rs == nil {
		t.Fatal("no recovery status")
	}
	if rs.EarlyResends == 0 {
		t.Errorf("no early resend at 12 %% loss (FEC %q): blocks beyond their repairs still wait for a report", rs.FEC)
	}
	if len(got) < n*97/100 {
		t.Errorf("%d of %d delivered", len(got), n)
	}
	t.Logf("%d of %d delivered; %d resent early; FEC %s", len(got), n, rs.EarlyResends, rs.FEC)
}

// A path whose capacity collapses under load (a cellular fade: here from
// unlimited to 100 kbit/s, 80 ms per segment) strands the segments it holds
// for seconds. rescueLate resends them on the other path while they are
// still in flight, so half a second later every segment has reached the
// server's TUN, long before the stranded copies would — but for those the
// client's queue dropped on purpose (CoDel, the queue bounds: the inner
// TCP's congestion signal, not a loss of the paths) — and the path counts
// them as rescued.
func TestEngineRescuesStrandedPayloads(t *testing.T) {
	const n, fadeAt = 300, 100
	r := lossyRig(t, Params{}, 0)
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	payload := make([]byte, 1000)
	delivered := map[uint32]bool{}
	seen := func(seq uint32) { delivered[seq] = true }
	for i := range n {
		if i == fadeAt {
			r.net.SetLink(cliAddr1, srvAddr1.Addr(), conntest.LinkOptions{Delay: 5 * time.Millisecond, Rate: 100e3})
		}
		r.cliATun.Inject(tcp4(inCliA, inSrv, 4000, 80, uint32(i), payload))
		if i%20 == 19 {
			drainSrvTUN(r, 10*time.Millisecond, seen)
		}
	}
	drainSrvTUN(r, 500*time.Millisecond, seen)
	st := r.cliA.Status()
	var rescued uint64
	for _, pa := range st.Peers[0].Paths {
		if pa.Recovery != nil {
			rescued += pa.Recovery.Rescued
		}
	}
	dropped := st.Counters["drop_cc_queue_full"] + st.Counters["drop_cc_queue_expired"]
	if q := st.Peers[0].Queue; q != nil {
		dropped += q.Drops
	}
	var missing []int
	for i := range n {
		if !delivered[uint32(i)] {
			missing = append(missing, i)
		}
	}
	if uint64(len(missing)) > dropped || rescued == 0 {
		t.Errorf("after the fade: segments %v of %d missing half a second later, %d dropped by the client's queue, %d rescued; want none missing but those dropped, some rescued", missing, n, dropped, rescued)
	}
	t.Logf("rescued %d, %d missing, %d dropped by the queue", rescued, len(missing), dropped)
}
