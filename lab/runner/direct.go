package runner

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

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

func startDirect(ctx context.Context, env *Env) (Session, error) {
	p, err := pathFor(env, env.Point.Transport.Path)
	if err != nil {
		return nil, err
	}
	return DirectSession(env.TB.Client(), p, netip.AddrPortFrom(env.Web.Addr, WebPort), env.CC), nil
}

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

// setupMPTCP checks MPTCP in the client and peer namespaces and configures
// the client's in-kernel path manager (MPTCPSubflowCommands). It returns the
// commands that undo it: the testbed outlives the point.
func setupMPTCP(ctx context.Context, env *Env, peer *netns.Namespace, subflows int) (undo [][]string, err error) {
	cli := env.TB.Client()
	for _, ns := range []*netns.Namespace{cli, peer} {
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
	if _, err := peer.Exec(ctx, "ip", MPTCPCommands(nil)[0]...); err != nil {
		return nil, fmt.Errorf("MPTCP limits in %s: %w", peer, err)
	}
	do, undo := MPTCPSubflowCommands(env.TB.Plan.Paths, subflows)
	for i, args := range do {
		if _, err := cli.Exec(ctx, "ip", args...); err != nil {
			runAll(cli, undo[len(undo)-i:])
			return nil, fmt.Errorf("MPTCP path manager: %w", err)
		}
	}
	return undo, nil
}

// runAll runs ip commands, best effort (an undo list).
func runAll(ns *netns.Namespace, cmds [][]string) {
	for _, args := range cmds {
		ns.Exec(context.Background(), "ip", args...)
	}
}

// MPTCPSubflowCommands is the client's path manager set-up for an MPTCP
// tunnel and the commands that undo it, in reverse order. subflows = 1 is
// MPTCPCommands: a subflow endpoint on every path after the first, the full
// mesh with one server address. subflows = n > 1 is the paper's
// ndiffports-like variant, n subflows on every path: the in-kernel path
// manager takes one endpoint per address, so each path gets n-1 extra
// addresses (the path's address + 16·k) with a policy rule into the path's
// routing table, each an endpoint of its own.
func MPTCPSubflowCommands(paths []testbed.Path, subflows int) (do, undo [][]string) {
	do = MPTCPCommands(paths)
	undo = [][]string{{"mptcp", "endpoint", "flush"}}
	for _, p := range paths {
		a := p.ClientAddr
		for k := 1; k < subflows; k++ {
			for range 16 {
				a = a.Next()
			}
			pfx := netip.PrefixFrom(a, p.Subnet.Bits()).String()
			host := netip.PrefixFrom(a, 32).String()
			table := strconv.Itoa(p.Table)
			do = append(do,
				[]string{"addr", "add", pfx, "dev", p.ClientIf},
				[]string{"rule", "add", "from", host, "table", table},
				[]string{"mptcp", "endpoint", "add", a.String(), "dev", p.ClientIf, "subflow"})
			undo = append(undo,
				[]string{"rule", "del", "from", host, "table", table},
				[]string{"addr", "del", pfx, "dev", p.ClientIf})
		}
	}
	return do, undo
}

type mptcpSession struct {
	BaseSession
	env  *Env
	undo [][]string
}

func startMPTCP(ctx context.Context, env *Env) (Session, error) {
	undo, err := setupMPTCP(ctx, env, env.TB.Web(), 1)
	if err != nil {
		return nil, err
	}
	first := env.TB.Plan.Paths[0]
	return &mptcpSession{env: env, undo: undo, BaseSession: BaseSession{
		Dialer: Dialer{NS: env.TB.Client(), From: first.ClientAddr, CC: env.CC, MPTCP: true},
		To:     netip.AddrPortFrom(env.Web.Addr, WebPortMPTCP).String(),
	}}, nil
}

func (s *mptcpSession) Close() error {
	runAll(s.env.TB.Client(), s.undo)
	return nil
}
