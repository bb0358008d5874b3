package tunnel

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn/conntest"
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
		deadline := time.After(d)
		for {
			select {
			case pkt := <-r.srvTun.Outbound():
				if len(pkt) >= 40 && pkt[9] == 6 {
					got = append(got, binary.BigEndian.Uint32(pkt[24:]))
				}
			case <-deadline:
				return
			}
		}
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

// With 4 % loss on both paths, recovery delivers the segments of a TCP flow in
// order, and the status shows the resends; without it segments go missing.
// Recovery is bounded in time (a resend that cannot arrive before the receiver
// stops waiting is given up and announced), so with random loss a segment
// whose resend is lost too may be given up: at most 1 % may be missing, and
// only as many as the sender counts as given up (residual).
func TestEngineRecoversLoss(t *testing.T) {
	const n = 600
	r := lossyRig(t, Params{}, 0.04)
	got := sendTCPFlow(t, r, n)
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("recovery on: delivery %d is segment %d after %d (out of order)", i, got[i], got[i-1])
		}
	}
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

	off := lossyRig(t, Params{Recovery: "off"}, 0.04)
	if got := sendTCPFlow(t, off, n); len(got) > n-5 {
		t.Errorf("recovery off: %d of %d delivered; the loss should show (is the link lossy?)", len(got), n)
	}
}
