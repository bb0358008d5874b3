//go:build linux

package conn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/internal/testenv"
)

// udpCmsgsSwapped: qemu-user translates only the control messages it knows and
// hands UDP_SEGMENT and UDP_GRO to the host kernel byte for byte, so for a
// big-endian guest on a little-endian host the kernel reads a byte-swapped
// segment size (1200 → 45060: one oversized datagram, or EINVAL) and braid a
// swapped GRO size. There the sockets of these tests go without offload, and the
// tests of offload itself skip; TestPutSegmentLayout and
// TestParseControlAfterOddMessage still check the messages' layout and byte order.
var udpCmsgsSwapped = testenv.Emulated() && binary.NativeEndian.Uint16([]byte{0, 1}) == 1

func listen(t testing.TB, opt Options) *udpConn {
	t.Helper()
	if udpCmsgsSwapped {
		opt.NoOffload = true
	}
	c, err := Listen(opt)
	if err != nil {
		t.Fatalf("Listen(%+v): %v", opt, err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*udpConn)
}

// bufs returns n buffers of size bytes each.
func bufs(n, size int) [][]byte {
	b := make([][]byte, n)
	for i := range b {
		b[i] = make([]byte, size)
	}
	return b
}

type got struct {
	payload string
	ep      Endpoint
}

// readN reads until n datagrams arrived and returns them plus the largest
// batch a single ReadBatch returned.
func readN(t *testing.T, c Conn, n, batch int) ([]got, int) {
	t.Helper()
	rb := bufs(batch, 2048)
	sizes := make([]int, batch)
	eps := make([]Endpoint, batch)
	var out []got
	maxBatch := 0
	deadline := time.AfterFunc(5*time.Second, func() { c.Close() })
	defer deadline.Stop()
	for len(out) < n {
		k, err := c.ReadBatch(rb, sizes, eps)
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d datagrams: %v", len(out), n, err)
		}
		maxBatch = max(maxBatch, k)
		for i := 0; i < k; i++ {
			out = append(out, got{string(rb[i][:sizes[i]]), eps[i]})
		}
	}
	return out, maxBatch
}

func TestLoopbackBatch(t *testing.T) {
	for _, tc := range []struct{ name, addr string }{{"v4", "127.0.0.1:0"}, {"v6", "[::1]:0"}} {
		t.Run(tc.name, func(t *testing.T) {
			a := listen(t, Options{Addr: netip.MustParseAddrPort(tc.addr), BatchSize: 16})
			b := listen(t, Options{Addr: netip.MustParseAddrPort(tc.addr), BatchSize: 16})
			const n = 40 // more than one batch: WriteBatch must split
			var out [][]byte
			var eps []Endpoint
			for i := 0; i < n; i++ {
				out = append(out, []byte(fmt.Sprintf("datagram %d %s", i, strings.Repeat("x", i*20))))
				eps = append(eps, Endpoint{Remote: b.LocalAddr()})
			}
			if err := a.WriteBatch(out, eps); err != nil {
				t.Fatal(err)
			}
			res, maxBatch := readN(t, b, n, 16)
			for i, r := range res {
				if r.payload != string(out[i]) {
					t.Fatalf("datagram %d = %q, want %q", i, r.payload, out[i])
				}
				if r.ep.Remote != a.LocalAddr() {
					t.Fatalf("datagram %d from %v, want %v", i, r.ep.Remote, a.LocalAddr())
				}
				if r.ep.Local.IsValid() {
					t.Fatalf("datagram %d: Local = %v on a specific-address socket, want zero", i, r.ep.Local)
				}
			}
			if maxBatch < 2 {
				t.Errorf("largest ReadBatch returned %d datagrams; recvmmsg batching not effective", maxBatch)
			}
			if a.BatchSize() != 16 {
				t.Errorf("BatchSize = %d, want 16", a.BatchSize())
			}
		})
	}
}

func TestLocalAddr(t *testing.T) {
	for _, tc := range []struct {
		opt  Options
		want string // port replaced by 0
	}{
		{Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")}, "127.0.0.1:0"},
		{Options{Network: "udp4"}, "0.0.0.0:0"},
		{Options{Addr: netip.MustParseAddrPort("0.0.0.0:0")}, "0.0.0.0:0"},
		{Options{Addr: netip.MustParseAddrPort("[::]:0")}, "[::]:0"},
		{Options{}, "[::]:0"},
	} {
		c := listen(t, tc.opt)
		la := c.LocalAddr()
		if la.Port() == 0 {
			t.Errorf("%+v: no port in LocalAddr %v", tc.opt, la)
		}
		if s := netip.AddrPortFrom(la.Addr(), 0).String(); s != tc.want {
			t.Errorf("%+v: LocalAddr %v, want %s", tc.opt, la, tc.want)
		}
	}
}

// TestPktinfoV4 checks that a wildcard socket reports the address each
// datagram arrived on and that replies leave from it. 127.0.0.2 is on lo on
// every Linux host, and without IP_PKTINFO the kernel would answer a peer on
// 127.0.0.1 from 127.0.0.1.
func TestPktinfoV4(t *testing.T) {
	for _, network := range []string{"udp4", "udp"} {
		t.Run(network, func(t *testing.T) {
			srv := listen(t, Options{Network: network})
			cli := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
			port := srv.LocalAddr().Port()
			dsts := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
			for _, dst := range dsts {
				err := cli.WriteBatch([][]byte{[]byte("ping " + dst.String())}, []Endpoint{{Remote: netip.AddrPortFrom(dst, port)}})
				if err != nil {
					t.Fatal(err)
				}
			}
			res, _ := readN(t, srv, 2, 8)
			for i, r := range res {
				if r.ep.Local != dsts[i] {
					t.Errorf("datagram %d: Local = %v, want %v", i, r.ep.Local, dsts[i])
				}
				if r.ep.Remote != cli.LocalAddr() || !r.ep.Remote.Addr().Is4() {
					t.Errorf("datagram %d: Remote = %v, want plain IPv4 %v", i, r.ep.Remote, cli.LocalAddr())
				}
			}
			// Reply to both through their endpoints.
			if err := srv.WriteBatch([][]byte{[]byte("a"), []byte("b")}, []Endpoint{res[0].ep, res[1].ep}); err != nil {
				t.Fatal(err)
			}
			back, _ := readN(t, cli, 2, 8)
			for i, r := range back {
				want := netip.AddrPortFrom(dsts[i], port)
				if r.ep.Remote != want {
					t.Errorf("reply %d came from %v, want %v", i, r.ep.Remote, want)
				}
			}
		})
	}
}

func TestPktinfoV6(t *testing.T) {
	for _, network := range []string{"udp6", "udp"} {
		t.Run(network, func(t *testing.T) {
			srv := listen(t, Options{Network: network})
			cli := listen(t, Options{Addr: netip.MustParseAddrPort("[::1]:0")})
			dst := netip.AddrPortFrom(netip.IPv6Loopback(), srv.LocalAddr().Port())
			if err := cli.WriteBatch([][]byte{[]byte("hi")}, []Endpoint{{Remote: dst}}); err != nil {
				t.Fatal(err)
			}
			res, _ := readN(t, srv, 1, 4)
			if res[0].ep.Local != netip.IPv6Loopback() || res[0].ep.Remote != cli.LocalAddr() {
				t.Fatalf("endpoint = %+v, want Local ::1 Remote %v", res[0].ep, cli.LocalAddr())
			}
			if err := srv.WriteBatch([][]byte{[]byte("back")}, []Endpoint{res[0].ep}); err != nil {
				t.Fatal(err)
			}
			back, _ := readN(t, cli, 1, 4)
			if back[0].payload != "back" || back[0].ep.Remote != dst {
				t.Fatalf("reply %q from %v, want \"back\" from %v", back[0].payload, back[0].ep.Remote, dst)
			}
		})
	}
}

// TestStaleSource: a Local address that is not (or no longer) ours must not
// make the datagram fail; it is sent from whatever source the kernel picks.
func TestStaleSource(t *testing.T) {
	srv := listen(t, Options{Network: "udp4"})
	cli := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	ep := Endpoint{Remote: cli.LocalAddr(), Local: netip.MustParseAddr("198.18.77.1")}
	if err := srv.WriteBatch([][]byte{[]byte("x")}, []Endpoint{ep}); err != nil {
		t.Fatalf("WriteBatch with a foreign source: %v", err)
	}
	res, _ := readN(t, cli, 1, 1)
	if res[0].payload != "x" || res[0].ep.Remote.Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("got %q from %v", res[0].payload, res[0].ep.Remote)
	}
}

func TestWriteErrorsDoNotStopBatch(t *testing.T) {
	a := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	b := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	v6 := netip.MustParseAddrPort("[::1]:9") // an IPv4 socket cannot send to IPv6
	err := a.WriteBatch(
		[][]byte{[]byte("one"), []byte("bad"), []byte("two"), []byte("zero"), []byte("three")},
		[]Endpoint{{Remote: b.LocalAddr()}, {Remote: v6}, {Remote: b.LocalAddr()}, {}, {Remote: b.LocalAddr()}})
	if err == nil {
		t.Fatal("WriteBatch to an IPv6 address from an IPv4 socket: no error")
	}
	if !strings.Contains(err.Error(), "[::1]:9") {
		t.Errorf("error %q does not name the failing destination", err)
	}
	res, _ := readN(t, b, 3, 8)
	for i, want := range []string{"one", "two", "three"} {
		if res[i].payload != want {
			t.Errorf("datagram %d = %q, want %q", i, res[i].payload, want)
		}
	}
	if err := a.WriteBatch([][]byte{[]byte("x"), []byte("y")}, []Endpoint{{Remote: b.LocalAddr()}}); err == nil {
		t.Error("WriteBatch with fewer endpoints than datagrams: no error")
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	c := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	done := make(chan error, 1)
	go func() {
		_, err := c.ReadBatch(bufs(4, 100), make([]int, 4), make([]Endpoint, 4))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it block; the test is valid either way
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ReadBatch after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock ReadBatch")
	}
	if _, err := c.ReadBatch(bufs(1, 10), make([]int, 1), make([]Endpoint, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadBatch on closed conn: %v", err)
	}
	if err := c.WriteBatch([][]byte{{1}}, []Endpoint{{Remote: netip.MustParseAddrPort("127.0.0.1:9")}}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WriteBatch on closed conn: %v", err)
	}
}

func TestListenErrors(t *testing.T) {
	a := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	_, err := Listen(Options{Addr: a.LocalAddr()})
	want := fmt.Sprintf("listen udp %v: address already in use", a.LocalAddr())
	if err == nil || err.Error() != want || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("busy port: %v, want %q (EADDRINUSE)", err, want)
	}

	_, err = Listen(Options{Device: "braidnope9", Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err == nil || err.Error() != `interface "braidnope9" not found` || !errors.Is(err, syscall.ENODEV) {
		t.Errorf("unknown interface: %v", err)
	}

	// 198.18.255.1 is a benchmarking address not configured on this host;
	// bind fails without sending anything.
	_, err = Listen(Options{Addr: netip.MustParseAddrPort("198.18.255.1:7000")})
	if err == nil || !strings.HasPrefix(err.Error(), "listen udp 198.18.255.1:7000: address not available") || !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Errorf("foreign address: %v", err)
	}

	_, err = Listen(Options{Network: "tcp"})
	if err == nil || !strings.Contains(err.Error(), `unknown network "tcp"`) {
		t.Errorf("network tcp: %v", err)
	}

	_, err = Listen(Options{Network: "udp6", Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err == nil || strings.Count(err.Error(), "listen") != 1 || strings.Contains(err.Error(), "\n") {
		t.Errorf("udp6 with IPv4 address: %v, want one one-line error", err)
	}

	// Permission failures cannot be provoked as root; check the message.
	if e := deviceError("eth1", unix.EPERM); !strings.Contains(e.Error(), "CAP_NET_RAW") || !strings.Contains(e.Error(), `"eth1"`) || !errors.Is(e, syscall.EPERM) {
		t.Errorf("EPERM message: %v", e)
	}
}

func getsockopt(t *testing.T, c *udpConn, level, opt int) int {
	var v int
	var err error
	c.rc.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), level, opt) })
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestBindToDevice(t *testing.T) {
	c := listen(t, Options{Device: "lo", Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	t.Run("getsockopt", func(t *testing.T) {
		// The option is set through qemu, but reading it back is not emulated.
		testenv.SkipIfEmulated(t, "qemu-user does not emulate getsockopt(SO_BINDTODEVICE) (EINVAL)")
		var dev string
		var err error
		c.rc.Control(func(fd uintptr) { dev, err = unix.GetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE) })
		if err != nil || dev != "lo" {
			t.Fatalf("SO_BINDTODEVICE = %q, %v; want lo", dev, err)
		}
	})
	peer := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err := peer.WriteBatch([][]byte{[]byte("via lo")}, []Endpoint{{Remote: c.LocalAddr()}}); err != nil {
		t.Fatal(err)
	}
	if res, _ := readN(t, c, 1, 1); res[0].payload != "via lo" {
		t.Fatalf("got %q", res[0].payload)
	}
}

func TestSocketBuffers(t *testing.T) {
	c := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0"), RecvBuf: 3 << 20, SendBuf: 5 << 20})
	rcv := getsockopt(t, c, unix.SOL_SOCKET, unix.SO_RCVBUF)
	snd := getsockopt(t, c, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if os.Geteuid() != 0 {
		t.Skipf("needs root for SO_*BUFFORCE (got rcv %d snd %d, capped by rmem_max/wmem_max)", rcv, snd)
	}
	// The kernel doubles the requested value for bookkeeping overhead.
	if rcv != 2*(3<<20) || snd != 2*(5<<20) {
		t.Fatalf("SO_RCVBUF = %d, SO_SNDBUF = %d; want %d and %d", rcv, snd, 2*(3<<20), 2*(5<<20))
	}
	d := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0"), RecvBuf: -1})
	if v := getsockopt(t, d, unix.SOL_SOCKET, unix.SO_RCVBUF); v >= 2*(3<<20) {
		t.Errorf("RecvBuf -1 should keep the system default, got %d", v)
	}
}

// pingPong writes one batch from a to b and reads it all back.
type pingPong struct {
	a, b   Conn
	out    [][]byte
	oeps   []Endpoint
	in     [][]byte
	sizes  []int
	ieps   []Endpoint
	failed error
}

func newPingPong(t testing.TB, a, b Conn, n, size int) *pingPong {
	p := &pingPong{a: a, b: b, out: bufs(n, size), oeps: make([]Endpoint, n),
		in: bufs(n, 2048), sizes: make([]int, n), ieps: make([]Endpoint, n)}
	for i := range p.oeps {
		p.oeps[i].Remote = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.LocalAddr().Port())
		if b.LocalAddr().Addr().Is6() && !b.LocalAddr().Addr().IsUnspecified() {
			p.oeps[i].Remote = b.LocalAddr()
		}
	}
	return p
}

func (p *pingPong) run() {
	if err := p.a.WriteBatch(p.out, p.oeps); err != nil {
		p.failed = err
		return
	}
	for got := 0; got < len(p.out); {
		n, err := p.b.ReadBatch(p.in, p.sizes, p.ieps)
		if err != nil {
			p.failed = err
			return
		}
		got += n
	}
}

// TestZeroAllocs: neither direction allocates in steady state, including the
// wildcard socket that parses IP_PKTINFO and the IPv6 path.
func TestZeroAllocs(t *testing.T) {
	for _, tc := range []struct{ name, a, b, network string }{
		{"v4", "127.0.0.1:0", "127.0.0.1:0", ""},
		{"v4-wildcard", "127.0.0.1:0", "0.0.0.0:0", ""},
		{"v6", "[::1]:0", "[::1]:0", ""},
		{"dualstack-v4", "127.0.0.1:0", "[::]:0", "udp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := listen(t, Options{Addr: netip.MustParseAddrPort(tc.a)})
			b := listen(t, Options{Addr: netip.MustParseAddrPort(tc.b), Network: tc.network})
			p := newPingPong(t, a, b, 32, 1200)
			p.run() // warm up pools
			allocs := testing.AllocsPerRun(200, p.run)
			if p.failed != nil {
				t.Fatal(p.failed)
			}
			if allocs != 0 && !raceEnabled {
				t.Fatalf("%v allocations per batch round trip, want 0", allocs)
			}
			if b.pktinfo && !p.ieps[0].Local.IsValid() {
				t.Fatal("wildcard socket did not report Local")
			}
			if !bytes.Equal(p.in[0][:p.sizes[0]], p.out[0]) {
				t.Fatal("payload mismatch")
			}
		})
	}
}

// BenchmarkLoopback: one op = a WriteBatch of 32 datagrams of 1200 bytes and
// the ReadBatch calls that receive them, over IPv4 loopback.
func BenchmarkLoopback(b *testing.B) {
	for _, wild := range []bool{false, true} {
		name, baddr := "specific", "127.0.0.1:0"
		if wild {
			name, baddr = "wildcard-pktinfo", "0.0.0.0:0"
		}
		b.Run(name, func(b *testing.B) {
			x := listen(b, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
			y := listen(b, Options{Addr: netip.MustParseAddrPort(baddr)})
			p := newPingPong(b, x, y, 32, 1200)
			b.ReportAllocs()
			b.SetBytes(32 * 1200)
			for b.Loop() {
				p.run()
			}
			if p.failed != nil {
				b.Fatal(p.failed)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/datagram")
		})
	}
}

// Sockets with ReusePort share one address and port: datagrams from many
// sources are spread over them, each source staying on one socket, and a
// socket without it still cannot bind the port.
func TestReusePort(t *testing.T) {
	a := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0"), ReusePort: true, NoOffload: true})
	b := listen(t, Options{Addr: a.LocalAddr(), ReusePort: true, NoOffload: true})
	if b.LocalAddr() != a.LocalAddr() {
		t.Fatalf("second socket on %v, want %v", b.LocalAddr(), a.LocalAddr())
	}
	if _, err := Listen(Options{Addr: a.LocalAddr()}); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("a socket without ReusePort bound a shared port: %v", err)
	}
	const sources, each = 32, 3
	for i := range sources {
		s := listen(t, Options{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
		for k := range each {
			msg := []byte(fmt.Sprintf("%d/%d", i, k))
			if err := s.WriteBatch([][]byte{msg}, []Endpoint{{Remote: a.LocalAddr()}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	bySource := map[netip.AddrPort]int{} // source → socket 1 or 2
	total := 0
	for i, c := range []*udpConn{a, b} {
		rb, sizes, eps := bufs(64, 2048), make([]int, 64), make([]Endpoint, 64)
		for {
			c.uc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := c.ReadBatch(rb, sizes, eps)
			if err != nil {
				break
			}
			for _, ep := range eps[:n] {
				if s, ok := bySource[ep.Remote]; ok && s != i+1 {
					t.Fatalf("source %v reached both sockets", ep.Remote)
				}
				bySource[ep.Remote] = i + 1
			}
			total += n
		}
	}
	if total != sources*each {
		t.Fatalf("%d datagrams arrived, want %d", total, sources*each)
	}
	counts := map[int]int{}
	for _, s := range bySource {
		counts[s]++
	}
	if counts[1] == 0 || counts[2] == 0 {
		t.Fatalf("sources per socket %v: the kernel did not spread them", counts)
	}
}
