package main

// End-to-end tests of the stream transports: real braid processes in namespaces this
// test creates, the tunnel over one TCP connection or over one kernel MPTCP
// connection whose subflows use both 10 Mbit/s paths.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/internal/testenv"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/netns"
	"github.com/braid-vpn/braid/wire"
)

// streamRig is the e2eRig topology (two shaped paths to the server, an unshaped one
// from a third namespace) with one client running the given transport.
//
//	cli  c1 198.18.1.1 ── 10 Mbit/s ── s1 198.18.1.2  srv
//	cli  c2 198.18.2.1 ── 10 Mbit/s ── s2 198.18.2.2  srv
//	cliB b1 198.18.3.1 ── unshaped  ── s3 198.18.3.2  srv
type streamRig struct {
	dir              string
	srv, cli, cliB   *netns.Namespace
	srvCfg, cliCfg   string
	srvSock, cliSock string
	dSrv, dCli       *daemon
	transport        string
	listen, servers  string
	paths            string
	srvKey, cliKey   keys.Key
}

func newStreamRig(t *testing.T, transport, listen, servers, paths, clientExtra string) *streamRig {
	testenv.SkipIfEmulated(t, testenv.NoNetns)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, veth pairs, TUN devices and MPTCP endpoints")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2 (ip): apt-get install iproute2")
	}
	netns.Cleanup(e2ePrefix)
	r := &streamRig{dir: t.TempDir(), transport: transport, listen: listen, servers: servers, paths: paths}
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
	shape := netns.TBF{Rate: 10_000_000}
	for _, l := range []string{"s1", "s2"} {
		must(r.srv.Shape(l, shape))
	}
	for _, l := range []string{"c1", "c2"} {
		must(r.cli.Shape(l, shape))
	}
	var err error
	r.srvKey, err = keys.Generate()
	must(err)
	r.cliKey, err = keys.Generate()
	must(err)
	writeFile(t, r.dir, "srv.key", r.srvKey.String())
	writeFile(t, r.dir, "cli.key", r.cliKey.String())
	r.srvSock = filepath.Join(r.dir, "srv.sock")
	r.cliSock = filepath.Join(r.dir, "cli.sock")
	r.srvCfg = writeFile(t, r.dir, "server.toml", fmt.Sprintf(`
role = "server"
private_key_file = "srv.key"
log_level = "debug"
[tun]
address = ["100.64.0.1/24"]
[server]
listen = [%s]
transport = %q
[[server.clients]]
name = "a"
public_key = %q
allowed_ips = ["100.64.0.2/32"]
[control]
socket = %q
`, listen, transport, r.cliKey.Public(), r.srvSock))
	r.cliCfg = writeFile(t, r.dir, "client.toml", fmt.Sprintf(`
role = "client"
private_key_file = "cli.key"
log_level = "debug"
[tun]
address = ["100.64.0.2/24"]
[client]
server_public_key = %q
servers = [%s]
paths = [%s]
transport = %q
%s
[control]
socket = %q
`, r.srvKey.Public(), servers, paths, transport, clientExtra, r.cliSock))

	r.dSrv = startDaemon(t, r.srv, "server", r.srvCfg, r.srvSock)
	r.dCli = startDaemon(t, r.cli, "client", r.cliCfg, r.cliSock)
	r.dCli.waitPaths(t, "", 1)
	r.dSrv.waitPaths(t, "a", 1)

	serveWeb(t, r.srv)
	return r
}

func (r *streamRig) fetch(t *testing.T, size int64) httpbench.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := httpbench.Fetch(ctx, httpbench.URL("100.64.0.1:8080", size), httpbench.Options{Dial: dialIn(r.cli, e2eCC())})
	if err != nil {
		t.Fatalf("download through the %s tunnel: %v", r.transport, err)
	}
	return res
}

// pingSoon waits until pings through the tunnel are answered again.
func (r *streamRig) pingSoon(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if got, _ := ping(r.cli, "100.64.0.1", 1); got == 1 {
			return time.Since(start)
		}
	}
	cs, _ := json.MarshalIndent(r.dCli.status(t), "", " ")
	ss, _ := json.MarshalIndent(r.dSrv.status(t), "", " ")
	t.Fatalf("no ping answered through the %s tunnel within %v\nclient status:\n%s\nserver status:\n%s", r.transport, within, cs, ss)
	return 0
}

// stream returns the client's only path and its stream status.
func clientStream(t *testing.T, st control.Status) (control.PathStatus, *control.StreamStatus) {
	t.Helper()
	if len(st.Peers) != 1 || len(st.Peers[0].Paths) != 1 {
		t.Fatalf("client status: want 1 peer with 1 path, got %+v", st.Peers)
	}
	p := st.Peers[0].Paths[0]
	if p.Stream == nil {
		t.Fatalf("path %d has no stream status", p.ID)
	}
	return p, p.Stream
}

func linkBytes(t *testing.T, ns *netns.Namespace, name string) (rx, tx uint64) {
	t.Helper()
	l, err := ns.Netlink().LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	s := l.Attrs().Statistics
	return s.RxBytes, s.TxBytes
}

// TestE2ETCP: the tunnel over one TCP connection (one path, one server address).
func TestE2ETCP(t *testing.T) {
	r := newStreamRig(t, "tcp", `"0.0.0.0:7000"`, `"198.18.1.2:7000"`, `"c1"`, "")

	t.Run("ping", func(t *testing.T) {
		if got, err := ping(r.cli, "100.64.0.1", 5); err != nil || got < 4 {
			t.Fatalf("%d of 5 pings answered through the tunnel (%v)", got, err)
		}
		st := r.dCli.status(t)
		if st.Transport != "tcp" {
			t.Fatalf("client status transport %q", st.Transport)
		}
		_, s := clientStream(t, st)
		if s.Kind != "tcp" || !s.Connected || s.Remote != "198.18.1.2:7000" || !strings.HasPrefix(s.Local, "198.18.1.1:") || s.RTTMs <= 0 {
			t.Fatalf("client stream %+v", s)
		}
	})

	t.Run("download", func(t *testing.T) {
		const size = 4 * httpbench.MB
		rx0, _ := linkBytes(t, r.cli, "c1")
		res := r.fetch(t, size)
		rx1, _ := linkBytes(t, r.cli, "c1")
		t.Logf("4 MB download through the TCP tunnel (one 10 Mbit/s path): %.2f Mbit/s, longest stall %v", res.GoodputMbps(), res.MaxStall)
		// It all came over the one connection, on c1.
		if rx1-rx0 < size {
			t.Fatalf("c1 received %d bytes during a %d-byte download", rx1-rx0, size)
		}
		_, s := clientStream(t, r.dCli.status(t))
		if s.RxBytes < size {
			t.Fatalf("the client's stream carried %d bytes of a %d-byte download", s.RxBytes, size)
		}
	})

	t.Run("bad-peers", func(t *testing.T) {
		before := r.dSrv.status(t).Counters["stream_bad_peer"]
		for i, send := range [][]byte{
			[]byte("GET / HTTP/1.1\r\nHost: braid\r\n\r\n"),
			append(wire.StreamHello[:], 0, 200, wire.TypeData, 0, 0), // truncated: 200 announced, 3 sent
		} {
			var c net.Conn
			if err := r.cliB.Do(func() (err error) {
				c, err = net.DialTimeout("tcp", "198.18.3.2:7000", 2*time.Second)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			c.Write(send)
			c.(*net.TCPConn).CloseWrite()
			// The server's hello may arrive first; then the connection must end.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadAll(c); err != nil && os.IsTimeout(err) {
				t.Fatalf("peer %d: the server did not disconnect it", i)
			}
			c.Close()
			// Meanwhile the real client carries on.
			if got, err := ping(r.cli, "100.64.0.1", 2); err != nil || got < 1 {
				t.Fatalf("after bad peer %d: %d of 2 pings answered (%v)", i, got, err)
			}
		}
		deadline := time.Now().Add(3 * time.Second)
		for {
			got := r.dSrv.status(t).Counters["stream_bad_peer"] - before
			if got == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stream_bad_peer +%d, want +2", got)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(r.dSrv.out.String(), "stream peer disconnected: bad framing") {
			t.Fatalf("server log does not mention the bad peer:\n%s", r.dSrv.out.String())
		}
	})

	t.Run("server-restart", func(t *testing.T) {
		if err := r.dSrv.stop(t); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the client sees the connection fail and retries
		r.dSrv = startDaemon(t, r.srv, "server (restarted)", r.srvCfg, r.srvSock)
		took := r.pingSoon(t, 20*time.Second)
		t.Logf("ping through the tunnel again %v after the server restarted", took.Round(10*time.Millisecond))
		_, s := clientStream(t, r.dCli.status(t))
		if !s.Connected || s.Connects < 2 {
			t.Fatalf("client stream after the restart: %+v", s)
		}
	})
}

// TestE2EMPTCP: the tunnel over one MPTCP connection; braid sets up the path
// manager on both sides, so the connection's subflows use both paths.
func TestE2EMPTCP(t *testing.T) {
	r := newStreamRig(t, "mptcp", `"198.18.1.2:7000", "198.18.2.2:7000"`, `"198.18.1.2:7000", "198.18.2.2:7000"`, `"c1", "c2"`, "")

	t.Run("ping", func(t *testing.T) {
		if got, err := ping(r.cli, "100.64.0.1", 5); err != nil || got < 4 {
			t.Fatalf("%d of 5 pings answered through the tunnel (%v)", got, err)
		}
		out, err := r.cli.Exec(context.Background(), "ip", "mptcp", "endpoint", "show")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"198.18.1.1 id", "198.18.2.1 id", "subflow fullmesh dev c1", "subflow fullmesh dev c2"} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("client endpoints lack %q:\n%s", want, out)
			}
		}
		out, _ = r.srv.Exec(context.Background(), "ip", "mptcp", "endpoint", "show")
		if !strings.Contains(string(out), "198.18.2.2 id") || !strings.Contains(string(out), "signal") {
			t.Fatalf("server endpoints:\n%s", out)
		}
	})

	t.Run("download", func(t *testing.T) {
		const size = 8 * httpbench.MB
		rx1a, _ := linkBytes(t, r.cli, "c1")
		rx2a, _ := linkBytes(t, r.cli, "c2")
		res := r.fetch(t, size)
		rx1b, _ := linkBytes(t, r.cli, "c1")
		rx2b, _ := linkBytes(t, r.cli, "c2")
		d1, d2 := rx1b-rx1a, rx2b-rx2a
		t.Logf("8 MB download through the MPTCP tunnel (two 10 Mbit/s paths): %.2f Mbit/s, longest stall %v; c1 received %.1f MB, c2 %.1f MB",
			res.GoodputMbps(), res.MaxStall, float64(d1)/1e6, float64(d2)/1e6)
		// Both paths carried a real share of the download, not just subflow setup.
		if d1 < size/5 || d2 < size/5 {
			t.Fatalf("c1 received %d and c2 %d bytes of a %d-byte download: one path idle\nclient %s\nserver %s", d1, d2, size, mptcpCounters(r.cli), mptcpCounters(r.srv))
		}
		st := r.dCli.status(t)
		p, s := clientStream(t, st)
		if s.Kind != "mptcp" || !s.Connected || p.Remote != "198.18.1.2:7000" {
			t.Fatalf("client path %+v, stream %+v", p, s)
		}
		busy := map[string]uint64{}
		for _, sf := range s.Subflows {
			t.Logf("  subflow %s → %s: received %.2f MB, rtt %.1f ms", sf.Local, sf.Remote, float64(sf.RxBytes)/1e6, sf.RTTMs)
			if sf.RxBytes > size/10 {
				busy[strings.Split(sf.Local, ":")[0]] += sf.RxBytes
			}
		}
		if len(busy) < 2 {
			t.Fatalf("subflows that carried >10%% of the download, by local address: %v (want both paths); %d subflows", busy, s.ExtraSubflows+1)
		}
		var out bytes.Buffer
		if code := run(context.Background(), []string{"status", "--socket", r.cliSock}, nil, &out, &out); code != 0 {
			t.Fatalf("braid status: exit %d\n%s", code, out.String())
		}
		if !strings.Contains(out.String(), "transport:   mptcp") || !strings.Contains(out.String(), "SUBFLOW") {
			t.Fatalf("braid status shows no subflows:\n%s", out.String())
		}
	})

	t.Run("cleanup", func(t *testing.T) {
		if err := r.dCli.stop(t); err != nil {
			t.Fatal(err)
		}
		out, err := r.cli.Exec(context.Background(), "ip", "mptcp", "endpoint", "show")
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Fatalf("endpoints left after the client stopped (%v):\n%s", err, out)
		}
		out, _ = r.cli.Exec(context.Background(), "ip", "mptcp", "limits")
		if !strings.Contains(string(out), "add_addr_accepted 0 subflows 2") {
			t.Fatalf("limits not restored: %s", out)
		}
	})
}

// TestE2EMPTCPSubflowsPerPath: subflows_per_path = 2 on one path and one server
// address gives two subflows between the same pair of addresses (ndiffports-like),
// both carrying the download.
func TestE2EMPTCPSubflowsPerPath(t *testing.T) {
	r := newStreamRig(t, "mptcp", `"0.0.0.0:7000"`, `"198.18.1.2:7000"`, `"c1"`, "subflows_per_path = 2")
	const size = 4 * httpbench.MB
	res := r.fetch(t, size)
	_, s := clientStream(t, r.dCli.status(t))
	t.Logf("4 MB download through MPTCP with 2 subflows on one 10 Mbit/s path: %.2f Mbit/s", res.GoodputMbps())
	if len(s.Subflows) != 2 {
		t.Fatalf("%d subflows, want 2: %+v\nclient %s\nserver %s", len(s.Subflows), s.Subflows, mptcpCounters(r.cli), mptcpCounters(r.srv))
	}
	a, b := s.Subflows[0], s.Subflows[1]
	t.Logf("  subflow %s ↔ %s received %.2f MB; subflow %s ↔ %s received %.2f MB", a.Local, a.Remote, float64(a.RxBytes)/1e6, b.Local, b.Remote, float64(b.RxBytes)/1e6)
	host := func(s string) string { return strings.Split(s, ":")[0] }
	if host(a.Local) != host(b.Local) || host(a.Remote) != host(b.Remote) || host(a.Local) != "198.18.1.1" {
		t.Fatalf("subflows are not on the one pair of addresses: %+v", s.Subflows)
	}
	if a.RxBytes+b.RxBytes < size || min(a.RxBytes, b.RxBytes) < size/20 {
		t.Fatalf("subflows received %d and %d bytes of a %d-byte download: one idle", a.RxBytes, b.RxBytes, size)
	}
}

// TestE2EMPTCPDisabled: with net.mptcp.enabled = 0 in its namespace, `braid up` with
// transport = "mptcp" stops with one line that names the sysctl.
func TestE2EMPTCPDisabled(t *testing.T) {
	testenv.SkipIfEmulated(t, testenv.NoNetns)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	ns := newNS(t)
	if err := ns.SetSysctl("net.mptcp.enabled", "0"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	k, _ := keys.Generate()
	srv, _ := keys.Generate()
	writeFile(t, dir, "k.key", k.String())
	file := writeFile(t, dir, "c.toml", fmt.Sprintf(`
role = "client"
private_key_file = "k.key"
[tun]
address = ["100.64.0.2/24"]
[client]
server_public_key = %q
servers = ["198.18.1.2:7000"]
transport = "mptcp"
[control]
socket = %q
`, srv.Public(), filepath.Join(dir, "c.sock")))
	upFails(t, ns, file, "sysctl net.mptcp.enabled = 0")
	if _, err := ns.Netlink().LinkByName("braid0"); err == nil {
		t.Fatal("braid0 left behind")
	}
}

// mptcpCounters returns the namespace's non-zero MPTCP MIB counters, for failures.
func mptcpCounters(ns *netns.Namespace) string {
	out, err := ns.Exec(context.Background(), "cat", "/proc/net/netstat")
	if err != nil {
		return err.Error()
	}
	var names, vals []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "MPTcpExt:") {
			continue
		}
		if names == nil {
			names = strings.Fields(l)[1:]
		} else {
			vals = strings.Fields(l)[1:]
		}
	}
	var b strings.Builder
	for i := range min(len(names), len(vals)) {
		if vals[i] != "0" {
			fmt.Fprintf(&b, "%s=%s ", names[i], vals[i])
		}
	}
	return b.String()
}
