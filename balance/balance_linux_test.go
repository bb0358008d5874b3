package balance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/internal/testenv"
	"github.com/braid-vpn/braid/netns"
	"github.com/braid-vpn/braid/wire"
)

// The test topology: a client namespace, the balancer, and one namespace per
// server, each on its own veth from the balancer (the backend LAN); every
// server holds the VIP on its loopback and answers from it.
//
//	cli 198.18.0.1/30 ─ 198.18.0.2 bal 198.18.1.{4i+1}/30 ─ 198.18.1.{4i+2} srv i (lo: VIP)
var (
	testPort   = 51820
	testIDBits = 4
	ctlPort    = 9100
)

// plan holds a topology's addresses: IPv4 (the lab's 198.18.0.0/15) or IPv6.
type plan struct {
	vip, cli, balUp  netip.Addr
	srv, balSide     func(i int) netip.Addr
	linkBits         int
	anyDst           netip.Prefix
	forward, network string // the forwarding sysctl, the UDP network
}

var plan4 = plan{
	vip: netip.MustParseAddr("198.19.0.1"), cli: netip.MustParseAddr("198.18.0.1"), balUp: netip.MustParseAddr("198.18.0.2"),
	srv: srvAddr, balSide: balSideAddr, linkBits: 30, anyDst: netip.MustParsePrefix("0.0.0.0/0"),
	forward: "net.ipv4.ip_forward", network: "udp4",
}

var plan6 = plan{
	vip: netip.MustParseAddr("fd00:bb::1"), cli: netip.MustParseAddr("fd00:b0::1"), balUp: netip.MustParseAddr("fd00:b0::2"),
	srv:      func(i int) netip.Addr { return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0xb1, 0, byte(i), 14: 0, 15: 2}) },
	balSide:  func(i int) netip.Addr { return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0xb1, 0, byte(i), 14: 0, 15: 1}) },
	linkBits: 64, anyDst: netip.MustParsePrefix("::/0"),
	forward: "net.ipv6.conf.all.forwarding", network: "udp6",
}

func srvAddr(i int) netip.Addr     { return netip.AddrFrom4([4]byte{198, 18, 1, byte(4*i + 2)}) }
func balSideAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 1, byte(4*i + 1)}) }

type topo struct {
	p        plan
	bal, cli *netns.Namespace
	srv      []*netns.Namespace
	cfg      *Config
	opt      Options
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and installs nftables rules in them")
	}
	testenv.SkipIfEmulated(t, testenv.NoNetns)
}

func newNS(t *testing.T) *netns.Namespace {
	t.Helper()
	ns, err := netns.New("bal")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// newTopo builds the namespaces for n servers and parses a balancer config
// for them (ids 0..n-1, the given health and poll settings).
// newNS makes a namespace without IPv6 duplicate address detection, which
// would hold a new link's link-local address tentative for a second or two
// (waitOperUp waits for it): an IPv6 router sends no neighbour solicitation
// meanwhile.
func (p plan) newNS(t *testing.T) *netns.Namespace {
	t.Helper()
	ns := newNS(t)
	for _, k := range []string{"net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"} {
		if err := ns.SetSysctl(k, "0"); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

func newTopo(t *testing.T, n int, extra string) *topo { return newTopoOn(t, plan4, n, extra) }

func newTopoOn(t *testing.T, p plan, n int, extra string) *topo {
	needRoot(t)
	tp := &topo{p: p}
	tp.bal, tp.cli = p.newNS(t), p.newNS(t)
	link := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, p.linkBits) }
	if err := netns.AddVeth(netns.VethEnd{NS: tp.cli, Name: "up", Addrs: []netip.Prefix{link(p.cli)}},
		netns.VethEnd{NS: tp.bal, Name: "cli", Addrs: []netip.Prefix{link(p.balUp)}}); err != nil {
		t.Fatal(err)
	}
	if err := tp.cli.AddRoute(netns.Route{Dst: p.anyDst, Via: p.balUp}); err != nil {
		t.Fatal(err)
	}
	if err := tp.bal.SetSysctl(p.forward, "1"); err != nil {
		t.Fatal(err)
	}
	toml := fmt.Sprintf("vip = %q\nport = %d\nserver_id_bits = %d\n%s\n", p.vip, testPort, testIDBits, extra)
	for i := range n {
		s := p.newNS(t)
		if err := netns.AddVeth(netns.VethEnd{NS: tp.bal, Name: fmt.Sprintf("s%d", i), Addrs: []netip.Prefix{link(p.balSide(i))}},
			netns.VethEnd{NS: s, Name: "lan", Addrs: []netip.Prefix{link(p.srv(i))}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddAddr("lo", netip.PrefixFrom(p.vip, p.vip.BitLen())); err != nil {
			t.Fatal(err)
		}
		if err := s.AddRoute(netns.Route{Dst: p.anyDst, Via: p.balSide(i)}); err != nil {
			t.Fatal(err)
		}
		tp.srv = append(tp.srv, s)
		toml += fmt.Sprintf("[[servers]]\nid = %d\naddress = %q\ncontrol = \"http://%s\"\n", i, p.srv(i), netip.AddrPortFrom(p.srv(i), uint16(ctlPort)))
	}
	// A veth passes nothing until the kernel has seen its carrier (the
	// link watcher runs up to a second late).
	for i, s := range tp.srv {
		waitOperUp(t, tp.bal, fmt.Sprintf("s%d", i))
		waitOperUp(t, s, "lan")
	}
	waitOperUp(t, tp.bal, "cli")
	waitOperUp(t, tp.cli, "up")
	cfg, err := Parse("test.toml", []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	tp.cfg = cfg
	tp.opt = Options{Netns: tp.bal.Path()}
	return tp
}

func waitOperUp(t *testing.T, ns *netns.Namespace, name string) {
	t.Helper()
	waitFor(t, name+" up", func() bool {
		l, err := ns.Netlink().LinkByName(name)
		if err != nil || l.Attrs().OperState != netlink.OperUp {
			return false
		}
		// An IPv6 router sends neighbour solicitations only from a link-local
		// address that is no longer tentative.
		addrs, err := ns.Netlink().AddrList(l, unix.AF_INET6)
		if err != nil {
			return false
		}
		for _, a := range addrs {
			if a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0 {
				return false
			}
		}
		return true
	})
}

func (tp *topo) install(t *testing.T) *Balancer {
	t.Helper()
	b, err := Install(tp.cfg, tp.opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func listenUDP(t *testing.T, ns *netns.Namespace, addr netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// datagram builds the first 8 bytes a balancer reads, padded to a plausible
// size: the type, then an index at bytes 4..8.
func datagram(typ byte, index uint32) []byte {
	b := make([]byte, 64)
	b[0] = typ
	binary.BigEndian.PutUint32(b[4:8], index)
	return b
}

// index puts v in the top server-id bits of an otherwise arbitrary index.
func index(v uint32, low uint32) uint32 {
	shift := 32 - testIDBits
	return v<<shift | low&(1<<shift-1)
}

// sampleValues picks init-map values to send through the kernel: for every
// server-id value its lowest, highest and one middle spread value. Every
// value would be hundreds of datagrams in one burst, more than the test's
// sockets reliably carry; the map itself is checked whole from State.
func sampleValues(st State) []uint32 {
	spread := st.InitBits - testIDBits
	var vs []uint32
	for id := range uint32(1 << testIDBits) {
		for _, low := range []uint32{0, 1<<spread/2 + 1, 1<<spread - 1} {
			vs = append(vs, id<<spread|low)
		}
	}
	return vs
}

// initIndex is a sender index whose top st.InitBits bits are v.
func initIndex(st State, v, low uint32) uint32 {
	shift := 32 - st.InitBits
	return v<<shift | low&(1<<shift-1)
}

// deliveries sends each datagram from the client to VIP:port and reports
// which server received each (-1: none within the wait).
func deliveries(t *testing.T, tp *topo, dgrams [][]byte) []int {
	t.Helper()
	srvs := make([]*net.UDPConn, len(tp.srv))
	for i, ns := range tp.srv {
		srvs[i] = listenUDP(t, ns, netip.AddrPortFrom(tp.p.vip, uint16(testPort)))
	}
	cli := listenUDP(t, tp.cli, netip.AddrPortFrom(tp.p.cli, 0))
	vip := net.UDPAddrFromAddrPort(netip.AddrPortFrom(tp.p.vip, uint16(testPort)))
	got := make([]int, len(dgrams))
	for k := range got {
		got[k] = -1
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, c := range srvs {
		wg.Go(func() {
			buf := make([]byte, 128)
			for {
				c.SetReadDeadline(time.Now().Add(time.Second))
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				k := int(binary.BigEndian.Uint16(buf[2:4]))
				mu.Lock()
				if k < len(got) {
					got[k] = i
				}
				mu.Unlock()
				// Answer from the VIP, as a braid server does: the reply
				// must reach the client directly.
				c.WriteToUDPAddrPort(buf[:n], from)
			}
		})
	}
	// One exchange with each server first: the burst below would otherwise
	// meet unresolved neighbours on the way there and back (IPv6's neighbour
	// discovery queues only a few datagrams per neighbour) and lose some.
	const warmTag = 0xffff
	buf := make([]byte, 128)
	for id := range len(srvs) {
		d := datagram(wire.TypeData, index(uint32(id), 1))
		binary.BigEndian.PutUint16(d[2:4], warmTag)
		deadline := time.Now().Add(3 * time.Second)
		for answered := false; !answered; {
			if time.Now().After(deadline) {
				t.Fatalf("server %d never answered the warm-up datagram", id)
			}
			if _, err := cli.WriteToUDP(d, vip); err != nil {
				t.Fatal(err)
			}
			cli.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, _, err := cli.ReadFromUDPAddrPort(buf)
			answered = err == nil
		}
	}
	// Late copies of the warm-up (it may have been sent twice) are not
	// counted below.
	time.Sleep(100 * time.Millisecond)
	for {
		cli.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, _, err := cli.ReadFromUDPAddrPort(buf); err != nil {
			break
		}
	}
	// Replies are read while the burst goes out: a few hundred at once
	// would overflow the socket's receive buffer.
	replies := 0
	var readers sync.WaitGroup
	readers.Go(func() {
		buf := make([]byte, 128)
		for {
			cli.SetReadDeadline(time.Now().Add(time.Second))
			_, from, err := cli.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if from.Addr().Unmap() != tp.p.vip {
				t.Errorf("reply from %v, not from the VIP", from)
			}
			replies++
		}
	})
	for k, d := range dgrams {
		binary.BigEndian.PutUint16(d[2:4], uint16(k)) // a tag in the reserved bytes
		if _, err := cli.WriteToUDP(d, vip); err != nil {
			t.Fatal(err)
		}
	}
	readers.Wait()
	wg.Wait()
	delivered := 0
	for _, g := range got {
		if g >= 0 {
			delivered++
		}
	}
	if replies != delivered {
		t.Errorf("%d datagrams delivered, %d replies reached the client", delivered, replies)
	}
	return got
}

func TestBalanceInstallRemove(t *testing.T) {
	tp := newTopo(t, 2, "")
	b := tp.install(t)
	// A crash leaves everything installed; the next Install replaces it.
	b2, err := Install(tp.cfg, tp.opt)
	if err != nil {
		t.Fatalf("reinstall over a leftover: %v", err)
	}
	b.k.close() // the first one is gone, as after a crash
	b.closed = true
	if n := installed(t, tp); n.tables != 1 || n.rules != 2 || n.routes != 2 {
		t.Fatalf("installed: %+v, want 1 table, 2 fwmark rules, 2 routes", n)
	}
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := installed(t, tp); n != (counts{}) {
		t.Fatalf("left after Close: %+v", n)
	}
}

type counts struct{ tables, rules, routes int }

// installed counts the balancer's table, fwmark rules and routes in the
// balancer's namespace.
func installed(t *testing.T, tp *topo) counts {
	t.Helper()
	var n counts
	c, err := nftables.New(nftables.WithNetNSFd(int(tp.bal.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == tp.cfg.NftTable {
			n.tables++
		}
	}
	nl := tp.bal.Netlink()
	rules, err := nl.RuleList(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Priority == tp.cfg.RulePriority {
			n.rules++
		}
	}
	routes, err := nl.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: routeProtocol}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		t.Fatal(err)
	}
	n.routes = len(routes)
	return n
}

func TestBalanceSteering(t *testing.T) {
	tp := newTopo(t, 3, "")
	b := tp.install(t)
	trackAll(t, tp.bal)
	checkSteering(t, tp, b)
	checkNoConntrack(t, tp)
}

func TestBalanceSteeringIPv6(t *testing.T) {
	tp := newTopoOn(t, plan6, 2, "")
	checkSteering(t, tp, tp.install(t))
}

// checkSteering sends data for every server (and for one not configured),
// an initiation for every value of the server-id bits and a datagram of a
// type clients do not send, and checks where each arrives.
func checkSteering(t *testing.T, tp *topo, b *Balancer) {
	t.Helper()
	n := len(tp.srv)
	var dgrams [][]byte
	var want []int
	// Data by the receiver index's server id: several indices per server.
	for id := range n {
		for low := range uint32(4) {
			dgrams = append(dgrams, datagram(wire.TypeData, index(uint32(id), low*0x9e3779b1)))
			want = append(want, id)
		}
	}
	// Data naming a server that is not configured is dropped.
	dgrams = append(dgrams, datagram(wire.TypeData, index(9, 7)))
	want = append(want, -1)
	// Initiations by the sender index's top bits, through the map.
	st := b.State()
	m := st.InitMap
	for _, v := range sampleValues(st) {
		dgrams = append(dgrams, datagram(wire.TypeHandshakeInit, initIndex(st, v, 12345)))
		want = append(want, int(m[v]))
	}
	// A type no client sends to the server is dropped.
	dgrams = append(dgrams, datagram(wire.TypeHandshakeResp, index(0, 1)))
	want = append(want, -1)

	got := deliveries(t, tp, dgrams)
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("datagram %d (type %d, index %#08x): reached server %d, want %d", k, dgrams[k][0], binary.BigEndian.Uint32(dgrams[k][4:8]), got[k], want[k])
		}
	}
	for v, id := range m {
		if own := uint32(v) >> (st.InitBits - testIDBits); own < uint32(n) && id != own {
			t.Errorf("initiation map: value %d → server %d, want its own server %d", v, id, own)
		}
	}
}

// trackAll makes the namespace track connections (a rule that reads ct
// state), as a real router's firewall does: without it no flow would be
// tracked and the absence of entries would prove nothing.
func trackAll(t *testing.T, ns *netns.Namespace) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	tb := c.AddTable(&nftables.Table{Name: "firewall", Family: nftables.TableFamilyIPv4})
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: "forward", Table: tb, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE}, &expr.Counter{}}})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
}

// checkNoConntrack fails if the balancer's namespace tracks any flow of the
// service, after checking that it does track an ordinary UDP flow.
func checkNoConntrack(t *testing.T, tp *topo) {
	t.Helper()
	cli := listenUDP(t, tp.cli, netip.AddrPortFrom(tp.p.cli, 0))
	other := net.UDPAddrFromAddrPort(netip.AddrPortFrom(srvAddr(0), 9))
	if _, err := cli.WriteToUDP([]byte("tracked"), other); err != nil {
		t.Fatal(err)
	}
	var flows []*netlink.ConntrackFlow
	deadline := time.Now().Add(5 * time.Second)
	control := false
	for !control && time.Now().Before(deadline) {
		var err error
		flows, err = tp.bal.Netlink().ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flows {
			control = control || (f.Forward.DstIP.Equal(srvAddr(0).AsSlice()) && f.Forward.DstPort == 9)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !control {
		t.Fatal("the control flow was not tracked: conntrack is not active in the balancer's namespace, the test proves nothing")
	}
	for _, f := range flows {
		if f.Forward.DstIP.Equal(tp.p.vip.AsSlice()) || f.Forward.SrcIP.Equal(tp.p.vip.AsSlice()) {
			t.Errorf("conntrack holds a service flow: %v", f)
		}
	}
}

func TestBalanceServerDownRemapsInitiations(t *testing.T) {
	tp := newTopo(t, 3, "")
	b := tp.install(t)
	if err := b.SetLive(1, false); err != nil {
		t.Fatal(err)
	}
	st := b.State()
	m := st.InitMap
	var dgrams [][]byte
	spread := map[uint32]int{} // server 1's own values (its clients' rekeys) → server
	for v, id := range m {
		if id == 1 {
			t.Errorf("value %d still maps to the dead server 1", v)
		}
		if uint32(v)>>(st.InitBits-testIDBits) == 1 {
			spread[id]++
		}
	}
	sample := sampleValues(st)
	for _, v := range sample {
		dgrams = append(dgrams, datagram(wire.TypeHandshakeInit, initIndex(st, v, 99)))
	}
	if len(spread) != 2 || spread[0]-spread[2] > 1 || spread[2]-spread[0] > 1 {
		t.Errorf("the dead server's own values go to %v; want them split evenly over servers 0 and 2", spread)
	}
	// Data of server 1's sessions still goes to server 1: its clients find
	// out by themselves (silence), then handshake afresh.
	dgrams = append(dgrams, datagram(wire.TypeData, index(1, 5)))
	got := deliveries(t, tp, dgrams)
	for k, v := range sample {
		if got[k] != int(m[v]) {
			t.Errorf("initiation with bits %d reached server %d, want %d", v, got[k], m[v])
		}
	}
	if got[len(got)-1] != 1 {
		t.Errorf("data for server 1 reached %d", got[len(got)-1])
	}
	if err := b.SetLive(1, true); err != nil {
		t.Fatal(err)
	}
	st = b.State()
	for v, id := range st.InitMap {
		if uint32(v)>>(st.InitBits-testIDBits) == 1 && id != 1 {
			t.Errorf("back up: value %d (server 1's) maps to %d", v, id)
		}
	}
}

// fakeServer serves /healthz and /sessions on a server's backend address,
// as the braid daemon's control HTTP server does.
type fakeServer struct {
	mu       sync.Mutex
	sessions []control.Session
	ln       net.Listener
}

func serveControl(t *testing.T, ns *netns.Namespace, addr netip.Addr) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	if err := ns.Do(func() error {
		var err error
		f.ln, err = net.Listen("tcp4", netip.AddrPortFrom(addr, uint16(ctlPort)).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(control.HealthPath, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc(control.SessionsPath, func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		json.NewEncoder(w).Encode(f.sessions)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(f.ln)
	t.Cleanup(func() { srv.Close() })
	return f
}

func (f *fakeServer) set(s ...control.Session) {
	f.mu.Lock()
	f.sessions = s
	f.mu.Unlock()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBalanceHealthAndRoutes(t *testing.T) {
	tp := newTopo(t, 2, "health_interval = \"50ms\"\nhealth_timeout = \"40ms\"\nfailures = 2\nrises = 1\nroute_poll = \"50ms\"\n")
	b := tp.install(t)
	fs := []*fakeServer{serveControl(t, tp.srv[0], srvAddr(0)), serveControl(t, tp.srv[1], srvAddr(1))}
	inner := netip.MustParsePrefix("198.19.100.2/32")
	t0 := time.Now()
	// The client also claims the balancer's own connected network and a
	// default route: neither may replace the balancer's routes.
	connected := netip.PrefixFrom(plan4.cli, plan4.linkBits).Masked()
	fs[0].set(control.Session{PublicKey: "a", AllowedIPs: []string{inner.String(), connected.String(), "0.0.0.0/0"}, LastHandshake: t0})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run: %v", err)
		}
	}()
	routeVia := func() netip.Addr {
		rs, err := tp.bal.Netlink().RouteListFiltered(unix.AF_INET, &netlink.Route{Table: tp.cfg.RouteTable, Protocol: routeProtocol}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Dst != nil && r.Dst.String() == inner.String() {
				a, _ := netip.AddrFromSlice(r.Gw)
				return a
			}
		}
		return netip.Addr{}
	}
	waitFor(t, "the client route via server 0", func() bool { return routeVia() == srvAddr(0) })
	all, err := tp.bal.Netlink().RouteList(nil, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if r.Dst == nil || r.Dst.String() == connected.String() && r.Protocol != unix.RTPROT_KERNEL {
			t.Errorf("the balancer's route %v was replaced (protocol %d, gateway %v)", r.Dst, r.Protocol, r.Gw)
		}
	}

	// The client handshook again with server 1; server 0 still lists its
	// old session for a while.
	fs[1].set(control.Session{PublicKey: "a", AllowedIPs: []string{inner.String()}, LastHandshake: t0.Add(time.Second)})
	waitFor(t, "the client route to move to server 1", func() bool { return routeVia() == srvAddr(1) })

	// Server 0 dies: it leaves the initiation map.
	fs[0].ln.Close()
	waitFor(t, "server 0 down", func() bool {
		st := b.State()
		for _, id := range st.InitMap {
			if id == 0 {
				return false
			}
		}
		return !st.Servers[0].Live
	})
	// The client's session ends everywhere: its route goes.
	fs[1].set()
	waitFor(t, "the client route to go", func() bool { return !routeVia().IsValid() })
}
