package tunnel

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn/conntest"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/wire"
)

// The rig's server has server_id 5 in 4 bits (newRig).
const rigServerID, rigServerIDBits = 5, 4

// A data datagram whose receiver index names another server is dropped
// before the index lookup and counted as wrong_server; one that names this
// server but no session is still unknown_index.
func TestEngineWrongServerDropped(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.srv, "a", 2)
	d := r.sealFromClient(t, wire.AppendPing(nil))
	idx := binary.BigEndian.Uint32(d[4:8])
	if idx>>(32-rigServerIDBits) != rigServerID {
		t.Fatalf("the server handed out index %#08x, without its id %d", idx, rigServerID)
	}
	before := r.srv.Drops()
	other := append([]byte(nil), d...)
	binary.BigEndian.PutUint32(other[4:8], (rigServerID+1)<<(32-rigServerIDBits)|idx&(1<<(32-rigServerIDBits)-1))
	r.net.Inject(netip.AddrPortFrom(cliAddr1, 4000), srvAddr1, other)
	unknown := append([]byte(nil), d...)
	binary.BigEndian.PutUint32(unknown[4:8], idx^1)
	r.net.Inject(netip.AddrPortFrom(cliAddr1, 4000), srvAddr1, unknown)
	deadline := time.Now().Add(3 * time.Second)
	for {
		after := r.srv.Drops()
		wrong, unk := after["wrong_server"]-before["wrong_server"], after["unknown_index"]-before["unknown_index"]
		if wrong == 1 && unk == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("wrong_server +%d, unknown_index +%d; want +1 each", wrong, unk)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// inits records client A's initiations and the receiver indices of its data
// datagrams, in order.
type inits struct {
	mu   sync.Mutex
	sent []initSeen
}

type initSeen struct {
	at       time.Time
	sender   uint32
	lastData uint32 // the receiver index of the client's last data datagram before it
}

func (s *inits) capture(n *conntest.Network) {
	var lastData uint32
	n.Capture(func(from, to netip.AddrPort, b []byte) {
		if from.Addr() != cliAddr1 && from.Addr() != cliAddr2 || len(b) < 8 {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		switch wire.MessageType(b) {
		case wire.TypeData:
			lastData = binary.BigEndian.Uint32(b[4:8])
		case wire.TypeHandshakeInit:
			sender := binary.BigEndian.Uint32(b[4:8])
			if k := len(s.sent); k > 0 && s.sent[k-1].sender == sender {
				return // the same initiation on another path
			}
			s.sent = append(s.sent, initSeen{at: time.Now(), sender: sender, lastData: lastData})
		}
	})
}

func (s *inits) list() []initSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]initSeen(nil), s.sent...)
}

// A rekey's initiation carries the top 16 bits of the server's receiver
// index, so a balancer steering initiations by the server-id bits sends it
// back to the server of the session.
func TestEngineRekeyKeepsServerBits(t *testing.T) {
	var seen inits
	r := newRig(t, rigOpts{
		tunables: func(tn *Tunables) { tn.RekeyAfterTime = 300 * time.Millisecond },
		links:    seen.capture,
	})
	waitUsable(t, r.cliA, "server", 2)
	deadline := time.Now().Add(10 * time.Second)
	for len(seen.list()) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d initiations, want a first handshake and 3 rekeys", len(seen.list()))
		}
		r.cliATun.Inject(udp4(inCliA, inSrv, 1, 2, []byte("keep the session busy")))
		time.Sleep(20 * time.Millisecond)
	}
	for i, in := range seen.list()[1:] {
		if in.lastData == 0 {
			t.Fatalf("rekey %d: no data sent before it", i+1)
		}
		if in.sender>>16 != in.lastData>>16 {
			t.Errorf("rekey %d: sender index %#08x, the session's server index %#08x: top 16 bits differ", i+1, in.sender, in.lastData)
		}
		if in.sender>>(32-rigServerIDBits) != rigServerID {
			t.Errorf("rekey %d: sender index %#08x does not carry server id %d", i+1, in.sender, rigServerID)
		}
	}
}

// Once the session has been silent for SessionDeadAfter (its server may be
// dead), the client handshakes afresh with a random sender index, so a
// balancer spreads the dead server's clients over the live ones.
func TestEngineDeadSessionHandshakesAtRandom(t *testing.T) {
	var seen inits
	const deadAfter = 300 * time.Millisecond
	r := newRig(t, rigOpts{
		tunables: func(tn *Tunables) {
			tn.SessionDeadAfter = deadAfter
			tn.HandshakeRetry = 100 * time.Millisecond
			tn.HandshakeRetryMax = 100 * time.Millisecond
		},
		links: seen.capture,
	})
	waitUsable(t, r.cliA, "server", 2)
	srvIdx := r.srv.Status().Peers[0].SessionIndex
	cut := time.Now()
	r.silenceServer()
	deadline := time.Now().Add(10 * time.Second)
	var after []initSeen
	for len(after) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d initiations after the session went silent, want 3", len(after))
		}
		time.Sleep(20 * time.Millisecond)
		after = after[:0]
		for _, in := range seen.list() {
			if in.at.Sub(cut) >= deadAfter {
				after = append(after, in)
			}
		}
	}
	// Three random indices all matching the server's top 16 bits: 2^-48.
	for _, in := range after {
		if in.sender>>16 != srvIdx>>16 {
			return
		}
	}
	t.Fatalf("every handshake after the session died kept the dead server's bits (%#04x)", srvIdx>>16)
}

// Rekey ages are spread over the last RekeyJitter of RekeyAfterTime, evenly
// enough that clients which handshook together do not rekey in one burst.
func TestRekeyJitterSpread(t *testing.T) {
	tn := DefaultTunables()
	tn.RekeyAfterTime = 120 * time.Second
	lo := tn.RekeyAfterTime - time.Duration(float64(tn.RekeyAfterTime)*tn.RekeyJitter)
	if tn.RekeyJitter <= 0 || tn.RekeyJitter >= 1 {
		t.Fatalf("default RekeyJitter %v: want a fraction in (0, 1)", tn.RekeyJitter)
	}
	const n, buckets = 1000, 12
	var count [buckets]int
	rng := rand.New(rand.NewPCG(1, 2))
	for range n {
		at := tn.rekeyAfter(&noise.Keypair{LocalIndex: rng.Uint32()})
		if at < lo || at > tn.RekeyAfterTime {
			t.Fatalf("rekey at %v, outside [%v, %v]", at, lo, tn.RekeyAfterTime)
		}
		b := int(float64(at-lo) / float64(tn.RekeyAfterTime-lo) * buckets)
		count[min(b, buckets-1)]++
	}
	for b, c := range count {
		// About n/buckets = 83 each; a burst would put most in one.
		if c < n/buckets/2 || c > 2*n/buckets {
			t.Errorf("bucket %d of the jitter window holds %d of %d rekeys: %v", b, c, n, count)
		}
	}
	tn.RekeyJitter = 0
	if at := tn.rekeyAfter(&noise.Keypair{LocalIndex: 0xffff}); at != tn.RekeyAfterTime {
		t.Errorf("no jitter: rekey at %v, want %v", at, tn.RekeyAfterTime)
	}
}

// A server's last handshake with a client is the last one the client
// confirmed: an initiation it answered that nobody confirms (a replay, sent
// by whoever holds a copy) must not make it look newer than the server
// that holds the client's session, or a balancer would move the client's
// routes there.
func TestEngineUnconfirmedHandshakeKeepsLastHandshake(t *testing.T) {
	stranger := netip.MustParseAddrPort("198.18.9.9:4000")
	answered := make(chan struct{}, 1)
	r := newRig(t, rigOpts{links: func(n *conntest.Network) {
		n.Capture(func(from, to netip.AddrPort, b []byte) {
			if to == stranger && wire.MessageType(b) == wire.TypeHandshakeResp {
				select {
				case answered <- struct{}{}:
				default:
				}
			}
		})
	}})
	waitUsable(t, r.srv, "a", 2)
	before := r.srv.Status().Peers[0].LastHandshake
	if before.IsZero() {
		t.Fatal("no last handshake after the session was established")
	}
	msg, _, err := noise.CreateInitiation(r.cfgA.PrivateKey, r.srv.PublicKey(), r.cfgA.PSK, 0x1234, nil, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * DefaultTunables().HandshakeMinInterval)
	r.net.Inject(stranger, srvAddr1, msg)
	select {
	case <-answered:
	case <-time.After(3 * time.Second):
		t.Fatal("the server did not answer the initiation")
	}
	if p := r.srv.Status().Peers[0]; !p.LastHandshake.Equal(before) || !p.Established {
		t.Fatalf("after an unconfirmed handshake: last handshake %v (was %v), established %v", p.LastHandshake, before, p.Established)
	}
}

// A server silent for SessionSuspectAfter (every path quiet) gets an early
// rekey carrying its own id, before SessionDeadAfter: behind a balancer that
// has taken the dead server out, that rekey reaches a live server. Only one per
// silence: the handshake's retries follow, not a rekey per tick.
func TestEngineSilentServerEarlyRekey(t *testing.T) {
	var seen inits
	const suspect = 400 * time.Millisecond
	r := newRig(t, rigOpts{
		tunables: func(tn *Tunables) {
			tn.SessionSuspectAfter = suspect
			tn.SessionDeadAfter = 10 * time.Second
			tn.HandshakeRetry = 5 * time.Second
		},
		links: seen.capture,
	})
	waitUsable(t, r.cliA, "server", 2)
	srvIdx := r.srv.Status().Peers[0].SessionIndex
	before := len(seen.list())
	cut := time.Now()
	r.silenceServer()
	time.Sleep(suspect + 1500*time.Millisecond)
	got := seen.list()[before:]
	if len(got) == 0 {
		t.Fatalf("no initiation %v after the server went silent (SessionSuspectAfter %v)", time.Since(cut).Round(time.Millisecond), suspect)
	}
	first := got[0]
	if first.sender>>16 != srvIdx>>16 {
		t.Errorf("early rekey's sender index %#08x does not carry the server's top bits %#04x", first.sender, srvIdx>>16)
	}
	// One initiation, sent on every path (4 copies), and no retry yet (5 s).
	senders := map[uint32]bool{}
	for _, in := range got {
		senders[in.sender] = true
	}
	if len(senders) != 1 {
		t.Errorf("%d handshakes in %v of silence, want one early rekey", len(senders), time.Since(cut).Round(time.Millisecond))
	}
}

// silenceServer takes down every link from the server to client A, as a
// server that died looks from the client.
func (r *rig) silenceServer() {
	for _, a := range []netip.Addr{cliAddr1, cliAddr2} {
		for _, s := range []netip.Addr{srvAddr1.Addr(), srvAddr2.Addr()} {
			r.net.SetLink(s, a, conntest.LinkOptions{Down: true})
		}
	}
}
