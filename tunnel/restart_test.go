package tunnel

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn/conntest"
	"github.com/braid-vpn/braid/tundev/tuntest"
)

// A server that crashes and comes back starts its session with the client afresh:
// new path ids, sequence numbers from 1. The client must forget what it received
// under the old session, or it takes the new datagrams for old duplicates, never
// acks them, and the server's paths never come up.
func TestEngineServerRestart(t *testing.T) {
	r := newRig(t, rigOpts{tunables: func(tn *Tunables) { tn.SessionDeadAfter = 300 * time.Millisecond }})
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	// Enough traffic that the client's receive state is far ahead of a new
	// session's numbers (acks cover 64 below the largest).
	const n = 400
	for i := 0; i < n; i++ {
		r.srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, fmt.Appendf(nil, "before %d", i)))
	}
	recvN(t, r.cliATun, n, 5*time.Second)

	direct := [][2]netip.Addr{{srvAddr1.Addr(), cliAddr1}, {srvAddr2.Addr(), cliAddr2}}
	for _, pair := range direct { // the crash: not even a CLOSE gets out
		r.net.SetLink(pair[0], pair[1], conntest.LinkOptions{Down: true})
	}
	r.srv.Close()
	for _, pair := range direct {
		r.net.SetLink(pair[0], pair[1], conntest.LinkOptions{})
	}
	cfg := r.srv.cfg
	cfg.TUN = tuntest.New(1380)
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Start()
	defer again.Close()
	waitUsable(t, again, "a", 2)
	for i := 0; i < 20; i++ {
		cfg.TUN.(*tuntest.Device).Inject(udp4(inSrv, inCliA, 5000, 4000, fmt.Appendf(nil, "after %d", i)))
	}
	got := recvN(t, r.cliATun, 20, 3*time.Second)
	for i, p := range got {
		if want := fmt.Sprintf("after %d", i); string(p[28:]) != want {
			t.Fatalf("packet %d = %q, want %q", i, p[28:], want)
		}
	}
}
