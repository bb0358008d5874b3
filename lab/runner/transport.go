package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
	"golang.org/x/sys/unix"
)

// Env is what a transport gets to set itself up on one point.
type Env struct {
	TB    *testbed.Testbed
	Point *scenario.Point
	CC    string     // congestion control of the download's TCP (or MPTCP) sockets
	Web   *WebServer // plain TCP and MPTCP listeners
	Dir   string     // scratch directory (configs, keys, sockets), removed after the point
	Braid BraidCommand
	// Competitor asks a braid transport for a second, competing client
	// (experiment.competing_transport = "braid"; BraidSpec.Competitor).
	Competitor bool
}

// Counters are a transport's own cumulative counters, read before and after
// each download; the runner records the difference.
type Counters struct {
	// PathBytes is what each path (by scenario link name) delivered towards
	// the client. Nil: the runner uses the link emulators' counters.
	PathBytes                  map[string]uint64
	Reordered, ReorderTimeouts uint64
	// Sender and Receiver are the statuses of the braid daemons that send
	// the download (the server: BulkOverhead) and receive it (the client:
	// the bench's batching); nil for transports without them.
	Sender, Receiver *control.Status
}

// Session is a transport set up between two namespaces, ready for
// downloads: "a transport under test" of the runs, the bench and the mesh.
type Session interface {
	Target() string // the host:port the client downloads from
	// Dial opens the download's connection inside the client namespace and
	// checks that it took the way under test.
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
	Counters(ctx context.Context) (Counters, error) // zero if it has none
	// PIDs are the tunnel daemons in the client and the server (0: none),
	// whose CPU time and memory the bench charges to the transport.
	PIDs() (cli, srv int)
	Detail() string // describes the setup for a report
	Close() error   // undoes the set-up; the testbed stays
}

// Dialer opens the lab's connections inside NS: TCP with congestion control
// CC (MPTCP if MPTCP, refusing a fallback to TCP), or UDP for a "udp"
// network, from From (zero: the routing table chooses), bound to device Dev
// if set (SO_BINDTODEVICE: the route lookup then only takes Dev's routes).
// Via, when valid, must contain the local address: proof of the way under
// test.
type Dialer struct {
	NS    *netns.Namespace
	From  netip.Addr
	CC    string
	MPTCP bool
	Via   netip.Prefix
	Dev   string
}

// Dial is a Session's Dial.
func (d Dialer) Dial(ctx context.Context, network, addr string) (c net.Conn, err error) {
	nd := net.Dialer{}
	if strings.HasPrefix(network, "udp") {
		network = "udp4"
		if d.From.IsValid() {
			nd.LocalAddr = &net.UDPAddr{IP: d.From.AsSlice()}
		}
	} else {
		network, nd.Control = "tcp4", httpbench.Control(d.CC)
		if d.From.IsValid() {
			nd.LocalAddr = &net.TCPAddr{IP: d.From.AsSlice()}
		}
		nd.SetMultipathTCP(d.MPTCP)
	}
	if d.Dev != "" {
		then := nd.Control
		nd.Control = func(network, address string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, d.Dev) }); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("binding to %s: %w", d.Dev, serr)
			}
			if then != nil {
				return then(network, address, c)
			}
			return nil
		}
	}
	if err := d.NS.Do(func() error {
		c, err = nd.DialContext(ctx, network, addr)
		return err
	}); err != nil {
		return nil, err
	}
	if tc, isTCP := c.(*net.TCPConn); isTCP && d.MPTCP {
		if ok, err := tc.MultipathTCP(); err != nil || !ok {
			c.Close()
			return nil, fmt.Errorf("MPTCP: the connection fell back to plain TCP (is MPTCP enabled at both ends?)")
		}
	}
	if a, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil && d.Via.IsValid() && !d.Via.Contains(a.Addr().Unmap()) {
		c.Close()
		return nil, fmt.Errorf("the %s connection left from %v, not from %v", network, a, d.Via)
	}
	return c, nil
}

// Fetch downloads size bytes from sess within timeout. It returns, with
// the result, the local address of the download's connection: the runs
// and the mesh look its retransmissions up in the web server by it.
func Fetch(ctx context.Context, sess Session, size int64, timeout time.Duration) (res httpbench.Result, local string, err error) {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := sess.Dial(ctx, network, addr)
		if err == nil {
			local = c.LocalAddr().String()
		}
		return c, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err = httpbench.Fetch(ctx, httpbench.URL(sess.Target(), size), httpbench.Options{Dial: dial})
	return res, local, err
}

// BaseSession is a Session without counters; the others embed it. Close
// stops the tunnel daemons cli and srv, if any, then runs undo, if set.
type BaseSession struct {
	Dialer
	To, About string // the Target and the Detail
	cli, srv  *proc.Child
	undo      func()
}

func (s *BaseSession) Target() string                             { return s.To }
func (s *BaseSession) Counters(context.Context) (Counters, error) { return Counters{}, nil }
func (s *BaseSession) Detail() string                             { return s.About }

func (s *BaseSession) PIDs() (cli, srv int) {
	if s.cli == nil || s.srv == nil {
		return 0, 0
	}
	return s.cli.PID(), s.srv.PID()
}

func (s *BaseSession) Close() error {
	s.cli.Stop(daemonStopTimeout)
	s.srv.Stop(daemonStopTimeout)
	if s.undo != nil {
		s.undo()
	}
	return nil
}

// DirectSession is plain TCP from path p's client address to target,
// inside ns: the runs' direct transport and the bench's kernel case.
func DirectSession(ns *netns.Namespace, p testbed.Path, target netip.AddrPort, cc string) *BaseSession {
	about := fmt.Sprintf("plain TCP from %v to %v over veth %s", p.ClientAddr, target.Addr(), p.ClientIf)
	if mtu := LinkMTU(ns, p.ClientIf); mtu > 0 {
		about += fmt.Sprintf(" (MTU %d)", mtu)
	}
	return &BaseSession{Dialer: Dialer{NS: ns, From: p.ClientAddr, CC: cc}, To: target.String(), About: about}
}

// LinkMTU is the MTU of interface name in ns, 0 if unknown.
func LinkMTU(ns *netns.Namespace, name string) int {
	if lk, err := ns.Netlink().LinkByName(name); err == nil {
		return lk.Attrs().MTU
	}
	return 0
}

// StartFunc sets a transport up for one point.
type StartFunc func(ctx context.Context, env *Env) (Session, error)

// transports are the runnable transports by their scenario name.
var transports = map[string]StartFunc{
	scenario.TransportDirect:       startDirect,
	scenario.TransportMPTCPDirect:  startMPTCP,
	scenario.TransportBraid:        braidOn(braidSetup{}),
	scenario.TransportUDPTunnel:    braidOn(braidSetup{single: true}),
	scenario.TransportTCPTunnel:    braidOn(braidSetup{single: true, transport: "tcp"}),
	scenario.TransportMPTCPTunnel:  braidOn(braidSetup{transport: "mptcp"}),
	scenario.TransportOpenVPNUDP:   startOpenVPN("udp", false),
	scenario.TransportOpenVPNTCP:   startOpenVPN("tcp", false),
	scenario.TransportOpenVPNMPTCP: startOpenVPN("tcp", true),
}

// Register adds a transport (scenario.RegisterTransport must know it too)
// in an init function; it panics on an empty or duplicate name.
func Register(name string, start StartFunc) {
	if _, dup := transports[name]; dup || name == "" || start == nil {
		panic(fmt.Sprintf("runner: transport %q registered twice, or without a name or StartFunc", name))
	}
	transports[name] = start
}

// Names lists the registered transports, sorted.
func Names() []string { return slices.Sorted(maps.Keys(transports)) }

// checkRunnable reports the first transport of points not registered.
func checkRunnable(points []scenario.Point) error {
	for _, p := range points {
		if _, ok := transports[p.Transport.Name]; !ok {
			return fmt.Errorf("runner: no implementation of transport %q (runnable: %v)", p.Transport.Name, Names())
		}
	}
	return nil
}

// pathFor is the path a single-path transport takes: the point's, or the primary.
func pathFor(env *Env) (testbed.Path, error) {
	name := cmp.Or(env.Point.Transport.Path, env.TB.Plan.Paths[0].Name)
	p, ok := env.TB.Plan.Path(name)
	if !ok {
		return p, fmt.Errorf("no path %q", name)
	}
	return p, nil
}

func webTarget(env *Env, port uint16) string { return netip.AddrPortFrom(env.Web.Addr, port).String() }

func startDirect(ctx context.Context, env *Env) (Session, error) {
	p, err := pathFor(env)
	if err != nil {
		return nil, err
	}
	return DirectSession(env.TB.Client(), p, netip.AddrPortFrom(env.Web.Addr, WebPort), env.CC), nil
}

func startMPTCP(ctx context.Context, env *Env) (Session, error) {
	undo, err := setupMPTCP(ctx, env, env.TB.Web(), 1)
	if err != nil {
		return nil, err
	}
	return &BaseSession{undo: undo, To: webTarget(env, WebPortMPTCP),
		Dialer: Dialer{NS: env.TB.Client(), From: env.TB.Plan.Paths[0].ClientAddr, CC: env.CC, MPTCP: true}}, nil
}

// mptcpLimits are the `ip mptcp` limits of the client and its peer: above
// any path count a scenario reaches.
var mptcpLimits = []string{"mptcp", "limits", "set", "subflow", "8", "add_addr_accepted", "8"}

// setupMPTCP checks MPTCP in the client and peer namespaces and configures
// the client's path manager (MPTCPSubflowCommands); it returns the undo.
func setupMPTCP(ctx context.Context, env *Env, peer *netns.Namespace, subflows int) (func(), error) {
	cli := env.TB.Client()
	for _, ns := range []*netns.Namespace{cli, peer} {
		v, err := ns.Sysctl("net.mptcp.enabled")
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("MPTCP is not available: this kernel has no net.mptcp (CONFIG_MPTCP)")
		} else if err != nil {
			return nil, fmt.Errorf("MPTCP: %w", err)
		}
		if v != "1" {
			return nil, fmt.Errorf("MPTCP is disabled in namespace %s (net.mptcp.enabled=%s)", ns, v)
		}
	}
	// The path manager is set with iproute2's ip, the lab's one program:
	// without it exec's error would hide which package is missing.
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("MPTCP needs the ip program: apt-get install iproute2")
	}
	if _, err := peer.Exec(ctx, "ip", mptcpLimits...); err != nil {
		return nil, fmt.Errorf("MPTCP limits in %s: %w", peer, err)
	}
	do, undoCmds := MPTCPSubflowCommands(env.TB.Plan.Paths, subflows)
	undo := func() { // what was not done fails harmlessly
		for _, args := range undoCmds {
			cli.Exec(context.Background(), "ip", args...)
		}
	}
	for _, args := range do {
		if _, err := cli.Exec(ctx, "ip", args...); err != nil {
			undo()
			return nil, fmt.Errorf("MPTCP path manager: %w", err)
		}
	}
	return undo, nil
}

// MPTCPSubflowCommands is the client's path manager set-up for MPTCP and
// its undo: the limits and a subflow endpoint on every path after the
// first (which carries the initial subflow); subflows = n adds n-1
// endpoints per path (docs/lab.md) at its address + 16·k.
func MPTCPSubflowCommands(paths []testbed.Path, subflows int) (do, undo [][]string) {
	do, undo = [][]string{mptcpLimits}, [][]string{{"mptcp", "endpoint", "flush"}}
	for _, p := range paths[min(1, len(paths)):] {
		do = append(do, []string{"mptcp", "endpoint", "add", p.ClientAddr.String(), "dev", p.ClientIf, "subflow"})
	}
	for _, p := range paths {
		a, table := p.ClientAddr, strconv.Itoa(p.Table)
		for k := 1; k < subflows; k++ {
			for range 16 {
				a = a.Next()
			}
			pfx, host := netip.PrefixFrom(a, p.Subnet.Bits()).String(), netip.PrefixFrom(a, 32).String()
			do = append(do, []string{"addr", "add", pfx, "dev", p.ClientIf}, []string{"rule", "add", "from", host, "table", table},
				[]string{"mptcp", "endpoint", "add", a.String(), "dev", p.ClientIf, "subflow"})
			undo = append(undo, []string{"rule", "del", "from", host, "table", table}, []string{"addr", "del", pfx, "dev", p.ClientIf})
		}
	}
	return do, undo
}
