package runner

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// pathFor returns the testbed path a single-path transport uses: the named
// one, or the primary.
func pathFor(env *Env, name string) (testbed.Path, error) {
	ps := env.TB.Plan.Paths
	if name == "" {
		return ps[0], nil
	}
	for _, p := range ps {
		if p.Name == name {
			return p, nil
		}
	}
	return testbed.Path{}, fmt.Errorf("no path %q", name)
}

// dialFrom opens a connection inside ns from local (zero: the routing table
// chooses), optionally as MPTCP.
func dialFrom(ns *netns.Namespace, local netip.Addr, cc string, mptcp bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		d := net.Dialer{Control: httpbench.Control(cc)}
		if local.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
		}
		d.SetMultipathTCP(mptcp)
		err = ns.Do(func() error {
			c, err = d.DialContext(ctx, "tcp4", addr)
			return err
		})
		return c, err
	}
}

// direct: the download over one path with plain TCP, from the path's own
// address so the client's policy rule sends it through that path's link.
type directSession struct {
	target string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

func startDirect(ctx context.Context, env *Env) (Session, error) {
	p, err := pathFor(env, env.Point.Transport.Path)
	if err != nil {
		return nil, err
	}
	return &directSession{
		target: netip.AddrPortFrom(env.Web.Addr, WebPort).String(),
		dial:   dialFrom(env.TB.Client(), p.ClientAddr, env.CC, false),
	}, nil
}

func (s *directSession) Target() string { return s.target }
func (s *directSession) Dial(ctx context.Context, n, a string) (net.Conn, error) {
	return s.dial(ctx, n, a)
}
func (s *directSession) Counters(context.Context) (Counters, error) { return Counters{}, nil }
func (s *directSession) Close() error                               { return nil }

// MPTCPLimit is the subflow and add_addr_accepted limit set in the client
// and web namespaces: above any path count a scenario reaches, so the
// in-kernel path manager's limits never decide the mesh.
const MPTCPLimit = 8

// MPTCPCommands is the `ip mptcp` configuration of the client for paths: the
// limits, and one subflow endpoint for every path after the first (the
// first carries the initial subflow). The kernel's in-kernel path manager
// then opens a subflow from each endpoint to the server's address, which with
// one server address is the full mesh.
func MPTCPCommands(paths []testbed.Path) [][]string {
	out := [][]string{{"mptcp", "limits", "set", "subflow", strconv.Itoa(MPTCPLimit), "add_addr_accepted", strconv.Itoa(MPTCPLimit)}}
	for i, p := range paths {
		if i == 0 {
			continue
		}
		out = append(out, []string{"mptcp", "endpoint", "add", p.ClientAddr.String(), "dev", p.ClientIf, "subflow"})
	}
	return out
}

type mptcpSession struct {
	directSession
	env *Env
}

func startMPTCP(ctx context.Context, env *Env) (Session, error) {
	cli, web := env.TB.Client(), env.TB.Web()
	for _, ns := range []*netns.Namespace{cli, web} {
		v, err := ns.Sysctl("net.mptcp.enabled")
		if err != nil {
			if os.IsNotExist(err) || strings.Contains(err.Error(), "no such file") {
				return nil, fmt.Errorf("MPTCP is not available: this kernel has no net.mptcp (CONFIG_MPTCP)")
			}
			return nil, fmt.Errorf("MPTCP: %w", err)
		}
		if strings.TrimSpace(v) != "1" {
			return nil, fmt.Errorf("MPTCP is disabled in namespace %s (net.mptcp.enabled=%s)", ns, strings.TrimSpace(v))
		}
	}
	s := &mptcpSession{env: env}
	if _, err := web.Exec(ctx, "ip", MPTCPCommands(nil)[0]...); err != nil {
		return nil, fmt.Errorf("MPTCP limits in the web namespace: %w", err)
	}
	for _, args := range MPTCPCommands(env.TB.Plan.Paths) {
		if _, err := cli.Exec(ctx, "ip", args...); err != nil {
			s.Close()
			return nil, fmt.Errorf("MPTCP path manager: %w", err)
		}
	}
	first := env.TB.Plan.Paths[0]
	dial := dialFrom(cli, first.ClientAddr, env.CC, true)
	s.target = netip.AddrPortFrom(env.Web.Addr, WebPortMPTCP).String()
	s.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if ok, err := c.(*net.TCPConn).MultipathTCP(); err != nil || !ok {
			c.Close()
			return nil, fmt.Errorf("MPTCP: the connection fell back to plain TCP (is MPTCP enabled at both ends?)")
		}
		return c, nil
	}
	return s, nil
}

func (s *mptcpSession) Close() error {
	_, err := s.env.TB.Client().Exec(context.Background(), "ip", "mptcp", "endpoint", "flush")
	return err
}
