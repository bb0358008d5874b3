package fleet

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/braid-vpn/braid/balance"
	"github.com/braid-vpn/braid/lab/runner"
)

// balancer is package balance's balancer, installed in the router
// namespace with every other setting its default, its health and route
// loop running until Close.
type balancer struct {
	b    *balance.Balancer
	stop context.CancelFunc
	done chan error
}

// startBalancer installs the balancer in front of l's servers: the clients'
// address VIP, each server by its link address and control HTTP server.
func (l *lab) startBalancer(ctx context.Context) (*balancer, error) {
	f := balance.File{VIP: VIP.String(), Port: runner.BraidPort, ServerIDBits: int64(serverIDBits(len(l.servers)))}
	for j := range l.servers {
		_, a := serverLink(j)
		f.Servers = append(f.Servers, balance.FileServer{ID: int64(j), Address: a.Addr().String(),
			Control: fmt.Sprintf("http://%v", netip.AddrPortFrom(a.Addr(), MetricsPort))})
	}
	cfg, err := f.Config("(the fleet's balancer)")
	if err != nil {
		return nil, err
	}
	b, err := balance.Install(cfg, balance.Options{Netns: l.router.Path()})
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	bl := &balancer{b: b, stop: stop, done: make(chan error, 1)}
	go func() { bl.done <- b.Run(ctx) }()
	return bl, nil
}

// Close stops the loop and removes what the balancer installed.
func (bl *balancer) Close() error {
	bl.stop()
	<-bl.done
	return bl.b.Close()
}
