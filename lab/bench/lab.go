package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// The two veth pairs: path i joins a-pI (client, 198.18.I.1/24) and b-pI
// (server, 198.18.I.2/24).
var benchPaths = []testbed.Path{
	{Name: "p1", Index: 0, ClientIf: "a-p1", ServerIf: "b-p1",
		ClientAddr: netip.MustParseAddr("198.18.1.1"), ServerAddr: netip.MustParseAddr("198.18.1.2"),
		Subnet: netip.MustParsePrefix("198.18.1.0/24")},
	{Name: "p2", Index: 1, ClientIf: "a-p2", ServerIf: "b-p2",
		ClientAddr: netip.MustParseAddr("198.18.2.1"), ServerAddr: netip.MustParseAddr("198.18.2.2"),
		Subnet: netip.MustParsePrefix("198.18.2.0/24")},
}

// lab is the two namespaces, their veth pairs and the HTTP server.
type lab struct {
	cfg      Config
	cli, srv *netns.Namespace
	dir      string
	web      *proc.Child
}

func newLab(cfg Config) (_ *lab, err error) {
	if _, err := netns.Cleanup(cfg.Prefix); err != nil {
		return nil, fmt.Errorf("removing stale namespaces: %w", err)
	}
	l := &lab{cfg: cfg}
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
	for _, p := range benchPaths {
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
	dial := dialIn(l.cli, "", netip.Prefix{})
	deadline := time.Now().Add(readyTimeout)
	for {
		c, err := dial(context.Background(), "tcp4", target)
		if err == nil {
			c.Close()
			return l, nil
		}
		if l.web.Exited() {
			return nil, fmt.Errorf("HTTP server exited: %s", l.web.LastLine())
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("HTTP server not reachable at %s after %v: %v", target, readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// tunnel is one case set up and ready for downloads.
type tunnel interface {
	// Target is the HTTP server's host:port as the client reaches it.
	Target() string
	// Dial opens the download's connection in the client namespace and
	// checks that it takes the way under test.
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
	// PIDs are the tunnel daemons in the client and the server (0: none).
	PIDs() (cli, srv int)
	// Detail describes the setup for the report.
	Detail() string
	Close()
}

func (l *lab) start(ctx context.Context, name string) (tunnel, error) {
	switch name {
	case CaseKernel:
		return &kernelTunnel{
			target: netip.AddrPortFrom(benchPaths[0].ServerAddr, WebPort).String(),
			dial:   dialIn(l.cli, l.cfg.CC, benchPaths[0].Subnet),
		}, nil
	case CaseBraid1:
		return startBraid(ctx, l, 1)
	case CaseBraid2:
		return startBraid(ctx, l, 2)
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
	wctx, cancel := context.WithTimeout(ctx, MinTimeout)
	_, err = httpbench.Fetch(wctx, httpbench.URL(t.Target(), WarmupSize), httpbench.Options{Dial: t.Dial})
	cancel()
	if err != nil {
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
	cpuOf := func(pid int, who string) (Num, error) {
		if pid < 0 {
			return NaN(), nil
		}
		v, err := ProcessCPU(pid)
		if err != nil {
			return NaN(), fmt.Errorf("CPU time of the %s: %w", who, err)
		}
		return Num(v), nil
	}
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
	for _, p := range benchPaths {
		lk, err := l.cli.Netlink().LinkByName(p.ClientIf)
		if err != nil || lk.Attrs().Statistics == nil {
			errs = append(errs, fmt.Errorf("RX bytes of %s: %v", p.ClientIf, err))
			continue
		}
		s.rx = append(s.rx, lk.Attrs().Statistics.RxBytes)
	}
	return s, errors.Join(errs...)
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

func (l *lab) measure(ctx context.Context, t tunnel, rep int) (Sample, error) {
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
	before, err := l.snapshot(cli, srv)
	if err != nil {
		return Sample{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	res, err := httpbench.Fetch(dctx, httpbench.URL(t.Target(), l.cfg.Size), httpbench.Options{Dial: t.Dial})
	cancel()
	if err != nil {
		return Sample{}, err
	}
	after, err := l.snapshot(cli, srv)
	if err != nil {
		return Sample{}, err
	}
	s := Sample{
		Rep: rep + 1, Bytes: res.Bytes, Seconds: res.Duration.Seconds(), Mbps: res.GoodputMbps(),
		CPU: after.cpu.add(before.cpu.scale(-1)), BackgroundCores: bg,
	}
	for i := range after.rx {
		s.PathBytes = append(s.PathBytes, after.rx[i]-before.rx[i])
	}
	return s, nil
}

// dialIn returns a dialer that opens TCP connections inside ns with
// congestion control cc and, if via is valid, refuses a connection whose
// local address is not in via: the proof that it took the way under test.
func dialIn(ns *netns.Namespace, cc string, via netip.Prefix) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		d := net.Dialer{Control: httpbench.Control(cc)}
		err = ns.Do(func() error {
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		if err != nil || !via.IsValid() {
			return c, err
		}
		la, _ := c.LocalAddr().(*net.TCPAddr)
		if a, ok := netip.AddrFromSlice(la.IP); !ok || !via.Contains(a.Unmap()) {
			c.Close()
			return nil, fmt.Errorf("the connection left from %v, not from %v", c.LocalAddr(), via)
		}
		return c, nil
	}
}

type kernelTunnel struct {
	target string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (k *kernelTunnel) Target() string { return k.target }
func (k *kernelTunnel) Dial(ctx context.Context, n, a string) (net.Conn, error) {
	return k.dial(ctx, n, a)
}
func (k *kernelTunnel) PIDs() (int, int) { return 0, 0 }
func (k *kernelTunnel) Detail() string {
	return fmt.Sprintf("plain TCP from %v to %v over veth %s (MTU 1500)", benchPaths[0].ClientAddr, benchPaths[0].ServerAddr, benchPaths[0].ClientIf)
}
func (k *kernelTunnel) Close() {}
