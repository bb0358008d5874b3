package runner

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// Env is what a transport gets to set itself up on one point.
type Env struct {
	TB    *testbed.Testbed
	Point *scenario.Point
	// CC is the congestion control of the download's TCP (or MPTCP) sockets.
	CC string
	// Web is the web server: plain TCP and MPTCP listeners.
	Web *WebServer
	// Dir is a scratch directory for the transport's files (configs, keys,
	// sockets), removed after the point.
	Dir string
	// Braid is how to start a braid daemon (executable and environment).
	Braid BraidCommand
}

// Counters are a transport's own cumulative counters, read before and after
// each download; the runner records the difference.
type Counters struct {
	// PathBytes is what each path (by scenario link name) delivered towards
	// the client. Nil: the runner uses the link emulators' counters.
	PathBytes       map[string]uint64
	Reordered       uint64
	ReorderTimeouts uint64
	// Sender and Receiver are the statuses of the braid daemons that send
	// the download (the server: BulkOverhead) and receive it (the client:
	// the bench's batching); nil for transports without them.
	Sender, Receiver *control.Status
}

// Session is a transport set up between two namespaces, ready for
// downloads: the one notion of "a transport under test" of the runs, the
// bench and the mesh. It lives here, not in a package of its own, because
// the bench and the mesh already build on the runner (the braid daemons,
// the web server), and the runner's transports are its implementations.
type Session interface {
	// Target is the host:port the client downloads from.
	Target() string
	// Dial opens the download's connection inside the client namespace and
	// checks that it took the way under test.
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
	// Counters snapshots the transport's counters (zero Counters if it has
	// none).
	Counters(ctx context.Context) (Counters, error)
	// PIDs are the tunnel daemons in the client and the server (0: none),
	// whose CPU time and memory the bench charges to the transport.
	PIDs() (cli, srv int)
	// Detail describes the setup for a report.
	Detail() string
	// Close undoes what Start did. The testbed stays.
	Close() error
}

// Dialer opens the lab's connections inside NS: TCP with congestion control
// CC (MPTCP if MPTCP, refusing a connection that fell back to plain TCP),
// or plain UDP for a "udp" network (the latency probes and the real-time
// flow; MPTCP has no UDP, so they take From like the MPTCP connection's
// initial subflow). From is the local address (zero: the routing table
// chooses). Via, when valid, must contain the local address: the proof
// that a connection took the tunnel or path under test when the
// destination has another route too.
type Dialer struct {
	NS    *netns.Namespace
	From  netip.Addr
	CC    string
	MPTCP bool
	Via   netip.Prefix
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
		network = "tcp4"
		nd.Control = httpbench.Control(d.CC)
		if d.From.IsValid() {
			nd.LocalAddr = &net.TCPAddr{IP: d.From.AsSlice()}
		}
		nd.SetMultipathTCP(d.MPTCP)
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

// BaseSession is a Session without daemons or counters; the others embed
// it for their target, dialer and detail.
type BaseSession struct {
	Dialer
	To    string // the Target
	About string // the Detail
}

func (s *BaseSession) Target() string                             { return s.To }
func (s *BaseSession) Counters(context.Context) (Counters, error) { return Counters{}, nil }
func (s *BaseSession) PIDs() (cli, srv int)                       { return 0, 0 }
func (s *BaseSession) Detail() string                             { return s.About }
func (s *BaseSession) Close() error                               { return nil }

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
	lk, err := ns.Netlink().LinkByName(name)
	if err != nil {
		return 0
	}
	return lk.Attrs().MTU
}

// StartFunc sets a transport up for one point.
type StartFunc func(ctx context.Context, env *Env) (Session, error)

var registry struct {
	sync.RWMutex
	m map[string]StartFunc
}

// Register makes a transport kind runnable under name, the name a scenario
// gives it (the kind must also be known to scenario.RegisterTransport for a
// scenario naming it to parse). It panics on an empty or duplicate name:
// registrations happen in init functions, where that is a programming error.
func Register(name string, start StartFunc) {
	if name == "" || start == nil {
		panic("runner: Register with empty name or nil StartFunc")
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.m == nil {
		registry.m = map[string]StartFunc{}
	}
	if _, dup := registry.m[name]; dup {
		panic(fmt.Sprintf("runner: transport %q registered twice", name))
	}
	registry.m[name] = start
}

// Lookup returns the StartFunc registered as name.
func Lookup(name string) (StartFunc, bool) {
	registry.RLock()
	defer registry.RUnlock()
	f, ok := registry.m[name]
	return f, ok
}

// Names lists the registered transports, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.m))
	for n := range registry.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// checkRunnable reports the first transport of points that the scenario
// package knows but nobody registered here, before any testbed is built.
func checkRunnable(points []scenario.Point) error {
	var missing []string
	for _, p := range points {
		if _, ok := Lookup(p.Transport.Name); !ok && !slices.Contains(missing, p.Transport.Name) {
			missing = append(missing, p.Transport.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("runner: no implementation of transport %q (runnable: %v)", missing[0], Names())
	}
	return nil
}

func init() {
	Register(scenario.TransportDirect, startDirect)
	Register(scenario.TransportMPTCPDirect, startMPTCP)
	Register(scenario.TransportBraid, startBraid)
	Register(scenario.TransportUDPTunnel, startUDPTunnel)
	Register(scenario.TransportTCPTunnel, startTCPTunnel)
	Register(scenario.TransportMPTCPTunnel, startMPTCPTunnel)
	Register(scenario.TransportOpenVPNUDP, startOpenVPN("udp", false))
	Register(scenario.TransportOpenVPNTCP, startOpenVPN("tcp", false))
	Register(scenario.TransportOpenVPNMPTCP, startOpenVPN("tcp", true))
}
