package mesh

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/runner"
)

// BraidClientConfig is the braid client's file for the mesh: one path per
// mesh path, given as the path's address (a socket bound to it follows
// the path's rule on every node), and one server address, the service
// address. The client opens the full mesh of paths × servers, which with
// one server address is exactly one daemon path per mesh path: none can
// wander onto another. scheduler "" keeps braid's default.
func BraidClientConfig(plan *Plan, serverKey keys.Key, socket, scheduler string) *config.File {
	var paths []string
	for _, pp := range plan.Paths {
		paths = append(paths, pp.ClientAddr.String())
	}
	f := runner.BraidClientFile(serverKey, socket, []string{netip.AddrPortFrom(plan.Service, runner.BraidPort).String()}, paths)
	f.Client.Scheduler = scheduler
	return f
}

// BraidServerConfig is the braid server's file: it listens on every
// address, so the service address, and answers each path from the
// address it was reached on.
func BraidServerConfig(clientKey keys.Key, socket string) *config.File {
	return runner.BraidServerConfig("mesh", clientKey, socket)
}

// Braid is a braid server in the destination and a braid client in the
// source, with one daemon path per mesh path.
type Braid struct {
	mesh *Mesh
	pair *runner.BraidPair
}

// StartBraid writes keys and configs into dir, starts both daemons with
// bc and waits until the client has a usable daemon path on every mesh path.
func (m *Mesh) StartBraid(ctx context.Context, bc runner.BraidCommand, dir, scheduler string) (*Braid, error) {
	pair, err := runner.StartBraidPair(ctx, bc, dir, m.Destination(), m.Source(),
		func(srvKey, cliKey keys.Key, srvSock, cliSock string) (*config.File, *config.File) {
			return BraidServerConfig(cliKey, srvSock), BraidClientConfig(m.Plan, srvKey, cliSock, scheduler)
		}, len(m.Plan.Paths), func(st control.Status) int { return UsablePaths(st, m.Plan) })
	if err != nil {
		return nil, err
	}
	return &Braid{mesh: m, pair: pair}, nil
}

// UsablePaths counts the mesh paths on which st has a usable daemon path,
// telling them apart by local address.
func UsablePaths(st control.Status, plan *Plan) int {
	return runner.UsableOn(st, len(plan.Paths), func(ps control.PathStatus, k int) bool {
		ap, err := netip.ParseAddrPort(ps.Local)
		return err == nil && ap.Addr().Unmap() == plan.Paths[k].ClientAddr
	})
}

// Status queries the client.
func (b *Braid) Status() (control.Status, error) { return control.Query(b.pair.CliSock) }

// Target is the web server as seen through the tunnel.
func (b *Braid) Target() string {
	return netip.AddrPortFrom(runner.BraidServerAddr.Addr(), runner.WebPort).String()
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
			if a, _ := netip.AddrFromSlice(la.IP); !runner.BraidClientAddr.Contains(a.Unmap()) {
				c.Close()
				return nil, fmt.Errorf("braid: the download left from %v, not through the tunnel", la)
			}
		}
		return c, nil
	}
}

// Close stops both daemons (client first).
func (b *Braid) Close() {
	if b != nil {
		b.pair.Close()
	}
}
