package fleet

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/netns"
)

// BalancerSpec is what the balancer in front of several servers is told:
// the namespace it runs in (the router between the clients, the servers
// and the backend LAN), the address and port the clients send to, and
// each server.
type BalancerSpec struct {
	NS           *netns.Namespace
	VIP          netip.AddrPort
	ServerIDBits int
	Servers      []BalancedServer
}

// BalancedServer is one server behind the balancer: its id (server_id),
// its address on its link to the router, and the base URL of its control
// HTTP server (health and status).
type BalancedServer struct {
	ID      int
	Addr    netip.Addr
	Control string
}

// BalancerFunc starts the balancer; Close removes it.
type BalancerFunc func(ctx context.Context, spec BalancerSpec) (interface{ Close() error }, error)

func (l *lab) balancerSpec() BalancerSpec {
	spec := BalancerSpec{NS: l.router, VIP: netip.AddrPortFrom(VIP, runner.BraidPort), ServerIDBits: serverIDBits(len(l.servers))}
	for j := range l.servers {
		_, a := serverLink(j)
		spec.Servers = append(spec.Servers, BalancedServer{ID: j, Addr: a.Addr(),
			Control: fmt.Sprintf("http://%v", netip.AddrPortFrom(a.Addr(), MetricsPort))})
	}
	return spec
}
