package stream

import (
	"net"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/wire"
)

// Tests of the caps on authenticated connections (MaxConnsPerPeer,
// MaxConnsPerSource). The engine's part is stood in for by calling Authenticated
// with the peer a datagram would have opened under.

// key is a client key of these tests.
func key(b byte) conn.PeerID {
	var id conn.PeerID
	for i := range id {
		id[i] = b
	}
	return id
}

// authedConn dials from the address from and has the engine stand-in
// authenticate the connection as peer.
func authedConn(t testing.TB, srv conn.Conn, from string, peer conn.PeerID) *net.TCPConn {
	t.Helper()
	c := dialFrom(t, from, srv.LocalAddr())
	c.Write(wire.StreamHello[:]) // as a client does: the hello deadline is met
	if !accepted(t, c) {
		t.Fatalf("a connection from %s was refused", from)
	}
	srv.(conn.Authenticator).Authenticated(endpointOf(c), peer)
	return c
}

// linkOf is the server's connection for the raw client connection c.
func linkOf(srv conn.Conn, c net.Conn) *link {
	s := srv.(*serverConn)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.links[endpointOf(c).Remote]
}

// One client key that authenticates 1024 connections (the whole MaxConns, all
// from one address) holds MaxConnsPerPeer of them, so a second client still
// connects, with the default limits. Before the caps the server refused every
// new connection: all of them were authenticated, and those were never evicted.
func TestOneKeyDoesNotHoldEverySlot(t *testing.T) {
	cfg := testConfig()
	// Nothing goes away by itself during the test.
	cfg.HelloTimeout, cfg.AuthTimeout, cfg.IdleTimeout = time.Minute, time.Minute, time.Minute
	tr, srv := newServer(t, cfg)
	sr := startReaderAuth(srv, from2)
	thief := key(0xa1)
	for range DefaultMaxConns {
		authedConn(t, srv, "127.0.0.1", thief)
	}
	waitLinks(t, srv, DefaultMaxConnsPerPeer)
	if got, want := tr.capEvictions.Load(), uint64(DefaultMaxConns-DefaultMaxConnsPerPeer); got != want {
		t.Fatalf("stream_cap_evictions %d, want %d", got, want)
	}
	cli := clientFrom(t, tr, "127.0.0.2")
	if from := exchange(t, cli, startReader(cli), srv, sr, 1); from.Addr().String() != "127.0.0.2" {
		t.Fatalf("client arrived from %v", from)
	}
	if tr.rejects.Load() != 0 {
		t.Fatalf("stream_rejects %d, want 0", tr.rejects.Load())
	}
}

// At MaxConnsPerPeer a peer's new connection replaces the peer's least recently
// authenticated one (a dead connection left by a reconnect stops being
// authenticated); connections that are in use and other peers' stay.
func TestPerPeerCapEvictsLeastRecent(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConnsPerPeer = 4
	tr, srv := newServer(t, cfg)
	startReaderAuth(srv, authNone)
	a, b := key(1), key(2)
	var cs []*net.TCPConn
	for range cfg.MaxConnsPerPeer {
		cs = append(cs, authedConn(t, srv, "127.0.0.1", a))
		time.Sleep(time.Millisecond) // distinct authentication times
	}
	other := authedConn(t, srv, "127.0.0.1", b)
	// cs[0] is still in use, so cs[1] is now the least recently authenticated.
	time.Sleep(time.Millisecond)
	srv.(conn.Authenticator).Authenticated(endpointOf(cs[0]), a)

	fresh := authedConn(t, srv, "127.0.0.1", a)
	closedWithin(t, cs[1], time.Second)
	for _, c := range []net.Conn{cs[0], cs[2], cs[3], other, fresh} {
		if !open(c) {
			t.Fatal("evicted another connection than the peer's least recently authenticated")
		}
	}
	if tr.capEvictions.Load() != 1 {
		t.Fatalf("stream_cap_evictions %d, want 1", tr.capEvictions.Load())
	}
	waitLinks(t, srv, cfg.MaxConnsPerPeer+1)
}

// At MaxConnsPerSource the source's connection that is unused goes first,
// whichever peer holds it; with none unused, the peer holding the most connections
// there loses its least recently authenticated, not the peer that just
// authenticated one (clients behind one NAT pay for their own excess).
func TestPerSourceCapEvictsHeaviestPeer(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConnsPerSource = 4
	tr, srv := newServer(t, cfg)
	startReaderAuth(srv, authNone)
	a, b := key(1), key(2)
	a0 := authedConn(t, srv, "127.0.0.1", a)
	time.Sleep(time.Millisecond)
	a1 := authedConn(t, srv, "127.0.0.1", a)
	a2 := authedConn(t, srv, "127.0.0.1", a)
	b0 := authedConn(t, srv, "127.0.0.1", b)
	// Another source is not affected by this one's cap.
	elsewhere := authedConn(t, srv, "127.0.0.3", key(3))

	b1 := authedConn(t, srv, "127.0.0.1", b) // 5 from 127.0.0.1: a holds the most
	closedWithin(t, a0, time.Second)
	for _, c := range []net.Conn{a1, a2, b0, b1, elsewhere} {
		if !open(c) {
			t.Fatal("evicted another connection than the heaviest peer's least recently authenticated")
		}
	}

	// b0 falls silent (a dead connection): it goes before any live one of a.
	linkOf(srv, b0).authAt.Store(time.Now().Add(-2 * unusedAfter).UnixNano())
	a3 := authedConn(t, srv, "127.0.0.1", a)
	closedWithin(t, b0, time.Second)
	for _, c := range []net.Conn{a1, a2, a3, b1, elsewhere} {
		if !open(c) {
			t.Fatal("evicted a connection in use while an unused one was there")
		}
	}
	if tr.capEvictions.Load() != 2 {
		t.Fatalf("stream_cap_evictions %d, want 2", tr.capEvictions.Load())
	}
}

// A connection whose datagrams start opening under another peer's keys counts
// for that peer from then on, and the first peer's count goes down.
func TestConnectionChangesPeer(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConnsPerPeer = 2
	tr, srv := newServer(t, cfg)
	startReaderAuth(srv, authNone)
	a, b := key(1), key(2)
	moved := authedConn(t, srv, "127.0.0.1", a)
	srv.(conn.Authenticator).Authenticated(endpointOf(moved), b)
	// a now holds none: two more fit under its cap of 2.
	a1 := authedConn(t, srv, "127.0.0.1", a)
	a2 := authedConn(t, srv, "127.0.0.1", a)
	for _, c := range []net.Conn{moved, a1, a2} {
		if !open(c) {
			t.Fatal("a connection was evicted under the cap")
		}
	}
	if tr.capEvictions.Load() != 0 {
		t.Fatalf("stream_cap_evictions %d, want 0", tr.capEvictions.Load())
	}
	s := srv.(*serverConn)
	s.mu.Lock()
	na, nb := len(s.byPeer[a]), len(s.byPeer[b])
	s.mu.Unlock()
	if na != 2 || nb != 1 {
		t.Fatalf("peer a holds %d, b %d; want 2, 1", na, nb)
	}
}
