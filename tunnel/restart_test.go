package tunnel

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn/conntest"
	"github.com/braid-vpn/braid/tundev/tuntest"
	"github.com/braid-vpn/braid/wire"
)

// A server that crashes and comes back starts its session with the client afresh:
// new path ids, sequence numbers from 1. The client must forget what it received
// under the old session, or it takes the new datagrams for old duplicates, never
// acks them, and the server's paths never come up.
func TestEngineServerRestart(t *testing.T) {
	r := newRig(t, rigOpts{tunables: func(tn *Tunables) { tn.SessionDeadAfter = 300 * time.Millisecond }})
	again, tun := r.crashServer(t, nil)
	waitUsable(t, again, "a", 2)
	r.checkDownstream(t, tun)
}

// The same with the first response of the restarted server lost: the retry must
// be answered "fresh" as well (an answered, unconfirmed handshake is no session).
func TestEngineServerRestartResponseLost(t *testing.T) {
	r := newRig(t, rigOpts{tunables: func(tn *Tunables) { tn.SessionDeadAfter = 300 * time.Millisecond }})
	var dropped atomic.Int32
	again, tun := r.crashServer(t, func() {
		r.net.SetFilter(func(from, to netip.AddrPort, b []byte) bool {
			return wire.MessageType(b) != wire.TypeHandshakeResp || dropped.Add(1) > 2 // both copies
		})
	})
	waitUsable(t, again, "a", 2)
	if dropped.Load() < 2 {
		t.Fatal("no response was dropped: the test did not test anything")
	}
	r.checkDownstream(t, tun)
}

// An initiation recorded before a restart and replayed to the restarted server
// (its timestamp is newer than the nothing the server remembers) must not leave
// the server half-way: the client's own handshake still starts the session afresh.
func TestEngineReplayedInitiationAfterRestart(t *testing.T) {
	var first atomic.Pointer[[]byte]
	r := newRig(t, rigOpts{
		tunables: func(tn *Tunables) { tn.SessionDeadAfter = 300 * time.Millisecond },
		links: func(n *conntest.Network) {
			n.Capture(func(from, to netip.AddrPort, b []byte) {
				if wire.MessageType(b) == wire.TypeHandshakeInit {
					c := append([]byte(nil), b...)
					first.CompareAndSwap(nil, &c)
				}
			})
		},
	})
	waitUsable(t, r.srv, "a", 2)
	r.net.Capture(nil)
	old := first.Load()
	if old == nil {
		t.Fatal("no initiation captured")
	}
	again, tun := r.crashServer(t, func() {})
	r.net.Inject(netip.AddrPortFrom(cliAddr1, 1), srvAddr1, *old)
	waitUsable(t, again, "a", 2)
	r.checkDownstream(t, tun)
}

// crashServer fills the client's receive state with traffic, then kills the
// server without a CLOSE and starts it again (with before() run just before the
// new one starts). It returns the new server and its TUN double.
func (r *rig) crashServer(t *testing.T, before func()) (*Engine, *tuntest.Device) {
	t.Helper()
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
	tun := tuntest.New(1380)
	cfg.TUN = tun
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before()
	}
	again.Start()
	t.Cleanup(func() { again.Close() })
	return again, tun
}

// checkDownstream sends 20 packets from the server's TUN and expects them in order
// at client A.
func (r *rig) checkDownstream(t *testing.T, srvTun *tuntest.Device) {
	t.Helper()
	for i := 0; i < 20; i++ {
		srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, fmt.Appendf(nil, "after %d", i)))
	}
	got := recvN(t, r.cliATun, 20, 3*time.Second)
	for i, p := range got {
		if want := fmt.Sprintf("after %d", i); string(p[28:]) != want {
			t.Fatalf("packet %d = %q, want %q", i, p[28:], want)
		}
	}
}

// A datagram of the old session withheld (by an on-path attacker, or late on a
// slow path) and delivered after the client restarted and started a fresh session
// must not be opened: the fresh session numbers its flows from 0 again, and an old
// packet taken in would take the place of the new session's first packet of its
// flow (which the reorder buffer would then drop as a duplicate). The server used
// to keep the old session's keys as the previous ones.
func TestEngineFreshSessionDropsOldKeys(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	var withheld atomic.Pointer[[]byte]
	var from atomic.Value
	r.net.SetFilter(func(f, to netip.AddrPort, b []byte) bool {
		if (f.Addr() == cliAddr1 || f.Addr() == cliAddr2) && wire.MessageType(b) == wire.TypeData && len(b) > 400 {
			c := append([]byte(nil), b...)
			if withheld.CompareAndSwap(nil, &c) {
				from.Store([2]netip.AddrPort{f, to})
				return false
			}
		}
		return true
	})
	r.cliATun.Inject(udp4(inCliA, inSrv, 4000, 5000, append([]byte("old "), make([]byte, 400)...)))
	for end := time.Now().Add(2 * time.Second); withheld.Load() == nil && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	r.net.SetFilter(nil)
	if withheld.Load() == nil {
		t.Fatal("no datagram withheld")
	}

	// The client crashes (no CLOSE gets out) and starts again: a fresh session.
	up := [][2]netip.Addr{{cliAddr1, srvAddr1.Addr()}, {cliAddr2, srvAddr2.Addr()}}
	for _, pair := range up {
		r.net.SetLink(pair[0], pair[1], conntest.LinkOptions{Down: true})
	}
	r.cliA.Close()
	for _, pair := range up {
		r.net.SetLink(pair[0], pair[1], conntest.LinkOptions{})
	}
	r.cliATun = tuntest.New(1380)
	cfg := r.cfgA
	cfg.TUN = r.cliATun
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Start()
	t.Cleanup(func() { again.Close() })
	waitUsable(t, again, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	for len(r.srvTun.Outbound()) > 0 {
		<-r.srvTun.Outbound()
	}

	ends := from.Load().([2]netip.AddrPort)
	before := r.srv.Drops()
	r.net.Inject(ends[0], ends[1], *withheld.Load())
	time.Sleep(50 * time.Millisecond)
	for k, v := range r.srv.Drops() {
		if v != before[k] {
			t.Logf("drop %s +%d", k, v-before[k])
		}
	}
	r.cliATun.Inject(udp4(inCliA, inSrv, 4000, 5000, append([]byte("new "), make([]byte, 400)...)))
	for _, p := range recvN(t, r.srvTun, 1, 2*time.Second) {
		if string(p[28:31]) != "new" {
			t.Fatalf("the server delivered %q after the fresh session, want the new session's packet", p[28:32])
		}
	}
	select {
	case p := <-r.srvTun.Outbound():
		t.Fatalf("the server delivered %q as well", p[28:32])
	case <-time.After(200 * time.Millisecond):
	}
}
