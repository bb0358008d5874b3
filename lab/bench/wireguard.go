package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/netns"
)

// wireguard-go's inner addresses: a subnet of their own, so that a
// connection's local address proves which tunnel it took.
var (
	wgServerInner = netip.MustParsePrefix("100.64.1.1/24")
	wgClientInner = netip.MustParsePrefix("100.64.1.2/24")
)

// WireGuardSocketDir is where wireguard-go opens its UAPI socket
// (NAME.sock) and where wg looks for it. It is not per namespace, so the
// interface names carry this process's PID.
const WireGuardSocketDir = "/var/run/wireguard"

// WireGuardNames are the interface names of the client and server
// wireguard-go of process pid: unique on the machine (their UAPI sockets
// share one directory) and within the kernel's 15 bytes.
func WireGuardNames(pid int) (cli, srv string) {
	return "bwgc" + strconv.Itoa(pid), "bwgs" + strconv.Itoa(pid)
}

// WgSetArgs are the `wg set` arguments of both ends: one peer each, the
// client with the server's endpoint on the first veth, the server learning
// the client's from its handshake.
func WgSetArgs(cliIf, srvIf, cliKeyFile, srvKeyFile, cliPub, srvPub string, endpoint netip.AddrPort) (cli, srv []string) {
	cli = []string{"set", cliIf, "private-key", cliKeyFile,
		"peer", srvPub, "endpoint", endpoint.String(), "allowed-ips", netip.PrefixFrom(wgServerInner.Addr(), 32).String()}
	srv = []string{"set", srvIf, "private-key", srvKeyFile, "listen-port", strconv.Itoa(int(endpoint.Port())),
		"peer", cliPub, "allowed-ips", netip.PrefixFrom(wgClientInner.Addr(), 32).String()}
	return cli, srv
}

type wgTunnel struct {
	runner.BaseSession
	cliIf, srvIf     string
	cliProc, srvProc *proc.Child
}

// wg runs wg with input on stdin, outside any namespace (key generation).
func wg(ctx context.Context, path, input string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("wg %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

func startWireGuard(ctx context.Context, l *lab) (_ runner.Session, err error) {
	t := &wgTunnel{}
	t.cliIf, t.srvIf = WireGuardNames(os.Getpid())
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	dir, err := os.MkdirTemp(l.dir, "wireguard-")
	if err != nil {
		return nil, err
	}
	wgPath := l.cfg.Wg.Path
	keyFiles := map[string]string{}
	pubs := map[string]string{}
	for _, who := range []string{"client", "server"} {
		priv, err := wg(ctx, wgPath, "", "genkey")
		if err != nil {
			return nil, err
		}
		if pubs[who], err = wg(ctx, wgPath, priv+"\n", "pubkey"); err != nil {
			return nil, err
		}
		keyFiles[who] = filepath.Join(dir, who+".key")
		if err := os.WriteFile(keyFiles[who], []byte(priv+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	for _, e := range []struct {
		ns   *netns.Namespace
		name string
		into **proc.Child
	}{{l.srv, t.srvIf, &t.srvProc}, {l.cli, t.cliIf, &t.cliProc}} {
		cmd := exec.Command(l.cfg.WireGuardGo.Path, "-f", e.name)
		cmd.Env = append(os.Environ(), "WG_PROCESS_FOREGROUND=1", "LOG_LEVEL=error")
		if *e.into, err = proc.Start(e.ns, "wireguard-go "+e.name, cmd); err != nil {
			return nil, err
		}
	}
	for _, c := range []*proc.Child{t.srvProc, t.cliProc} {
		if err := waitSocket(ctx, c, filepath.Join(WireGuardSocketDir, strings.TrimPrefix(c.Name, "wireguard-go ")+".sock")); err != nil {
			return nil, err
		}
	}
	endpoint := netip.AddrPortFrom(benchPaths[0].ServerAddr, WireGuardPort)
	cliArgs, srvArgs := WgSetArgs(t.cliIf, t.srvIf, keyFiles["client"], keyFiles["server"], pubs["client"], pubs["server"], endpoint)
	for _, e := range []struct {
		ns    *netns.Namespace
		args  []string
		ifc   string
		inner netip.Prefix
	}{{l.srv, srvArgs, t.srvIf, wgServerInner}, {l.cli, cliArgs, t.cliIf, wgClientInner}} {
		if _, err := e.ns.Exec(ctx, wgPath, e.args...); err != nil {
			return nil, err
		}
		if err := e.ns.AddAddr(e.ifc, e.inner); err != nil {
			return nil, err
		}
		if err := e.ns.SetUp(e.ifc); err != nil {
			return nil, err
		}
	}
	t.About = fmt.Sprintf("%s, one peer over veth %s", l.cfg.WireGuardGo.Version, benchPaths[0].ClientIf)
	if mtu := runner.LinkMTU(l.cli, t.cliIf); mtu > 0 {
		t.About += fmt.Sprintf(", inner MTU %d", mtu)
	}
	t.To = netip.AddrPortFrom(wgServerInner.Addr(), WebPort).String()
	t.Dialer = runner.Dialer{NS: l.cli, CC: l.cfg.CC, Via: wgClientInner.Masked()}
	return t, nil
}

// waitSocket waits for wireguard-go's UAPI socket, the sign that it has
// its TUN device and will take configuration.
func waitSocket(ctx context.Context, c *proc.Child, path string) error {
	return proc.Await(ctx, readyTimeout, 20*time.Millisecond, func() error {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%s: no UAPI socket %s after %v", c.Name, path, readyTimeout)
		}
		return nil
	}, c)
}

func (t *wgTunnel) PIDs() (cli, srv int) { return t.cliProc.PID(), t.srvProc.PID() }

// Close stops both daemons; a killed one leaves its UAPI socket behind,
// which is removed here (only this process's names).
func (t *wgTunnel) Close() error {
	t.cliProc.Stop(stopTimeout)
	t.srvProc.Stop(stopTimeout)
	for _, n := range []string{t.cliIf, t.srvIf} {
		os.Remove(filepath.Join(WireGuardSocketDir, n+".sock"))
	}
	return nil
}
