package tunnel

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// A black hole that opens in the middle of a session (server → client on link 2
// now drops datagrams above 1300 bytes): the server notices from the data, finds
// the smaller size, and the stream goes on over both paths.
func TestEngineBlackHoleMidSession(t *testing.T) {
	// Round robin, so that the large datagrams certainly use both paths.
	r := newRig(t, rigOpts{params: Params{Scheduler: "roundrobin"}})
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	r.net.SetFilter(func(from, to netip.AddrPort, b []byte) bool {
		return !(from.Addr() == srvAddr2.Addr() && to.Addr() == cliAddr2 && len(b) > 1300)
	})
	var gap atomic.Int64
	gap.Store(int64(time.Millisecond))
	r.streamDown(t, 1320, &gap)
	go func() {
		for range r.cliATun.Outbound() {
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mtu := 0
		for _, pa := range r.srv.Status().Peers[0].Paths {
			if pa.Remote[:10] == cliAddr2.String() {
				mtu = pa.MTU
			}
		}
		if mtu > 0 && mtu <= 1300 && mtu > 1300-8 { // the search's step

			t.Logf("server found %d on the path that became a black hole", mtu)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server's size for the black-holed path still %d after 5 s", mtu)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The clamp counts a path whose search is still running at what it has
// confirmed so far (the base at first), not as if it carried everything.
func TestLeastSize(t *testing.T) {
	for _, tc := range []struct {
		paths   []pathSize
		least   int
		settled bool
	}{
		{nil, 0, true},
		{[]pathSize{{1472, true}, {1472, true}}, 1472, true},
		// Path 2 still searching with only its base confirmed: the base.
		{[]pathSize{{1472, true}, {1252, false}}, 1252, false},
		{[]pathSize{{1472, true}, {1256, true}}, 1256, true},
		{[]pathSize{{1300, false}, {1472, true}}, 1300, false},
	} {
		least, settled := leastSize(tc.paths)
		if least != tc.least || settled != tc.settled {
			t.Errorf("%v: %d, %v; want %d, %v", tc.paths, least, settled, tc.least, tc.settled)
		}
	}
}
