//go:build linux

package stream

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/internal/testenv"
	"github.com/braid-vpn/braid/netns"
)

const nsPrefix = "braid-stream"

// twoPaths builds client and server namespaces joined by two veth pairs:
//
//	cli c1 198.18.1.1 ── s1 198.18.1.2 srv
//	cli c2 198.18.2.1 ── s2 198.18.2.2 srv
func twoPaths(t *testing.T) (cli, srv *netns.Namespace) {
	testenv.SkipIfEmulated(t, testenv.NoNetns)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and configures MPTCP endpoints in them")
	}
	netns.Cleanup(nsPrefix)
	mk := func() *netns.Namespace {
		ns, err := netns.New(nsPrefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		return ns
	}
	cli, srv = mk(), mk()
	p := func(s string) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(s)} }
	for _, err := range []error{
		netns.AddVeth(netns.VethEnd{NS: cli, Name: "c1", Addrs: p("198.18.1.1/24")}, netns.VethEnd{NS: srv, Name: "s1", Addrs: p("198.18.1.2/24")}),
		netns.AddVeth(netns.VethEnd{NS: cli, Name: "c2", Addrs: p("198.18.2.1/24")}, netns.VethEnd{NS: srv, Name: "s2", Addrs: p("198.18.2.2/24")}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return cli, srv
}

func TestPathManager(t *testing.T) {
	cli, _ := twoPaths(t)
	servers := []netip.AddrPort{netip.MustParseAddrPort("198.18.1.2:7000"), netip.MustParseAddrPort("198.18.2.2:7000")}
	paths := []PMPath{{Device: "c1"}, {Device: "c2"}, {Device: "nope0"}}
	err := cli.Do(func() error {
		pm, err := NewPathManager(testConfig().Logger)
		if err != nil {
			return err
		}
		before, err := pm.c.limits()
		if err != nil {
			return err
		}
		// An endpoint the operator configured is left alone.
		if err := pm.c.add(Endpoint{Addr: netip.MustParseAddr("198.18.2.1"), Flags: FlagSubflow}); err != nil {
			return err
		}
		want, lim, warn := ClientPlan(paths, servers, 2)
		if len(warn) != 1 || !strings.Contains(warn[0], "nope0") {
			t.Errorf("warnings %q, want one about nope0", warn)
		}
		// 2 usable paths × 2 servers − 1 + 2 × (2−1) extra = 5; 2 announced servers.
		if lim != (Limits{Subflows: 5, AddAddrAccepted: 2}) {
			t.Errorf("limits %+v, want subflows 5 add_addr_accepted 2", lim)
		}
		if err := pm.Apply(want, lim); err != nil {
			return err
		}
		list := func() []string {
			got, err := pm.c.endpoints()
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, e := range got {
				port := ""
				if e.Port != 0 {
					port = " port"
				}
				lines = append(lines, e.Addr.String()+port+" "+e.Flags.String())
			}
			slices.Sort(lines)
			return lines
		}
		// The extra ports wait for a connection (Announce).
		if lines, want := list(), []string{"198.18.1.1 subflow fullmesh", "198.18.2.1 subflow"}; !slices.Equal(lines, want) {
			t.Errorf("before Announce: endpoints %q, want %q", lines, want)
		}
		if err := pm.Announce(); err != nil {
			return err
		}
		lines := list()
		wantLines := []string{
			"198.18.1.1 port signal",
			"198.18.1.1 subflow fullmesh",
			"198.18.2.1 port signal",
			"198.18.2.1 subflow", // the operator's, not replaced
		}
		if !slices.Equal(lines, wantLines) {
			t.Errorf("endpoints %q, want %q", lines, wantLines)
		}
		if l, _ := pm.c.limits(); l.Subflows != max(5, before.Subflows) || l.AddAddrAccepted != max(2, before.AddAddrAccepted) {
			t.Errorf("kernel limits %+v", l)
		}
		// Reload with one subflow per path: the announced ports go, the rest stays
		// (same kernel ids).
		ids := map[netip.Addr]uint8{}
		for _, e := range pm.Owned() {
			if e.Flags&FlagSubflow != 0 {
				ids[e.Addr] = e.ID
			}
		}
		want, lim, _ = ClientPlan(paths[:2], servers, 1)
		if err := pm.Apply(want, lim); err != nil {
			return err
		}
		owned := pm.Owned()
		if len(owned) != 1 || owned[0].ID != ids[netip.MustParseAddr("198.18.1.1")] {
			t.Errorf("after reload braid owns %v", owned)
		}
		if err := pm.Close(); err != nil {
			return err
		}
		got, err := pm.c.endpoints()
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].Addr != netip.MustParseAddr("198.18.2.1") {
			t.Errorf("after Close: %v, want only the operator's endpoint", got)
		}
		if l, _ := pm.c.limits(); l != before {
			t.Errorf("limits after Close %+v, want %+v as before", l, before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// One MPTCP connection with the path manager set up: subflows on both paths, and
// MPTCP_FULL_INFO reports them with their addresses and bytes.
func TestMPTCPSubflows(t *testing.T) {
	cli, srv := twoPaths(t)
	// The scheduler sends on a second subflow only when the first is full: make
	// the links the bottleneck.
	for _, l := range []string{"c1", "c2"} {
		if err := cli.Shape(l, netns.TBF{Rate: 20_000_000}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig()
	cfg.Kind = MPTCP
	cfg.Dial = func(ctx context.Context, d *net.Dialer, addr string) (c net.Conn, err error) {
		err = cli.Do(func() error {
			c, err = d.DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}
	var tr *Transport
	var s conn.Conn
	err := srv.Do(func() error {
		var err error
		if tr, err = New(cfg); err != nil {
			return err
		}
		pm, err := NewPathManager(testConfig().Logger)
		if err != nil {
			return err
		}
		t.Cleanup(func() { srv.Do(pm.Close) })
		eps, lim, _ := ServerPlan([]netip.AddrPort{netip.MustParseAddrPort("198.18.1.2:7000"), netip.MustParseAddrPort("198.18.2.2:7000")})
		if err := pm.Apply(eps, lim); err != nil {
			return err
		}
		s, err = tr.Server(conn.Options{Addr: netip.MustParseAddrPort("0.0.0.0:7000")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var c conn.Conn
	err = cli.Do(func() error {
		pm, err := NewPathManager(testConfig().Logger)
		if err != nil {
			return err
		}
		t.Cleanup(func() { cli.Do(pm.Close) })
		eps, lim, _ := ClientPlan([]PMPath{{Device: "c1"}, {Device: "c2"}}, []netip.AddrPort{netip.MustParseAddrPort("198.18.1.2:7000"), netip.MustParseAddrPort("198.18.2.2:7000")}, 1)
		if err := pm.Apply(eps, lim); err != nil {
			return err
		}
		c, err = tr.Client(conn.Options{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sr := startReader(s)
	to := netip.MustParseAddrPort("198.18.1.2:7000")
	writeUntil(t, c, to, sr, 1, 5*time.Second)
	// Keep data flowing while the subflows join: the full mesh 2 paths × 2 server
	// addresses.
	var in Info
	deadline := time.Now().Add(5 * time.Second)
	for {
		bufs := make([][]byte, 64)
		eps := make([]conn.Endpoint, 64)
		for i := range bufs {
			bufs[i], eps[i] = dgram(1400, uint32(i)), conn.Endpoint{Remote: to}
		}
		c.WriteBatch(bufs, eps)
		time.Sleep(5 * time.Millisecond)
		in, _ = InfoOf(c, to)
		if in.MPTCP != nil && len(in.MPTCP.SubflowList) == 4 {
			busy := 0
			for _, sf := range in.MPTCP.SubflowList {
				if sf.TCP.BytesAcked > 10000 {
					busy++
				}
			}
			if busy >= 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("MPTCP info %+v", in.MPTCP)
		}
	}
	if in.Kind != MPTCP || in.MPTCP.Subflows != 3 || in.MPTCP.Fallback {
		t.Fatalf("info %+v, mptcp %+v", in, in.MPTCP)
	}
	locals := map[netip.Addr]bool{}
	for _, sf := range in.MPTCP.SubflowList {
		locals[sf.Local.Addr()] = true
		t.Logf("subflow %d %v → %v: sent %d acked %d rtt %v", sf.ID, sf.Local, sf.Remote, sf.TCP.BytesSent, sf.TCP.BytesAcked, sf.TCP.RTT)
	}
	if !locals[netip.MustParseAddr("198.18.1.1")] || !locals[netip.MustParseAddr("198.18.2.1")] {
		t.Fatalf("subflows do not use both local paths: %v", locals)
	}
	if in.MPTCP.BytesSent == 0 || in.MPTCP.BytesSent < in.MPTCP.BytesAcked {
		t.Fatalf("connection counters sent %d acked %d", in.MPTCP.BytesSent, in.MPTCP.BytesAcked)
	}
}

// MPTCP switched off by sysctl in the namespace: New says so, naming the sysctl.
func TestMPTCPDisabled(t *testing.T) {
	cli, _ := twoPaths(t)
	if err := cli.SetSysctl("net.mptcp.enabled", "0"); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Kind = MPTCP
	err := cli.Do(func() error {
		_, err := New(cfg)
		return err
	})
	if !errors.Is(err, ErrMPTCPDisabled) || !strings.Contains(err.Error(), "net.mptcp.enabled = 0") {
		t.Fatalf("New: %v", err)
	}
	cfg.Kind = TCP
	if err := cli.Do(func() error { _, err := New(cfg); return err }); err != nil {
		t.Fatalf("TCP with MPTCP off: %v", err)
	}
}

// subflows_per_path = 2 on one path: the client announces its address once more with
// a port of its own and the server opens the second subflow to it, so one pair of
// addresses carries two subflows (ndiffports-like).
func TestMPTCPExtraSubflowPerPath(t *testing.T) {
	cli, srv := twoPaths(t)
	cfg := testConfig()
	cfg.Kind = MPTCP
	cfg.Dial = func(ctx context.Context, d *net.Dialer, addr string) (c net.Conn, err error) {
		err = cli.Do(func() error {
			c, err = d.DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}
	server := netip.MustParseAddrPort("198.18.1.2:7000")
	var cpm *PathManager
	established := make(chan struct{}, 4)
	cfg.OnEstablished = func() {
		if err := cli.Do(cpm.Announce); err != nil {
			t.Errorf("Announce: %v", err)
		}
		established <- struct{}{}
	}
	var tr *Transport
	var s conn.Conn
	if err := srv.Do(func() error {
		var err error
		if tr, err = New(cfg); err != nil {
			return err
		}
		pm, err := NewPathManager(cfg.Logger)
		if err != nil {
			return err
		}
		t.Cleanup(func() { srv.Do(pm.Close) })
		eps, lim, _ := ServerPlan([]netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:7000")})
		if len(eps) != 0 {
			t.Errorf("a wildcard listen address announces %v", eps)
		}
		if err := pm.Apply(eps, lim); err != nil {
			return err
		}
		s, err = tr.Server(conn.Options{Addr: netip.MustParseAddrPort("0.0.0.0:7000")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var c conn.Conn
	var announced uint16
	if err := cli.Do(func() error {
		pm, err := NewPathManager(cfg.Logger)
		if err != nil {
			return err
		}
		cpm = pm
		t.Cleanup(func() { cli.Do(pm.Close) })
		eps, lim, _ := ClientPlan([]PMPath{{Device: "c1"}}, []netip.AddrPort{server}, 2)
		if lim != (Limits{Subflows: 1, AddAddrAccepted: 1}) {
			t.Errorf("limits %+v, want subflows 1 (0 for the mesh + 1 extra) add_addr_accepted 1", lim)
		}
		if err := pm.Apply(eps, lim); err != nil {
			return err
		}
		if len(pm.Owned()) != 1 {
			t.Errorf("before a connection braid owns %v, want only the subflow endpoint", pm.Owned())
		}
		c, err = tr.Client(conn.Options{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sr := startReader(s)
	writeUntil(t, c, server, sr, 1, 5*time.Second)
	select {
	case <-established:
	case <-time.After(5 * time.Second):
		t.Fatal("OnEstablished was not called")
	}
	for _, e := range cpm.Owned() {
		if e.Flags == FlagSignal {
			announced = e.Port
		}
	}
	if announced == 0 {
		t.Fatal("no extra endpoint with a port after the connection came up")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		write(t, c, server, 2)
		in, _ := InfoOf(c, server)
		if in.MPTCP != nil && len(in.MPTCP.SubflowList) == 2 {
			a, b := in.MPTCP.SubflowList[0], in.MPTCP.SubflowList[1]
			if a.Local.Addr() != b.Local.Addr() || a.Remote.Addr() != b.Remote.Addr() {
				t.Fatalf("subflows %v→%v and %v→%v are not on one pair of addresses", a.Local, a.Remote, b.Local, b.Remote)
			}
			if a.Local.Port() != announced && b.Local.Port() != announced {
				t.Fatalf("no subflow to the announced port %d: %v, %v", announced, a.Local, b.Local)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("MPTCP info %+v", in.MPTCP)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
