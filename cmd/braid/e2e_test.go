package main

// The end-to-end test: real braid processes in network namespaces this test creates,
// joined by veth pairs shaped to 10 Mbit/s with tbf, carrying a real HTTP download.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/internal/testenv"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/netns"
)

// When the test binary is started with BRAID_TEST_MAIN=1 it is braid itself: the
// test runs the daemons as child processes inside the namespaces without having to
// build a separate binary.
func TestMain(m *testing.M) {
	if os.Getenv("BRAID_TEST_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const e2ePrefix = "braid-e2e"

type daemon struct {
	name   string
	cmd    *exec.Cmd
	out    *syncBuffer
	socket string
	done   chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startDaemon(t testing.TB, ns *netns.Namespace, name, cfgFile, socket string) *daemon {
	t.Helper()
	d := &daemon{name: name, out: &syncBuffer{}, socket: socket, done: make(chan error, 1)}
	d.cmd = exec.Command(os.Args[0], "up", "-c", cfgFile)
	d.cmd.Env = append(os.Environ(), "BRAID_TEST_MAIN=1")
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := ns.Start(d.cmd); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("--- %s log ---\n%s", name, d.out.String())
		}
	})
	return d
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop(t testing.TB) error {
	if d.cmd.ProcessState != nil {
		return nil
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(5 * time.Second):
		d.cmd.Process.Kill()
		return fmt.Errorf("%s did not exit on SIGTERM", d.name)
	}
}

func (d *daemon) status(t testing.TB) control.Status {
	t.Helper()
	st, err := control.Query(d.socket)
	if err != nil {
		t.Fatalf("%s status: %v", d.name, err)
	}
	return st
}

// waitPaths waits until d's peer has n usable paths.
func (d *daemon) waitPaths(t testing.TB, peer string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := control.Query(d.socket); err == nil {
			for _, p := range st.Peers {
				if (peer == "" || p.Name == peer) && p.Established {
					k := 0
					for _, pa := range p.Paths {
						if pa.State == "active" || pa.State == "degraded" {
							k++
						}
					}
					if k >= n {
						return
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: peer %q never had %d usable paths\n%s", d.name, peer, n, d.out.String())
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newNS(t testing.TB) *netns.Namespace {
	t.Helper()
	ns, err := netns.New(e2ePrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

func pfx(s string) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(s)} }

// ping sends ICMP echo requests from inside ns and returns how many were answered.
func ping(ns *netns.Namespace, dst string, count int) (int, error) {
	var c *icmp.PacketConn
	if err := ns.Do(func() (err error) {
		c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		return 0, err
	}
	defer c.Close()
	got := 0
	for seq := 1; seq <= count; seq++ {
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: seq, Data: []byte("braid")}}
		b, _ := msg.Marshal(nil)
		if _, err := c.WriteTo(b, &net.IPAddr{IP: net.ParseIP(dst)}); err != nil {
			return got, fmt.Errorf("ping %s: %w", dst, err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 1500)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				break
			}
			if m, err := icmp.ParseMessage(1, buf[:n]); err == nil && m.Type == ipv4.ICMPTypeEchoReply {
				if e, ok := m.Body.(*icmp.Echo); ok && e.Seq == seq {
					got++
					break
				}
			}
		}
	}
	return got, nil
}

// dialIn returns a dialer that opens connections inside ns.
func dialIn(ns *netns.Namespace, cc string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		d := net.Dialer{Control: httpbench.Control(cc)}
		err = ns.Do(func() error {
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// e2eRig is the namespace topology:
//
//	cli  c1 198.18.1.1 ── 10 Mbit/s ── s1 198.18.1.2  srv
//	cli  c2 198.18.2.1 ── 10 Mbit/s ── s2 198.18.2.2  srv
//	cliB b1 198.18.3.1 ── unshaped  ── s3 198.18.3.2  srv
type e2eRig struct {
	srvCfg, cliCfg string
	srv, cli, cliB *netns.Namespace
	dSrv, dCli, dB *daemon
	srvKey, cliKey keys.Key
	dir            string
	// pathsA is how many usable paths client a must have before the rig is
	// ready (0: both).
	pathsA int
}

func newE2ERig(t testing.TB, shaped bool) *e2eRig { return newE2ERigWith(t, shaped, nil) }

// newE2ERigWith is newE2ERig with before run on the topology before the daemons
// start (e.g. to give a link a smaller MTU).
func newE2ERigWith(t testing.TB, shaped bool, before func(*e2eRig)) *e2eRig {
	testenv.SkipIfEmulated(t, testenv.NoNetns)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, veth pairs and TUN devices")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2 (ip): apt-get install iproute2")
	}
	netns.Cleanup(e2ePrefix)
	r := &e2eRig{dir: t.TempDir()}
	r.srv, r.cli, r.cliB = newNS(t), newNS(t), newNS(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(netns.AddVeth(netns.VethEnd{NS: r.cli, Name: "c1", Addrs: pfx("198.18.1.1/24")}, netns.VethEnd{NS: r.srv, Name: "s1", Addrs: pfx("198.18.1.2/24")}))
	must(netns.AddVeth(netns.VethEnd{NS: r.cli, Name: "c2", Addrs: pfx("198.18.2.1/24")}, netns.VethEnd{NS: r.srv, Name: "s2", Addrs: pfx("198.18.2.2/24")}))
	must(netns.AddVeth(netns.VethEnd{NS: r.cliB, Name: "b1", Addrs: pfx("198.18.3.1/24")}, netns.VethEnd{NS: r.srv, Name: "s3", Addrs: pfx("198.18.3.2/24")}))
	if os.Getenv("E2E_ARP_IGNORE") == "1" {
		must(r.srv.SetSysctl("net.ipv4.conf.all.arp_ignore", "1"))
	}
	if shaped {
		shape := netns.TBF{Rate: 10_000_000}
		must(r.srv.Shape("s1", shape))
		must(r.srv.Shape("s2", shape))
		must(r.cli.Shape("c1", shape))
		must(r.cli.Shape("c2", shape))
	}

	var err error
	r.srvKey, err = keys.Generate()
	must(err)
	r.cliKey, err = keys.Generate()
	must(err)
	bKey, err := keys.Generate()
	must(err)
	writeFile(t, r.dir, "srv.key", r.srvKey.String())
	writeFile(t, r.dir, "cli.key", r.cliKey.String())
	writeFile(t, r.dir, "b.key", bKey.String())

	srvSock := filepath.Join(r.dir, "srv.sock")
	srvCfg := writeFile(t, r.dir, "server.toml", fmt.Sprintf(`
role = "server"
private_key_file = "srv.key"
log_level = "debug"
[tun]
address = ["100.64.0.1/24"]
[server]
listen = ["0.0.0.0:7000"]
listen_sockets = 2
[[server.clients]]
name = "a"
public_key = %q
allowed_ips = ["100.64.0.2/32"]
[[server.clients]]
name = "b"
public_key = %q
allowed_ips = ["100.64.0.3/32"]
[control]
socket = %q
metrics = "127.0.0.1:9273"
`, r.cliKey.Public(), bKey.Public(), srvSock))
	r.srvCfg = srvCfg
	cliSock := filepath.Join(r.dir, "cli.sock")
	cliCfg := writeFile(t, r.dir, "client.toml", fmt.Sprintf(`
role = "client"
private_key_file = "cli.key"
[tun]
address = ["100.64.0.2/24"]
[client]
server_public_key = %q
servers = ["198.18.1.2:7000", "198.18.2.2:7000"]
paths = ["c1", "c2"]
congestion = %q
recovery = %q
[control]
socket = %q
`, r.srvKey.Public(), e2eCongestion(), e2eRecovery(), cliSock))
	r.cliCfg = cliCfg
	bSock := filepath.Join(r.dir, "b.sock")
	bCfg := writeFile(t, r.dir, "b.toml", fmt.Sprintf(`
role = "client"
private_key_file = "b.key"
[tun]
address = ["100.64.0.3/24"]
[client]
server_public_key = %q
servers = ["198.18.3.2:7000"]
paths = ["b1"]
[control]
socket = %q
`, r.srvKey.Public(), bSock))

	if before != nil {
		before(r)
	}
	r.dSrv = startDaemon(t, r.srv, "server", srvCfg, srvSock)
	r.dCli = startDaemon(t, r.cli, "client a", cliCfg, cliSock)
	r.dB = startDaemon(t, r.cliB, "client b", bCfg, bSock)
	if r.pathsA == 0 {
		r.pathsA = 2
	}
	r.dCli.waitPaths(t, "", r.pathsA)
	r.dSrv.waitPaths(t, "a", r.pathsA)
	r.dSrv.waitPaths(t, "b", 1)

	// The web server: one listener in the server namespace, reachable directly
	// (198.18.x.2) and through the tunnel (100.64.0.1).
	serveWeb(t, r.srv)
	return r
}

// shapeLink shapes both ends of the rig's link n (s<n> and c<n>) to rate
// bits/s with a queue of limit bytes (0: the default); rate 8 with limit 1
// drops every packet, a silent cut.
func (r *e2eRig) shapeLink(t testing.TB, n int, rate uint64, limit uint32) {
	for _, l := range []struct {
		ns   *netns.Namespace
		link string
	}{{r.srv, fmt.Sprintf("s%d", n)}, {r.cli, fmt.Sprintf("c%d", n)}} {
		if err := l.ns.Shape(l.link, netns.TBF{Rate: rate, Limit: limit}); err != nil {
			t.Error(err)
		}
	}
}

// e2eCongestion is braid's own per-path congestion control for client a: braid's
// default ("auto": the rate model, with loss recovery on), or $E2E_CONGESTION to
// run the same checks with another controller.
func e2eCongestion() string {
	if c := os.Getenv("E2E_CONGESTION"); c != "" {
		return c
	}
	return "auto"
}

// e2eRecovery is client a's loss recovery: braid's default ("auto"), or
// $E2E_RECOVERY.
func e2eRecovery() string {
	if r := os.Getenv("E2E_RECOVERY"); r != "" {
		return r
	}
	return "auto"
}

// e2eCC is the inner TCP's congestion control: cubic as in the paper, or $E2E_CC.
func e2eCC() string {
	if cc := os.Getenv("E2E_CC"); cc != "" {
		return cc
	}
	return "cubic"
}

func (r *e2eRig) fetch(t testing.TB, host string, size int64, onProgress func(int64)) httpbench.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := httpbench.Fetch(ctx, httpbench.URL(host, size), httpbench.Options{Dial: dialIn(r.cli, e2eCC()), OnProgress: onProgress})
	if err != nil {
		t.Fatalf("download from %s: %v", host, err)
	}
	return res
}

func TestE2ETunnel(t *testing.T) {
	r := newE2ERig(t, true)
	const size = 16 * httpbench.MB

	t.Run("ping", func(t *testing.T) {
		if got, err := ping(r.cli, "100.64.0.1", 5); err != nil || got < 4 {
			t.Fatalf("%d of 5 pings answered through the tunnel (%v)", got, err)
		}
		// The whole test runs with two sockets reading the listen address.
		if st := r.dSrv.status(t); st.ListenSockets != 2 || len(st.Listen) != 1 {
			t.Fatalf("server listens on %v with %d sockets, want one address and 2", st.Listen, st.ListenSockets)
		}
	})

	t.Run("aggregation", func(t *testing.T) {
		direct := r.fetch(t, "198.18.1.2:8080", size, nil)
		tunnel := r.fetch(t, "100.64.0.1:8080", size, nil)
		ratio := tunnel.GoodputMbps() / direct.GoodputMbps()
		t.Logf("16 MB download: one path direct %.2f Mbit/s, braid over two paths %.2f Mbit/s, ratio %.2f",
			direct.GoodputMbps(), tunnel.GoodputMbps(), ratio)
		logPaths(t, "server", r.dSrv.status(t))
		logPaths(t, "client", r.dCli.status(t))
		if ratio <= 1.6 {
			t.Fatalf("aggregation ratio %.2f ≤ 1.6", ratio)
		}
	})

	t.Run("forged-and-replayed", func(t *testing.T) { r.forgedAndReplayed(t) })

	t.Run("spoofing", func(t *testing.T) { r.spoofing(t) })

	t.Run("path-cut", func(t *testing.T) {
		var once sync.Once
		res := r.fetch(t, "100.64.0.1:8080", size, func(total int64) {
			if total >= size/3 {
				once.Do(func() {
					// The far end goes down: the client keeps its addresses but
					// path 2 carries nothing any more, in either direction.
					if err := r.srv.SetDown("s2"); err != nil {
						t.Errorf("cutting path: %v", err)
					}
				})
			}
		})
		t.Logf("download with a path cut at a third: %.2f Mbit/s, longest stall %v", res.GoodputMbps(), res.MaxStall)
		if res.MaxStall >= time.Second {
			t.Fatalf("the download stood still for %v", res.MaxStall)
		}
		st := r.dCli.status(t)
		down := 0
		for _, pa := range st.Peers[0].Paths {
			if pa.State == "down" {
				down++
			}
		}
		if down == 0 {
			t.Fatalf("no path reported down after the cut: %+v", st.Peers[0].Paths)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		c := http.Client{Transport: &http.Transport{DialContext: dialIn(r.srv, "")}}
		resp, err := c.Get("http://127.0.0.1:9273/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{"braid_path_srtt_seconds", "braid_drops_total", `reason="replayed"`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	t.Run("sighup-reload", func(t *testing.T) {
		// Drop client b from the server's file; SIGHUP applies it without touching
		// client a's session.
		before := r.dSrv.status(t)
		cfg, err := os.ReadFile(r.srvCfg)
		if err != nil {
			t.Fatal(err)
		}
		i := strings.LastIndex(string(cfg), "[[server.clients]]")
		j := strings.Index(string(cfg), "[control]")
		if err := os.WriteFile(r.srvCfg, append(cfg[:i:i], cfg[j:]...), 0o600); err != nil {
			t.Fatal(err)
		}
		r.dSrv.cmd.Process.Signal(syscall.SIGHUP)
		deadline := time.Now().Add(5 * time.Second)
		for {
			st := r.dSrv.status(t)
			if len(st.Peers) == 1 {
				if st.Peers[0].Name != "a" || st.Peers[0].SessionIndex != before.Peers[0].SessionIndex {
					t.Fatalf("after reload: %+v (before: index %x)", st.Peers[0], before.Peers[0].SessionIndex)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("reload did not remove client b: %d peers", len(st.Peers))
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got, err := ping(r.cli, "100.64.0.1", 3); err != nil || got < 2 {
			t.Fatalf("after reload %d of 3 pings answered (%v)", got, err)
		}
	})

	t.Run("clean-shutdown", func(t *testing.T) {
		if err := r.dCli.stop(t); err != nil {
			t.Fatalf("client exit: %v", err)
		}
		if _, err := r.cli.Netlink().LinkByName("braid0"); err == nil {
			t.Fatal("braid0 still exists after SIGTERM")
		}
	})
}

// forgedAndReplayed captures a real transport datagram on the server's first link,
// then sends it again (replay) and with a changed counter (forgery) from the client's
// namespace. Both must be dropped and counted.
func (r *e2eRig) forgedAndReplayed(t *testing.T) {
	var fd int
	if err := r.srv.Do(func() error {
		var err error
		fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_DGRAM, int(htons(syscall.ETH_P_IP)))
		if err != nil {
			return err
		}
		ifi, err := net.InterfaceByName("s1")
		if err != nil {
			return err
		}
		return syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_IP), Ifindex: ifi.Index})
	}); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	tv := syscall.NsecToTimeval(int64(200 * time.Millisecond))
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)

	var dgram []byte
	deadline := time.Now().Add(5 * time.Second)
	go ping(r.cli, "100.64.0.1", 5)
	buf := make([]byte, 65536)
	for dgram == nil && time.Now().Before(deadline) {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil || n < 28 {
			continue
		}
		ihl := int(buf[0]&0xf) * 4
		if buf[9] != syscall.IPPROTO_UDP || n < ihl+8+32 {
			continue
		}
		if binary.BigEndian.Uint16(buf[ihl+2:]) != 7000 || buf[ihl+8] != 4 {
			continue
		}
		dgram = bytes.Clone(buf[ihl+8 : n])
	}
	if dgram == nil {
		t.Fatal("captured no transport datagram")
	}
	before := r.dSrv.status(t).Counters
	var c *net.UDPConn
	if err := r.cli.Do(func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP("198.18.1.1")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dst := &net.UDPAddr{IP: net.ParseIP("198.18.1.2"), Port: 7000}
	c.WriteToUDP(dgram, dst) // replay
	forged := bytes.Clone(dgram)
	forged[8] ^= 0x40 // a counter far ahead: passes the replay pre-check, fails authentication
	c.WriteToUDP(forged, dst)
	deadline = time.Now().Add(3 * time.Second)
	for {
		after := r.dSrv.status(t).Counters
		rep := after["drop_replayed"] - before["drop_replayed"]
		forg := after["drop_forged"] - before["drop_forged"]
		if rep == 1 && forg == 1 {
			t.Logf("replayed +%d, forged +%d", rep, forg)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replayed +%d, forged +%d; want +1 each (counters %v)", rep, forg, after)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logPaths logs one line per path and the reorder counters of every peer.
func logPaths(t testing.TB, who string, st control.Status) {
	for _, p := range st.Peers {
		r := p.ReorderStats
		t.Logf("%s peer %s: reorder hold %.1fms in-order %d reordered %d timeouts %d late %d dups %d",
			who, p.Name, r.HoldMs, r.InOrder, r.Reordered, r.Timeouts, r.Late, r.Duplicates)
		if rs := p.RecoveryStats; rs != nil {
			t.Logf("  recovery %s: hold %.1fms fec %q rebuilt %d give-ups %d; queue %+v", p.Recovery, rs.HoldMs, rs.FEC, rs.Rebuilt, rs.GiveUps, p.Queue)
		}
		for _, pa := range p.Paths {
			t.Logf("  path %d %s: %s srtt %.1fms min %.1fms queue %.1fms rate %.2f Mbit/s share %.3f lost %d mtu %d",
				pa.ID, pa.Remote, pa.State, pa.SRTTMs, pa.MinRTTMs, pa.QueueDelayMs, pa.DeliveryRateBps/1e6, pa.Share, pa.LostPackets, pa.MTU)
			if c, r := pa.CC, pa.Recovery; c != nil && r != nil {
				t.Logf("    cc: cap %d B, in flight %d B, pacing %.2f Mbit/s; resent %d, recovered %d, repairs %d, rebuilt %d, residual %d",
					c.CwndBytes, pa.InFlight, c.PacingRateBps/1e6, r.Retransmitted, r.Recovered, r.RepairSent, r.RepairUsed, r.Residual)
			}
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// spoofing: client B sends from client A's inner address; the server must drop it,
// while B's packets from its own address arrive.
func (r *e2eRig) spoofing(t *testing.T) {
	var ln *net.UDPConn
	if err := r.srv.Do(func() (err error) {
		ln, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := r.cliB.AddAddr("braid0", netip.MustParsePrefix("100.64.0.2/32")); err != nil {
		t.Fatal(err)
	}
	before := r.dSrv.status(t).Counters["drop_spoofed_source"]
	send := func(src, msg string) {
		var c *net.UDPConn
		if err := r.cliB.Do(func() (err error) {
			c, err = net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(src)}, &net.UDPAddr{IP: net.ParseIP("100.64.0.1"), Port: 9999})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte(msg))
	}
	send("100.64.0.2", "spoofed")
	time.Sleep(100 * time.Millisecond)
	send("100.64.0.3", "honest")
	ln.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 100)
	n, from, err := ln.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("honest packet from client b not received: %v", err)
	}
	if string(buf[:n]) != "honest" || from.IP.String() != "100.64.0.3" {
		t.Fatalf("received %q from %v", buf[:n], from)
	}
	if got := r.dSrv.status(t).Counters["drop_spoofed_source"] - before; got != 1 {
		t.Fatalf("drop_spoofed_source +%d, want +1", got)
	}
}

// TestE2EStartupErrors: an unknown interface and a busy port each stop `braid up`
// with one clear line and exit code 1, and leave no TUN device behind.
func TestE2EStartupErrors(t *testing.T) {
	testenv.SkipIfEmulated(t, testenv.NoNetns)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and TUN devices")
	}
	ns := newNS(t)
	dir := t.TempDir()
	k, _ := keys.Generate()
	srv, _ := keys.Generate()
	writeFile(t, dir, "k.key", k.String())
	var busy *net.UDPConn
	if err := ns.Do(func() (err error) {
		busy, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero, Port: 7000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// An interface that does not exist (yet) is not an error: the path waits for
	// it (see TestE2EInterfaceComesAndGoes).
	t.Run("unknown interface waits", func(t *testing.T) {
		sock := filepath.Join(dir, "c.sock")
		file := writeFile(t, dir, "c.toml", fmt.Sprintf(`
role = "client"
private_key_file = "k.key"
[tun]
address = ["100.64.0.2/24"]
[client]
server_public_key = %q
servers = ["198.18.1.2:7000"]
paths = ["nope0"]
[control]
socket = %q
`, srv.Public(), sock))
		d := startDaemon(t, ns, "client", file, sock)
		deadline := time.Now().Add(5 * time.Second)
		for {
			if st, err := control.Query(sock); err == nil && len(st.Peers) == 1 {
				waiting := false
				for _, pa := range st.Peers[0].Paths {
					waiting = waiting || (pa.Device == "nope0" && pa.State == "waiting")
				}
				if !waiting {
					t.Fatalf("no waiting path for nope0: %+v", st.Peers[0].Paths)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("braid up with a missing interface did not come up:\n%s", d.out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := d.stop(t); err != nil {
			t.Fatal(err)
		}
	})
	cases := []struct {
		name, cfg, want string
	}{
		{"busy port", fmt.Sprintf(`
role = "server"
private_key_file = "k.key"
[tun]
address = ["100.64.0.1/24"]
[server]
listen = ["0.0.0.0:7000"]
[[server.clients]]
public_key = %q
allowed_ips = ["100.64.0.2/32"]
[control]
socket = %q
`, srv.Public(), filepath.Join(dir, "s.sock")), "address already in use"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := writeFile(t, dir, "x.toml", c.cfg)
			upFails(t, ns, file, c.want)
			if _, err := ns.Netlink().LinkByName("braid0"); err == nil {
				t.Fatal("braid0 left behind")
			}
		})
	}
}

// upFails runs `braid up -c file` inside ns and requires it to exit 1 with a
// last line "braid: …want…".
func upFails(t *testing.T, ns *netns.Namespace, file, want string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "up", "-c", file)
	cmd.Env = append(os.Environ(), "BRAID_TEST_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("braid up did not fail within 15 s; output:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit code %d (%v), want 1; output:\n%s", code, err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "braid: ") || !strings.Contains(last, want) {
		t.Fatalf("last line %q, want a \"braid: …%s…\" line; output:\n%s", last, want, out.String())
	}
}

// serveWeb runs the httpbench web server on port 8080 of every address of ns
// until the test ends.
func serveWeb(t testing.TB, ns *netns.Namespace) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = httpbench.Listen("0.0.0.0:8080", e2eCC())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: httpbench.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
}
