// Package load is braid's load generator (`braid lab load`): one real braid
// server daemon in a namespace, and N client engines (package tunnel, each
// with its own key, inner address and source addresses) in one process in
// another namespace, their in-memory TUN devices feeding inner UDP traffic
// to a sink behind the server. It measures what a server costs per client:
// handshakes per second while they all start, the time until all are up,
// the server's RSS per idle client, its CPU per handshake and per GB, the
// drops it counts, and how handshakes (rekeys) spread over the run.
//
// Two processes: Run, the driver, builds the namespaces, starts the server
// and the client process, measures the server from outside (/proc and its
// control socket) and writes the report; RunClients is the client process,
// started by the driver inside the client namespace (so that every socket
// of every engine is opened there without switching threads), which it
// steers over two pipes (requests and replies, one JSON line each).
package load

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/braid-vpn/braid/lab/runner"
)

// The topology. One veth pair joins the namespaces; the clients' source
// addresses are /32s on the client end, in a subnet the server routes
// through the client end's address, so the server keeps one neighbour entry
// however many clients there are (the kernel's neighbour table holds 1024
// by default, gc_thresh3, and a thousand two-path clients on-link would
// overflow it).
var (
	ServerOuter = netip.MustParsePrefix("198.18.0.1/30")
	ClientOuter = netip.MustParsePrefix("198.18.0.2/30")
	// Sources holds every client path's source address, from its second
	// address on.
	Sources = netip.MustParsePrefix("198.19.0.0/16")
	// Tunnel is the inner subnet: the server is its first address, client
	// i (from 0) its (i+2)th.
	Tunnel = netip.MustParsePrefix("100.64.0.0/16")
)

// Names of the veth ends and the sink's port on the server's inner address.
const (
	ServerIf = "ld-srv"
	ClientIf = "ld-cli"
	SinkPort = 9000
)

// Limits of a run: the address plan's room (every client path needs a
// source address), and what the issue asks to measure up to.
const (
	MaxClients  = 10000
	MaxPaths    = 8
	MaxPacket   = 1380 // the inner MTU: tundev.DefaultMTU, both ends' default
	MinPacket   = 28   // an IPv4 and a UDP header
	MaxRate     = 100000
	MinRekey    = time.Second
	minSourcesN = 1 // Sources' first address is the network's own
)

// ServerInner is the server's inner address, where the sink listens.
func ServerInner() netip.Addr { return nth(Tunnel, 1) }

// ClientInner is client i's inner address.
func ClientInner(i int) netip.Addr { return nth(Tunnel, i+2) }

// Source is the source address of client i's path k of paths per client.
func Source(i, k, paths int) netip.Addr { return nth(Sources, minSourcesN+i*paths+k) }

// ServerAddr is where every client path sends: the server's outer address
// at the lab's braid port.
func ServerAddr() netip.AddrPort { return netip.AddrPortFrom(ServerOuter.Addr(), runner.BraidPort) }

// Sink is the inner address and port the clients' traffic goes to.
func Sink() netip.AddrPort { return netip.AddrPortFrom(ServerInner(), SinkPort) }

// nth is the address k after p's network address (IPv4; the plan's
// limits keep k inside p).
func nth(p netip.Prefix, k int) netip.Addr {
	a := p.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(k)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// checkPlan reports whether clients × paths fit the address plan.
func checkPlan(clients, paths int) error {
	if clients < 1 || clients > MaxClients {
		return fmt.Errorf("%d clients: want 1..%d", clients, MaxClients)
	}
	if paths < 1 || paths > MaxPaths {
		return fmt.Errorf("%d paths per client: want 1..%d", paths, MaxPaths)
	}
	// The last source must stay below the subnet's broadcast address.
	if last := minSourcesN + clients*paths; last >= 1<<(32-Sources.Bits())-1 {
		return fmt.Errorf("%d clients × %d paths need %d source addresses; %v holds %d", clients, paths, clients*paths, Sources, 1<<(32-Sources.Bits())-2)
	}
	return nil
}
