package tunnel

import (
	"bytes"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/tundev/tuntest"
	"github.com/braid-vpn/braid/wire"
)

// waitUsableWithin is waitUsable with a deadline of the caller's.
func waitUsableWithin(t *testing.T, e *Engine, peerName string, n int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if usablePaths(e.Status(), peerName) >= n {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: fewer than %d usable paths to %q after %v", e.role, n, peerName, within)
	return 0
}

// restartClientA closes client A and starts it again with the same keys.
func (r *rig) restartClientA(t *testing.T) *Engine {
	t.Helper()
	r.cliA.Close()
	cfg := r.cfgA
	cfg.TUN = tuntest.New(1380)
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Start()
	t.Cleanup(func() { again.Close() })
	return again
}

// Someone with client A's static key but not its PSK sends one initiation dated an
// hour ahead. The server answers it (the PSK enters only at message 2, so it
// cannot tell), but nobody can use those keys. The genuine client, restarting,
// still gets in: lastTS moves when a session is confirmed, not when the server
// answers. (It used to move on the answer, and the client was refused until the
// server restarted.)
func TestEngineFutureInitiationNoLockout(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.srv, "a", 2)
	future := time.Now().Add(time.Hour)
	msg, _, err := noise.CreateInitiation(r.cfgA.PrivateKey, r.srv.public, keys.Key{}, 77, nil, future)
	if err != nil {
		t.Fatal(err)
	}
	p := r.srv.byKey[r.cfgA.PrivateKey.Public()]
	deadline := time.Now().Add(2 * time.Second)
	for {
		// Again until answered: one arriving within HandshakeMinInterval of
		// the client's own is refused as too soon.
		r.net.Inject(netip.MustParseAddrPort("198.19.7.7:4000"), srvAddr1, msg)
		time.Sleep(30 * time.Millisecond)
		p.mu.Lock()
		answered := p.pending.ts == noise.TAI64N(future)
		p.mu.Unlock()
		if answered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not answer the future-dated initiation; drops %v", r.srv.Drops())
		}
	}
	again := r.restartClientA(t)
	// The answered initiation holds off older ones for pendingHold; the
	// client's retries (1 s, then 2 s later) get in after it.
	el := waitUsableWithin(t, again, "server", 2, 8*time.Second)
	t.Logf("client back after %v", el.Round(time.Millisecond))
	p.mu.Lock()
	last := p.lastTS
	p.mu.Unlock()
	if bound := noise.TAI64N(future.Add(-time.Minute)); string(last[:]) >= string(bound[:]) {
		t.Fatal("lastTS moved to the unconfirmed future timestamp")
	}
}

// Replay protection survives the move: once the client has confirmed a session, a
// recorded copy of its initiation is refused (and creates no keys), and while a
// newer handshake waits for confirmation, an older initiation does not take its
// place.
func TestEngineReplayedInitiationAfterConfirm(t *testing.T) {
	var captured atomic.Pointer[[]byte]
	r := newRig(t, rigOpts{links: captureFirstInit(&captured)})
	waitUsable(t, r.srv, "a", 2)
	waitUsable(t, r.cliA, "server", 2)
	r.net.Capture(nil)
	// Past the time copies are answered from the response cache.
	time.Sleep(DefaultTunables().HandshakeRetry + 100*time.Millisecond)
	p := r.srv.byKey[r.cfgA.PrivateKey.Public()]
	replayed := func() uint64 { return r.srv.Drops()["handshake_replayed"] }
	waitReplayed := func(before uint64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for replayed() == before {
			if time.Now().After(deadline) {
				t.Fatalf("the replayed initiation was not refused as a replay; drops %v", r.srv.Drops())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	before := replayed()
	r.net.Inject(netip.MustParseAddrPort("198.19.7.7:4000"), srvAddr1, *captured.Load())
	waitReplayed(before)
	p.mu.Lock()
	next := p.next
	p.mu.Unlock()
	if next != nil {
		t.Fatal("a replayed initiation left keys waiting for confirmation")
	}

	// A newer initiation (from the client's key and PSK) is answered but not
	// confirmed; an older one, newer than the confirmed session, must not
	// replace it while it is pending.
	now := time.Now()
	older, _, err := noise.CreateInitiation(r.cfgA.PrivateKey, r.srv.public, r.cfgA.PSK, 91, nil, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	newer, _, err := noise.CreateInitiation(r.cfgA.PrivateKey, r.srv.public, r.cfgA.PSK, 92, nil, now.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	src := netip.MustParseAddrPort("198.19.7.8:4000")
	r.net.Inject(src, srvAddr1, newer)
	deadline := time.Now().Add(2 * time.Second)
	for {
		p.mu.Lock()
		ts := p.pending.ts
		p.mu.Unlock()
		if ts == noise.TAI64N(now.Add(2*time.Second)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the newer initiation was not answered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(DefaultTunables().HandshakeMinInterval)
	before = replayed()
	r.net.Inject(src, srvAddr1, older)
	waitReplayed(before)
}

// A restarted client's old instance says goodbye (CLOSE under the old keys), but
// the server reads that only after it has answered the new instance's
// initiation. The close ends the old session, not the answered handshake: the
// new instance confirms its keys and gets its paths. (The close used to drop the
// answered keys too; the client, established, then sent into an index the
// server no longer knew until its session timed out.)
func TestEngineLateCloseSparesNewHandshake(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.srv, "a", 2)
	fromA := func(a netip.Addr) bool { return a == cliAddr1 || a == cliAddr2 }
	var mu sync.Mutex
	var held [][3]any // the old instance's datagrams: from, to, payload
	var holding atomic.Bool
	holding.Store(true)
	r.net.SetFilter(func(from, to netip.AddrPort, b []byte) bool {
		if !fromA(from.Addr()) || wire.MessageType(b) != wire.TypeData || !holding.Load() {
			return true
		}
		mu.Lock()
		held = append(held, [3]any{from, to, bytes.Clone(b)})
		mu.Unlock()
		return false
	})
	r.cliA.Close() // its CLOSE frames are held back
	mu.Lock()
	old := held
	held = nil
	mu.Unlock()
	if len(old) == 0 {
		t.Fatal("the closing client sent nothing: no CLOSE to hold back")
	}
	again := r.restartClientA(t)
	// The new instance is established; its first datagrams (which would confirm
	// the keys to the server) are held back too, so the server has only answered.
	p := r.srv.byKey[r.cfgA.PrivateKey.Public()]
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		answered := p.next != nil
		p.mu.Unlock()
		if answered && again.Status().Peers[0].Established {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never answered the restarted client")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, d := range old {
		r.net.Inject(d[0].(netip.AddrPort), d[1].(netip.AddrPort), d[2].([]byte))
	}
	time.Sleep(50 * time.Millisecond)
	holding.Store(false)
	// Within a second: not by waiting for the session to time out and
	// handshaking again.
	took := waitUsableWithin(t, again, "server", 2, time.Second)
	t.Logf("usable %v after the held datagrams went", took)
	waitUsable(t, r.srv, "a", 2)
}
