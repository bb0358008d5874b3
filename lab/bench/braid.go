package bench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/testbed"
)

// Inner addresses of the braid cases (the lab's: runner uses the same).
var (
	braidServerInner = netip.MustParsePrefix("100.64.0.1/24")
	braidClientInner = netip.MustParsePrefix("100.64.0.2/24")
)

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// BraidClientConfig is the client's file for paths. With one path it
// talks to the server address on that path only: one subflow, one veth.
// With more it lists every server address, as a real client does and as
// the lab's braid transport does, so the full mesh has paths × addresses
// subflows (the crossing ones still leave through their own veth: a socket
// pinned to a device with no route to the address treats it as on-link).
func BraidClientConfig(paths []testbed.Path, serverKey keys.Key, socket string) string {
	var ifs, servers []string
	for _, p := range paths {
		ifs = append(ifs, p.ClientIf)
		servers = append(servers, netip.AddrPortFrom(p.ServerAddr, runner.BraidPort).String())
	}
	return fmt.Sprintf("role = \"client\"\nprivate_key_file = \"client.key\"\n[tun]\naddress = [%q]\n[client]\nserver_public_key = %q\nservers = %s\npaths = %s\n[control]\nsocket = %q\n",
		braidClientInner, serverKey.Public().String(), quoteList(servers), quoteList(ifs), socket)
}

// BraidServerConfig is the server's file for one client key.
func BraidServerConfig(clientKey keys.Key, socket string) string {
	return fmt.Sprintf("role = \"server\"\nprivate_key_file = \"server.key\"\n[tun]\naddress = [%q]\n[server]\nlisten = [\"0.0.0.0:%d\"]\n[[server.clients]]\nname = \"bench\"\npublic_key = %q\nallowed_ips = [%q]\n[control]\nsocket = %q\n",
		braidServerInner, runner.BraidPort, clientKey.Public().String(), netip.PrefixFrom(braidClientInner.Addr(), 32), socket)
}

type braidTunnel struct {
	l        *lab
	paths    []testbed.Path
	srv, cli *child
	cliSock  string
	detail   string
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
}

func startBraid(ctx context.Context, l *lab, n int) (_ tunnel, err error) {
	t := &braidTunnel{l: l, paths: benchPaths[:n]}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	dir, err := os.MkdirTemp(l.dir, "braid-")
	if err != nil {
		return nil, err
	}
	srvKey, err := keys.Generate()
	if err != nil {
		return nil, err
	}
	cliKey, err := keys.Generate()
	if err != nil {
		return nil, err
	}
	srvSock, cliSock := filepath.Join(dir, "server.sock"), filepath.Join(dir, "client.sock")
	t.cliSock = cliSock
	files := map[string]string{
		"server.key":  srvKey.String(),
		"client.key":  cliKey.String(),
		"server.toml": BraidServerConfig(cliKey, srvSock),
		"client.toml": BraidClientConfig(t.paths, srvKey, cliSock),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	for _, d := range []struct {
		who  string
		file string
		into **child
		ns   bool
	}{{"braid server", "server.toml", &t.srv, true}, {"braid client", "client.toml", &t.cli, false}} {
		cmd, err := braidCmd(l.cfg.Braid, "up", "-c", filepath.Join(dir, d.file))
		if err != nil {
			return nil, err
		}
		ns := l.cli
		if d.ns {
			ns = l.srv
		}
		if *d.into, err = startChild(ns, d.who, cmd); err != nil {
			return nil, err
		}
	}
	st, err := t.waitReady(ctx)
	if err != nil {
		return nil, err
	}
	t.detail = braidDetail(st, t.paths, tunMTU(l, "braid0"))
	t.dial = dialIn(l.cli, l.cfg.CC, braidClientInner.Masked())
	return t, nil
}

// waitReady waits until the client has a usable subflow on every path.
func (t *braidTunnel) waitReady(ctx context.Context) (control.Status, error) {
	deadline := time.Now().Add(runner.BraidReadyTimeout)
	got := 0
	for time.Now().Before(deadline) {
		if t.srv.exited() {
			return control.Status{}, fmt.Errorf("braid server exited: %s", t.srv.lastLine())
		}
		if t.cli.exited() {
			return control.Status{}, fmt.Errorf("braid client exited: %s", t.cli.lastLine())
		}
		if st, err := control.Query(t.cliSock); err == nil {
			if got = runner.UsablePaths(st, t.paths); got >= len(t.paths) {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return control.Status{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return control.Status{}, fmt.Errorf("braid: the client had %d of %d paths usable after %v (client: %s)", got, len(t.paths), runner.BraidReadyTimeout, t.cli.lastLine())
}

// braidDetail names the scheduler and counts the usable subflows.
func braidDetail(st control.Status, paths []testbed.Path, mtu int) string {
	sched, subflows := "", 0
	for _, p := range st.Peers {
		if !p.Established {
			continue
		}
		sched = p.Scheduler
		for _, ps := range p.Paths {
			if ps.State == "active" || ps.State == "degraded" {
				subflows++
			}
		}
	}
	veths := make([]string, len(paths))
	for i, p := range paths {
		veths[i] = p.ClientIf
	}
	s := fmt.Sprintf("braid scheduler %s, %d usable subflow(s) over veth %s", sched, subflows, strings.Join(veths, "+"))
	if mtu > 0 {
		s += fmt.Sprintf(", inner MTU %d", mtu)
	}
	return s
}

// tunMTU is the MTU of the client's tunnel interface, 0 if unknown.
func tunMTU(l *lab, name string) int {
	lk, err := l.cli.Netlink().LinkByName(name)
	if err != nil {
		return 0
	}
	return lk.Attrs().MTU
}

func (t *braidTunnel) Target() string {
	return netip.AddrPortFrom(braidServerInner.Addr(), WebPort).String()
}
func (t *braidTunnel) Dial(ctx context.Context, n, a string) (net.Conn, error) {
	return t.dial(ctx, n, a)
}
func (t *braidTunnel) PIDs() (int, int) { return t.cli.pid(), t.srv.pid() }
func (t *braidTunnel) Detail() string   { return t.detail }
func (t *braidTunnel) Close() {
	t.cli.stop()
	t.srv.stop()
}
