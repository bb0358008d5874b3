package runner

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// Braid tunnel settings of the lab.
const (
	BraidPort = 7000
	// BraidReadyTimeout bounds waiting for the client's session to have a
	// usable subflow on every path.
	BraidReadyTimeout = 20 * time.Second
	// braidStopTimeout is how long a daemon gets to exit on SIGTERM.
	braidStopTimeout = 5 * time.Second
)

var (
	braidServerAddr = netip.MustParsePrefix("100.64.0.1/24")
	braidClientAddr = netip.MustParsePrefix("100.64.0.2/24")
)

// BraidCommand says how to start braid: Exe (default: this executable) with
// Env added to the environment (tests use it to make a test binary act as
// braid).
type BraidCommand struct {
	Exe string
	Env []string
}

// Command is the exec.Cmd of `braid args…`.
func (b BraidCommand) Command(args ...string) (*exec.Cmd, error) {
	exe := b.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), b.Env...)
	return cmd, nil
}

// BraidWeights expands per-path weights to braid's per-subflow list
// (path-major, one slot per server address): every subflow of a path leaves
// through that path's interface, whichever server address it targets, so it
// takes the path's weight.
func BraidWeights(perPath []float64, servers int) []float64 {
	out := make([]float64, 0, len(perPath)*servers)
	for _, w := range perPath {
		for range servers {
			out = append(out, w)
		}
	}
	return out
}

func tomlStrings(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// BraidClientConfig is the client's config file for transport t on paths,
// routing web into the tunnel; extra lines go into [client].
func BraidClientConfig(t scenario.Transport, paths []testbed.Path, web netip.Prefix, serverKey keys.Key, socket string, extra ...string) string {
	var ifs, servers []string
	for _, p := range paths {
		ifs = append(ifs, p.ClientIf)
		servers = append(servers, netip.AddrPortFrom(p.ServerAddr, BraidPort).String())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "role = \"client\"\nprivate_key_file = \"client.key\"\n[tun]\naddress = [%q]\nroutes = [%q]\n", braidClientAddr, web)
	fmt.Fprintf(&b, "[client]\nserver_public_key = %q\nservers = %s\npaths = %s\n", serverKey.Public().String(), tomlStrings(servers), tomlStrings(ifs))
	if t.Scheduler != "" {
		fmt.Fprintf(&b, "scheduler = %q\n", t.Scheduler)
	}
	if t.Scheduler == "weighted" && len(t.Weights) > 0 {
		ws := BraidWeights(t.Weights, len(servers))
		parts := make([]string, len(ws))
		for i, w := range ws {
			parts[i] = strconv.FormatFloat(w, 'g', -1, 64)
		}
		fmt.Fprintf(&b, "weights = [%s]\n", strings.Join(parts, ", "))
	}
	if t.Reorder != "" {
		fmt.Fprintf(&b, "reorder = %q\n", t.Reorder)
	}
	if t.Congestion != "" {
		fmt.Fprintf(&b, "congestion = %q\n", t.Congestion)
	}
	if t.Recovery != "" {
		fmt.Fprintf(&b, "recovery = %q\n", t.Recovery)
	}
	for _, l := range extra {
		fmt.Fprintln(&b, l)
	}
	fmt.Fprintf(&b, "[control]\nsocket = %q\n", socket)
	return b.String()
}

// BraidServerConfig is the server's config file for one client key; extra
// lines go into [server].
func BraidServerConfig(clientKey keys.Key, socket string, extra ...string) string {
	return fmt.Sprintf("role = \"server\"\nprivate_key_file = \"server.key\"\n[tun]\naddress = [%q]\n[server]\nlisten = [\"0.0.0.0:%d\"]\n%s[[server.clients]]\nname = \"lab\"\npublic_key = %q\nallowed_ips = [%q]\n[control]\nsocket = %q\n",
		braidServerAddr, BraidPort, lines(extra), clientKey.Public().String(), netip.PrefixFrom(braidClientAddr.Addr(), 32), socket)
}

func lines(ls []string) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// braidSetup is how a braid-based lab transport runs: on which paths, over
// which transport, and how many paths the client must report usable.
type braidSetup struct {
	paths     []testbed.Path
	transport string // "" = udp
	subflows  int    // subflows_per_path; 0 = default
	// onePath: the tunnel is one path for the engine (mptcp); per-path
	// bytes then come from the link emulators.
	onePath bool
}

// startDaemon starts `braid up -c cfg` inside ns.
func startDaemon(ns *netns.Namespace, bc BraidCommand, name, cfg string) (*proc.Child, error) {
	cmd, err := bc.Command("up", "-c", cfg)
	if err != nil {
		return nil, err
	}
	return proc.Start(ns, "braid "+name, cmd)
}

// BraidPair is a braid server and client started from generated keys and
// config files.
type BraidPair struct {
	Srv, Cli *proc.Child
	// SrvSock and CliSock are the daemons' control sockets.
	SrvSock, CliSock string
}

// StartBraidPair generates both ends' keys into dir, writes the configs that
// configs returns for them (with control sockets in dir), starts the server
// in srvNS and the client in cliNS, and waits until usable(client status)
// reaches want. On error nothing is left running.
func StartBraidPair(ctx context.Context, bc BraidCommand, dir string, srvNS, cliNS *netns.Namespace,
	configs func(srvKey, cliKey keys.Key, srvSock, cliSock string) (srv, cli string),
	want int, usable func(control.Status) int) (_ *BraidPair, err error) {
	b := &BraidPair{SrvSock: filepath.Join(dir, "server.sock"), CliSock: filepath.Join(dir, "client.sock")}
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
	srvCfg, cliCfg := configs(srvKey, cliKey, b.SrvSock, b.CliSock)
	for name, content := range map[string]string{
		"server.key": srvKey.String(), "client.key": cliKey.String(),
		"server.toml": srvCfg, "client.toml": cliCfg,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	if b.Srv, err = startDaemon(srvNS, bc, "server", filepath.Join(dir, "server.toml")); err != nil {
		return nil, err
	}
	if b.Cli, err = startDaemon(cliNS, bc, "client", filepath.Join(dir, "client.toml")); err != nil {
		return nil, err
	}
	if _, err := WaitReady(ctx, b.Srv, b.Cli, b.CliSock, want, usable); err != nil {
		return nil, err
	}
	return b, nil
}

// Close stops both daemons, the client first. A nil pair is a no-op.
func (b *BraidPair) Close() {
	if b == nil {
		return
	}
	b.Cli.Stop(braidStopTimeout)
	b.Srv.Stop(braidStopTimeout)
}

// WaitReady polls the braid client's control socket until usable(status)
// reaches want, failing early when either daemon exits.
func WaitReady(ctx context.Context, srv, cli *proc.Child, sock string, want int, usable func(control.Status) int) (control.Status, error) {
	deadline := time.Now().Add(BraidReadyTimeout)
	got := 0
	for time.Now().Before(deadline) {
		for _, d := range []*proc.Child{srv, cli} {
			if d.Exited() {
				return control.Status{}, fmt.Errorf("%s exited: %s", d.Name, d.LastLine())
			}
		}
		if st, err := control.Query(sock); err == nil {
			if got = usable(st); got >= want {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return control.Status{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return control.Status{}, fmt.Errorf("braid: the client had %d of %d paths usable after %v (client: %s)", got, want, BraidReadyTimeout, cli.LastLine())
}

type braidSession struct {
	env     *Env
	paths   []testbed.Path // the paths the tunnel runs on
	onePath bool           // mptcp: one engine path over all of them
	pair    *BraidPair
	target  string
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

func startBraid(ctx context.Context, env *Env) (Session, error) {
	return startBraidOn(ctx, env, braidSetup{paths: env.TB.Plan.Paths})
}

// startTCPTunnel is braid over one TCP connection on one path: the paper's
// TCP-in-TCP tunnel.
func startTCPTunnel(ctx context.Context, env *Env) (Session, error) {
	p, err := pathFor(env, env.Point.Transport.Path)
	if err != nil {
		return nil, err
	}
	return startBraidOn(ctx, env, braidSetup{paths: []testbed.Path{p}, transport: "tcp"})
}

// startMPTCPTunnel is braid over one kernel MPTCP connection whose subflows
// braid's path manager set-up spreads over every path: TCP-in-MPTCP.
func startMPTCPTunnel(ctx context.Context, env *Env) (Session, error) {
	return startBraidOn(ctx, env, braidSetup{paths: env.TB.Plan.Paths, transport: "mptcp", subflows: env.Point.Transport.Subflows, onePath: true})
}

// startUDPTunnel is braid over one path: the paper's single-path TCP-in-UDP
// tunnel.
func startUDPTunnel(ctx context.Context, env *Env) (Session, error) {
	p, err := pathFor(env, env.Point.Transport.Path)
	if err != nil {
		return nil, err
	}
	return startBraidOn(ctx, env, braidSetup{paths: []testbed.Path{p}})
}

func startBraidOn(ctx context.Context, env *Env, set braidSetup) (_ Session, err error) {
	paths := set.paths
	s := &braidSession{env: env, paths: paths, onePath: set.onePath, target: netip.AddrPortFrom(env.Web.Addr, WebPort).String()}
	var cliExtra, srvExtra []string
	if set.transport != "" {
		// The tunnel's own TCP sockets get the download's congestion
		// control, as the lab's other sockets do (Table 3).
		t := fmt.Sprintf("transport = %q\ntcp_congestion = %q", set.transport, env.CC)
		cliExtra, srvExtra = append(cliExtra, t), append(srvExtra, t)
	}
	if set.subflows > 1 {
		cliExtra = append(cliExtra, fmt.Sprintf("subflows_per_path = %d", set.subflows))
	}
	want, usable := len(paths), func(st control.Status) int { return UsablePaths(st, paths) }
	if set.onePath {
		want, usable = 1, usableAny
	}
	s.pair, err = StartBraidPair(ctx, env.Braid, env.Dir, env.TB.Server(), env.TB.Client(),
		func(srvKey, cliKey keys.Key, srvSock, cliSock string) (string, string) {
			return BraidServerConfig(cliKey, srvSock, srvExtra...),
				BraidClientConfig(env.Point.Transport, paths, env.TB.Plan.WebSubnet, srvKey, cliSock, cliExtra...)
		}, want, usable)
	if err != nil {
		return nil, err
	}
	s.dial = tunnelDial(env, "braid")
	return s, nil
}

// UsablePaths counts the testbed paths on which st's first established peer
// has an active or degraded subflow.
func UsablePaths(st control.Status, paths []testbed.Path) int {
	n := 0
	for _, p := range paths {
		ok := false
		for _, peer := range st.Peers {
			if !peer.Established {
				continue
			}
			for _, ps := range peer.Paths {
				if (ps.State == "active" || ps.State == "degraded") && onPath(ps, p) {
					ok = true
				}
			}
		}
		if ok {
			n++
		}
	}
	return n
}

// usableAny counts the active or degraded paths of st's established peers,
// wherever they leave from (an MPTCP tunnel's one path has no device).
func usableAny(st control.Status) int {
	n := 0
	for _, peer := range st.Peers {
		for _, ps := range peer.Paths {
			if peer.Established && (ps.State == "active" || ps.State == "degraded") {
				n++
			}
		}
	}
	return n
}

// onPath tells whether a braid subflow belongs to testbed path p: by its
// device, or by its local address when the status has no device.
func onPath(ps control.PathStatus, p testbed.Path) bool {
	if ps.Device != "" {
		return ps.Device == p.ClientIf
	}
	if ap, err := netip.ParseAddrPort(ps.Local); err == nil {
		return p.Subnet.Contains(ap.Addr().Unmap())
	}
	return false
}

func (s *braidSession) Target() string { return s.target }
func (s *braidSession) Dial(ctx context.Context, n, a string) (net.Conn, error) {
	return s.dial(ctx, n, a)
}

func (s *braidSession) Counters(ctx context.Context) (Counters, error) {
	st, err := control.Query(s.pair.CliSock)
	if err != nil {
		return Counters{}, err
	}
	srv, err := control.Query(s.pair.SrvSock)
	if err != nil {
		return Counters{}, err
	}
	c := Counters{PathBytes: map[string]uint64{}, Sender: &srv}
	if s.onePath {
		c.PathBytes = nil // the link emulators count each path
	}
	for _, p := range s.env.TB.Plan.Paths {
		if c.PathBytes != nil {
			c.PathBytes[p.Name] = 0
		}
	}
	for _, peer := range st.Peers {
		c.Reordered += peer.ReorderStats.Reordered
		c.ReorderTimeouts += peer.ReorderStats.Timeouts
		for _, ps := range peer.Paths {
			for _, p := range s.env.TB.Plan.Paths {
				if c.PathBytes != nil && onPath(ps, p) {
					c.PathBytes[p.Name] += ps.RxBytes
				}
			}
		}
	}
	return c, nil
}

func (s *braidSession) Close() error {
	s.pair.Close()
	return nil
}
