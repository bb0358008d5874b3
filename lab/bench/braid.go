package bench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

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

type braidTunnel struct {
	l      *lab
	paths  []testbed.Path
	pair   *runner.BraidPair
	detail string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

func startBraid(ctx context.Context, l *lab, n int) (_ tunnel, err error) {
	t := &braidTunnel{l: l, paths: l.paths[:n]}
	dir, err := os.MkdirTemp(l.dir, "braid-")
	if err != nil {
		return nil, err
	}
	t.pair, err = runner.StartBraidPair(ctx, l.cfg.Braid, dir, l.srv, l.cli,
		func(srvKey, cliKey keys.Key, srvSock, cliSock string) (*config.File, *config.File) {
			srv := runner.BraidServerConfig("bench", cliKey, srvSock)
			srv.CryptoWorkers = cryptoWorkers(l.cfg)
			return srv, BraidClientConfig(l.cfg, t.paths, srvKey, cliSock)
		}, len(t.paths), func(st control.Status) int { return runner.UsablePaths(st, t.paths) })
	if err != nil {
		return nil, err
	}
	st, err := control.Query(t.pair.CliSock)
	if err != nil {
		t.Close()
		return nil, err
	}
	t.detail = braidDetail(st, t.paths, tunMTU(l, "braid0"))
	t.dial = dialIn(l.cli, l.cfg.CC, runner.BraidClientAddr.Masked())
	return t, nil
}

// braidDetail names the scheduler, congestion control and recovery and
// counts the daemon paths: the client opens one from each path to each
// server address it lists (see BraidClientConfig), and the daemon lists
// each with its state.
func braidDetail(st control.Status, paths []testbed.Path, mtu int) string {
	sched, cc, rec := "", "", ""
	for _, p := range st.Peers {
		if p.Established {
			sched, cc, rec = p.Scheduler, p.Congestion, p.Recovery
		}
	}
	usable := runner.UsableAny(st)
	veths := make([]string, len(paths))
	for i, p := range paths {
		veths[i] = p.ClientIf
	}
	n := len(paths)
	s := fmt.Sprintf("braid scheduler %s, congestion %s, recovery %s, %d path(s) over veth %s to %d server address(es): %d of %d daemon paths usable",
		sched, cc, rec, n, strings.Join(veths, "+"), n, usable, n*n)
	if mtu > 0 {
		s += fmt.Sprintf(", inner MTU %d", mtu)
	}
	if st.Crypto != nil {
		s += fmt.Sprintf(", %d crypto worker(s)", st.Crypto.Workers)
	}
	return s
}

// tunMTU is the MTU of the client's tunnel interface, 0 if unknown.
func tunMTU(l *lab, name string) int {
	lk, err := l.cli.Netlink().LinkByName(name)
	if err != nil {
		return 0
	}
	return lk.Attrs().MTU
}

func (t *braidTunnel) Target() string {
	return netip.AddrPortFrom(runner.BraidServerAddr.Addr(), WebPort).String()
}
func (t *braidTunnel) Dial(ctx context.Context, n, a string) (net.Conn, error) {
	return t.dial(ctx, n, a)
}
func (t *braidTunnel) PIDs() (int, int) { return t.pair.Cli.PID(), t.pair.Srv.PID() }
func (t *braidTunnel) Detail() string   { return t.detail }
func (t *braidTunnel) Close() {
	t.pair.Close()
}
