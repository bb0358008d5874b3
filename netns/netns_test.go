//go:build linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// testPrefix names every namespace these tests create; TestMain removes
// leftovers of crashed earlier runs and checks that this run left none.
const testPrefix = "brnstest"

func TestMain(m *testing.M) {
	if os.Geteuid() == 0 {
		if removed, err := Cleanup(testPrefix); err != nil || len(removed) > 0 {
			fmt.Fprintf(os.Stderr, "cleanup of stale test namespaces: removed %v, err %v\n", removed, err)
		}
	}
	code := m.Run()
	if os.Geteuid() == 0 {
		if left := ours(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: namespaces left behind: %v\n", left)
			code = 1
		}
	}
	os.Exit(code)
}

// ours lists the names in RunDir this process created.
func ours() []string {
	ents, _ := os.ReadDir(RunDir)
	var out []string
	mine := fmt.Sprintf("%s-%d-", testPrefix, os.Getpid())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), mine) {
			out = append(out, e.Name())
		}
	}
	return out
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
}

func newNS(t *testing.T) *Namespace {
	t.Helper()
	ns, err := New(testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	})
	return ns
}

func haveIP() bool {
	_, err := exec.LookPath("ip")
	return err == nil
}

func TestNewClose(t *testing.T) {
	needRoot(t)
	ns, err := New(testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ns.Name(), fmt.Sprintf("%s-%d-", testPrefix, os.Getpid())) {
		t.Errorf("name %q", ns.Name())
	}
	if haveIP() {
		out, err := exec.Command("ip", "netns", "list").CombinedOutput()
		if err != nil || !strings.Contains(string(out), ns.Name()) {
			t.Errorf("ip netns list does not show %s: %s %v", ns.Name(), out, err)
		}
	}
	lo, err := ns.Netlink().LinkByName("lo")
	if err != nil || lo.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("lo inside: %v, %v (want up)", lo, err)
	}
	// The namespace is really separate: its links are lo only.
	links, _ := ns.Netlink().LinkList()
	if len(links) != 1 {
		t.Errorf("fresh namespace has %d links", len(links))
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ns.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Close: %v", ns.Path(), err)
	}
	if err := ns.Do(func() error { return nil }); err == nil {
		t.Error("Do after Close succeeded")
	}
	if err := ns.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := New("bad/prefix"); err == nil {
		t.Error("New accepted a prefix with a slash")
	}
}

// pair builds a — b joined by veth "va" 198.18.0.1/30 — "vb" 198.18.0.2/30.
func pair(t *testing.T) (a, b *Namespace) {
	a, b = newNS(t), newNS(t)
	err := AddVeth(
		VethEnd{NS: a, Name: "va", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.1/30")}},
		VethEnd{NS: b, Name: "vb", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.2/30")}, MTU: 1400})
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// udpEcho serves a UDP echo on 198.18.0.2:7 inside b until the test ends.
func udpEcho(t *testing.T, b *Namespace) {
	var pc net.PacketConn
	err := b.Do(func() error {
		var err error
		pc, err = net.ListenPacket("udp4", "198.18.0.2:7")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
}

// echo sends one datagram from inside a and reports whether it came back
// within wait.
func echo(t *testing.T, a *Namespace, wait time.Duration) bool {
	var c net.Conn
	if err := a.Do(func() error {
		var err error
		c, err = net.Dial("udp4", "198.18.0.2:7")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := []byte("braid echo")
	deadline := time.Now().Add(wait)
	c.SetDeadline(deadline)
	buf := make([]byte, 64)
	for time.Now().Before(deadline) {
		c.Write(msg) // repeat: the first may wait for ARP
		rd := time.Now().Add(100 * time.Millisecond)
		if rd.After(deadline) {
			rd = deadline
		}
		c.SetReadDeadline(rd)
		n, err := c.Read(buf)
		if err == nil {
			return string(buf[:n]) == string(msg)
		}
	}
	return false
}

func TestVethEchoAndLinkDown(t *testing.T) {
	needRoot(t)
	a, b := pair(t)
	// Both ends exist where they should, with their MTUs.
	if l, err := b.Netlink().LinkByName("vb"); err != nil || l.Attrs().MTU != 1400 {
		t.Fatalf("vb in b: %v %v", l, err)
	}
	if _, err := a.Netlink().LinkByName("vb"); err == nil {
		t.Fatal("vb visible in a")
	}
	udpEcho(t, b)
	if !echo(t, a, 3*time.Second) {
		t.Fatal("no UDP echo over the veth")
	}

	// ICMP from a Go raw socket opened inside a.
	var ic *icmp.PacketConn
	if err := a.Do(func() error {
		var err error
		ic, err = icmp.ListenPacket("ip4:icmp", "198.18.0.1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	req, _ := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 7, Seq: 1, Data: []byte("hi")}}).Marshal(nil)
	if _, err := ic.WriteTo(req, &net.IPAddr{IP: net.ParseIP("198.18.0.2")}); err != nil {
		t.Fatal(err)
	}
	ic.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		buf := make([]byte, 1500)
		n, from, err := ic.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no ICMP echo reply: %v", err)
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err == nil && m.Type == ipv4.ICMPTypeEchoReply && from.String() == "198.18.0.2" {
			break
		}
	}

	// Cut the path at the far end, then restore it. The near end keeps its
	// routes (see the package doc).
	r := Route{Dst: netip.MustParsePrefix("198.18.7.0/24"), Via: netip.MustParseAddr("198.18.0.2")}
	if err := a.AddRoute(r); err != nil {
		t.Fatal(err)
	}
	if err := b.SetDown("vb"); err != nil {
		t.Fatal(err)
	}
	if echo(t, a, 300*time.Millisecond) {
		t.Fatal("echo answered with vb down")
	}
	if err := b.SetUp("vb"); err != nil {
		t.Fatal(err)
	}
	if !echo(t, a, 3*time.Second) {
		t.Fatal("no echo after vb up again")
	}
	if err := a.DelRoute(r); err != nil {
		t.Fatalf("near-end route lost while the far end was down: %v", err)
	}
}

func TestRunExecStart(t *testing.T) {
	needRoot(t)
	a, _ := pair(t)
	ctx := context.Background()
	// /proc/self/net/dev lists the links of the reader's namespace.
	check := func(how string, out []byte) {
		if !strings.Contains(string(out), "va:") || strings.Contains(string(out), "vb:") {
			t.Errorf("%s: child does not see namespace a:\n%s", how, out)
		}
	}
	var out strings.Builder
	cmd := exec.Command("cat", "/proc/self/net/dev")
	cmd.Stdout = &out
	if err := a.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	check("Start", []byte(out.String()))
	if !haveIP() {
		t.Skip("needs iproute2 for Run/Exec")
	}
	b, err := a.Exec(ctx, "cat", "/proc/self/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	check("Exec", b)
	if _, err := a.Exec(ctx, "false"); err == nil {
		t.Error("Exec false: no error")
	}
	// Close kills what is still running inside.
	ns := newNS(t)
	sleeper := ns.Run(ctx, "sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	waitPids(t, ns, 1)
	ns.Close()
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("sleep exited cleanly; expected it to be killed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close left the process running")
	}
}

// waitPids waits until n processes are inside ns (ip netns exec needs a
// moment to exec).
func waitPids(t *testing.T, ns *Namespace, n int) {
	for i := 0; i < 200; i++ {
		if p, _ := ns.Pids(); len(p) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no process appeared in %s", ns.Name())
}

func TestSysctlRouteRule(t *testing.T) {
	needRoot(t)
	a, _ := pair(t)
	host, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	want := "1"
	if strings.TrimSpace(string(host)) == "1" {
		want = "0"
	}
	if err := a.SetSysctl("net.ipv4.ip_forward", want); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Sysctl("net/ipv4/ip_forward"); err != nil || v != want {
		t.Fatalf("ip_forward in a = %q, %v; want %s", v, err, want)
	}
	if after, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); string(after) != string(host) {
		t.Fatalf("host ip_forward changed from %q to %q", host, after)
	}

	r := Route{Dst: netip.MustParsePrefix("198.18.5.0/24"), Via: netip.MustParseAddr("198.18.0.2"), Table: 100}
	if err := a.AddRoute(r); err != nil {
		t.Fatal(err)
	}
	if err := a.AddRule(Rule{Src: netip.MustParsePrefix("198.18.0.1/32"), Table: 100, Priority: 1000}); err != nil {
		t.Fatal(err)
	}
	routes, err := a.Netlink().RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 100}, netlink.RT_FILTER_TABLE)
	if err != nil || len(routes) != 1 || routes[0].Dst.String() != "198.18.5.0/24" || routes[0].Gw.String() != "198.18.0.2" {
		t.Fatalf("table 100: %v %v", routes, err)
	}
	rules, _ := a.Netlink().RuleList(netlink.FAMILY_V4)
	found := false
	for _, ru := range rules {
		found = found || ru.Table == 100 && ru.Priority == 1000 && ru.Src != nil && ru.Src.String() == "198.18.0.1/32"
	}
	if !found {
		t.Fatalf("rule not found in %v", rules)
	}
	if err := a.DelRoute(r); err != nil {
		t.Fatal(err)
	}
	if err := a.AddRoute(Route{Dst: netip.MustParsePrefix("198.18.6.0/24"), Dev: "nosuch0"}); err == nil || !strings.Contains(err.Error(), "nosuch0") {
		t.Fatalf("route via missing dev: %v", err)
	}
}

// TestShape: a TCP transfer of a fixed size through tbf at 20 Mbit/s. TCP
// carries 1448 payload bytes per 1514-byte frame (tbf counts the Ethernet
// header), so goodput should be 20·1448/1514 = 19.13 Mbit/s; accept ±20%.
// 3 MB take about 1.25 s.
func TestShape(t *testing.T) {
	needRoot(t)
	a, b := pair(t)
	const rate = 20_000_000
	if err := a.Shape("va", TBF{Rate: rate}); err != nil {
		t.Fatal(err)
	}
	l, _ := a.Netlink().LinkByName("va")
	qs, err := a.Netlink().QdiscList(l)
	if err != nil {
		t.Fatal(err)
	}
	var tbf *netlink.Tbf
	for _, q := range qs {
		if q, ok := q.(*netlink.Tbf); ok {
			tbf = q
		}
	}
	if tbf == nil || tbf.Rate != rate/8 {
		t.Fatalf("qdiscs %v: want tbf at %d bytes/s", qs, rate/8)
	}

	var ln net.Listener
	if err := b.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", "198.18.0.2:5001")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		n   int64
		dur time.Duration
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			res <- result{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(15 * time.Second))
		buf := make([]byte, 64<<10)
		k, err := io.ReadAtLeast(c, buf, 1)
		start := time.Now()
		if err != nil {
			res <- result{err: err}
			return
		}
		n, err := io.CopyBuffer(io.Discard, c, buf)
		res <- result{int64(k) + n, time.Since(start), err}
	}()
	var c net.Conn
	if err := a.Do(func() error {
		var err error
		c, err = net.Dial("tcp4", "198.18.0.2:5001")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const total = 3_000_000
	if _, err := c.Write(make([]byte, total)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.n != total {
		t.Fatalf("received %d bytes, want %d", r.n, total)
	}
	got := float64(r.n) * 8 / r.dur.Seconds()
	want := rate * 1448.0 / 1514.0
	t.Logf("goodput %.2f Mbit/s over %v (expected %.2f)", got/1e6, r.dur, want/1e6)
	if got < 0.8*want || got > 1.2*want {
		t.Fatalf("goodput %.2f Mbit/s, want %.2f ±20%%", got/1e6, want/1e6)
	}
	if err := a.Unshape("va"); err != nil {
		t.Fatal(err)
	}
	qs, _ = a.Netlink().QdiscList(l)
	for _, q := range qs {
		if q.Type() == "tbf" {
			t.Fatal("tbf still there after Unshape")
		}
	}
}

func TestCleanup(t *testing.T) {
	needRoot(t)
	// A dead PID: a child that has exited.
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	dead := child.Process.Pid
	stale, err := create(fmt.Sprintf("%s-%d-abcdef", testPrefix, dead))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // only matters if the test fails before Cleanup ran
		killIn(stale.path)
		remove(stale.path)
	})
	// Something still running inside the stale namespace.
	sleeper := exec.Command("sleep", "30")
	if err := stale.Start(sleeper); err != nil {
		stale.Close()
		t.Fatal(err)
	}
	stale.nl.Close()
	stale.fd.Close() // as if its creator had died: only the name and the process keep it
	other, err := create(fmt.Sprintf("%sx-%d-abcdef", testPrefix, dead))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	live := newNS(t)

	removed, err := Cleanup(testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != stale.Name() {
		t.Fatalf("Cleanup removed %v, want only %s", removed, stale.Name())
	}
	for _, ns := range []*Namespace{other, live} {
		if _, err := os.Stat(ns.Path()); err != nil {
			t.Errorf("Cleanup touched %s: %v", ns.Name(), err)
		}
	}
	if _, err := os.Stat(stale.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale %s still there", stale.Name())
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("process in stale namespace exited cleanly; expected kill")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("process in stale namespace still running")
	}
}

// TestCloseDestroys: closing one namespace must free it completely (no
// handle or socket of ours keeping it alive), which takes the veth pair
// with it: the peer in the other namespace disappears.
func TestCloseDestroys(t *testing.T) {
	needRoot(t)
	a, b := pair(t)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ { // namespace teardown runs in a kernel workqueue
		if _, err := b.Netlink().LinkByName("vb"); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("vb still exists 3 s after its peer's namespace was closed")
}
