package runner

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// Braid tunnel settings of the lab: the server's port, how long the client
// may take to have a usable subflow on every path, and how long a tunnel
// daemon gets to exit on SIGTERM.
const (
	BraidPort         = 7000
	BraidReadyTimeout = 20 * time.Second
	daemonStopTimeout = 5 * time.Second
)

// The tunnel's inner addresses in every lab config (runs, bench, mesh).
var (
	BraidServerAddr = netip.MustParsePrefix("100.64.0.1/24")
	BraidClientAddr = netip.MustParsePrefix("100.64.0.2/24")
)

// The competing braid client (experiment.competing_transport = "braid")
// shares the client namespace with the measured one, so it needs its own
// TUN device and inner address: a /32, which adds no on-link route next to
// braid0's 100.64.0.0/24, inside testbed.TunnelPrefix, which the web
// server routes back through the server.
const CompetitorTun = "braid1"

var CompetitorAddr = netip.MustParsePrefix("100.64.0.3/32")

// BraidCommand says how to start braid: Exe (default: this executable) with
// Env added to the environment (tests make a test binary act as braid).
type BraidCommand struct {
	Exe string
	Env []string
}

// Command is the exec.Cmd of `braid args…`.
func (b BraidCommand) Command(args ...string) (cmd *exec.Cmd, err error) {
	exe := b.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	cmd = exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), b.Env...)
	return cmd, nil
}

// BraidClientFile is the lab's braid client file: key file client.key next
// to it, inner address BraidClientAddr, the server's public key, servers
// and paths as given, every option braid's default.
func BraidClientFile(serverKey keys.Key, socket string, servers, paths []string) *config.File {
	return &config.File{
		Role: string(config.RoleClient), PrivateKeyFile: "client.key",
		Tun:     config.FileTun{Address: []string{BraidClientAddr.String()}},
		Client:  &config.FileClient{ServerPublicKey: serverKey.Public().String(), Servers: servers, Paths: paths},
		Control: config.FileControl{Socket: socket},
	}
}

// BraidClientConfig is the client's file for transport t on paths (one
// server address per path), web, when valid, routed into the tunnel. The
// options t leaves "" keep braid's defaults.
func BraidClientConfig(t scenario.Transport, paths []testbed.Path, web netip.Prefix, serverKey keys.Key, socket string) *config.File {
	var ifs, servers []string
	for _, p := range paths {
		ifs = append(ifs, p.ClientIf)
		servers = append(servers, netip.AddrPortFrom(p.ServerAddr, BraidPort).String())
	}
	f := BraidClientFile(serverKey, socket, servers, ifs)
	if web.IsValid() {
		f.Tun.Routes = []string{web.String()}
	}
	c := f.Client
	c.Scheduler, c.Reorder, c.Congestion, c.Recovery = t.Scheduler, t.Reorder, t.Congestion, t.Recovery
	if t.Scheduler == "weighted" { // every subflow of a path (one per server address) takes its weight
		for _, w := range t.Weights {
			c.Weights = append(c.Weights, slices.Repeat([]float64{w}, len(servers))...)
		}
	}
	for _, p := range t.Priorities {
		c.Priorities = append(c.Priorities, int64(p))
	}
	return f
}

// BraidServerConfig is the server's file for one client key, named name in
// its logs and status: it listens on every address at BraidPort.
func BraidServerConfig(name string, clientKey keys.Key, socket string) *config.File {
	return &config.File{
		Role: string(config.RoleServer), PrivateKeyFile: "server.key",
		Tun: config.FileTun{Address: []string{BraidServerAddr.String()}},
		Server: &config.FileServer{
			Listen: []string{netip.AddrPortFrom(netip.IPv4Unspecified(), BraidPort).String()},
			Clients: []config.FilePeer{{Name: name, PublicKey: clientKey.Public().String(),
				AllowedIPs: []string{netip.PrefixFrom(BraidClientAddr.Addr(), 32).String()}}},
		},
		Control: config.FileControl{Socket: socket},
	}
}

// AddCompetitor makes the server of file srv accept a competing client of
// key and returns that client's file: the measured client's cli (the same
// server, paths and options) with its own key file, TUN device, address and
// control socket.
//
// Its routes are the parents of cli's (the web subnet's /23 for its /24):
// braid0 already has cli's routes in the client's main table, where a second
// identical one fails, and the more specific route keeps the measured
// downloads in braid0. They still make the web server an accepted source
// for this client (tun.routes are a client's allowed sources), and its
// downloads reach braid1 by binding their sockets to it (Dialer.Dev).
func AddCompetitor(srv, measured *config.File, key keys.Key, socket string) *config.File {
	srv.Server.Clients = append(srv.Server.Clients, config.FilePeer{Name: "competitor", PublicKey: key.Public().String(),
		AllowedIPs: []string{CompetitorAddr.String()}})
	cli := *measured
	c := *cli.Client // copied: cli.Client is the measured client's
	cli.Client, cli.PrivateKeyFile, cli.Control = &c, "competitor.key", config.FileControl{Socket: socket}
	routes := cli.Tun.Routes
	cli.Tun = config.FileTun{Name: CompetitorTun, Address: []string{CompetitorAddr.String()}, MTU: cli.Tun.MTU}
	for _, r := range routes {
		if p, err := netip.ParsePrefix(r); err == nil && p.Bits() > 0 {
			cli.Tun.Routes = append(cli.Tun.Routes, netip.PrefixFrom(p.Addr(), p.Bits()-1).Masked().String())
		}
	}
	return &cli
}

// braidSetup is how a braid transport of the runs runs: on one path or
// all, over transport ("" = udp; "mptcp": one engine path whose kernel
// subflows spread over every path).
type braidSetup struct {
	single    bool
	transport string
}

// apply sets the transport, with cc (the download's) for the tunnel's own
// TCP sockets, and subflows per path in both ends' files.
func (set braidSetup) apply(srv, cli *config.File, cc string, subflows int) {
	if set.transport != "" {
		cli.Client.Transport, cli.Client.TCPCongestion = set.transport, cc
		srv.Server.Transport, srv.Server.TCPCongestion = set.transport, cc
	}
	if set.transport == "mptcp" && subflows > 1 {
		cli.Client.SubflowsPerPath = new(int64(subflows))
	}
}

// braidOn starts braid and the paper's TCP-in-UDP, TCP-in-TCP and
// TCP-in-MPTCP tunnels.
func braidOn(set braidSetup) StartFunc {
	return func(ctx context.Context, env *Env) (Session, error) {
		paths := env.TB.Plan.Paths
		if set.single {
			p, err := pathFor(env)
			if err != nil {
				return nil, err
			}
			paths = []testbed.Path{p}
		}
		spec := BraidSpec{
			Command: env.Braid, Dir: env.Dir, Server: env.TB.Server(), Client: env.TB.Client(),
			Configs: func(srvKey, cliKey keys.Key, srvSock, cliSock string) (*config.File, *config.File) {
				srv := BraidServerConfig("lab", cliKey, srvSock)
				cli := BraidClientConfig(env.Point.Transport, paths, env.TB.Plan.WebSubnet, srvKey, cliSock)
				set.apply(srv, cli, env.CC, env.Point.Transport.Subflows)
				return srv, cli
			},
			Want: len(paths), Usable: func(st control.Status) int { return UsablePaths(st, paths) },
			Target: webTarget(env, WebPort), CC: env.CC, Count: env.TB.Plan.Paths, Competitor: env.Competitor,
		}
		if set.transport == "mptcp" { // the link emulators count each path of the one MPTCP path
			spec.Want, spec.Usable, spec.Count = 1, func(st control.Status) int { return len(usable(st)) }, nil
		}
		return StartBraid(ctx, spec)
	}
}

// BraidSpec is a braid tunnel between two of a lab's namespaces.
type BraidSpec struct {
	Command        BraidCommand
	Dir            string // for the keys, the configs and the control sockets
	Server, Client *netns.Namespace
	// Configs makes both ends' files for the generated keys and the
	// control sockets.
	Configs func(srvKey, cliKey keys.Key, srvSock, cliSock string) (srv, cli *config.File)
	// The client is ready when Usable(its status) reaches Want.
	Want   int
	Usable func(control.Status) int
	// Target is what the downloads fetch through the tunnel, CC their
	// congestion control.
	Target, CC string
	// Count are the paths whose bytes Counters reports, told apart by the
	// daemon paths on them; nil: the lab counts each path its own way.
	Count []testbed.Path
	// Competitor adds a second client of the server (AddCompetitor), for
	// the competing downloads (experiment.competing_transport = "braid").
	Competitor bool
}

// braidSession is a braid server and client started by StartBraid, with
// the competing client comp if the spec asked for one.
type braidSession struct {
	BaseSession
	srvSock, cliSock string // the daemons' control sockets
	count            []testbed.Path
	cliKey           string // the measured client's public key
	comp             *proc.Child
	compDialer       Dialer
}

// Competitor is how the competing downloads dial through the competing
// braid client; false without one.
func (b *braidSession) Competitor() (Dialer, bool) { return b.compDialer, b.comp != nil }

// Close stops the competing client first: it is a client of b's server.
func (b *braidSession) Close() error {
	b.comp.Stop(daemonStopTimeout)
	return b.BaseSession.Close()
}

// StartBraid writes both ends' keys and configs into spec.Dir, starts the
// server and then the client and waits until the client is ready, failing
// early when either daemon exits. On error nothing is left running.
func StartBraid(ctx context.Context, spec BraidSpec) (_ Session, err error) {
	file := func(name string) string { return filepath.Join(spec.Dir, name) }
	b := &braidSession{srvSock: file("server.sock"), cliSock: file("client.sock"), count: spec.Count}
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
	b.cliKey = cliKey.Public().String()
	srvCfg, cliCfg := spec.Configs(srvKey, cliKey, b.srvSock, b.cliSock)
	files := map[string]func() ([]byte, error){
		"server.key": srvKey.MarshalText, "client.key": cliKey.MarshalText,
		"server.toml": srvCfg.Encode, "client.toml": cliCfg.Encode,
	}
	if spec.Competitor {
		compKey, err := keys.Generate()
		if err != nil {
			return nil, err
		}
		files["competitor.key"], files["competitor.toml"] = compKey.MarshalText, AddCompetitor(srvCfg, cliCfg, compKey, file("competitor.sock")).Encode
	}
	for name, content := range files {
		data, err := content()
		if err == nil {
			err = os.WriteFile(file(name), data, 0o600)
		}
		if err != nil {
			return nil, err
		}
	}
	start := func(ns *netns.Namespace, name string) (*proc.Child, error) {
		cmd, err := spec.Command.Command("up", "-c", file(name+".toml"))
		if err != nil {
			return nil, err
		}
		return proc.Start(ns, "braid "+name, cmd)
	}
	if b.srv, err = start(spec.Server, "server"); err != nil {
		return nil, err
	}
	if b.cli, err = start(spec.Client, "client"); err != nil {
		return nil, err
	}
	// ready waits until the client whose control socket is sock is ready,
	// failing early when it or a daemon already started exits.
	ready := func(sock, what string, cli *proc.Child, others ...*proc.Child) (st control.Status, err error) {
		err = proc.Await(ctx, BraidReadyTimeout, 20*time.Millisecond, func() error {
			got := 0
			if s, err := control.Query(sock); err == nil {
				if st, got = s, spec.Usable(s); got >= spec.Want {
					return nil
				}
			}
			return fmt.Errorf("braid: the %s had %d of %d paths usable after %v (%s: %s)", what, got, spec.Want, BraidReadyTimeout, what, cli.LastLine())
		}, append(others, cli)...)
		return st, err
	}
	st, err := ready(b.cliSock, "client", b.cli, b.srv)
	if err != nil {
		return nil, err
	}
	b.To = spec.Target
	// The measured download must leave from braid0's address: the
	// competing client's is in the same /24.
	b.Dialer = Dialer{NS: spec.Client, CC: spec.CC, Via: netip.PrefixFrom(BraidClientAddr.Addr(), 32)}
	b.About = braidDetail(st, cliCfg.Client.Paths, len(cliCfg.Client.Servers), LinkMTU(spec.Client, "braid0"))
	if spec.Competitor {
		if b.comp, err = start(spec.Client, "competitor"); err != nil {
			return nil, err
		}
		if _, err := ready(file("competitor.sock"), "competing client", b.comp, b.srv, b.cli); err != nil {
			return nil, err
		}
		b.compDialer = Dialer{NS: spec.Client, From: CompetitorAddr.Addr(), CC: spec.CC, Via: CompetitorAddr, Dev: CompetitorTun}
		b.About += fmt.Sprintf("; a competing braid client (%s, %v) of the same server", CompetitorTun, CompetitorAddr.Addr())
	}
	return b, nil
}

// braidDetail names the scheduler, congestion control and recovery and
// counts the usable daemon paths of client paths × server addresses.
func braidDetail(st control.Status, paths []string, servers, mtu int) string {
	sched, cc, rec := "", "", ""
	for _, p := range st.Peers {
		if p.Established {
			sched, cc, rec = p.Scheduler, p.Congestion, p.Recovery
		}
	}
	s := fmt.Sprintf("braid scheduler %s, congestion %s, recovery %s, %d path(s) over veth %s to %d server address(es): %d of %d daemon paths usable",
		sched, cc, rec, len(paths), strings.Join(paths, "+"), servers, len(usable(st)), len(paths)*servers)
	if mtu > 0 {
		s += fmt.Sprintf(", inner MTU %d", mtu)
	}
	if st.Crypto != nil {
		s += fmt.Sprintf(", %d crypto worker(s)", st.Crypto.Workers)
	}
	return s
}

func (b *braidSession) Counters(ctx context.Context) (Counters, error) {
	cli, err := control.Query(b.cliSock)
	if err != nil {
		return Counters{}, err
	}
	srv, err := control.Query(b.srvSock)
	if err != nil {
		return Counters{}, err
	}
	if b.comp != nil { // the sender's figures (BulkOverhead) are the measured client's peer's
		srv.Peers = slices.DeleteFunc(srv.Peers, func(p control.PeerStatus) bool { return p.PublicKey != b.cliKey })
	}
	c := Counters{Sender: &srv, Receiver: &cli}
	for _, peer := range cli.Peers {
		c.Reordered += peer.ReorderStats.Reordered
		c.ReorderTimeouts += peer.ReorderStats.Timeouts
	}
	if b.count != nil {
		c.PathBytes = map[string]uint64{}
	}
	for _, p := range b.count {
		c.PathBytes[p.Name] = 0
		for _, peer := range cli.Peers {
			for _, ps := range peer.Paths {
				if onPath(ps, p) {
					c.PathBytes[p.Name] += ps.RxBytes
				}
			}
		}
	}
	return c, nil
}

// UsablePaths counts the testbed paths on which an established peer of st
// has a usable daemon path.
func UsablePaths(st control.Status, paths []testbed.Path) int {
	return UsableOn(st, len(paths), func(ps control.PathStatus, k int) bool { return onPath(ps, paths[k]) })
}

// UsableOn counts the network paths 0..n-1 on which a usable daemon path
// (usable) lies; on tells which network path a daemon path takes (each lab
// topology tells them apart its own way).
func UsableOn(st control.Status, n int, on func(ps control.PathStatus, k int) bool) int {
	count, ps := 0, usable(st)
	for k := range n {
		if slices.ContainsFunc(ps, func(p control.PathStatus) bool { return on(p, k) }) {
			count++
		}
	}
	return count
}

// usable lists the daemon paths of st's established peers that carry
// traffic (active or degraded), wherever they leave from (an MPTCP
// tunnel's one path has no device).
func usable(st control.Status) (out []control.PathStatus) {
	for _, peer := range st.Peers {
		for _, ps := range peer.Paths {
			if peer.Established && (ps.State == "active" || ps.State == "degraded") {
				out = append(out, ps)
			}
		}
	}
	return out
}

// onPath tells whether a braid daemon path takes testbed path p: by its
// device, or by its local address when the status has no device.
func onPath(ps control.PathStatus, p testbed.Path) bool {
	if ps.Device != "" {
		return ps.Device == p.ClientIf
	}
	ap, err := netip.ParseAddrPort(ps.Local)
	return err == nil && p.Subnet.Contains(ap.Addr().Unmap())
}
