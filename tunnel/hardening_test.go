package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/conn/conntest"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/tundev/tuntest"
	"github.com/braid-vpn/braid/wire"
)

// captureFirstInit records the first initiation a client sends.
func captureFirstInit(dst *atomic.Pointer[[]byte]) func(*conntest.Network) {
	return func(n *conntest.Network) {
		n.Capture(func(from, to netip.AddrPort, b []byte) {
			if wire.MessageType(b) == wire.TypeHandshakeInit {
				c := append([]byte(nil), b...)
				dst.CompareAndSwap(nil, &c)
			}
		})
	}
}

// sealFromClient builds an authenticated datagram from client A's current keys
// carrying frames, as a malicious client could.
func (r *rig) sealFromClient(t *testing.T, frames []byte) []byte {
	t.Helper()
	return r.sealFromClientOn(t, 0, frames)
}

// sealFromClientOn is sealFromClient with the client's path id pid in the inner
// header.
func (r *rig) sealFromClientOn(t *testing.T, pid uint16, frames []byte) []byte {
	t.Helper()
	p := r.cliA.server
	p.mu.Lock()
	kp := p.cur
	p.mu.Unlock()
	if kp == nil {
		t.Fatal("client has no keys")
	}
	buf := make([]byte, wire.DataHeaderLen+wire.InnerHeaderLen, wire.DataOverhead+wire.InnerHeaderLen+len(frames))
	wire.PutInnerHeader(buf[wire.DataHeaderLen:], wire.InnerHeader{Seq: 1 << 30, Path: pid})
	buf = append(buf, frames...)
	d, err := kp.Seal(buf, wire.InnerHeaderLen+len(frames))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A client with valid keys sends one datagram full of CHALLENGE frames from a
// victim's spoofed address: the server sends the victim at most three times what
// it received from there (it used to answer every frame: ~9× the bytes).
func TestEngineChallengeReflection(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.srv, "a", 2)
	victim := netip.AddrPortFrom(netip.MustParseAddr("198.18.77.1"), 5555)
	var toVictim atomic.Int64
	r.net.Capture(func(from, to netip.AddrPort, b []byte) {
		if to == victim {
			toVictim.Add(int64(len(b)))
		}
	})
	var frames []byte
	for len(frames)+wire.ChallengeFrameLen <= 1300 {
		frames = wire.AppendChallenge(frames, [wire.ChallengeLen]byte{1, 2, 3}, false)
	}
	d := r.sealFromClient(t, frames)
	r.net.Inject(victim, srvAddr1, d)
	// Long enough for every challenge retry (ChallengeRetry × ChallengeTries).
	time.Sleep(DefaultTunables().ChallengeRetry*time.Duration(DefaultTunables().ChallengeTries) + 200*time.Millisecond)
	if got := toVictim.Load(); got > 3*int64(len(d)) || got == 0 {
		t.Fatalf("the server sent %d bytes to the spoofed source for %d received; want (0, %d]", got, len(d), 3*len(d))
	}
	if r.srv.Drops()["challenge_not_answered"] == 0 {
		t.Fatal("the server answered challenges")
	}
}

// The client sends each initiation on every path. When the fastest path's downlink
// is dead, the copy on the other path must still get a response (from the
// server's cache, with no second Diffie-Hellman), at the first handshake and at
// every rekey.
func TestEngineDeadDownlinkHandshake(t *testing.T) {
	r := newRig(t, rigOpts{
		tunables: func(tn *Tunables) { tn.RekeyAfterTime = 400 * time.Millisecond },
		links: func(n *conntest.Network) {
			n.SetLink(srvAddr1.Addr(), cliAddr1, conntest.LinkOptions{Down: true})
			n.SetLink(cliAddr2, srvAddr2.Addr(), conntest.LinkOptions{Delay: 20 * time.Millisecond})
			n.SetLink(srvAddr2.Addr(), cliAddr2, conntest.LinkOptions{Delay: 20 * time.Millisecond})
		},
	})
	waitUsable(t, r.cliA, "server", 1)
	keysSeen := map[*noise.Keypair]bool{}
	deadline := time.Now().Add(3 * time.Second)
	for len(keysSeen) < 4 && time.Now().Before(deadline) {
		r.cliA.server.mu.Lock()
		if kp := r.cliA.server.cur; kp != nil {
			keysSeen[kp] = true
		}
		r.cliA.server.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	if len(keysSeen) < 4 {
		t.Fatalf("%d sessions in 3 s with 400 ms rekeys: handshakes fail when one downlink is dead", len(keysSeen))
	}
	r.checkDownstream(t, r.srvTun)
}

// A server flooded with a recorded initiation replayed from more spoofed sources
// than its limiter holds stops spending Diffie-Hellmans on them once under load
// (cookies), the established session keeps its traffic, and a client that
// (re)starts during the flood gets in through the cookie.
func TestEngineHandshakeFlood(t *testing.T) {
	const budget = 20
	var captured atomic.Pointer[[]byte]
	r := newRig(t, rigOpts{
		tunables: func(tn *Tunables) {
			tn.HandshakeQueue = 64
			tn.HandshakeBudget = budget
			tn.HandshakeLoadHold = time.Minute
		},
		links: captureFirstInit(&captured),
	})
	waitUsable(t, r.srv, "a", 2)
	waitUsable(t, r.cliA, "server", 2)
	r.net.Capture(nil)
	initMsg := *captured.Load()
	// Past the time copies are answered from the cache: each replay now costs a
	// Diffie-Hellman unless the server asks for a cookie.
	time.Sleep(DefaultTunables().HandshakeRetry + 100*time.Millisecond)

	dh0 := r.srv.responder.DHCount()
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var flooded atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), uint16(1024+i%50000))
			r.net.Inject(src, srvAddr1, initMsg)
			flooded.Add(1)
			if i%32 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	sent, delivered := r.streamUp(5*time.Millisecond, time.Second)
	if delivered != sent {
		t.Fatalf("established session lost traffic under the flood: %d of %d delivered", delivered, sent)
	}
	// Client A restarts during the flood.
	again := r.restartClientA(t)
	waitUsable(t, again, "server", 1)

	elapsed := time.Since(start)
	dh := r.srv.responder.DHCount() - dh0
	// Without load only the budget bounds the Diffie-Hellmans; once under load,
	// spoofed sources get cookies. The bound holds whatever the machine's speed.
	bound := uint64(budget + budget*elapsed.Seconds() + 1)
	t.Logf("%d spoofed initiations in %v: %d Diffie-Hellmans, drops %v", flooded.Load(), elapsed.Round(time.Millisecond), dh, r.srv.Drops())
	if flooded.Load() < 5000 {
		t.Fatalf("only %d spoofed initiations sent: not a flood", flooded.Load())
	}
	if dh > bound {
		t.Fatalf("%d Diffie-Hellmans for %d spoofed initiations; want at most %d", dh, flooded.Load(), bound)
	}
	if r.srv.Drops()["handshake_cookie_sent"] == 0 {
		t.Fatal("the server never went under load")
	}
}

// A datagram from the server copied by an attacker and raced to the client from
// another source must not take the genuine datagram's replay-window slot.
func TestEngineClientSourceBeforeReplay(t *testing.T) {
	r := newRig(t, rigOpts{links: func(n *conntest.Network) {
		n.SetLink(srvAddr1.Addr(), cliAddr1, conntest.LinkOptions{Delay: 30 * time.Millisecond})
		n.SetLink(srvAddr2.Addr(), cliAddr2, conntest.LinkOptions{Delay: 30 * time.Millisecond})
	}})
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	wrong := netip.AddrPortFrom(srvAddr1.Addr(), srvAddr1.Port()+1)
	before := r.cliA.Drops()["replayed"]
	r.net.Capture(func(from, to netip.AddrPort, b []byte) {
		if from.Addr() == srvAddr1.Addr() && wire.MessageType(b) == wire.TypeData {
			r.net.Inject(wrong, to, append([]byte(nil), b...))
		}
	})
	for i := 0; i < 20; i++ {
		r.srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, fmt.Appendf(nil, "p %d", i)))
	}
	recvN(t, r.cliATun, 20, 3*time.Second)
	r.net.Capture(nil)
	d := r.cliA.Drops()
	if d["unvalidated_path"] == 0 {
		t.Fatal("no copy from the wrong source arrived: the test tested nothing")
	}
	if got := d["replayed"] - before; got != 0 {
		t.Fatalf("%d genuine datagrams dropped as replays after a copy from another source", got)
	}
}

// A client's requested reorder hold (u32 µs on the wire: up to 71 minutes) is
// clamped by the server.
func TestEngineReorderHoldClamped(t *testing.T) {
	r := newRig(t, rigOpts{params: Params{Reorder: "fixed", ReorderHold: time.Hour}})
	waitUsable(t, r.srv, "a", 2)
	p := r.srv.byKey[r.cfgA.PrivateKey.Public()]
	p.mu.Lock()
	hold := p.reorderCfg.Hold
	p.mu.Unlock()
	if hold <= 0 || hold > 5*time.Second {
		t.Fatalf("server holds gaps for %v, want at most 5 s", hold)
	}
}

// A client accepts from the server only inner sources it routes into the tunnel.
func TestEngineClientInnerSource(t *testing.T) {
	p := startPair(t, []netip.AddrPort{srvAddr1}, "100.64.0.2/32", func(c *Config) {
		c.Servers = []netip.AddrPort{srvAddr1}
		c.LocalPaths = []LocalPath{{Addr: cliAddr1}}
		c.ServerAllowedIPs = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24")}
	})
	waitUsable(t, p.cli, "server", 1)
	waitUsable(t, p.srv, "a", 1)
	p.srvTun.Inject(udp4(netip.MustParseAddr("10.9.9.9"), inCliA, 5000, 4000, []byte("spoofed")))
	p.srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, []byte("genuine")))
	got := recvN(t, p.cliTun, 1, 3*time.Second)
	if string(got[0][28:]) != "genuine" {
		t.Fatalf("client delivered %q first", got[0][28:])
	}
	deadline := time.Now().Add(time.Second)
	for p.cli.Drops()["spoofed_source"] == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if p.cli.Drops()["spoofed_source"] != 1 {
		t.Fatalf("client drops %v, want one spoofed_source", p.cli.Drops())
	}
}

// A low-order server key (no one's public key) is one clear error at start, not a
// handshake retried forever.
func TestEngineLowOrderKey(t *testing.T) {
	var one keys.Key
	one[0] = 1 // the point u = 1, of order 4 on the twist
	n := conntest.NewNetwork()
	defer n.Close()
	_, err := New(Config{
		Role: Client, PrivateKey: mustKey(t), TUN: tuntest.New(1380), Listen: n.ListenOptions, Logger: testLogger(t),
		ServerPublicKey: one, Servers: []netip.AddrPort{srvAddr1}, LocalPaths: []LocalPath{{Addr: cliAddr1}},
	})
	if err == nil || !errors.Is(err, keys.ErrLowOrder) {
		t.Fatalf("New with a low-order server key: err = %v, want ErrLowOrder", err)
	}
}

// One source sending faster than its per-source limit spends the global
// Diffie-Hellman budget only for what the limiter lets through.
func TestHandshakeBudgetPerSource(t *testing.T) {
	r := newRig(t, rigOpts{handshakeRate: noise.DefaultRatePerSecond, tunables: func(tn *Tunables) { tn.HandshakeBudget = 100 }})
	e := r.srv
	stranger := mustKey(t) // not a client: each initiation costs a DH, then fails
	msg, _, err := noise.CreateInitiation(stranger, e.public, keys.Key{}, 7, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hw := &hsWorker{tokens: 100, cache: map[[wire.MACLen]byte]cachedResponse{}}
	now := time.Now()
	var j hsJob
	j.cs, j.ep, j.n = e.conns[0], conn.Endpoint{Remote: netip.MustParseAddrPort("198.18.9.9:4000")}, copy(j.msg[:], msg)
	for range 50 {
		e.handleQueued(hw, &j, now)
	}
	burst := noise.DefaultBurst
	if got := 100 - int(hw.tokens+0.5); got != burst {
		t.Fatalf("one source spent %d of the budget's 100 tokens; want %d (its burst)", got, burst)
	}
}

// Authenticated datagrams relayed from another source (an on-path attacker racing
// copies, as a NAT rebinding would look) must not take the acks of the client's
// paths to an unvalidated address: the client's paths stay in service.
func TestEngineRelayedDatagramsKeepAcks(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	relay := netip.AddrPortFrom(netip.MustParseAddr("198.18.66.1"), 5000)
	r.net.Capture(func(from, to netip.AddrPort, b []byte) {
		if from.Addr() == cliAddr1 && wire.MessageType(b) == wire.TypeData {
			r.net.Inject(relay, to, append([]byte(nil), b...))
		}
	})
	defer r.net.Capture(nil)
	sent, delivered := r.streamUp(2*time.Millisecond, 2*time.Second)
	if delivered < sent*9/10 {
		t.Fatalf("%d of %d packets delivered while copies were relayed from another source", delivered, sent)
	}
	if n := usablePaths(r.cliA.Status(), "server"); n < 2 {
		t.Fatalf("client has %d usable paths; the relayed copies took its acks away", n)
	}
}

// Under load an initiation from a validated path's endpoint needs a valid mac2
// like any other: without one it gets a cookie reply and no Diffie-Hellman (a
// spoofer of a client's endpoint used to pass). The client has one anyway: the
// server gave each of its paths a cookie inside the session (COOKIE frames),
// and with it the initiation passes at once.
func TestHandshakeUnderLoadKnownEndpoint(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.srv, "a", 2)
	waitUsable(t, r.cliA, "server", 2)
	e := r.srv
	// The client's cookie for one of its paths, and that path's source.
	var known netip.AddrPort
	var cookie noise.Cookie
	deadline := time.Now().Add(2 * time.Second)
	for known == (netip.AddrPort{}) && time.Now().Before(deadline) {
		p := r.cliA.server
		p.mu.Lock()
		for _, ps := range p.paths {
			if ps != nil && ps.cookie != (noise.Cookie{}) {
				known, cookie = ps.cs.c.LocalAddr(), ps.cookie
				break
			}
		}
		p.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	if known == (netip.AddrPort{}) {
		t.Fatal("the server gave the client no cookie inside its session")
	}
	if !e.knownEndpoint(known) {
		t.Fatalf("%v is not a validated endpoint of the server", known)
	}
	hw := &hsWorker{tokens: 100, cache: map[[wire.MACLen]byte]cachedResponse{}, loadUntil: time.Now().Add(time.Hour)}
	try := func(from netip.AddrPort, ts time.Time, c noise.Cookie) uint64 {
		msg, _, err := noise.CreateInitiation(r.cfgA.PrivateKey, e.public, r.cfgA.PSK, 9, nil, ts)
		if err != nil {
			t.Fatal(err)
		}
		noise.SetMAC2(msg, c)
		var j hsJob
		j.cs, j.ep, j.n = e.conns[0], conn.Endpoint{Remote: from}, copy(j.msg[:], msg)
		before := e.responder.DHCount()
		hw.out = hw.out[:0]
		e.handleQueued(hw, &j, time.Now())
		return e.responder.DHCount() - before
	}
	for _, from := range []netip.AddrPort{netip.MustParseAddrPort("198.19.1.1:4000"), known} {
		if n := try(from, time.Now(), noise.Cookie{}); n != 0 {
			t.Fatalf("%v without mac2 under load cost %d Diffie-Hellmans", from, n)
		}
		if len(hw.out) != 1 || len(hw.out[0].msg) != wire.CookieReplyLen {
			t.Fatalf("no cookie reply for %v: %+v", from, hw.out)
		}
	}
	if n := try(known, time.Now().Add(time.Second), cookie); n != 1 {
		t.Fatalf("the validated endpoint %v with its session cookie under load: %d Diffie-Hellmans, want 1", known, n)
	}
}

// TestLookupIndexCache: a reader's kept index entry is used only while no
// index has changed; after a drop the index is unknown, and a new session
// under the same index is found, not the old one.
func TestLookupIndexCache(t *testing.T) {
	e := &Engine{indices: map[uint32]indexEntry{}}
	a, b := &peer{name: "a"}, &peer{name: "b"}
	set := func(idx uint32, p *peer) {
		e.idxMu.Lock()
		e.setIndex(idx, indexEntry{peer: p})
		e.idxMu.Unlock()
	}
	in := &inbound{e: e}
	set(7, a)
	for range 2 { // the second from the kept entry
		if ent, ok := in.lookupIndex(7); !ok || ent.peer != a {
			t.Fatalf("lookup 7 = %v, %v; want peer a", ent.peer, ok)
		}
	}
	e.releaseIndex(7)
	if _, ok := in.lookupIndex(7); ok {
		t.Fatal("a dropped index was still found (the kept entry outlived it)")
	}
	set(7, b)
	if ent, ok := in.lookupIndex(7); !ok || ent.peer != b {
		t.Fatalf("after a new session under 7: %v, %v; want peer b", ent.peer, ok)
	}
	set(9, a) // another index changing also refreshes the kept one
	if ent, ok := in.lookupIndex(7); !ok || ent.peer != b {
		t.Fatalf("lookup 7 after 9 was set = %v, %v; want peer b", ent.peer, ok)
	}
	if _, ok := in.lookupIndex(8); ok {
		t.Fatal("unknown index 8 found")
	}
}

// An on-path attacker who saw an initiation (and so its mac1) seals cookie
// replies with cookies of its own, as many as it likes: the client resends that
// initiation at most once per path because of them (it used to resend once per
// new cookie, without bound).
func TestEngineForgedCookieReplies(t *testing.T) {
	var mu sync.Mutex
	var first []byte
	var from netip.AddrPort
	sent := map[[wire.MACLen]byte]int{} // initiations sent from `from`, by mac1
	r := newRig(t, rigOpts{links: func(n *conntest.Network) {
		// The server's answers never arrive: the client's initiation stays
		// pending while the attacker works.
		n.SetLink(srvAddr1.Addr(), cliAddr1, conntest.LinkOptions{Down: true})
		n.SetLink(srvAddr2.Addr(), cliAddr2, conntest.LinkOptions{Down: true})
		n.Capture(func(src, dst netip.AddrPort, b []byte) {
			if wire.MessageType(b) != wire.TypeHandshakeInit || dst != srvAddr1 {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				first, from = append([]byte(nil), b...), src
			}
			if src == from {
				m, _ := noise.InitiationMAC1(b)
				sent[m]++
			}
		})
	}})
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		got := first != nil
		mu.Unlock()
		if got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no initiation captured")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	msg, to := first, from
	mu.Unlock()
	mac1, _ := noise.InitiationMAC1(msg)
	// Genuine-looking replies (sealed under the server's key, bound to this
	// mac1), each with another cookie: what the attacker can make.
	for i := 0; i < 50; i++ {
		fake := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 9)
		reply, err := r.srv.cookies.AppendReply(nil, msg, fake, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		r.net.Inject(srvAddr1, to, reply)
	}
	time.Sleep(300 * time.Millisecond) // within the first retry interval
	mu.Lock()
	n := sent[mac1]
	mu.Unlock()
	if n > 2 {
		t.Fatalf("the client sent one initiation %d times from %v after 50 forged cookie replies; want at most 2 (once, and one resend)", n, to)
	}
	if n < 2 {
		t.Fatalf("the client sent the initiation %d times: the forged replies did not reach it (the test tested nothing)", n)
	}
}

// Keys that expire leave the session index table through dropIndex, which counts
// the change: a reader that kept the entry from its last lookup must not keep
// opening datagrams under them (three deletes in the timers skipped the count,
// so a reader's kept entry outlived the keys).
func TestExpiredKeysLeaveReaderCache(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name         string
		client, next bool
	}{{"client prev", true, false}, {"server prev", false, false}, {"server next", false, true}} {
		e := &Engine{indices: map[uint32]indexEntry{}, tn: DefaultTunables(), log: testLogger(t)}
		p := &peer{e: e, name: "a", isSrv: c.client}
		kp := &noise.Keypair{LocalIndex: 7, Created: now.Add(-2 * e.tn.RejectAfterTime)}
		e.idxMu.Lock()
		e.setIndex(7, indexEntry{peer: p, kp: kp})
		e.idxMu.Unlock()
		if c.next {
			p.next = kp
		} else {
			p.prev = kp
		}
		in := &inbound{e: e}
		if _, ok := in.lookupIndex(7); !ok {
			t.Fatalf("%s: index 7 not found", c.name)
		}
		if c.client {
			// A handshake under way: clientTick starts none of its own.
			p.hs, p.hsSent, p.hsRetry = &noise.Initiation{}, now, time.Hour
			p.clientTick(now)
		} else {
			p.serverTick(now)
		}
		if p.prev != nil || p.next != nil {
			t.Fatalf("%s: the keys did not expire", c.name)
		}
		if _, ok := in.lookupIndex(7); ok {
			t.Errorf("%s: a reader still finds the expired keys (its kept entry)", c.name)
		}
	}
}

// Two of a client's paths may share a remote endpoint: one client socket sends to
// both server addresses. The engine-wide set of validated endpoints (what the
// handshake worker calls known) must keep that endpoint while either path is
// left; removing one used to forget it for both.
func TestValidatedEndpointSharedByTwoPaths(t *testing.T) {
	r := newRig(t, rigOpts{links: func(n *conntest.Network) {
		n.SetLink(cliAddr1, srvAddr2.Addr(), conntest.LinkOptions{})
		n.SetLink(srvAddr2.Addr(), cliAddr1, conntest.LinkOptions{})
	}})
	waitUsable(t, r.srv, "a", 3)
	p := r.srv.byKey[r.cfgA.PrivateKey.Public()]
	p.mu.Lock()
	defer p.mu.Unlock()
	var shared []*pathState
	for _, ps := range p.paths {
		if ps != nil && ps.validated && ps.ep.Remote.Addr() == cliAddr1 {
			shared = append(shared, ps)
		}
	}
	if len(shared) != 2 || shared[0].ep.Remote != shared[1].ep.Remote {
		t.Fatalf("want two validated paths from one endpoint of %v, have %d", cliAddr1, len(shared))
	}
	remote := shared[0].ep.Remote
	p.removePath(shared[0])
	if !r.srv.knownEndpoint(remote) {
		t.Fatalf("%v is no longer a known endpoint though path %d still comes from it", remote, shared[1].id)
	}
	p.removePath(shared[1])
	if r.srv.knownEndpoint(remote) {
		t.Fatalf("%v is still a known endpoint after both its paths left", remote)
	}
}

// countHandler counts log records by message and keeps the attributes of the
// last one.
type countHandler struct {
	mu   sync.Mutex
	n    map[string]int
	last map[string]map[string]string
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countHandler) WithGroup(string) slog.Handler            { return h }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.Message]++
	a := map[string]string{}
	r.Attrs(func(at slog.Attr) bool { a[at.Key] = at.Value.String(); return true })
	h.last[r.Message] = a
	return nil
}

// An authenticated client can make the server log a line as often as it likes
// (here: a session with parameters the server cannot use, confirmed a thousand
// times at once; paths validated, moved or gone work the same way). The lines
// about one client are rate-limited, and the next line that gets through says
// how many were left out.
func TestClientLogLinesRateLimited(t *testing.T) {
	h := &countHandler{n: map[string]int{}, last: map[string]map[string]string{}}
	e := &Engine{indices: map[uint32]indexEntry{}, tn: DefaultTunables(), log: slog.New(h)}
	p, err := e.newPeer("a", mustKey(t).Public(), keys.Key{}, nil, Params{}, false)
	if err != nil {
		t.Fatal(err)
	}
	const msg = "client asked for unusable session parameters; using defaults"
	now := time.Now()
	confirm := func(i int) {
		p.next = &noise.Keypair{LocalIndex: uint32(i + 1), Created: now}
		p.pending = pendingSession{params: true, want: Params{Congestion: "bogus"}}
		p.confirmNext(now)
	}
	for i := range 1000 {
		confirm(i)
	}
	logged := h.n[msg]
	t.Logf("%d of 1000 lines logged", logged)
	if logged > 50 {
		t.Fatalf("%d of 1000 lines about one client were logged at once", logged)
	}
	now = now.Add(time.Minute)
	confirm(1000)
	if h.n[msg] != logged+1 {
		t.Fatalf("a minute later the line was not logged (%d)", h.n[msg]-logged)
	}
	if got, want := h.last[msg]["suppressed"], fmt.Sprint(1000-logged); got != want {
		t.Fatalf("the next line says %q lines were suppressed, want %s", got, want)
	}
}

// A source that sent one small authenticated datagram (an ack, a ping) has a
// challenge budget of three times that: fewer than ChallengeTries challenges.
// It is forgotten all the same once it has not answered for as long as the
// challenges would take; it used to stay, waiting for more bytes, for good.
func TestEngineSilentSmallSourceForgotten(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.srv, "a", 2)
	src := netip.AddrPortFrom(netip.MustParseAddr("198.18.77.1"), 5555)
	// A client path id the server has no path for: no other endpoint is
	// challenged and answers for it (see migrate).
	d := r.sealFromClientOn(t, 9, wire.AppendPing(nil))
	r.net.Inject(src, srvAddr1, d)
	p := r.srv.byKey[r.cfgA.PrivateKey.Public()]
	has := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, ps := range p.paths {
			if ps != nil && ps.ep.Remote == src {
				return true
			}
		}
		return false
	}
	for end := time.Now().Add(time.Second); !has(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the source was not learnt")
		}
	}
	tn := DefaultTunables()
	time.Sleep(tn.ChallengeRetry*time.Duration(tn.ChallengeTries+1) + 300*time.Millisecond)
	if has() {
		t.Fatalf("a source that sent %d B and never answered is still a path", len(d))
	}
}
