package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/netns"
)

// WireGuardModule is the module whose root package is the wireguard-go
// program; braid depends on it (docs/lab.md, "Getting wireguard-go and wg").
const WireGuardModule = "golang.zx2c4.com/wireguard"

// ErrToolMissing is wrapped by FindWireGuardGo and FindWg when the program
// is not installed.
var ErrToolMissing = errors.New("not installed")

// Tool is an external program the bench runs.
type Tool struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// WireGuardVersion is the version of WireGuardModule this binary was built
// with ("" when the build information is missing).
func WireGuardVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == WireGuardModule {
			return cmp.Or(d.Replace, d).Version
		}
	}
	return ""
}

// WireGuardGoHint says, on one line, how to get wireguard-go.
func WireGuardGoHint() string {
	return fmt.Sprintf("wireguard-go not found, benching without it: `go install %s@%s` installs it as $(go env GOPATH)/bin/wireguard (put that directory on PATH or pass --wireguard-go PATH)", WireGuardModule, cmp.Or(WireGuardVersion(), "latest"))
}

// WgHint says, on one line, how to get wg.
func WgHint() string {
	return "wg not found, benching without wireguard-go: `apt-get install --no-install-recommends wireguard-tools` (Debian/Ubuntu) provides it"
}

// checkTool returns the program at path if the first line of its
// --version starts with prefix, the name of what it must be.
func checkTool(path, what, prefix string) (Tool, error) {
	// A program that hangs on --version is not the one we want.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return Tool{}, fmt.Errorf("%s --version: %w", path, err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	t := Tool{Path: path, Version: strings.TrimSpace(line)}
	if !strings.HasPrefix(t.Version, prefix) {
		return Tool{}, fmt.Errorf("%s is not %s (--version: %q)", path, what, t.Version)
	}
	return t, nil
}

// FindWireGuardGo returns the wireguard-go program: explicit if set (an
// error if it is not wireguard-go), else the first on PATH of
// "wireguard-go" and go install's "wireguard" whose --version says so.
func FindWireGuardGo(explicit string) (Tool, error) {
	if explicit != "" {
		p, err := exec.LookPath(explicit)
		if err != nil {
			return Tool{}, fmt.Errorf("--wireguard-go %s: %w", explicit, err)
		}
		return checkTool(p, "wireguard-go", "wireguard-go ")
	}
	var errs []error
	for _, n := range []string{"wireguard-go", "wireguard"} {
		if p, err := exec.LookPath(n); err == nil {
			t, err := checkTool(p, "wireguard-go", "wireguard-go ")
			if err == nil {
				return t, nil
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return Tool{}, fmt.Errorf("wireguard-go: %w (%w)", ErrToolMissing, errors.Join(errs...))
	}
	return Tool{}, fmt.Errorf("wireguard-go: %w", ErrToolMissing)
}

// FindWg returns wg from wireguard-tools on PATH.
func FindWg() (Tool, error) {
	p, err := exec.LookPath("wg")
	if err != nil {
		return Tool{}, fmt.Errorf("wg: %w", ErrToolMissing)
	}
	return checkTool(p, "wireguard-tools' wg", "wireguard-tools ")
}

// wireguard-go's inner addresses: a subnet of their own, so that a
// connection's local address proves which tunnel it took.
var (
	wgServerInner = netip.MustParsePrefix("100.64.1.1/24")
	wgClientInner = netip.MustParsePrefix("100.64.1.2/24")
)

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

// wgTunnel is wireguard-go at both ends of the first veth.
type wgTunnel struct {
	runner.BaseSession
	cli, srv *proc.Child
	socks    []string // the UAPI sockets
}

// startWireGuard starts wireguard-go in the server and then the client
// namespace, each configured with `wg set` once its UAPI socket is there
// (the sign that it has its TUN device and will take configuration).
func startWireGuard(ctx context.Context, l *lab) (_ runner.Session, err error) {
	t := &wgTunnel{}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	dir, err := os.MkdirTemp(l.dir, "wireguard-")
	if err != nil {
		return nil, err
	}
	// Fresh keys in files, as `wg genkey` writes them.
	var priv [2]keys.Key // the client's, the server's
	files := [2]string{filepath.Join(dir, "client.key"), filepath.Join(dir, "server.key")}
	for i := range priv {
		if priv[i], err = keys.Generate(); err == nil {
			err = os.WriteFile(files[i], []byte(priv[i].String()+"\n"), 0o600)
		}
		if err != nil {
			return nil, err
		}
	}
	cliIf, srvIf := WireGuardNames(os.Getpid())
	cliArgs, srvArgs := WgSetArgs(cliIf, srvIf, files[0], files[1], priv[0].Public().String(), priv[1].Public().String(),
		netip.AddrPortFrom(benchPaths[0].ServerAddr, WireGuardPort))
	for _, e := range []struct {
		ns    *netns.Namespace
		ifc   string
		args  []string
		inner netip.Prefix
		into  **proc.Child
	}{{l.srv, srvIf, srvArgs, wgServerInner, &t.srv}, {l.cli, cliIf, cliArgs, wgClientInner, &t.cli}} {
		cmd := exec.Command(l.cfg.WireGuardGo.Path, "-f", e.ifc)
		cmd.Env = append(os.Environ(), "WG_PROCESS_FOREGROUND=1", "LOG_LEVEL=error")
		c, err := proc.Start(e.ns, "wireguard-go "+e.ifc, cmd)
		if err != nil {
			return nil, err
		}
		*e.into = c
		sock := filepath.Join("/var/run/wireguard", e.ifc+".sock") // of every namespace
		t.socks = append(t.socks, sock)
		if err := proc.Await(ctx, readyTimeout, 20*time.Millisecond, func() error {
			if _, err := os.Stat(sock); err != nil {
				return fmt.Errorf("%s: no UAPI socket %s after %v", c.Name, sock, readyTimeout)
			}
			return nil
		}, c); err != nil {
			return nil, err
		}
		if _, err := e.ns.Exec(ctx, l.cfg.Wg.Path, e.args...); err != nil {
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
	if mtu := runner.LinkMTU(l.cli, cliIf); mtu > 0 {
		t.About += fmt.Sprintf(", inner MTU %d", mtu)
	}
	t.To = netip.AddrPortFrom(wgServerInner.Addr(), WebPort).String()
	t.Dialer = runner.Dialer{NS: l.cli, CC: l.cfg.CC, Via: wgClientInner.Masked()}
	return t, nil
}

func (t *wgTunnel) PIDs() (cli, srv int) { return t.cli.PID(), t.srv.PID() }

// Close stops both daemons; a killed one leaves its UAPI socket behind,
// which is removed here.
func (t *wgTunnel) Close() error {
	t.cli.Stop(stopTimeout)
	t.srv.Stop(stopTimeout)
	for _, s := range t.socks {
		os.Remove(s)
	}
	return nil
}
