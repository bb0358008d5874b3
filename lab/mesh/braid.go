package mesh

import (
	"context"
	"net/netip"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
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

// StartBraid starts a braid server in the destination and a braid
// client in the source, with one daemon path per mesh path, its keys and
// configs in dir, and waits until the client has a usable daemon path on
// every mesh path. The mesh counts each path's bytes itself (Delivered).
func (m *Mesh) StartBraid(ctx context.Context, bc runner.BraidCommand, dir, scheduler, cc string) (runner.Session, error) {
	return runner.StartBraid(ctx, runner.BraidSpec{
		Command: bc, Dir: dir, Server: m.Destination(), Client: m.Source(),
		Configs: func(srvKey, cliKey keys.Key, srvSock, cliSock string) (*config.File, *config.File) {
			return BraidServerConfig(cliKey, srvSock), BraidClientConfig(m.Plan, srvKey, cliSock, scheduler)
		},
		Want: len(m.Plan.Paths), Usable: func(st control.Status) int { return UsablePaths(st, m.Plan) },
		Target: netip.AddrPortFrom(runner.BraidServerAddr.Addr(), runner.WebPort).String(), CC: cc,
	})
}

// UsablePaths counts the mesh paths on which st has a usable daemon path,
// telling them apart by local address.
func UsablePaths(st control.Status, plan *Plan) int {
	return runner.UsableOn(st, len(plan.Paths), func(ps control.PathStatus, k int) bool {
		ap, err := netip.ParseAddrPort(ps.Local)
		return err == nil && ap.Addr().Unmap() == plan.Paths[k].ClientAddr
	})
}
