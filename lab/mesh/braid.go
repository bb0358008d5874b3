package mesh

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/netns"
)

// Tunnel addresses: the lab's (runner and bench use the same). The
// destination's web server is reached inside the tunnel at TunnelServer.
var (
	TunnelServer = netip.MustParsePrefix("100.64.0.1/24")
	TunnelClient = netip.MustParsePrefix("100.64.0.2/24")
)

const braidStopTimeout = 5 * time.Second

// BraidClientConfig is the braid client's file for the mesh: one path per
// mesh path, given as the path's address (a socket bound to it follows
// the path's rule on every node), and one server address, the service
// address. The client opens the full mesh of paths × servers, which with
// one server address is exactly one subflow per path: none can wander
// onto another path. scheduler "" keeps braid's default.
func BraidClientConfig(plan *Plan, serverKey keys.Key, socket, scheduler string) string {
	var paths []string
	for _, pp := range plan.Paths {
		paths = append(paths, strconv.Quote(pp.ClientAddr.String()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "role = \"client\"\nprivate_key_file = \"client.key\"\n[tun]\naddress = [%q]\n", TunnelClient)
	fmt.Fprintf(&b, "[client]\nserver_public_key = %q\nservers = [%q]\npaths = [%s]\n",
		serverKey.Public().String(), netip.AddrPortFrom(plan.Service, runner.BraidPort).String(), strings.Join(paths, ", "))
	if scheduler != "" {
		fmt.Fprintf(&b, "scheduler = %q\n", scheduler)
	}
	fmt.Fprintf(&b, "[control]\nsocket = %q\n", socket)
	return b.String()
}

// BraidServerConfig is the braid server's file: it listens on every
// address, so the service address, and answers each path from the
// address it was reached on.
func BraidServerConfig(clientKey keys.Key, socket string) string {
	return fmt.Sprintf("role = \"server\"\nprivate_key_file = \"server.key\"\n[tun]\naddress = [%q]\n[server]\nlisten = [\"0.0.0.0:%d\"]\n[[server.clients]]\nname = \"mesh\"\npublic_key = %q\nallowed_ips = [%q]\n[control]\nsocket = %q\n",
		TunnelServer, runner.BraidPort, clientKey.Public().String(), netip.PrefixFrom(TunnelClient.Addr(), 32), socket)
}

// Braid is a braid server in the destination and a braid client in the
// source, with one subflow per mesh path.
type Braid struct {
	mesh     *Mesh
	srv, cli *daemon
	cliSock  string
}

// StartBraid writes keys and configs into dir, starts both daemons with
// bc and waits until the client has a usable subflow on every path.
func (m *Mesh) StartBraid(ctx context.Context, bc runner.BraidCommand, dir, scheduler string) (_ *Braid, err error) {
	b := &Braid{mesh: m}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	srvKey, err := keys.Generate()
	if err != nil {
		return nil, err
	}
	cliKey, err := keys.Generate()
	if err != nil {
		return nil, err
	}
	srvSock, cliSock := filepath.Join(dir, "server.sock"), filepath.Join(dir, "client.sock")
	b.cliSock = cliSock
	files := map[string]string{
		"server.key":  srvKey.String(),
		"client.key":  cliKey.String(),
		"server.toml": BraidServerConfig(cliKey, srvSock),
		"client.toml": BraidClientConfig(m.Plan, srvKey, cliSock, scheduler),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	if b.srv, err = startDaemon(m.Destination(), bc, "server", filepath.Join(dir, "server.toml")); err != nil {
		return nil, err
	}
	if b.cli, err = startDaemon(m.Source(), bc, "client", filepath.Join(dir, "client.toml")); err != nil {
		return nil, err
	}
	if err := b.waitReady(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// UsablePaths counts the mesh paths on which st has an active or degraded
// subflow of an established peer, telling paths apart by local address.
func UsablePaths(st control.Status, plan *Plan) int {
	n := 0
	for k := range plan.Paths {
		if len(PathStatuses(st, plan, k)) > 0 {
			n++
		}
	}
	return n
}

// PathStatuses are st's usable subflows of mesh path k.
func PathStatuses(st control.Status, plan *Plan, k int) []control.PathStatus {
	var out []control.PathStatus
	for _, peer := range st.Peers {
		if !peer.Established {
			continue
		}
		for _, ps := range peer.Paths {
			if ps.State != "active" && ps.State != "degraded" {
				continue
			}
			if ap, err := netip.ParseAddrPort(ps.Local); err == nil && ap.Addr().Unmap() == plan.Paths[k].ClientAddr {
				out = append(out, ps)
			}
		}
	}
	return out
}

func (b *Braid) waitReady(ctx context.Context) error {
	want := len(b.mesh.Plan.Paths)
	deadline := time.Now().Add(runner.BraidReadyTimeout)
	got := 0
	for time.Now().Before(deadline) {
		if b.srv.exited() {
			return fmt.Errorf("braid server exited: %s", b.srv.lastLine())
		}
		if b.cli.exited() {
			return fmt.Errorf("braid client exited: %s", b.cli.lastLine())
		}
		if st, err := control.Query(b.cliSock); err == nil {
			if got = UsablePaths(st, b.mesh.Plan); got >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("braid: the client had %d of %d paths usable after %v (client: %s)", got, want, runner.BraidReadyTimeout, b.cli.lastLine())
}

// Status queries the client.
func (b *Braid) Status() (control.Status, error) { return control.Query(b.cliSock) }

// Target is the web server as seen through the tunnel.
func (b *Braid) Target() string {
	return netip.AddrPortFrom(TunnelServer.Addr(), runner.WebPort).String()
}

// Dial opens a TCP connection in the source that must go through the
// tunnel (its local address is the tunnel's), with congestion control cc.
func (b *Braid) Dial(cc string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	src := b.mesh.Source()
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		d := net.Dialer{Control: httpbench.Control(cc)}
		if err := src.Do(func() error {
			c, err = d.DialContext(ctx, "tcp4", addr)
			return err
		}); err != nil {
			return nil, err
		}
		if la, ok := c.LocalAddr().(*net.TCPAddr); ok {
			if a, _ := netip.AddrFromSlice(la.IP); !TunnelClient.Contains(a.Unmap()) {
				c.Close()
				return nil, fmt.Errorf("braid: the download left from %v, not through the tunnel", la)
			}
		}
		return c, nil
	}
}

// Close stops both daemons (client first).
func (b *Braid) Close() {
	if b == nil {
		return
	}
	b.cli.stop()
	b.srv.stop()
}

// daemon is a braid process in a namespace with the tail of its output.
type daemon struct {
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{}
}

func startDaemon(ns *netns.Namespace, bc runner.BraidCommand, name, cfg string) (*daemon, error) {
	exe := bc.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(exe, "up", "-c", cfg)
	cmd.Env = append(os.Environ(), bc.Env...)
	d := &daemon{cmd: cmd, out: &tailBuffer{max: 8 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := ns.Start(cmd); err != nil {
		return nil, fmt.Errorf("starting braid %s: %w", name, err)
	}
	go func() { cmd.Wait(); close(d.done) }()
	return d, nil
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *daemon) stop() {
	if d == nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(braidStopTimeout):
		d.cmd.Process.Kill()
		<-d.done
	}
}

func (d *daemon) lastLine() string {
	s := strings.TrimSpace(d.out.String())
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
