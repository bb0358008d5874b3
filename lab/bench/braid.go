package bench

import (
	"context"
	"net/netip"
	"os"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
)

// BraidClientConfig is the client's file for paths. With one path it
// talks to the server address on that path only: one daemon path, one
// veth. With more it lists every server address, as a real client does and
// as the lab's braid transport does, so the full mesh has paths × addresses
// daemon paths (the crossing ones still leave through their own veth: a socket
// pinned to a device with no route to the address treats it as on-link).
// Every option but congestion and recovery (from Config) is braid's
// default, and nothing is routed into the tunnel but its own subnet.
func BraidClientConfig(cfg Config, paths []testbed.Path, serverKey keys.Key, socket string) *config.File {
	tr := scenario.Transport{Congestion: cfg.Congestion, Recovery: cfg.Recovery}
	f := runner.BraidClientConfig(tr, paths, netip.Prefix{}, serverKey, socket)
	f.CryptoWorkers = cryptoWorkers(cfg)
	return f
}

// cryptoWorkers is the crypto_workers key of both daemons' files (nil: unset).
func cryptoWorkers(cfg Config) *int64 {
	if cfg.CryptoWorkers == nil {
		return nil
	}
	return new(int64(*cfg.CryptoWorkers))
}

func startBraid(ctx context.Context, l *lab, n int) (runner.Session, error) {
	paths := l.paths[:n]
	dir, err := os.MkdirTemp(l.dir, "braid-")
	if err != nil {
		return nil, err
	}
	return runner.StartBraid(ctx, runner.BraidSpec{
		Command: l.cfg.Braid, Dir: dir, Server: l.srv, Client: l.cli,
		Configs: func(srvKey, cliKey keys.Key, srvSock, cliSock string) (*config.File, *config.File) {
			srv := runner.BraidServerConfig("bench", cliKey, srvSock)
			srv.CryptoWorkers = cryptoWorkers(l.cfg)
			return srv, BraidClientConfig(l.cfg, paths, srvKey, cliSock)
		},
		Want: n, Usable: func(st control.Status) int { return runner.UsablePaths(st, paths) },
		Target: netip.AddrPortFrom(runner.BraidServerAddr.Addr(), WebPort).String(), CC: l.cfg.CC,
	})
}
