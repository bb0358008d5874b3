package runner

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
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
	// Sender is the status of the braid daemon that sends the download
	// (the server), for BulkOverhead; nil for transports without one.
	Sender *control.Status
}

// Session is a transport set up on the testbed, ready for downloads.
type Session interface {
	// Target is the host:port the client downloads from.
	Target() string
	// Dial opens the download's connection inside the client namespace.
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
	// Counters snapshots the transport's counters (zero Counters if it has
	// none).
	Counters(ctx context.Context) (Counters, error)
	// Close undoes what Start did. The testbed stays.
	Close() error
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
