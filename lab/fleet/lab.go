package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

const (
	stopTimeout  = 5 * time.Second
	readyTimeout = 10 * time.Second // for the HTTP server and a server daemon
	// MetricsPort is where each server's control HTTP server (health and
	// status for the balancer) listens on its link address.
	MetricsPort = 9273
)

// daemon is one `braid up` in its namespace: its directory holds its key,
// config and control socket.
type daemon struct {
	name string
	ns   *netns.Namespace
	dir  string

	mu    sync.Mutex
	child *proc.Child // replaced when a killed server is started again
}

func (d *daemon) file(name string) string { return filepath.Join(d.dir, name) }
func (d *daemon) sock() string            { return d.file("control.sock") }

func (d *daemon) current() *proc.Child {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.child
}

// start starts `braid up` on the daemon's config.
func (d *daemon) start(cmd runner.BraidCommand) error {
	c, err := cmd.Command("up", "-c", d.file("braid.toml"))
	if err != nil {
		return err
	}
	child, err := proc.Start(d.ns, d.name, c)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.child = child
	d.mu.Unlock()
	return nil
}

// write writes the daemon's key and config into its directory.
func (d *daemon) write(key keys.Key, f *config.File) error {
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return err
	}
	k, err := key.MarshalText()
	if err != nil {
		return err
	}
	f.PrivateKeyFile, f.Control.Socket = "braid.key", d.sock()
	c, err := f.Encode()
	if err != nil {
		return err
	}
	return errors.Join(os.WriteFile(d.file("braid.key"), k, 0o600), os.WriteFile(d.file("braid.toml"), c, 0o600))
}

// client is one client daemon with its download's progress.
type client struct {
	daemon
	index  int
	pub    string // its public key, as the servers' status names it
	inner  netip.Prefix
	paths  []netip.Addr // the source address of each path
	dialer runner.Dialer
	dl     progress
}

// lab is the fleet's namespaces and daemons.
type lab struct {
	cfg             Config
	dir             string
	router, backend *netns.Namespace
	servers         []*daemon
	clients         []*client
	web             *proc.Child
	balancer        *balancer
	all             []*netns.Namespace
}

func (l *lab) newNS(sysctls map[string]string) (*netns.Namespace, error) {
	ns, err := netns.New(cmp.Or(l.cfg.Prefix, testbed.Prefix))
	if err != nil {
		return nil, err
	}
	l.all = append(l.all, ns)
	// rp_filter's default first: the veths take it when they are made.
	for _, k := range []string{"net.ipv4.conf.default.rp_filter", "net.ipv4.conf.all.rp_filter", "net.ipv4.ip_forward"} {
		if v, ok := sysctls[k]; ok {
			if err := ns.SetSysctl(k, v); err != nil {
				return nil, err
			}
		}
	}
	return ns, nil
}

var (
	endSysctls    = map[string]string{"net.ipv4.conf.default.rp_filter": "0", "net.ipv4.conf.all.rp_filter": "0"}
	routerSysctls = map[string]string{"net.ipv4.conf.default.rp_filter": "0", "net.ipv4.conf.all.rp_filter": "0", "net.ipv4.ip_forward": "1"}
)

// build makes the namespaces, links, keys and configs and starts the HTTP
// server, the servers, the balancer and the clients, in that order, each
// ready before the next. On error everything made is removed.
func build(ctx context.Context, cfg Config) (l *lab, err error) {
	if _, err := netns.Cleanup(cmp.Or(cfg.Prefix, testbed.Prefix)); err != nil {
		return nil, fmt.Errorf("removing stale namespaces: %w", err)
	}
	l = &lab{cfg: cfg}
	defer func() {
		if err != nil {
			l.close()
			l = nil
		}
	}()
	if l.dir, err = os.MkdirTemp("", "braid-fleet-"); err != nil {
		return nil, err
	}
	if err := l.buildNet(); err != nil {
		return nil, err
	}
	srvKey, err := keys.Generate()
	if err != nil {
		return nil, err
	}
	var peers []config.FilePeer
	for _, c := range l.clients {
		key, err := keys.Generate()
		if err != nil {
			return nil, err
		}
		c.pub = key.Public().String()
		peers = append(peers, config.FilePeer{Name: c.name, PublicKey: c.pub, AllowedIPs: []string{netip.PrefixFrom(c.inner.Addr(), 32).String()}})
		if err := c.write(key, l.clientFile(srvKey, c)); err != nil {
			return nil, err
		}
	}
	for j, s := range l.servers {
		if err := s.write(srvKey, l.serverFile(j, peers)); err != nil {
			return nil, err
		}
	}
	cfg.Progress(fmt.Sprintf("%d namespaces up; starting the HTTP server and %d server(s)", len(l.all), len(l.servers)))
	if err := l.startWeb(ctx); err != nil {
		return nil, err
	}
	for _, s := range l.servers {
		if err := l.startServer(ctx, s); err != nil {
			return nil, err
		}
	}
	if len(l.servers) > 1 {
		if l.balancer, err = l.startBalancer(ctx); err != nil {
			return nil, fmt.Errorf("balancer: %w", err)
		}
	}
	cfg.Progress(fmt.Sprintf("starting %d client daemons", len(l.clients)))
	return l, l.startClients(ctx)
}

// buildNet makes the router, the backend, the servers and the clients with
// their links and routes (docs/lab.md, "Fleet").
func (l *lab) buildNet() (err error) {
	cfg := l.cfg
	if l.router, err = l.newNS(routerSysctls); err != nil {
		return err
	}
	if l.backend, err = l.newNS(endSysctls); err != nil {
		return err
	}
	if err := netns.AddVeth(
		netns.VethEnd{NS: l.router, Name: lanIf, Addrs: []netip.Prefix{netip.PrefixFrom(backendRouter, backendLAN.Bits())}},
		netns.VethEnd{NS: l.backend, Name: lanIf, Addrs: []netip.Prefix{netip.PrefixFrom(backendAddr, backendLAN.Bits())}}); err != nil {
		return err
	}
	if err := l.backend.AddRoute(netns.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: backendRouter}); err != nil {
		return err
	}
	for j := range cfg.Servers {
		ns, err := l.newNS(routerSysctls)
		if err != nil {
			return err
		}
		s := &daemon{name: "braid server " + strconv.Itoa(j), ns: ns, dir: filepath.Join(l.dir, "server"+strconv.Itoa(j))}
		l.servers = append(l.servers, s)
		r, a := serverLink(j)
		if err := netns.AddVeth(netns.VethEnd{NS: l.router, Name: routerServerIf(j), Addrs: []netip.Prefix{r}},
			netns.VethEnd{NS: ns, Name: serverIf, Addrs: []netip.Prefix{a}}); err != nil {
			return err
		}
		if err := ns.AddRoute(netns.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: r.Addr()}); err != nil {
			return err
		}
		if cfg.Servers > 1 { // direct server return: each server answers from the address the balancer serves
			if err := ns.AddAddr("lo", netip.PrefixFrom(VIP, 32)); err != nil {
				return err
			}
		}
		if cfg.Uplink > 0 {
			if err := ns.Shape(serverIf, netns.TBF{Rate: cfg.Uplink}); err != nil {
				return err
			}
		}
	}
	if cfg.Servers == 1 { // without a balancer the router sends the tunnel's inner addresses to the one server
		_, a := serverLink(0)
		if err := l.router.AddRoute(netns.Route{Dst: TunnelPrefix, Via: a.Addr()}); err != nil {
			return err
		}
	}
	for i := range cfg.Clients {
		ns, err := l.newNS(endSysctls)
		if err != nil {
			return err
		}
		c := &client{daemon: daemon{name: fmt.Sprintf("braid client %d", i), ns: ns, dir: filepath.Join(l.dir, "client"+strconv.Itoa(i))},
			index: i, inner: clientInner(i)}
		for k := range cfg.Paths {
			r, a := clientPathLink(i, k, cfg.Paths)
			if err := netns.AddVeth(netns.VethEnd{NS: l.router, Name: routerClientIf(i, k), Addrs: []netip.Prefix{r}},
				netns.VethEnd{NS: ns, Name: clientIf(k), Addrs: []netip.Prefix{a}}); err != nil {
				return err
			}
			// One default route per path, so that a daemon socket bound to
			// the path's device finds its gateway there.
			if err := ns.AddRoute(netns.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: r.Addr(), Dev: clientIf(k), Metric: k + 1}); err != nil {
				return err
			}
			c.paths = append(c.paths, a.Addr())
		}
		c.dialer = runner.Dialer{NS: ns, CC: cfg.CC, Via: netip.PrefixFrom(c.inner.Addr(), 32)}
		l.clients = append(l.clients, c)
	}
	return nil
}

// serverAddr is where the clients send: the balancer's address, or the
// one server's.
func (l *lab) serverAddr() netip.Addr {
	if len(l.servers) > 1 {
		return VIP
	}
	_, a := serverLink(0)
	return a.Addr()
}

func (l *lab) security() config.FileSecurity {
	var s config.FileSecurity
	if r := l.cfg.RekeyAfter; r > 0 {
		s.RekeyAfterTime = r.String()
		if r >= config.DefaultRejectAfterTime {
			s.RejectAfterTime = (r * 3 / 2).String()
		}
	}
	return s
}

func (l *lab) clientFile(srvKey keys.Key, c *client) *config.File {
	var ifs []string
	for k := range l.cfg.Paths {
		ifs = append(ifs, clientIf(k))
	}
	f := runner.BraidClientFile(srvKey, "", []string{netip.AddrPortFrom(l.serverAddr(), runner.BraidPort).String()}, ifs)
	f.Tun.Address, f.Tun.Routes = []string{c.inner.String()}, []string{backendLAN.String()}
	f.LogLevel, f.Security = l.cfg.LogLevel, l.security()
	return f
}

func (l *lab) serverFile(j int, peers []config.FilePeer) *config.File {
	listen := netip.AddrPortFrom(netip.IPv4Unspecified(), runner.BraidPort)
	f := &config.File{
		Role: string(config.RoleServer), LogLevel: l.cfg.LogLevel, Security: l.security(),
		Tun:    config.FileTun{Address: []string{netip.PrefixFrom(serverInner, TunnelPrefix.Bits()).String()}},
		Server: &config.FileServer{Clients: peers},
	}
	if len(l.servers) > 1 {
		listen = netip.AddrPortFrom(VIP, runner.BraidPort)
		f.Server.ServerID, f.Server.ServerIDBits = int64(j), int64(serverIDBits(len(l.servers)))
		_, a := serverLink(j)
		f.Control.Metrics = netip.AddrPortFrom(a.Addr(), MetricsPort).String()
	}
	f.Server.Listen = []string{listen.String()}
	return f
}

// MinServerIDBits is the fleet's least server_id_bits with a balancer:
// the balancer maps the values no server has by hashing over the live
// servers, so with 256 values fresh handshakes spread evenly, where with
// the fewest bits (2 for 3 servers) one server would take half of them.
const MinServerIDBits = 8

// serverIDBits is the server_id_bits of n servers: at least
// MinServerIDBits, more if n needs them (0 for one server: no balancer).
func serverIDBits(n int) int {
	if n <= 1 {
		return 0
	}
	b := MinServerIDBits
	for 1<<b < n {
		b++
	}
	return b
}

func (l *lab) startWeb(ctx context.Context) (err error) {
	cmd, err := l.cfg.Braid.Command("lab", "serve", "--addr", netip.AddrPortFrom(netip.IPv4Unspecified(), WebPort).String(), "--cc", l.cfg.CC)
	if err != nil {
		return err
	}
	if l.web, err = proc.Start(l.backend, "HTTP server", cmd); err != nil {
		return err
	}
	target := netip.AddrPortFrom(backendAddr, WebPort).String()
	return proc.Await(ctx, readyTimeout, 20*time.Millisecond, func() error {
		c, err := runner.Dialer{NS: l.router}.Dial(ctx, "tcp4", target)
		if err != nil {
			return fmt.Errorf("HTTP server not reachable at %s after %v: %v", target, readyTimeout, err)
		}
		return c.Close()
	}, l.web)
}

// startServer starts server s and waits for its control socket.
func (l *lab) startServer(ctx context.Context, s *daemon) error {
	if err := s.start(l.cfg.Braid); err != nil {
		return err
	}
	return proc.Await(ctx, readyTimeout, 20*time.Millisecond, func() error {
		if _, err := control.Query(s.sock()); err != nil {
			return fmt.Errorf("%s: no status after %v: %v", s.name, readyTimeout, err)
		}
		return nil
	}, s.current())
}

// startClients starts the client daemons in an order the seed shuffles, a
// few at a time, each ready (a usable daemon path on every path) before
// its slot goes to the next: dozens of handshakes at once on two cores
// would time each other out.
func (l *lab) startClients(ctx context.Context) error {
	order := rand.New(rand.NewPCG(l.cfg.Seed, 0)).Perm(len(l.clients))
	slots := make(chan struct{}, l.cfg.StartConcurrently)
	errs := make([]error, len(l.clients))
	var wg sync.WaitGroup
	for _, i := range order {
		c := l.clients[i]
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if errs[i] = c.start(l.cfg.Braid); errs[i] == nil {
				errs[i] = l.awaitClient(ctx, c, runner.BraidReadyTimeout)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// usablePaths counts c's paths with a usable daemon path in st, a client's
// status or one server's: a server sees each of c's paths as its remote
// address, the client as its device.
func (c *client) usablePaths(st control.Status) int {
	return runner.UsableOn(st, len(c.paths), func(ps control.PathStatus, k int) bool {
		if ps.Device != "" {
			return ps.Device == clientIf(k)
		}
		a, err := netip.ParseAddrPort(ps.Remote)
		return err == nil && a.Addr().Unmap() == c.paths[k]
	})
}

func (l *lab) awaitClient(ctx context.Context, c *client, timeout time.Duration) error {
	got := 0
	return proc.Await(ctx, timeout, 20*time.Millisecond, func() error {
		if st, err := control.Query(c.sock()); err == nil {
			if got = c.usablePaths(st); got == len(c.paths) {
				return nil
			}
		}
		return fmt.Errorf("%s had %d of %d paths usable after %v: %s", c.name, got, len(c.paths), timeout, c.current().LastLine())
	}, c.current())
}

// close stops every daemon (at once: one by one would take seconds each
// on a loaded machine) and removes the namespaces, which takes the veths.
func (l *lab) close() {
	var wg sync.WaitGroup
	for _, c := range l.clients {
		wg.Go(func() { c.current().Stop(stopTimeout) })
	}
	wg.Wait()
	if l.balancer != nil {
		l.balancer.Close()
	}
	for _, s := range l.servers {
		wg.Go(func() { s.current().Stop(stopTimeout) })
	}
	wg.Go(func() { l.web.Stop(stopTimeout) })
	wg.Wait()
	for _, ns := range l.all {
		ns.Close()
	}
	if l.dir != "" {
		os.RemoveAll(l.dir)
	}
}
