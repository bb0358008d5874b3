package stream

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/wire"
)

// Tests of the server's limits on unauthenticated peers. On loopback every
// 127.0.0.0/8 address is local, so a dialler bound to 127.0.0.2 is a second source.

// dialFrom opens a plain TCP connection from the address from to a server Conn.
func dialFrom(t testing.TB, from string, to netip.AddrPort) *net.TCPConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", to.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// endpointOf is the endpoint under which the server sees a raw connection.
func endpointOf(c net.Conn) conn.Endpoint {
	return conn.Endpoint{Remote: unmap(c.LocalAddr().(*net.TCPAddr).AddrPort())}
}

// accepted reports whether the server took c: it sends its hello on a connection
// it accepts, and closes one it refuses at once.
func accepted(t testing.TB, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var b [wire.StreamHelloLen]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		if os.IsTimeout(err) {
			t.Fatal("the server neither sent its hello nor closed the connection")
		}
		return false
	}
	if b != wire.StreamHello {
		t.Fatalf("server sent %q", b)
	}
	return true
}

// open reports whether c is still open: nothing arrives within a moment (the
// server's hello must have been read already).
func open(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	_, err := c.Read(b[:])
	return os.IsTimeout(err)
}

// closedWithin waits up to d for the server to close c and returns how long it took.
func closedWithin(t testing.TB, c net.Conn, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if os.IsTimeout(err) {
			t.Fatalf("the server did not close the connection within %v", d)
		}
		return time.Since(start)
	}
}

// links counts the server's connections.
func links(c conn.Conn) int {
	s := c.(*serverConn)
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.links)
}

func waitLinks(t testing.TB, c conn.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for links(c) != n {
		if time.Now().After(deadline) {
			t.Fatalf("server has %d connections, want %d", links(c), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func newServer(t testing.TB, cfg Config) (*Transport, conn.Conn) {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tr.Server(conn.Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return tr, srv
}

// clientFrom is a client Conn whose connections come from the address from.
func clientFrom(t testing.TB, tr *Transport, from string) conn.Conn {
	t.Helper()
	cli, err := tr.Client(conn.Options{Addr: netip.AddrPortFrom(netip.MustParseAddr(from), 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// exchange checks that cli (whose reader is cr) reaches srv (whose reader is sr)
// and srv reaches cli back; it returns the client's endpoint at the server.
func exchange(t testing.TB, cli conn.Conn, cr *reader, srv conn.Conn, sr *reader, id uint32) netip.AddrPort {
	t.Helper()
	from := writeUntil(t, cli, srv.LocalAddr(), sr, id, 5*time.Second)[0].Remote
	cr.mu.Lock()
	n := len(cr.ids)
	cr.mu.Unlock()
	write(t, srv, from, id+1)
	_, ids := cr.waitFor(t, n+1, 5*time.Second)
	if ids[n] != id+1 {
		t.Fatalf("client got %v, want %d", ids[n:], id+1)
	}
	return from
}

// from2 authenticates what comes from 127.0.0.2, the real client of these tests.
func from2(ep conn.Endpoint) bool { return ep.Remote.Addr() == netip.MustParseAddr("127.0.0.2") }

// One host opening 1024 connections, silent or sending well-formed frames that
// never authenticate, takes only MaxUnauthPerSource slots: a client from another
// address still connects and exchanges datagrams, with the default limits (but
// for the timeouts).
func TestGarbageDoesNotLockOut(t *testing.T) {
	cfg := testConfig()
	// No garbage goes away by itself during the test.
	cfg.HelloTimeout, cfg.AuthTimeout = time.Minute, time.Minute
	tr, srv := newServer(t, cfg)
	sr := startReaderAuth(srv, from2)
	for i := range DefaultMaxConns {
		c := dialFrom(t, "127.0.0.1", srv.LocalAddr())
		if i%2 == 1 { // hello and a frame: well-formed, never authenticated
			c.Write(streamOf(dgram(100, 1000+uint32(i))))
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for tr.rejects.Load()+tr.accepts.Load() < DefaultMaxConns && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	cli := clientFrom(t, tr, "127.0.0.2")
	from := exchange(t, cli, startReader(cli), srv, sr, 1)
	if from.Addr() != netip.MustParseAddr("127.0.0.2") {
		t.Fatalf("client arrived from %v", from)
	}
	if got := tr.rejects.Load(); got != DefaultMaxConns-DefaultMaxUnauthPerSource {
		t.Fatalf("stream_rejects %d, want %d", got, DefaultMaxConns-DefaultMaxUnauthPerSource)
	}
	waitLinks(t, srv, DefaultMaxUnauthPerSource+1)
}

// The cap counts unauthenticated connections per source (an IPv4 address, an IPv6
// /64); other sources are not affected, and an authenticated connection frees its
// place.
func TestPerSourceCap(t *testing.T) {
	cfg := testConfig()
	cfg.MaxUnauthPerSource = 4
	tr, srv := newServer(t, cfg)
	var held []*net.TCPConn
	for range cfg.MaxUnauthPerSource {
		c := dialFrom(t, "127.0.0.1", srv.LocalAddr())
		if !accepted(t, c) {
			t.Fatal("a connection below the cap was refused")
		}
		held = append(held, c)
	}
	if accepted(t, dialFrom(t, "127.0.0.1", srv.LocalAddr())) {
		t.Fatalf("connection %d from one address accepted, cap %d", cfg.MaxUnauthPerSource+1, cfg.MaxUnauthPerSource)
	}
	if tr.rejects.Load() != 1 {
		t.Fatalf("stream_rejects %d, want 1", tr.rejects.Load())
	}
	if !accepted(t, dialFrom(t, "127.0.0.2", srv.LocalAddr())) {
		t.Fatal("another address was refused")
	}
	// The engine authenticates one of them: its source may open another.
	srv.(conn.Authenticator).Authenticated(endpointOf(held[0]), peerOf(endpointOf(held[0])))
	if !accepted(t, dialFrom(t, "127.0.0.1", srv.LocalAddr())) {
		t.Fatal("an authenticated connection still counts against the cap")
	}
	for _, c := range held {
		if !open(c) {
			t.Fatal("a connection below the cap was closed")
		}
	}
}

func TestSourceOf(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"},
		{"fe80::1%eth0", "fe80::2"},
	} {
		if a, b := sourceOf(netip.MustParseAddr(c.a)), sourceOf(netip.MustParseAddr(c.b)); a != b || !a.IsValid() {
			t.Errorf("%s is %v, %s is %v: want one source", c.a, a, c.b, b)
		}
	}
	for _, c := range []struct{ a, b string }{
		{"192.0.2.1", "192.0.2.2"},
		{"2001:db8:1:2::1", "2001:db8:1:3::1"},
	} {
		if sourceOf(netip.MustParseAddr(c.a)) == sourceOf(netip.MustParseAddr(c.b)) {
			t.Errorf("%s and %s are one source", c.a, c.b)
		}
	}
}

// A connection that sends nothing, or only part of its first frame, is closed
// HelloTimeout after it connected; one that sent a frame is not (it is then held
// to AuthTimeout).
func TestHelloTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.HelloTimeout = 150 * time.Millisecond
	tr, srv := newServer(t, cfg)
	startReaderAuth(srv, authNone)
	silent := dialFrom(t, "127.0.0.1", srv.LocalAddr())
	hello := dialFrom(t, "127.0.0.1", srv.LocalAddr())
	hello.Write(wire.StreamHello[:])
	partial := dialFrom(t, "127.0.0.1", srv.LocalAddr())
	partial.Write(streamOf(dgram(100, 1))[:50])
	good := dialFrom(t, "127.0.0.1", srv.LocalAddr())
	good.Write(streamOf(dgram(100, 2)))
	for _, c := range []net.Conn{silent, hello, partial} {
		if el := closedWithin(t, c, 2*time.Second); el > time.Second {
			t.Fatalf("closed after %v, HelloTimeout %v", el, cfg.HelloTimeout)
		}
	}
	if got := tr.helloTimeouts.Load(); got != 3 {
		t.Fatalf("stream_hello_timeouts %d, want 3", got)
	}
	time.Sleep(2 * cfg.HelloTimeout)
	if !accepted(t, good) || !open(good) {
		t.Fatal("a connection that sent its first frame in time was closed")
	}
}

// Frames do not keep a connection alive, however well-formed: one that is never
// authenticated is closed AuthTimeout after it connected, and an authenticated one
// IdleTimeout after its last authenticated datagram, while one the engine keeps
// authenticating stays.
func TestFramesDoNotRefreshIdle(t *testing.T) {
	cfg := testConfig()
	cfg.AuthTimeout = 300 * time.Millisecond
	cfg.IdleTimeout = 300 * time.Millisecond
	tr, srv := newServer(t, cfg)
	startReaderAuth(srv, authNone) // the test decides what is authenticated
	auth := srv.(conn.Authenticator)

	unauth := dialFrom(t, "127.0.0.1", srv.LocalAddr())
	once := dialFrom(t, "127.0.0.1", srv.LocalAddr())
	kept := dialFrom(t, "127.0.0.1", srv.LocalAddr())
	for _, c := range []net.Conn{unauth, once, kept} {
		c.Write(wire.StreamHello[:])
		if !accepted(t, c) {
			t.Fatal("refused")
		}
	}
	auth.Authenticated(endpointOf(once), peerOf(endpointOf(once)))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // frames every 10 ms on all three; only kept is authenticated again
		defer close(done)
		for id := uint32(1); ; id++ {
			for _, c := range []net.Conn{unauth, once, kept} {
				c.Write(appendFrame(nil, dgram(100, id)))
			}
			auth.Authenticated(endpointOf(kept), peerOf(endpointOf(kept)))
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for _, c := range []net.Conn{unauth, once} {
		if el := closedWithin(t, c, 3*time.Second); el > 2*time.Second {
			t.Fatalf("closed after %v", el)
		}
	}
	if tr.authTimeouts.Load() != 1 || tr.idleClosed.Load() != 1 {
		t.Fatalf("stream_auth_timeouts %d, stream_idle_closed %d; want 1, 1", tr.authTimeouts.Load(), tr.idleClosed.Load())
	}
	time.Sleep(cfg.IdleTimeout)
	if !open(kept) {
		t.Fatal("a connection that is authenticated all along was closed")
	}
}

// At MaxConns a new connection takes the place of an unauthenticated one: the
// oldest of the source with the most of them. Authenticated connections stay.
func TestEvictUnauthenticated(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConns = 8
	cfg.MaxUnauthPerSource = 100 // this test is about the global bound
	tr, srv := newServer(t, cfg)
	sr := startReaderAuth(srv, from2)

	lone := dialFrom(t, "127.0.0.3", srv.LocalAddr()) // the oldest, from a source of its own
	accepted(t, lone)
	var flood []*net.TCPConn
	for range cfg.MaxConns - 1 {
		c := dialFrom(t, "127.0.0.1", srv.LocalAddr())
		accepted(t, c)
		flood = append(flood, c)
	}
	waitLinks(t, srv, cfg.MaxConns)

	// A client from a third address connects and gets through.
	cli := clientFrom(t, tr, "127.0.0.2")
	cr := startReader(cli)
	exchange(t, cli, cr, srv, sr, 1)
	if tr.evictions.Load() != 1 {
		t.Fatalf("stream_evictions %d, want 1", tr.evictions.Load())
	}
	closedWithin(t, flood[0], time.Second)
	if !open(lone) || !open(flood[1]) {
		t.Fatal("evicted another connection than the oldest of the largest source")
	}

	// More garbage evicts garbage, never the authenticated client.
	for range 2 * cfg.MaxConns {
		accepted(t, dialFrom(t, "127.0.0.1", srv.LocalAddr()))
	}
	exchange(t, cli, cr, srv, sr, 10)
	if in, _ := InfoOf(cli, srv.LocalAddr()); in.Connects != 1 {
		t.Fatalf("the client connected %d times, want once", in.Connects)
	}
	if links(srv) > cfg.MaxConns {
		t.Fatalf("%d connections, MaxConns %d", links(srv), cfg.MaxConns)
	}
	if tr.rejects.Load() != 0 {
		t.Fatalf("stream_rejects %d, want 0: there was always an unauthenticated connection to evict", tr.rejects.Load())
	}
}

// Until it is authenticated a connection holds a small read buffer and no send
// queue: idle garbage connections cost little memory.
func TestLazyBuffers(t *testing.T) {
	const n = 256
	cfg := testConfig()
	cfg.MaxUnauthPerSource = n
	_, srv := newServer(t, cfg)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	for range n {
		dialFrom(t, "127.0.0.1", srv.LocalAddr())
	}
	waitLinks(t, srv, n)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	per := (int64(ms.HeapAlloc) - int64(before)) / n
	t.Logf("%d bytes of heap per idle connection (both ends)", per)
	// Preallocated buffers were 2×64 KiB of queue and 32 KiB to read into.
	if per > 16<<10 {
		t.Fatalf("%d bytes of heap per idle connection, want < 16 KiB", per)
	}
}

// Before it is authenticated a connection's read buffer is small, but a large
// frame still arrives whole.
func TestLargeFrameBeforeAuth(t *testing.T) {
	_, srv := newServer(t, testConfig())
	sr := startReaderAuth(srv, authNone)
	c := dialFrom(t, "127.0.0.1", srv.LocalAddr())
	big := dgram(9000, 7)
	c.Write(streamOf(dgram(60, 6), big, dgram(1400, 8)))
	_, ids := sr.waitFor(t, 3, 5*time.Second)
	if ids[0] != 6 || ids[1] != 7 || ids[2] != 8 {
		t.Fatalf("got %v", ids)
	}
	sr.mu.Lock()
	err := sr.err
	sr.mu.Unlock()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
}
