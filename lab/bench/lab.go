package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// benchPaths are the veth pairs a-pN 198.18.N.1/24 ↔ b-pN 198.18.N.2/24.
var benchPaths = func() []testbed.Path {
	var ps []testbed.Path
	for i := range 4 {
		n := byte(i + 1)
		ps = append(ps, testbed.Path{Name: fmt.Sprintf("p%d", n), Index: i,
			ClientIf: fmt.Sprintf("a-p%d", n), ServerIf: fmt.Sprintf("b-p%d", n),
			ClientAddr: netip.AddrFrom4([4]byte{198, 18, n, 1}), ServerAddr: netip.AddrFrom4([4]byte{198, 18, n, 2}),
			Subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, n, 0}), 24)})
	}
	return ps
}()

// lab is the two namespaces, their veth pairs and the HTTP server.
type lab struct {
	cfg      Config
	paths    []testbed.Path // the veth pairs built, a prefix of benchPaths
	cli, srv *netns.Namespace
	dir      string
	web      *proc.Child
}

// newLab builds the first veths of benchPaths and starts the HTTP server,
// a child process so that its CPU time is its own.
func newLab(cfg Config, veths int) (_ *lab, err error) {
	if _, err := netns.Cleanup(cfg.Prefix); err != nil {
		return nil, fmt.Errorf("removing stale namespaces: %w", err)
	}
	l := &lab{cfg: cfg, paths: benchPaths[:veths]}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if l.dir, err = os.MkdirTemp("", "braid-bench-"); err != nil {
		return nil, err
	}
	if l.cli, err = netns.New(cfg.Prefix); err != nil {
		return nil, err
	}
	if l.srv, err = netns.New(cfg.Prefix); err != nil {
		return nil, err
	}
	for _, p := range l.paths {
		a := netns.VethEnd{NS: l.cli, Name: p.ClientIf, Addrs: []netip.Prefix{netip.PrefixFrom(p.ClientAddr, p.Subnet.Bits())}}
		b := netns.VethEnd{NS: l.srv, Name: p.ServerIf, Addrs: []netip.Prefix{netip.PrefixFrom(p.ServerAddr, p.Subnet.Bits())}}
		if err := netns.AddVeth(a, b); err != nil {
			return nil, err
		}
	}
	cmd, err := cfg.Braid.Command("lab", "serve", "--addr", fmt.Sprintf("0.0.0.0:%d", WebPort), "--cc", cfg.CC)
	if err != nil {
		return nil, err
	}
	if l.web, err = proc.Start(l.srv, "HTTP server", cmd); err != nil {
		return nil, err
	}
	target := netip.AddrPortFrom(benchPaths[0].ServerAddr, WebPort).String()
	if err := proc.Await(context.Background(), readyTimeout, 20*time.Millisecond, func() error {
		c, err := runner.Dialer{NS: l.cli}.Dial(context.Background(), "tcp4", target)
		if err != nil {
			return fmt.Errorf("HTTP server not reachable at %s after %v: %v", target, readyTimeout, err)
		}
		return c.Close()
	}, l.web); err != nil {
		return nil, err
	}
	return l, nil
}

// close stops the HTTP server and removes the namespaces (which kills
// anything still inside and takes the veth pairs with them).
func (l *lab) close() {
	l.web.Stop(stopTimeout)
	for _, ns := range []*netns.Namespace{l.cli, l.srv} {
		if ns != nil {
			ns.Close()
		}
	}
	if l.dir != "" {
		os.RemoveAll(l.dir)
	}
}

func (l *lab) start(ctx context.Context, name string) (runner.Session, error) {
	if n := cases[name].paths; n > 0 {
		dir, err := os.MkdirTemp(l.dir, "braid-")
		if err != nil {
			return nil, err
		}
		paths := l.paths[:n]
		return runner.StartBraid(ctx, runner.BraidSpec{
			Command: l.cfg.Braid, Dir: dir, Server: l.srv, Client: l.cli, Configs: braidConfigs(l.cfg, paths),
			Want: n, Usable: func(st control.Status) int { return runner.UsablePaths(st, paths) },
			Target: netip.AddrPortFrom(runner.BraidServerAddr.Addr(), WebPort).String(), CC: l.cfg.CC,
		})
	}
	if name == CaseWireGuardGo {
		return startWireGuard(ctx, l)
	}
	return runner.DirectSession(l.cli, benchPaths[0], netip.AddrPortFrom(benchPaths[0].ServerAddr, WebPort), l.cfg.CC), nil
}

// braidConfigs makes the daemons' files for braid on paths: braid's
// defaults but for cfg's congestion, recovery and crypto workers, nothing
// routed into the tunnel but its own subnet. The client lists every server
// address (docs/lab.md); the crossing daemon paths still leave through
// their own veth (a socket pinned to a device with no route to the address
// treats it as on-link).
func braidConfigs(cfg Config, paths []testbed.Path) func(srvKey, cliKey keys.Key, srvSock, cliSock string) (*config.File, *config.File) {
	return func(srvKey, cliKey keys.Key, srvSock, cliSock string) (*config.File, *config.File) {
		srv := runner.BraidServerConfig("bench", cliKey, srvSock)
		tr := scenario.Transport{Congestion: cfg.Congestion, Recovery: cfg.Recovery}
		cli := runner.BraidClientConfig(tr, paths, netip.Prefix{}, srvKey, cliSock)
		if cfg.CryptoWorkers != nil {
			srv.CryptoWorkers, cli.CryptoWorkers = new(int64(*cfg.CryptoWorkers)), new(int64(*cfg.CryptoWorkers))
		}
		return srv, cli
	}
}

// runCase sets a case up, warms it up, measures one download and tears
// the case down again.
func (l *lab) runCase(ctx context.Context, name string, rep int) (Sample, string, error) {
	t, err := l.start(ctx, name)
	if err != nil {
		return Sample{}, "", err
	}
	defer t.Close()
	if _, _, err := runner.Fetch(ctx, t, WarmupSize, MinTimeout); err != nil {
		return Sample{}, "", fmt.Errorf("warm-up download: %w", err)
	}
	s, err := l.measure(ctx, t, rep)
	return s, t.Detail(), err
}

// snapshot reads the cumulative counters that bracket a download: the CPU
// time of the tunnel daemons cli and srv (0: none), of this process, the
// HTTP server and the machine, and the veths' RX bytes.
func (l *lab) snapshot(cli, srv int) (cpu CPU, rx []uint64, _ error) {
	errs := make([]error, 5)
	for i, p := range []struct {
		pid int
		who string
	}{{cli, "client daemon"}, {srv, "server daemon"}, {os.Getpid(), "bench process"}, {l.web.PID(), "HTTP server"}} {
		*cpu.figures()[i], errs[i] = perProcess(p.pid, p.who, "CPU time", "stat", ParsePidStat)
	}
	busy, _, err := ReadSystemCPU()
	cpu.System, errs[4] = Num(busy), err
	for _, p := range l.paths {
		lk, err := l.cli.Netlink().LinkByName(p.ClientIf)
		if err != nil || lk.Attrs().Statistics == nil {
			errs = append(errs, fmt.Errorf("RX bytes of %s: %v", p.ClientIf, err))
			continue
		}
		rx = append(rx, lk.Attrs().Statistics.RxBytes)
	}
	return cpu, rx, errors.Join(errs...)
}

// idleLoad returns the CPUs busy on average over the idle window.
func (l *lab) idleLoad(ctx context.Context) (float64, error) {
	if l.cfg.Idle <= 0 {
		return 0, nil
	}
	busy0, _, err := ReadSystemCPU()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(l.cfg.Idle):
	}
	busy1, _, err := ReadSystemCPU()
	return (busy1 - busy0) / time.Since(t0).Seconds(), err
}

func (l *lab) measure(ctx context.Context, t runner.Session, rep int) (Sample, error) {
	bg, err := l.idleLoad(ctx)
	if err != nil {
		return Sample{}, err
	}
	cli, srv := t.PIDs()
	// The status queries stay outside the snapshots: they cost the daemons CPU.
	cBefore, err := t.Counters(ctx)
	if err != nil {
		return Sample{}, err
	}
	cpu0, rx0, err := l.snapshot(cli, srv)
	if err != nil {
		return Sample{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	res, err := download(dctx, t, l.cfg.Size, l.cfg.Parallel)
	cancel()
	if err != nil {
		return Sample{}, err
	}
	cpu1, rx1, err := l.snapshot(cli, srv)
	if err != nil {
		return Sample{}, err
	}
	cAfter, err := t.Counters(ctx)
	if err != nil {
		return Sample{}, err
	}
	// VmHWM is the peak since the daemon started, so reading it now, while
	// the daemons still run, covers the warm-up and the timed download.
	rssC, errC := perProcess(cli, "client daemon", "peak RSS", "status", ParseVmHWM)
	rssS, errS := perProcess(srv, "server daemon", "peak RSS", "status", ParseVmHWM)
	if err := errors.Join(errC, errS); err != nil {
		return Sample{}, err
	}
	s := Sample{
		Rep: rep + 1, Bytes: res.Bytes, Seconds: res.Duration.Seconds(), Mbps: res.GoodputMbps(),
		CPU: cpu1.plus(-1, cpu0), BackgroundCores: bg, TunnelRSSMB: PeakRSS{rssC / 1e6, rssS / 1e6}, Batching: batchingOf(cBefore, cAfter),
	}
	for i := range rx1 {
		s.PathBytes = append(s.PathBytes, rx1[i]-rx0[i])
	}
	return s, nil
}

// download fetches size bytes from t as k concurrent HTTP downloads of
// size/k bytes (the first size%k one byte more, so that they add up to
// size), each on a connection of its own that t.Dial opens and checks. The
// time runs from the first request to the last byte of any of them, as
// httpbench times one; MaxStall is the longest of any. The first error
// cancels the others.
func download(ctx context.Context, t runner.Session, size int64, k int) (httpbench.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	starts, res, errs := make([]time.Time, k), make([]httpbench.Result, k), make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		n := size / int64(k)
		if int64(i) < size%int64(k) {
			n++
		}
		wg.Go(func() {
			starts[i] = time.Now()
			if res[i], errs[i] = httpbench.Fetch(ctx, httpbench.URL(t.Target(), n), httpbench.Options{Dial: t.Dial}); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	var failed []error
	var sum httpbench.Result
	var last time.Time
	for i, err := range errs {
		// One cut short by another's failure (or by Ctrl-C) says nothing new.
		if err != nil && !errors.Is(err, context.Canceled) {
			failed = append(failed, fmt.Errorf("download %d of %d: %w", i+1, k, err))
		}
		sum.Bytes += res[i].Bytes
		sum.MaxStall = max(sum.MaxStall, res[i].MaxStall)
		if end := starts[i].Add(res[i].Duration); end.After(last) {
			last = end
		}
	}
	// Without a failure of its own, ctx is canceled only from above.
	if err := cmp.Or(errors.Join(failed...), ctx.Err()); err != nil {
		return httpbench.Result{}, err
	}
	sum.Duration = last.Sub(slices.MinFunc(starts, time.Time.Compare))
	return sum, nil
}
