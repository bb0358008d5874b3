package tunnel

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/cc"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/wire"
)

// download streams 1000-byte packets from the server to client A, perMs every
// ms, until stop is closed; it returns the count of packets sent, and got counts
// what the client's TUN receives.
func (r *rig) download(stop chan struct{}, perMs int, got *atomic.Int64) *atomic.Int64 {
	sent := new(atomic.Int64)
	every(stop, time.Millisecond, func() {
		for range perMs {
			r.srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, make([]byte, 1000)))
			sent.Add(1)
		}
	})
	go func() {
		for range r.cliATun.Outbound() {
			got.Add(1)
		}
	}()
	return sent
}

// every runs f every d on a goroutine of its own until stop is closed.
func every(stop <-chan struct{}, d time.Duration, f func()) {
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(d):
			}
			f()
		}
	}()
}

// serverPathTo returns the server's path for client A whose remote address is
// addr (any port), or nil. Caller holds p.mu.
func serverPathTo(p *peer, addr netip.Addr) *pathState {
	for _, ps := range p.paths {
		if ps != nil && ps.validated && ps.ep.Remote.Addr() == addr {
			return ps
		}
	}
	return nil
}

// An on-path relay copies every datagram client A sends on its first path and
// sends the copy from an address of its own, ahead of the genuine one (which the
// server then drops as a replay), and forwards to the client what the server
// sends there: it answers the server's challenge from the new address. The client's
// old endpoint is alive and acks what it gets, so the path must stay there — it
// used to move to the relay, with its full congestion window — and the relay gets
// no more than three times what it sent.
func TestEngineRelayDoesNotStealPath(t *testing.T) {
	relayTest(t, netip.AddrPortFrom(netip.MustParseAddr("198.18.66.1"), 5000))
}

// The same relay sending from the client's own address with another port looks
// like a NAT rebinding, which moves a path at once (keeping its congestion
// state). The old endpoint answers its challenge, sent at the same time, and
// takes the path back.
func TestEngineOldEndpointWinsBack(t *testing.T) {
	relayTest(t, netip.AddrPortFrom(cliAddr1, 61000))
}

func relayTest(t *testing.T, relay netip.AddrPort) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	p := r.srv.byKey[r.cfgA.PrivateKey.Public()]
	p.mu.Lock()
	old := serverPathTo(p, cliAddr1)
	if old == nil {
		p.mu.Unlock()
		t.Fatal("no server path to the client's first address")
	}
	oldEP, oldID := old.ep.Remote, old.id
	p.mu.Unlock()

	portOnly := relay.Addr() == oldEP.Addr()
	var toRelay, fromRelay, forwarded atomic.Int64
	r.net.SetFilter(func(from, to netip.AddrPort, b []byte) bool {
		switch {
		case from == oldEP && to.Addr() == srvAddr1.Addr():
			fromRelay.Add(int64(len(b)))
			r.net.Inject(relay, to, append([]byte(nil), b...))
		case to == relay:
			toRelay.Add(int64(len(b)))
			forwarded.Add(1)
			r.net.Inject(from, oldEP, append([]byte(nil), b...))
			return false
		}
		return true
	})
	defer r.net.SetFilter(nil)

	stop := make(chan struct{})
	defer close(stop)
	var got atomic.Int64
	sent := r.download(stop, 1, &got)
	moved, last := 0, false
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		ps := p.paths[oldID]
		last = ps == nil || ps.ep.Remote != oldEP
		p.mu.Unlock()
		if last {
			moved++
		}
	}
	time.Sleep(100 * time.Millisecond) // the last packets arrive
	t.Logf("relay sent %d B, got %d B (%d datagrams forwarded); the path was elsewhere in %d samples; client got %d of %d packets",
		fromRelay.Load(), toRelay.Load(), forwarded.Load(), moved, got.Load(), sent.Load())
	if forwarded.Load() == 0 {
		t.Fatal("the server sent nothing to the relay: it never challenged it, the test tested nothing")
	}
	switch {
	case last:
		t.Errorf("the path is not at the old endpoint, which still acks (elsewhere in %d samples)", moved)
	case portOnly && moved > 10:
		// A move back takes the old endpoint's round trip, not 50 ms.
		t.Errorf("the path was at the relay's port in %d samples", moved)
	case !portOnly && moved > 0:
		t.Errorf("the path left the old endpoint, which still acks, in %d samples", moved)
	}
	if toRelay.Load() > 3*fromRelay.Load() {
		t.Errorf("the relay got %d B for %d B it sent: more than 3×", toRelay.Load(), fromRelay.Load())
	}
	if got.Load() < sent.Load()*9/10 {
		t.Errorf("the client got %d of %d packets of the download", got.Load(), sent.Load())
	}
}

// A client's first path really moves to a new address (its old address is gone).
// The server moves the path once the new endpoint has answered its challenge and
// the old one has not; until the new endpoint acks something sent there it gets
// at most three times the bytes it sent (here the relay lets only challenges
// through to the client at first, so nothing sent there is acked), and the
// path's congestion window and RTT start over. Then the route opens and the
// download goes on over the moved path.
func TestEngineMoveResetsAndLimits(t *testing.T) {
	r := newRig(t, rigOpts{params: Params{Congestion: cc.Cubic}})
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	r.setDelays(20*time.Millisecond, 20*time.Millisecond)
	p := r.srv.byKey[r.cfgA.PrivateKey.Public()]

	stop := make(chan struct{})
	defer close(stop)
	var got atomic.Int64
	r.download(stop, 3, &got)
	time.Sleep(1500 * time.Millisecond)
	p.mu.Lock()
	old := serverPathTo(p, cliAddr1)
	if old == nil || old.cc == nil {
		p.mu.Unlock()
		t.Fatal("no server path with a congestion controller to the client's first address")
	}
	oldEP, id := old.ep.Remote, old.id
	grown, srtt := old.cc.Window(), old.sender.SRTT()
	ccfg := p.cc.Config()
	initial := int(ccfg.InitialWindow * float64(ccfg.MSS))
	p.mu.Unlock()
	t.Logf("before the move: window %d B (initial %d), SRTT %v", grown, initial, srtt)
	if grown <= initial {
		t.Fatalf("the window did not grow before the move (%d B): the test would not see it start over", grown)
	}

	moved := netip.AddrPortFrom(netip.MustParseAddr("198.18.3.1"), 40000)
	var toNew, fromNew atomic.Int64
	var open atomic.Bool
	const chalLen = wire.DataOverhead + wire.InnerHeaderLen + wire.ChallengeFrameLen
	r.net.SetFilter(func(from, to netip.AddrPort, b []byte) bool {
		switch {
		case from == oldEP && to.Addr() == srvAddr1.Addr():
			fromNew.Add(int64(len(b)))
			r.net.Inject(moved, to, append([]byte(nil), b...))
			return false
		case to == moved:
			toNew.Add(int64(len(b)))
			// At first only challenges reach the client (the only datagrams
			// of that size): it answers them, but acks nothing sent there.
			if open.Load() || len(b) == chalLen {
				r.net.Inject(from, oldEP, append([]byte(nil), b...))
			}
			return false
		case to == oldEP:
			return false // the old address is gone
		}
		return true
	})
	defer r.net.SetFilter(nil)

	var at time.Time
	var win int
	var rtt time.Duration
	for end := time.Now().Add(3 * time.Second); at.IsZero() && time.Now().Before(end); time.Sleep(time.Millisecond) {
		p.mu.Lock()
		if ps := p.paths[id]; ps != nil && ps.ep.Remote == moved && ps.cc != nil {
			at, win, rtt = time.Now(), ps.cc.Window(), ps.sender.SRTT()
		}
		p.mu.Unlock()
	}
	if at.IsZero() {
		t.Fatal("the path did not move to the new address within 3 s")
	}
	t.Logf("moved: window %d B, SRTT %v", win, rtt)
	if win != initial {
		t.Errorf("after the move the window is %d B, want the initial %d (it was %d)", win, initial, grown)
	}
	if want := path.DefaultConfig().InitialRTT; rtt != want {
		t.Errorf("after the move SRTT is %v, want the initial estimate (it was %v)", rtt, srtt)
	}
	time.Sleep(time.Second)
	sent, recv := toNew.Load(), fromNew.Load()
	t.Logf("until the new endpoint could ack: the server sent it %d B, it sent %d B", sent, recv)
	if sent > 3*recv {
		t.Errorf("the server sent the new endpoint %d B for %d B it sent, before any ack: more than 3×", sent, recv)
	}

	open.Store(true)
	before := got.Load()
	time.Sleep(time.Second)
	p.mu.Lock()
	ps := p.paths[id]
	amp := ps != nil && ps.amp
	p.mu.Unlock()
	t.Logf("after the route opened: %d B more sent to the new endpoint, client got %d packets in 1 s", toNew.Load()-sent, got.Load()-before)
	if amp || toNew.Load()-sent < 100_000 {
		t.Errorf("the moved path carries no data once the new endpoint acks (still limited: %v; %d B)", amp, toNew.Load()-sent)
	}
}
