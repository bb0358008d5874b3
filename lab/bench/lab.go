package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// benchPaths are the veth pairs: path i joins a-pI (client, 198.18.I.1/24)
// and b-pI (server, 198.18.I.2/24).
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

// newLab builds the first veths of benchPaths.
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
	dial := runner.Dialer{NS: l.cli}.Dial
	err = proc.Await(context.Background(), readyTimeout, 20*time.Millisecond, func() error {
		c, err := dial(context.Background(), "tcp4", target)
		if err != nil {
			return fmt.Errorf("HTTP server not reachable at %s after %v: %v", target, readyTimeout, err)
		}
		c.Close()
		return nil
	}, l.web)
	if err != nil {
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

func (l *lab) progress(format string, args ...any) {
	if l.cfg.Progress != nil {
		l.cfg.Progress(fmt.Sprintf(format, args...))
	}
}

func (l *lab) start(ctx context.Context, name string) (runner.Session, error) {
	switch name {
	case CaseKernel:
		return runner.DirectSession(l.cli, benchPaths[0], netip.AddrPortFrom(benchPaths[0].ServerAddr, WebPort), l.cfg.CC), nil
	case CaseBraid1, CaseBraid2, CaseBraid4:
		return startBraid(ctx, l, braidPaths[name])
	case CaseWireGuardGo:
		return startWireGuard(ctx, l)
	}
	return nil, fmt.Errorf("unknown case %q", name)
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

// snap is the cumulative counters bracketing a download.
type snap struct {
	cpu CPU
	rx  []uint64
}

func (l *lab) snapshot(cliPID, srvPID int) (snap, error) {
	var s snap
	cpuOf := func(pid int, who string) (Num, error) { return perProcess(pid, who, "CPU time", ProcessCPU) }
	var err error
	var errs []error
	s.cpu.TunnelClient, err = cpuOf(cliPID, "client daemon")
	errs = append(errs, err)
	s.cpu.TunnelServer, err = cpuOf(srvPID, "server daemon")
	errs = append(errs, err)
	s.cpu.AppClient, err = cpuOf(0, "bench process")
	errs = append(errs, err)
	s.cpu.AppServer, err = cpuOf(l.web.PID(), "HTTP server")
	errs = append(errs, err)
	sys, err := ReadSystemCPU()
	errs = append(errs, err)
	s.cpu.System = Num(sys.Busy)
	for _, p := range l.paths {
		lk, err := l.cli.Netlink().LinkByName(p.ClientIf)
		if err != nil || lk.Attrs().Statistics == nil {
			errs = append(errs, fmt.Errorf("RX bytes of %s: %v", p.ClientIf, err))
			continue
		}
		s.rx = append(s.rx, lk.Attrs().Statistics.RxBytes)
	}
	return s, errors.Join(errs...)
}

// perProcess reads what of process pid (0: this one, < 0: none, giving
// NaN), naming who in an error.
func perProcess(pid int, who, what string, read func(pid int) (float64, error)) (Num, error) {
	if pid < 0 {
		return stats.NaN(), nil
	}
	v, err := read(pid)
	if err != nil {
		return stats.NaN(), fmt.Errorf("%s of the %s: %w", what, who, err)
	}
	return Num(v), nil
}

// idleLoad returns the CPUs busy on average over the idle window.
func (l *lab) idleLoad(ctx context.Context) (float64, error) {
	if l.cfg.Idle <= 0 {
		return 0, nil
	}
	s0, err := ReadSystemCPU()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(l.cfg.Idle):
	}
	s1, err := ReadSystemCPU()
	if err != nil {
		return 0, err
	}
	return (s1.Busy - s0.Busy) / time.Since(t0).Seconds(), nil
}

func (l *lab) measure(ctx context.Context, t runner.Session, rep int) (Sample, error) {
	bg, err := l.idleLoad(ctx)
	if err != nil {
		return Sample{}, err
	}
	cli, srv := t.PIDs()
	if cli == 0 {
		cli = -1
	}
	if srv == 0 {
		srv = -1
	}
	cBefore, err := t.Counters(ctx)
	if err != nil {
		return Sample{}, err
	}
	before, err := l.snapshot(cli, srv)
	if err != nil {
		return Sample{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	res, err := download(dctx, t, l.cfg.Size, l.cfg.Parallel)
	cancel()
	if err != nil {
		return Sample{}, err
	}
	after, err := l.snapshot(cli, srv)
	if err != nil {
		return Sample{}, err
	}
	cAfter, err := t.Counters(ctx)
	if err != nil {
		return Sample{}, err
	}
	bat := batchingOf(cBefore, cAfter)
	// VmHWM is the peak since the daemon started, so reading it now, while
	// the daemons still run, covers the warm-up and the timed download.
	rssOf := func(pid int, who string) (Num, error) {
		b, err := perProcess(pid, who, "peak RSS", ProcessPeakRSS)
		return b / 1e6, err
	}
	var rss PeakRSS
	var errC, errS error
	rss.Client, errC = rssOf(cli, "client daemon")
	rss.Server, errS = rssOf(srv, "server daemon")
	if err := errors.Join(errC, errS); err != nil {
		return Sample{}, err
	}
	s := Sample{
		Rep: rep + 1, Bytes: res.Bytes, Seconds: res.Duration.Seconds(), Mbps: res.GoodputMbps(),
		CPU: after.cpu.add(before.cpu.scale(-1)), BackgroundCores: bg, TunnelRSSMB: rss, Batching: bat,
	}
	for i := range after.rx {
		s.PathBytes = append(s.PathBytes, after.rx[i]-before.rx[i])
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
	type part struct {
		start time.Time
		res   httpbench.Result
		err   error
	}
	parts := make([]part, k)
	var wg sync.WaitGroup
	for i := range parts {
		n := size / int64(k)
		if int64(i) < size%int64(k) {
			n++
		}
		wg.Go(func() {
			p := &parts[i]
			p.start = time.Now()
			if p.res, p.err = httpbench.Fetch(ctx, httpbench.URL(t.Target(), n), httpbench.Options{Dial: t.Dial}); p.err != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	var sum httpbench.Result
	var first, last time.Time
	var errs []error
	canceled := false
	for i, p := range parts {
		if errors.Is(p.err, context.Canceled) {
			// Cut short by another's failure (or by Ctrl-C): nothing new.
			canceled = true
		} else if p.err != nil {
			errs = append(errs, fmt.Errorf("download %d of %d: %w", i+1, k, p.err))
		}
		sum.Bytes += p.res.Bytes
		sum.MaxStall = max(sum.MaxStall, p.res.MaxStall)
		if first.IsZero() || p.start.Before(first) {
			first = p.start
		}
		if end := p.start.Add(p.res.Duration); end.After(last) {
			last = end
		}
	}
	if len(errs) > 0 {
		return httpbench.Result{}, errors.Join(errs...)
	}
	if canceled {
		return httpbench.Result{}, context.Canceled
	}
	sum.Duration = last.Sub(first)
	return sum, nil
}
