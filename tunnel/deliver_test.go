package tunnel

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lanes"
	"github.com/braid-vpn/braid/reorder"
	"github.com/braid-vpn/braid/tundev"
	"github.com/braid-vpn/braid/tundev/tuntest"
)

// gatedTUN is a TUN double whose Write hangs on the first batch holding a
// packet that stuck matches, until release is closed: a TUN write that takes
// long (a busy device, a preempted reader).
type gatedTUN struct {
	*tuntest.Device
	stuck   func(pkt []byte) bool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedTUN) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		if g.stuck(b[offset:]) {
			g.once.Do(func() {
				close(g.entered)
				<-g.release
			})
		}
	}
	return g.Device.Write(bufs, offset)
}

func udpDstPort(pkt []byte) uint16 { return binary.BigEndian.Uint16(pkt[22:]) }

// TestStuckTUNWrite: while one reader's TUN write of flow X hangs, the peer's
// other path delivers flow Y, the peer's other direction carries on, and a
// later packet of flow X waits for the stuck one instead of overtaking it.
// Before the TUN write left the peer's lock, all three waited.
func TestStuckTUNWrite(t *testing.T) {
	const xPort, yPort = 7001, 7002
	flows := DefaultTunables().ReorderFlows
	laneOf := func(sport, dport uint16) uint {
		return lanes.Of(reorder.FlowID(udp4(inCliA, inSrv, sport, dport, nil), flows) & uint16(flows-1))
	}
	ySport := uint16(1)
	for laneOf(ySport, yPort) == laneOf(1, xPort) {
		ySport++
	}
	g := &gatedTUN{
		stuck:   func(p []byte) bool { return udpDstPort(p) == xPort && string(p[28:]) == "x1" },
		entered: make(chan struct{}),
		release: make(chan struct{}),
	}
	released := false
	defer func() {
		if !released {
			close(g.release)
		}
	}()
	// Redundant: every packet goes on both paths, so while one path's reader
	// hangs in the write the other path's reader has the same packets.
	r := newRig(t, rigOpts{
		params:   Params{Scheduler: "redundant", Congestion: "none"},
		tunables: func(tn *Tunables) { tn.ReorderMinHold = 100 * time.Millisecond },
		srvTUN:   func(d *tuntest.Device) tundev.Device { g.Device = d; return g },
	})
	waitUsable(t, r.srv, "a", 2)
	waitUsable(t, r.cliA, "server", 2)

	r.cliATun.Inject(udp4(inCliA, inSrv, 1, xPort, []byte("x1")))
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("x1 never reached the server's TUN")
	}
	const ny = 5
	for i := range ny {
		r.cliATun.Inject(udp4(inCliA, inSrv, ySport, yPort, fmt.Appendf(nil, "y%d", i)))
	}
	for i, p := range recvN(t, r.srvTun, ny, 5*time.Second) {
		if udpDstPort(p) != yPort || string(p[28:]) != fmt.Sprintf("y%d", i) {
			t.Fatalf("while x1's write hangs, packet %d delivered is %q to port %d, want y%d", i, p[28:], udpDstPort(p), i)
		}
	}
	r.srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, []byte("down")))
	if p := recvN(t, r.cliATun, 1, 5*time.Second)[0]; string(p[28:]) != "down" {
		t.Fatalf("client got %q", p[28:])
	}
	r.cliATun.Inject(udp4(inCliA, inSrv, 1, xPort, []byte("x2")))
	select {
	case p := <-r.srvTun.Outbound():
		t.Fatalf("%q delivered while x1's write hangs", p[28:])
	case <-time.After(200 * time.Millisecond):
	}
	close(g.release)
	released = true
	for i, p := range recvN(t, r.srvTun, 2, 5*time.Second) {
		if want := fmt.Sprintf("x%d", i+1); string(p[28:]) != want {
			t.Fatalf("flow x: packet %d is %q, want %q", i, p[28:], want)
		}
	}
}

// TestWriteTurnLaneByLane: a release of several lanes is written lane by
// lane; the lane an earlier writer still holds waits, the others go, and
// each lane keeps its packets' order.
func TestWriteTurnLaneByLane(t *testing.T) {
	d := tuntest.New(1380)
	g := &gatedTUN{Device: d, stuck: func(p []byte) bool { return string(p[28:]) == "a0" },
		entered: make(chan struct{}), release: make(chan struct{})}
	e := &Engine{tun: g, closing: make(chan struct{})}
	e.pool.init(2048)
	p := &peer{e: e}
	pkt := func(flow uint16, s string) *packetBuf {
		pb := e.pool.get()
		b := udp4(inCliA, inSrv, 1, 2, []byte(s))
		pb.start = tunWriteOffset
		pb.end = pb.start + copy(pb.b[pb.start:], b)
		pb.flow = flow
		return pb
	}
	// Writer 1 releases a0 (flow 1) and hangs in its write.
	var t1 lanes.Ticket
	first := []*packetBuf{pkt(1, "a0")}
	p.takeTurn(&t1, first)
	go p.writeTurn(&t1, first, &tunWrite{})
	<-g.entered
	// Writer 2 releases, interleaved, flows 1 (lane 1), 2 and 2+N (lane 2).
	var t2 lanes.Ticket
	second := []*packetBuf{pkt(2, "b0"), pkt(1, "a1"), pkt(2+lanes.N, "c0"), pkt(2, "b1"), pkt(1, "a2")}
	p.takeTurn(&t2, second)
	done := make(chan struct{})
	go func() { p.writeTurn(&t2, second, &tunWrite{}); close(done) }()
	expectWrites(t, d, "lane 2, while lane 1's write hangs", "b0", "c0", "b1")
	select {
	case got := <-d.Outbound():
		t.Fatalf("%q overtook a0", got[28:])
	case <-time.After(100 * time.Millisecond):
	}
	close(g.release)
	expectWrites(t, d, "lane 1, after the release", "a0", "a1", "a2")
	<-done
	if !p.delivery.Idle() {
		t.Fatal("turns left after both writers finished")
	}
}

// expectWrites reads len(want) packets from d's writes and checks their payloads.
func expectWrites(t *testing.T, d *tuntest.Device, what string, want ...string) {
	t.Helper()
	for i, w := range want {
		select {
		case got := <-d.Outbound():
			if string(got[28:]) != w {
				t.Fatalf("%s: write %d is %q, want %q", what, i, got[28:], w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: %d of %d written", what, i, len(want))
		}
	}
}

func TestByLane(t *testing.T) {
	var pkts []*packetBuf
	for i, f := range []uint16{5, 3, 5 + lanes.N, 3, 0, 5} {
		pkts = append(pkts, &packetBuf{start: i, flow: f})
	}
	var at [lanes.N + 1]int32
	out := byLane(pkts, nil, &at)
	var got []int
	for _, pb := range out {
		got = append(got, pb.start)
	}
	if want := []int{4, 1, 3, 0, 2, 5}; !slices.Equal(got, want) {
		t.Fatalf("sorted %v, want %v", got, want)
	}
	if at[0] != 0 || at[1] != 1 || at[3] != 1 || at[4] != 3 || at[5] != 3 || at[6] != 6 || at[lanes.N] != 6 {
		t.Fatalf("lane bounds %v", at[:8])
	}
}
