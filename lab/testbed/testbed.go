package testbed

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
)

// Options of Build.
type Options struct {
	// Prefix names the namespaces; "" = Prefix. Stale namespaces with this
	// prefix (their creator is dead) are removed first.
	Prefix string
	// Seed seeds the emulators' loss and jitter.
	Seed uint64
	// Emulator is the link emulator backend, EmulatorUserspace ("") or
	// EmulatorNetem (ResolveEmulator turns a user's choice into one).
	Emulator string
}

// Testbed is a running topology. Close removes it.
type Testbed struct {
	Plan *Plan
	// Skipped lists sysctls a namespace did not take and that the lab works
	// around: the congestion control when the host does not allow it in
	// namespaces (it is set per socket instead), and net.core settings a
	// kernel keeps global (read-only in a namespace). "node: key: reason".
	Skipped []string
	// Emulator is the backend the emulated links run on.
	Emulator string

	ns    map[string]*netns.Namespace
	links map[string]*linkemu.Link
	media map[string]*linkemu.Medium

	mu     sync.Mutex
	undo   []func() error
	closed bool
}

// Build creates the namespaces, links, emulators, routes and sysctls of top.
// On error everything already created is removed.
func Build(top *scenario.Topology, opt Options) (*Testbed, error) {
	plan, err := NewPlan(top, opt.Seed)
	if err != nil {
		return nil, err
	}
	return Start(plan, opt)
}

// Start executes a plan: the two-path testbed's (NewPlan) or any other
// shape a lab builds its plan for (the mesh lab's). On error everything
// already created is removed.
func Start(plan *Plan, opt Options) (tb *Testbed, err error) {
	prefix := opt.Prefix
	prefix = cmp.Or(prefix, Prefix)
	if _, err := netns.Cleanup(prefix); err != nil {
		return nil, fmt.Errorf("testbed: removing stale namespaces: %w", err)
	}
	emu := opt.Emulator
	emu = cmp.Or(emu, EmulatorUserspace)
	if emu != EmulatorUserspace && emu != EmulatorNetem {
		return nil, fmt.Errorf("testbed: unknown emulator %q", emu)
	}
	tb = &Testbed{Plan: plan, Emulator: emu, ns: map[string]*netns.Namespace{}, links: map[string]*linkemu.Link{}}
	defer func() {
		if err != nil {
			tb.Close()
			tb = nil
		}
	}()

	for _, n := range plan.Nodes {
		ns, err := netns.New(prefix)
		if err != nil {
			return tb, fmt.Errorf("testbed: node %s: %w", n.Name, err)
		}
		tb.onClose(ns.Close)
		tb.ns[n.Name] = ns
	}
	for _, n := range plan.Nodes {
		for _, s := range plan.Sysctls[n.Name] {
			if err := tb.ns[n.Name].SetSysctl(s.Key, s.Value); err != nil {
				if why, ok := tolerable(s.Key, err); ok {
					tb.Skipped = append(tb.Skipped, fmt.Sprintf("%s: %s: %s", n.Name, s.Key, why))
					continue
				}
				return tb, fmt.Errorf("testbed: node %s: sysctl %s=%s: %w", n.Name, s.Key, s.Value, err)
			}
		}
	}
	for _, v := range plan.Veths {
		a := netns.VethEnd{NS: tb.ns[v.NodeA], Name: v.IfA}
		b := netns.VethEnd{NS: tb.ns[v.NodeB], Name: v.IfB}
		if v.AddrA.IsValid() {
			a.Addrs = append(a.Addrs, v.AddrA)
		}
		if v.AddrB.IsValid() {
			b.Addrs = append(b.Addrs, v.AddrB)
		}
		// A veth goes away with either namespace: Close of the namespaces
		// (registered above) undoes this.
		if err := netns.AddVeth(a, b); err != nil {
			return tb, fmt.Errorf("testbed: veth %s/%s – %s/%s: %w", v.NodeA, v.IfA, v.NodeB, v.IfB, err)
		}
		if v.NoOffloads {
			for _, e := range []netns.VethEnd{a, b} {
				if err := linkemu.DisableOffloads(e.NS, e.Name); err != nil {
					return tb, fmt.Errorf("testbed: %s: %w", e.Name, err)
				}
			}
		}
	}
	for _, a := range plan.Addrs {
		if err := tb.ns[a.Node].AddAddr(a.If, a.Prefix); err != nil {
			return tb, fmt.Errorf("testbed: node %s: address %v on %s: %w", a.Node, a.Prefix, a.If, err)
		}
	}
	for _, pa := range plan.Paths {
		if pa.MTU > 0 {
			if err := tb.Client().SetMTU(pa.ClientIf, pa.MTU); err != nil {
				return tb, fmt.Errorf("testbed: mtu of %s: %w", pa.ClientIf, err)
			}
		}
	}
	if emu == EmulatorNetem && len(plan.Media) > 0 {
		return tb, fmt.Errorf("testbed: netem cannot make links share a medium (%s); use --emulator userspace", plan.Media[0].Name)
	}
	media := map[string]*linkemu.Medium{}
	for _, m := range plan.Media {
		media[m.Name] = linkemu.NewMedium(uint64(m.Rate), m.QueueLimit)
	}
	tb.media = media
	for _, e := range plan.Emulated {
		if m := media[e.Medium]; m != nil {
			e.AtoB.Medium, e.BtoA.Medium = m, m
			e.AtoB.QueuePackets, e.BtoA.QueuePackets = 0, 0
		}
		if emu == EmulatorNetem {
			// The bridge and qdiscs go with the link node's namespace.
			if err := startNetem(tb.ns[e.Node], e); err != nil {
				return tb, fmt.Errorf("testbed: netem on link %s: %w", e.Link, err)
			}
			continue
		}
		l, err := linkemu.Start(linkemu.Config{NS: tb.ns[e.Node], A: e.A, B: e.B, AtoB: e.AtoB, BtoA: e.BtoA})
		if err != nil {
			return tb, fmt.Errorf("testbed: emulator of link %s: %w", e.Link, err)
		}
		// Emulators close before the namespaces (undo runs in reverse).
		tb.onClose(l.Close)
		tb.links[e.Link] = l
	}
	for _, s := range plan.Shaped {
		if err := tb.ns[s.Node].Shape(s.If, s.TBF); err != nil {
			return tb, fmt.Errorf("testbed: tbf on %s/%s: %w", s.Node, s.If, err)
		}
	}
	for _, n := range plan.Nodes {
		for _, r := range plan.Routes[n.Name] {
			if err := tb.ns[n.Name].AddRoute(r); err != nil {
				return tb, fmt.Errorf("testbed: node %s: %w", n.Name, err)
			}
		}
		for _, r := range plan.Rules[n.Name] {
			if err := tb.ns[n.Name].AddRule(r); err != nil {
				return tb, fmt.Errorf("testbed: node %s: %w", n.Name, err)
			}
		}
	}
	return tb, nil
}

// tolerable says whether a failed sysctl is one the lab can do without, and
// why: a namespace refuses congestion controls the host does not allow there
// (the lab sets TCP_CONGESTION per socket), some kernels keep net.core
// buffer limits global, and a kernel without MPTCP has no net.mptcp (the
// mptcp-direct transport then fails with its own error), and a kernel
// without IPv6 has no IPv6 to switch off.
func tolerable(key string, err error) (string, bool) {
	switch {
	case key == "net.ipv4.tcp_congestion_control":
		return "not allowed in the namespace; set per socket instead (" + err.Error() + ")", true
	case errors.Is(err, fs.ErrNotExist) && slices.Contains(hostWide, key):
		return "not present in the namespace", true
	case errors.Is(err, fs.ErrPermission) && slices.Contains(hostWide, key):
		return "read-only in the namespace (the host's value applies)", true
	case errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(key, "net.ipv6."):
		return "no IPv6 in this kernel (nothing to switch off)", true
	}
	return "", false
}

// hostWide are the sysctls a kernel may keep global (or lack): read-only or
// absent inside a namespace.
var hostWide = []string{"net.core.rmem_max", "net.core.rmem_default", "net.core.wmem_max", "net.core.wmem_default", "net.mptcp.enabled"}

func (tb *Testbed) onClose(f func() error) {
	tb.mu.Lock()
	tb.undo = append(tb.undo, f)
	tb.mu.Unlock()
}

// OnClose registers f to run when the testbed closes, before the
// emulators and namespaces go (transports use it for anything they add).
func (tb *Testbed) OnClose(f func() error) { tb.onClose(f) }

// NS returns the namespace of node name (nil if none).
func (tb *Testbed) NS(name string) *netns.Namespace { return tb.ns[name] }

// Client, Server and Web return the namespaces of those roles.
func (tb *Testbed) Client() *netns.Namespace { return tb.byRole(scenario.RoleClient) }
func (tb *Testbed) Server() *netns.Namespace { return tb.byRole(scenario.RoleServer) }
func (tb *Testbed) Web() *netns.Namespace    { return tb.byRole(scenario.RoleWeb) }

func (tb *Testbed) byRole(r scenario.Role) *netns.Namespace {
	for _, n := range tb.Plan.Nodes {
		if n.Role == r {
			return tb.ns[n.Name]
		}
	}
	return nil
}

// Reseed restarts the loss and jitter of every userspace emulator from seed
// (each link from LinkSeed(seed, its Seq), as a testbed built with this seed
// starts). The netem backend draws from the kernel's random numbers and
// cannot be reseeded: Reseed leaves it alone.
func (tb *Testbed) Reseed(seed uint64) {
	for _, e := range tb.Plan.Emulated {
		if l := tb.links[e.Link]; l != nil {
			l.Reseed(LinkSeed(seed, e.Seq))
		}
	}
}

// FirstLosses is the loss marks (linkemu.Link.FirstLosses) of every
// userspace emulator direction that lost a frame since the last Reseed,
// keyed "LINK A→B" and "LINK B→A"; nil when none did.
func (tb *Testbed) FirstLosses() map[string][]uint64 {
	var out map[string][]uint64
	for _, e := range tb.Plan.Emulated {
		l := tb.links[e.Link]
		if l == nil {
			continue
		}
		for _, d := range []linkemu.Direction{linkemu.AtoB, linkemu.BtoA} {
			if f := l.FirstLosses(d); len(f) > 0 {
				if out == nil {
					out = map[string][]uint64{}
				}
				out[e.Link+" "+d.String()] = f
			}
		}
	}
	return out
}

// LinkEmulator returns the userspace emulator of link name (nil for a plain
// link or with netem).
func (tb *Testbed) LinkEmulator(link string) *linkemu.Link { return tb.links[link] }

// Medium returns the shared medium name (nil if none).
func (tb *Testbed) Medium(name string) *linkemu.Medium { return tb.media[name] }

// Delivered returns the bytes an emulated link has delivered towards its A
// end (the client's side of a path) since it started; 0 for a plain link.
func (tb *Testbed) Delivered(link string) uint64 {
	if l := tb.links[link]; l != nil {
		return l.Stats(linkemu.BtoA).BytesForwarded
	}
	if tb.Emulator == EmulatorNetem {
		for _, e := range tb.Plan.Emulated {
			if e.Link == link {
				return netemForwarded(tb.ns[e.Node], e.A)
			}
		}
	}
	return 0
}

// Offered returns the bytes of the frames an emulated link has taken in
// from both of its ends since it started, before loss and queue drops: what
// the hosts sent on it, Ethernet headers included. 0 for a plain link and
// with netem, which does not count frames it drops.
func (tb *Testbed) Offered(link string) uint64 {
	if l := tb.links[link]; l != nil {
		return l.Stats(linkemu.AtoB).BytesIn + l.Stats(linkemu.BtoA).BytesIn
	}
	return 0
}

// Close stops the emulators and removes the namespaces, with every link and
// process in them. It is idempotent and returns the first error.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	undo := tb.undo
	tb.undo = nil
	tb.closed = true
	tb.mu.Unlock()
	var first error
	for i := len(undo) - 1; i >= 0; i-- {
		if err := undo[i](); err != nil && first == nil {
			first = err
		}
	}
	return first
}
