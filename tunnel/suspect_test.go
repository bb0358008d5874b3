package tunnel

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn/conntest"
	"github.com/braid-vpn/braid/internal/testenv"
)

// A path that goes silent while traffic flows leaves the schedule about one probe
// timeout after its first unanswered packet (hideSuspects), not only when it is
// Down 200–350 ms later. The stream is of small packets, as a receiver's TCP acks:
// they never fill the silent path's congestion window, so until Down the
// scheduler would keep giving it its share of them, and an inner TCP sender
// whose acks are lost waits for its retransmission timeout.
func TestEngineSuspectPathLeavesSchedule(t *testing.T) {
	testenv.SkipIfEmulated(t, "times wall-clock behaviour: counts packets sent in the 200–350 ms before Down")
	r := newRig(t, rigOpts{})
	r.shapePaths(conntest.LinkOptions{Rate: 5e6, Queue: 64 << 10})
	waitUsable(t, r.cliA, "server", 2)
	go func() {
		for range r.srvTun.Outbound() {
		}
	}()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	defer func() { close(stop); wg.Wait() }()
	streamSized(r.cliATun, inCliA, inSrv, 500*time.Microsecond, 64, stop, &wg)
	time.Sleep(500 * time.Millisecond)

	txOn2 := func() (pkts uint64, state string) {
		for _, pa := range r.cliA.Status().Peers[0].Paths {
			if lp, err := netip.ParseAddrPort(pa.Local); err == nil && lp.Addr() == cliAddr2 && pa.Remote == srvAddr2.String() {
				return pa.TxPackets, pa.State
			}
		}
		t.Fatal("client a has no path from its second address")
		return 0, ""
	}
	atCut, _ := txOn2()
	if p1, p2 := pathTx(r.cliA.Status()); p2 < p1/4 {
		t.Fatalf("before the cut path 2 carried %d bytes against path 1's %d: too little for the test to mean anything", p2, p1)
	}
	cut := time.Now()
	r.net.SetLink(cliAddr2, srvAddr2.Addr(), conntest.LinkOptions{Down: true})
	r.net.SetLink(srvAddr2.Addr(), cliAddr2, conntest.LinkOptions{Down: true})
	for {
		n, st := txOn2()
		if st == "down" {
			t.Logf("path 2 down %v after the cut; %d datagrams sent on it since the cut", time.Since(cut).Round(time.Millisecond), n-atCut)
			if n-atCut > 80 {
				t.Errorf("%d datagrams went on the silent path between the cut and Down, want ≤ 80", n-atCut)
			}
			return
		}
		if time.Since(cut) > 2*time.Second {
			t.Fatalf("path 2 still %q 2 s after the cut", st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
