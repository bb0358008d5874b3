package conntest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn"
)

var (
	addrA = netip.MustParseAddr("198.18.1.1")
	addrB = netip.MustParseAddr("198.18.1.2")
	addrC = netip.MustParseAddr("198.18.2.1")
)

func ap(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

func manual() *Network {
	cfg := DefaultConfig()
	cfg.ManualClock = true
	return NewNetworkConfig(cfg)
}

type rx struct {
	payload string
	ep      conn.Endpoint
}

// drain reads whatever is queued without blocking (the queue is checked
// through a zero-delay read loop guarded by the conn's count).
func drain(t testing.TB, c *Conn) []rx {
	var out []rx
	bufs := [][]byte{make([]byte, 2048), make([]byte, 2048), make([]byte, 2048), make([]byte, 2048)}
	sizes := make([]int, 4)
	eps := make([]conn.Endpoint, 4)
	for {
		c.mu.Lock()
		empty := c.count == 0
		c.mu.Unlock()
		if empty {
			return out
		}
		n, err := c.ReadBatch(bufs, sizes, eps)
		if err != nil {
			panic(err)
		}
		for i := 0; i < n; i++ {
			out = append(out, rx{string(bufs[i][:sizes[i]]), eps[i]})
		}
	}
}

func send(t *testing.T, c *Conn, to netip.AddrPort, payloads ...string) {
	t.Helper()
	bufs := make([][]byte, len(payloads))
	eps := make([]conn.Endpoint, len(payloads))
	for i, p := range payloads {
		bufs[i] = []byte(p)
		eps[i].Remote = to
	}
	if err := c.WriteBatch(bufs, eps); err != nil {
		t.Fatal(err)
	}
}

func payloads(r []rx) string {
	var s []string
	for _, x := range r {
		s = append(s, x.payload)
	}
	return strings.Join(s, ",")
}

func TestDeliveryAndEndpoints(t *testing.T) {
	n := manual()
	a := n.Listen(ap(addrA, 1000))
	b := n.Listen(ap(addrB, 2000))
	w := n.Listen(ap(netip.IPv4Unspecified(), 3000))
	send(t, a, b.LocalAddr(), "1", "2", "3")
	got := drain(t, b)
	if payloads(got) != "1,2,3" {
		t.Fatalf("got %q", payloads(got))
	}
	if got[0].ep != (conn.Endpoint{Remote: ap(addrA, 1000)}) {
		t.Errorf("endpoint %+v: want Remote %v and no Local on a specific bind", got[0].ep, ap(addrA, 1000))
	}
	// A wildcard conn reports the destination as Local and replies from it.
	send(t, a, ap(addrC, 3000), "to C")
	got = drain(t, w)
	if len(got) != 1 || got[0].ep.Local != addrC {
		t.Fatalf("wildcard got %+v, want Local %v", got, addrC)
	}
	if err := w.WriteBatch([][]byte{[]byte("reply")}, []conn.Endpoint{got[0].ep}); err != nil {
		t.Fatal(err)
	}
	back := drain(t, a)
	if len(back) != 1 || back[0].ep.Remote != ap(addrC, 3000) {
		t.Fatalf("reply %+v, want from %v", back, ap(addrC, 3000))
	}
	// Without Local a wildcard conn cannot know its source.
	err := w.WriteBatch([][]byte{[]byte("x")}, []conn.Endpoint{{Remote: a.LocalAddr()}})
	if err == nil || !strings.Contains(err.Error(), "no source address") {
		t.Errorf("wildcard write without Local: %v", err)
	}
	// v4-mapped destinations are the same as IPv4 ones.
	send(t, a, ap(netip.AddrFrom16(addrB.As16()), 2000), "mapped")
	if got := drain(t, b); payloads(got) != "mapped" {
		t.Errorf("v4-mapped destination: got %q", payloads(got))
	}
	if b.BatchSize() != 64 {
		t.Errorf("BatchSize %d", b.BatchSize())
	}
}

func TestListenErrors(t *testing.T) {
	n := NewNetwork()
	a := n.Listen(ap(addrA, 7000))
	if _, err := n.TryListen(a.LocalAddr()); err == nil || err.Error() != "listen udp 198.18.1.1:7000: address already in use" {
		t.Errorf("busy: %v", err)
	}
	e1 := n.Listen(ap(addrA, 0))
	e2 := n.Listen(ap(addrA, 0))
	if e1.LocalAddr().Port() == 0 || e1.LocalAddr() == e2.LocalAddr() {
		t.Errorf("ephemeral ports %v %v", e1.LocalAddr(), e2.LocalAddr())
	}
	if _, err := n.ListenOptions(conn.Options{Device: "eth9"}); err == nil || err.Error() != `interface "eth9" not found` {
		t.Errorf("unknown device: %v", err)
	}
	a.Close()
	if _, err := n.TryListen(ap(addrA, 7000)); err != nil {
		t.Errorf("port not freed by Close: %v", err)
	}
}

func TestInterfaces(t *testing.T) {
	n := manual()
	n.AddInterface("eth1", addrA)
	n.AddInterface("wwan0", addrC)
	srv := n.Listen(ap(addrB, 7000))
	c1, err := n.ListenOptions(conn.Options{Device: "eth1"})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := n.ListenOptions(conn.Options{Device: "wwan0", Addr: ap(netip.Addr{}, c1.LocalAddr().Port())})
	if err != nil {
		t.Fatal(err) // same port, other device: allowed, as with SO_BINDTODEVICE
	}
	for _, c := range []conn.Conn{c1, c2} {
		if err := c.WriteBatch([][]byte{[]byte("hi")}, []conn.Endpoint{{Remote: srv.LocalAddr()}}); err != nil {
			t.Fatal(err)
		}
	}
	got := drain(t, srv)
	if len(got) != 2 || got[0].ep.Remote.Addr() != addrA || got[1].ep.Remote.Addr() != addrC {
		t.Fatalf("sources %+v, want %v then %v", got, addrA, addrC)
	}
	// Replies reach the conn pinned to the interface owning the address.
	send(t, srv, got[1].ep.Remote, "for wwan0")
	if r := drain(t, c2.(*Conn)); len(r) != 1 || r[0].ep.Local != addrC {
		t.Fatalf("c2 got %+v", r)
	}
	if r := drain(t, c1.(*Conn)); len(r) != 0 {
		t.Fatalf("c1 got %+v", r)
	}
}

func TestDelayManualClock(t *testing.T) {
	n := manual()
	a := n.Listen(ap(addrA, 1))
	b := n.Listen(ap(addrB, 2))
	n.SetLink(addrA, addrB, LinkOptions{Delay: 30 * time.Millisecond})
	send(t, a, b.LocalAddr(), "slow")
	send(t, b, a.LocalAddr(), "reverse is instant")
	if got := drain(t, a); payloads(got) != "reverse is instant" {
		t.Fatalf("reverse direction: %q", payloads(got))
	}
	n.Advance(29 * time.Millisecond)
	if got := drain(t, b); len(got) != 0 {
		t.Fatalf("delivered after 29ms of 30ms delay: %q", payloads(got))
	}
	n.Advance(time.Millisecond)
	if got := drain(t, b); payloads(got) != "slow" {
		t.Fatalf("after 30ms: %q", payloads(got))
	}
	if n.Now() != Epoch.Add(30*time.Millisecond) {
		t.Errorf("Now = %v", n.Now())
	}
}

// TestRateAndQueue checks the FIFO serializer against hand-computed times:
// 8 Mbit/s = 1 byte/µs, datagrams of 972 + 28 = 1000 bytes take 1 ms each;
// Delay 10 ms. Queue 2500 bytes: at t=0 the first datagram enters (backlog
// 0), the second sees 1000 bytes waiting (ok), the third 2000+1000 > 2500
// (dropped), and so on.
func TestRateAndQueue(t *testing.T) {
	n := manual()
	a := n.Listen(ap(addrA, 1))
	b := n.Listen(ap(addrB, 2))
	n.SetLink(addrA, addrB, LinkOptions{Rate: 8e6, Delay: 10 * time.Millisecond, Queue: 2500})
	p := strings.Repeat("x", 972)
	send(t, a, b.LocalAddr(), "1"+p[1:], "2"+p[1:], "3"+p[1:], "4"+p[1:])
	n.Advance(10*time.Millisecond + 999*time.Microsecond)
	if got := drain(t, b); len(got) != 0 {
		t.Fatalf("%d datagrams before 11 ms", len(got))
	}
	n.Advance(time.Microsecond) // 11 ms: first done
	if got := drain(t, b); len(got) != 1 || got[0].payload[0] != '1' {
		t.Fatalf("at 11ms got %d datagrams", len(got))
	}
	n.Advance(time.Millisecond) // 12 ms: second done
	if got := drain(t, b); len(got) != 1 || got[0].payload[0] != '2' {
		t.Fatalf("at 12ms got %d datagrams", len(got))
	}
	s := n.Stats(addrA, addrB)
	if s.Sent != 4 || s.QueueDrops != 2 || s.Delivered != 2 {
		t.Fatalf("stats %+v, want Sent 4, QueueDrops 2, Delivered 2", s)
	}
	// At 12 ms the serializer has been idle since 2 ms: a new datagram starts
	// at once, is done at 13 ms and arrives at 23 ms.
	send(t, a, b.LocalAddr(), "5"+p[1:])
	n.Advance(10*time.Millisecond + 999*time.Microsecond)
	if got := drain(t, b); len(got) != 0 {
		t.Fatalf("fifth datagram early")
	}
	n.Advance(time.Microsecond)
	if got := drain(t, b); len(got) != 1 || got[0].payload[0] != '5' {
		t.Fatalf("fifth datagram not delivered at 23 ms")
	}
}

// TestRateSpacing: without a queue limit a burst is spread at the line rate:
// 10 datagrams of 1000 wire bytes at 8 Mbit/s arrive 1 ms apart.
func TestRateSpacing(t *testing.T) {
	n := manual()
	a := n.Listen(ap(addrA, 1))
	b := n.Listen(ap(addrB, 2))
	n.SetLink(addrA, addrB, LinkOptions{Rate: 8e6})
	p := strings.Repeat("x", 972)
	for i := 0; i < 10; i++ {
		send(t, a, b.LocalAddr(), p)
	}
	for ms := 1; ms <= 10; ms++ {
		n.Advance(time.Millisecond)
		if got := drain(t, b); len(got) != 1 {
			t.Fatalf("at %d ms: %d datagrams, want 1", ms, len(got))
		}
	}
}

func lossPattern(seed uint64, loss float64, count int) (string, LinkStats) {
	cfg := DefaultConfig()
	cfg.Seed = seed
	cfg.ManualClock = true
	n := NewNetworkConfig(cfg)
	a := n.Listen(ap(addrA, 1))
	b := n.Listen(ap(addrB, 2))
	// Traffic on another link must not disturb this link's stream.
	c := n.Listen(ap(addrC, 3))
	n.SetLink(addrA, addrB, LinkOptions{Loss: loss})
	n.SetLink(addrC, addrB, LinkOptions{Loss: loss})
	var sb strings.Builder
	for i := 0; i < count; i++ {
		if seed == 7 && i%3 == 0 {
			c.WriteBatch([][]byte{{0}}, []conn.Endpoint{{Remote: b.LocalAddr()}})
		}
		a.WriteBatch([][]byte{[]byte(fmt.Sprint(i))}, []conn.Endpoint{{Remote: b.LocalAddr()}})
		fromA := false
		for _, r := range drain(nil, b) {
			fromA = fromA || r.ep.Remote.Addr() == addrA
		}
		if fromA {
			sb.WriteByte('1')
		} else {
			sb.WriteByte('0')
		}
	}
	return sb.String(), n.Stats(addrA, addrB)
}

func TestLossSeeded(t *testing.T) {
	p1, s1 := lossPattern(7, 0.3, 2000)
	p2, _ := lossPattern(7, 0.3, 2000)
	if p1 != p2 {
		t.Fatal("same seed, different loss pattern")
	}
	p3, _ := lossPattern(8, 0.3, 2000)
	if p1 == p3 {
		t.Fatal("different seeds, same loss pattern")
	}
	lost := strings.Count(p1, "0")
	// Binomial(2000, 0.3): mean 600, sd 20.5; ±5 sd.
	if lost < 498 || lost > 702 || uint64(lost) != s1.Lost || s1.Delivered != uint64(2000-lost) {
		t.Fatalf("lost %d of 2000 at 30%% (stats %+v)", lost, s1)
	}
	if p, _ := lossPattern(9, 0, 500); strings.Contains(p, "0") {
		t.Fatal("loss 0 lost datagrams")
	}
}

func TestDownAndDefaultLink(t *testing.T) {
	n := manual()
	a := n.Listen(ap(addrA, 1))
	b := n.Listen(ap(addrB, 2))
	n.SetLink(addrA, addrB, LinkOptions{Delay: 10 * time.Millisecond})
	send(t, a, b.LocalAddr(), "in flight")
	n.SetLink(addrA, addrB, LinkOptions{Delay: 10 * time.Millisecond, Down: true})
	send(t, a, b.LocalAddr(), "refused")
	n.Advance(20 * time.Millisecond)
	if got := drain(t, b); len(got) != 0 {
		t.Fatalf("down link delivered %q", payloads(got))
	}
	if s := n.Stats(addrA, addrB); s.DownDrops != 2 {
		t.Fatalf("DownDrops %d, want 2 (one at send, one in flight)", s.DownDrops)
	}
	n.SetLink(addrA, addrB, LinkOptions{})
	send(t, a, b.LocalAddr(), "up again")
	if got := drain(t, b); payloads(got) != "up again" {
		t.Fatalf("after up: %q", payloads(got))
	}
	// The default applies to links never set explicitly.
	c := n.Listen(ap(addrC, 3))
	n.SetDefaultLink(LinkOptions{Down: true})
	send(t, c, b.LocalAddr(), "default down")
	send(t, a, b.LocalAddr(), "explicit up")
	if got := drain(t, b); payloads(got) != "explicit up" {
		t.Fatalf("default link: %q", payloads(got))
	}
	if !n.Link(addrC, addrB).Down || n.Link(addrA, addrB).Down {
		t.Fatal("Link() does not report options in force")
	}
}

func TestDuplicateAndRecvQueue(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ManualClock = true
	cfg.RecvQueue = 5
	n := NewNetworkConfig(cfg)
	a := n.Listen(ap(addrA, 1))
	b := n.Listen(ap(addrB, 2))
	n.SetLink(addrA, addrB, LinkOptions{Duplicate: 1})
	send(t, a, b.LocalAddr(), "x", "y")
	if got := drain(t, b); payloads(got) != "x,x,y,y" {
		t.Fatalf("duplicate: %q", payloads(got))
	}
	n.SetLink(addrA, addrB, LinkOptions{})
	send(t, a, b.LocalAddr(), "1", "2", "3", "4", "5", "6", "7")
	if got := drain(t, b); payloads(got) != "1,2,3,4,5" {
		t.Fatalf("queue of 5: %q", payloads(got))
	}
	if s := n.Stats(addrA, addrB); s.RecvDrops != 2 || s.Duplicated != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestInjectCaptureFilter(t *testing.T) {
	n := manual()
	a := n.Listen(ap(addrA, 1))
	b := n.Listen(ap(addrB, 2))
	type rec struct {
		from, to netip.AddrPort
		data     string
	}
	var log []rec
	n.Capture(func(from, to netip.AddrPort, p []byte) { log = append(log, rec{from, to, string(p)}) })
	n.SetFilter(func(from, to netip.AddrPort, p []byte) bool { return string(p) != "drop me" })
	n.SetLink(addrA, addrB, LinkOptions{Down: true}) // captured even if the link drops it
	send(t, a, b.LocalAddr(), "hello", "drop me")
	n.SetLink(addrA, addrB, LinkOptions{})
	send(t, a, b.LocalAddr(), "drop me", "world")
	if got := drain(t, b); payloads(got) != "world" {
		t.Fatalf("filter: got %q", payloads(got))
	}
	if len(log) != 4 || log[0] != (rec{a.LocalAddr(), b.LocalAddr(), "hello"}) {
		t.Fatalf("capture log %+v", log)
	}
	// Replay the captured first datagram, and forge one from a stranger.
	n.Capture(nil)
	n.Inject(log[0].from, log[0].to, []byte(log[0].data))
	spoof := ap(netip.MustParseAddr("203.0.113.9"), 666)
	n.Inject(spoof, b.LocalAddr(), []byte("forged"))
	got := drain(t, b)
	if payloads(got) != "hello,forged" || got[0].ep.Remote != a.LocalAddr() || got[1].ep.Remote != spoof {
		t.Fatalf("inject: %+v", got)
	}
	if len(log) != 4 {
		t.Fatal("injected datagrams were captured")
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	n := NewNetwork()
	c := n.Listen(ap(addrA, 1))
	done := make(chan error, 1)
	go func() {
		_, err := c.ReadBatch([][]byte{make([]byte, 10)}, []int{0}, []conn.Endpoint{{}})
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("err %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock ReadBatch")
	}
	if err := c.WriteBatch([][]byte{{1}}, []conn.Endpoint{{Remote: ap(addrB, 1)}}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	d := n.Listen(ap(addrB, 1))
	n.Close()
	if _, err := d.ReadBatch([][]byte{make([]byte, 10)}, []int{0}, []conn.Endpoint{{}}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Network.Close: %v", err)
	}
}

// TestRealTime: with real time a delayed datagram arrives after its delay
// (lower bound only; the upper bound is loose on a busy machine) and a burst
// over concurrent writers arrives complete.
func TestRealTime(t *testing.T) {
	n := NewNetwork()
	defer n.Close()
	a := n.Listen(ap(addrA, 1))
	b := n.Listen(ap(addrB, 2))
	n.SetLink(addrA, addrB, LinkOptions{Delay: 30 * time.Millisecond})
	start := time.Now()
	send(t, a, b.LocalAddr(), "late")
	buf := [][]byte{make([]byte, 64)}
	sizes := []int{0}
	eps := []conn.Endpoint{{}}
	if _, err := b.ReadBatch(buf, sizes, eps); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 30*time.Millisecond || string(buf[0][:sizes[0]]) != "late" {
		t.Fatalf("got %q after %v, want \"late\" after ≥30ms", buf[0][:sizes[0]], el)
	}

	const writers, each = 4, 250
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		c := n.Listen(ap(addrC, uint16(10+w)))
		n.SetLink(addrC, addrB, LinkOptions{Delay: time.Millisecond})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				c.WriteBatch([][]byte{[]byte("p")}, []conn.Endpoint{{Remote: b.LocalAddr()}})
			}
		}()
	}
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, 8)
	}
	sz, ep := make([]int, 64), make([]conn.Endpoint, 64)
	got := 0
	timer := time.AfterFunc(10*time.Second, func() { b.Close() })
	defer timer.Stop()
	for got < writers*each {
		k, err := b.ReadBatch(bufs, sz, ep)
		if err != nil {
			t.Fatalf("after %d datagrams: %v", got, err)
		}
		got += k
	}
	wg.Wait()
}

func TestZeroAllocs(t *testing.T) {
	n := manual()
	a := n.Listen(ap(addrA, 1))
	b := n.Listen(ap(addrB, 2))
	n.SetLink(addrA, addrB, LinkOptions{Delay: time.Millisecond, Rate: 1e9, Loss: 0.01})
	out := [][]byte{make([]byte, 1200), make([]byte, 1200), make([]byte, 1200), make([]byte, 1200)}
	eps := []conn.Endpoint{{Remote: b.LocalAddr()}, {Remote: b.LocalAddr()}, {Remote: b.LocalAddr()}, {Remote: b.LocalAddr()}}
	in := [][]byte{make([]byte, 1500), make([]byte, 1500), make([]byte, 1500), make([]byte, 1500)}
	sizes, reps := make([]int, 4), make([]conn.Endpoint, 4)
	round := func() {
		a.WriteBatch(out, eps)
		n.Advance(time.Millisecond)
		for {
			b.mu.Lock()
			k := b.count
			b.mu.Unlock()
			if k == 0 {
				return
			}
			b.ReadBatch(in, sizes, reps)
		}
	}
	for i := 0; i < 10; i++ {
		round()
	}
	if allocs := testing.AllocsPerRun(100, round); allocs != 0 && !raceEnabled {
		t.Fatalf("%v allocations per round", allocs)
	}
}

// BenchmarkWriteRead: one op = a WriteBatch of 32 datagrams of 1200 bytes
// over a zero-delay link and the reads that take them.
func BenchmarkWriteRead(b *testing.B) {
	n := manual()
	x := n.Listen(ap(addrA, 1))
	y := n.Listen(ap(addrB, 2))
	out, eps := make([][]byte, 32), make([]conn.Endpoint, 32)
	in, sizes, reps := make([][]byte, 32), make([]int, 32), make([]conn.Endpoint, 32)
	for i := range out {
		out[i], in[i], eps[i].Remote = make([]byte, 1200), make([]byte, 1500), y.LocalAddr()
	}
	b.ReportAllocs()
	b.SetBytes(32 * 1200)
	for b.Loop() {
		x.WriteBatch(out, eps)
		for got := 0; got < 32; {
			k, _ := y.ReadBatch(in, sizes, reps)
			got += k
		}
	}
}
