package testbed

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
)

// Options of Build.
type Options struct {
	Prefix   string // names the namespaces ("" = Prefix); stale ones (their creator dead) are removed first
	Seed     uint64 // seeds the emulators' loss and jitter
	Emulator string // EmulatorUserspace ("") or EmulatorNetem (see ResolveEmulator)
}

// Testbed is a running topology. Close removes it.
type Testbed struct {
	Plan     *Plan
	Emulator string // the backend the emulated links run on

	ns    map[string]*netns.Namespace
	links map[string]*linkemu.Link

	mu   sync.Mutex
	undo []func() error

	reseeded time.Time // the last Reseed: where the traces restarted
}

// Build is NewPlan then Start.
func Build(top *scenario.Topology, opt Options) (*Testbed, error) {
	plan, err := NewPlan(top, opt.Seed)
	if err != nil {
		return nil, err
	}
	return Start(plan, opt)
}

// Start creates the namespaces, links, emulators, routes and sysctls of a
// plan. On error everything already created is removed.
func Start(plan *Plan, opt Options) (tb *Testbed, err error) {
	prefix := cmp.Or(opt.Prefix, Prefix)
	if _, err := netns.Cleanup(prefix); err != nil {
		return nil, fmt.Errorf("testbed: removing stale namespaces: %w", err)
	}
	emu := cmp.Or(opt.Emulator, EmulatorUserspace)
	if emu != EmulatorUserspace && emu != EmulatorNetem {
		return nil, fmt.Errorf("testbed: unknown emulator %q", emu)
	}
	if emu == EmulatorNetem && len(plan.Media) > 0 {
		return nil, fmt.Errorf("testbed: netem cannot make links share a medium (%s); use --emulator userspace", plan.Media[0].Name)
	}
	if i := slices.IndexFunc(plan.Emulated, func(e Emulated) bool { return e.AtoB.Trace != nil || e.BtoA.Trace != nil }); emu == EmulatorNetem && i >= 0 {
		return nil, fmt.Errorf("testbed: netem cannot replay the trace of link %s; use --emulator userspace", plan.Emulated[i].Link)
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
		tb.undo = append(tb.undo, ns.Close) // tb is not shared yet: no lock
		tb.ns[n.Name] = ns
		for _, s := range plan.Sysctls[n.Name] {
			if err := ns.SetSysctl(s.Key, s.Value); err != nil && !tolerable(s.Key, err) {
				return tb, fmt.Errorf("testbed: node %s: sysctl %s=%s: %w", n.Name, s.Key, s.Value, err)
			}
		}
	}
	for _, v := range plan.Veths {
		ends := [2]netns.VethEnd{{NS: tb.ns[v.NodeA], Name: v.IfA}, {NS: tb.ns[v.NodeB], Name: v.IfB}}
		for i, a := range []netip.Prefix{v.AddrA, v.AddrB} {
			if a.IsValid() {
				ends[i].Addrs = []netip.Prefix{a}
			}
		}
		// A veth goes away with either namespace (registered above).
		if err := netns.AddVeth(ends[0], ends[1]); err != nil {
			return tb, fmt.Errorf("testbed: veth %s/%s – %s/%s: %w", v.NodeA, v.IfA, v.NodeB, v.IfB, err)
		}
		if v.NoOffloads {
			for _, e := range ends {
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
	media := map[string]*linkemu.Medium{}
	for _, m := range plan.Media {
		media[m.Name] = linkemu.NewMedium(uint64(m.Rate), m.QueueLimit)
	}
	for i := range plan.Emulated {
		e := &plan.Emulated[i] // in place: Restore gives the link these shapes again
		if m := media[e.Medium]; m != nil {
			e.AtoB.Medium, e.BtoA.Medium = m, m
			e.AtoB.QueuePackets, e.BtoA.QueuePackets = 0, 0
		}
		if emu == EmulatorNetem { // the bridge and qdiscs go with the link node's namespace
			if err := startNetem(tb.ns[e.Node], *e); err != nil {
				return tb, fmt.Errorf("testbed: netem on link %s: %w", e.Link, err)
			}
		} else if l, err := linkemu.Start(linkemu.Config{NS: tb.ns[e.Node], A: e.A, B: e.B, AtoB: e.AtoB, BtoA: e.BtoA}); err != nil {
			return tb, fmt.Errorf("testbed: emulator of link %s: %w", e.Link, err)
		} else {
			tb.undo = append(tb.undo, l.Close) // before the namespaces: undo runs in reverse
			tb.links[e.Link] = l
		}
	}
	for _, s := range plan.Shaped {
		if err := tb.ns[s.Node].Shape(s.If, s.TBF); err != nil {
			return tb, fmt.Errorf("testbed: tbf on %s/%s: %w", s.Node, s.If, err)
		}
	}
	for _, n := range plan.Nodes {
		ns := tb.ns[n.Name]
		for _, r := range plan.Routes[n.Name] {
			if err := ns.AddRoute(r); err != nil {
				return tb, fmt.Errorf("testbed: node %s: %w", n.Name, err)
			}
		}
		for _, r := range plan.Rules[n.Name] {
			if err := ns.AddRule(r); err != nil {
				return tb, fmt.Errorf("testbed: node %s: %w", n.Name, err)
			}
		}
	}
	return tb, nil
}

// tolerable says whether a failed sysctl is one the lab can do without: a
// congestion control the host does not allow in namespaces (the lab sets it
// per socket), net.core limits a kernel keeps global (absent or read-only
// in the namespace: the host's value applies), net.mptcp on a kernel
// without MPTCP (mptcp-direct then fails on its own), IPv6 settings on a
// kernel without IPv6 (nothing to switch off).
func tolerable(key string, err error) bool {
	hostWide := slices.Contains([]string{"net.core.rmem_max", "net.core.rmem_default", "net.core.wmem_max", "net.core.wmem_default", "net.mptcp.enabled"}, key)
	missing := errors.Is(err, fs.ErrNotExist)
	return key == "net.ipv4.tcp_congestion_control" ||
		hostWide && (missing || errors.Is(err, fs.ErrPermission)) ||
		missing && strings.HasPrefix(key, "net.ipv6.")
}

// NS returns the namespace of node name (nil if none).
func (tb *Testbed) NS(name string) *netns.Namespace { return tb.ns[name] }

// Client, Server and Web return the namespaces of those roles.
func (tb *Testbed) Client() *netns.Namespace { return tb.ns[tb.node(scenario.RoleClient)] }
func (tb *Testbed) Server() *netns.Namespace { return tb.ns[tb.node(scenario.RoleServer)] }
func (tb *Testbed) Web() *netns.Namespace    { return tb.ns[tb.node(scenario.RoleWeb)] }

// node is the name of the first node of role r ("" if none).
func (tb *Testbed) node(r scenario.Role) string {
	for _, n := range tb.Plan.Nodes {
		if n.Role == r {
			return n.Name
		}
	}
	return ""
}

// Reseed restarts the loss and jitter of every userspace emulator from seed
// (each link from LinkSeed(seed, its Seq), as a testbed built with this seed
// starts). netem cannot be reseeded.
func (tb *Testbed) Reseed(seed uint64) {
	tb.reseeded = time.Now()
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
	for name, l := range tb.links {
		for _, d := range []linkemu.Direction{linkemu.AtoB, linkemu.BtoA} {
			if f := l.FirstLosses(d); len(f) > 0 {
				if out == nil {
					out = map[string][]uint64{}
				}
				out[name+" "+d.String()] = f
			}
		}
	}
	return out
}

// LinkEmulator returns the userspace emulator of link name (nil for a plain
// link or with netem).
func (tb *Testbed) LinkEmulator(link string) *linkemu.Link { return tb.links[link] }

// Delivered returns the bytes an emulated link has delivered towards its A
// end (the client's side of a path) since it started; 0 for a plain link.
func (tb *Testbed) Delivered(link string) uint64 {
	if l := tb.links[link]; l != nil {
		return l.Stats(linkemu.BtoA).BytesForwarded
	}
	// With netem, what the link node transmitted on the interface to A.
	if e := tb.Plan.emulated(link); e != nil && tb.Emulator == EmulatorNetem {
		if l, err := tb.ns[e.Node].Netlink().LinkByName(e.A); err == nil && l.Attrs().Statistics != nil {
			return l.Attrs().Statistics.TxBytes
		}
	}
	return 0
}

// Offered returns the bytes of the frames (headers included) an emulated
// link has taken in from both of its ends since it started, before loss and
// queue drops; 0 for a plain link and with netem, which does not count them.
func (tb *Testbed) Offered(link string) uint64 {
	if l := tb.links[link]; l != nil {
		return l.Stats(linkemu.AtoB).BytesIn + l.Stats(linkemu.BtoA).BytesIn
	}
	return 0
}

// Capacity returns the frame bytes (headers included) that an emulated
// link's download direction (B→A) could have carried since the last Reseed:
// its trace's delivery opportunities (linkemu.Link.Offered), or its fixed
// rate over the time. ok is false for a link without either (unshaped, on a
// shared medium, a plain veth) and with netem for a trace.
func (tb *Testbed) Capacity(link string) (bytes uint64, ok bool) {
	e := tb.Plan.emulated(link)
	switch {
	case e == nil || tb.reseeded.IsZero():
		return 0, false
	case e.BtoA.Trace != nil:
		if l := tb.links[link]; l != nil {
			return l.Offered(linkemu.BtoA), true
		}
		return 0, false
	case e.BtoA.Rate > 0:
		return uint64(float64(e.BtoA.Rate) / 8 * time.Since(tb.reseeded).Seconds()), true
	}
	return 0, false
}

// Close stops the emulators and removes the namespaces, with every link and
// process in them. It is idempotent and returns the first error.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	undo := tb.undo
	tb.undo = nil
	tb.mu.Unlock()
	var first error
	for _, f := range slices.Backward(undo) {
		if err := f(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// The changes a scenario's [[events]] make to a path while a download runs,
// and their undo. Each returns an error naming the path.

// onPath runs f on path name.
func (tb *Testbed) onPath(name string, f func(Path) error) error {
	if p, ok := tb.Plan.Path(name); ok {
		return f(p)
	}
	return fmt.Errorf("testbed: no path %q", name)
}

// Cut makes path name's emulator drop every frame in both directions: a
// failure inside the network that neither end's interface sees.
func (tb *Testbed) Cut(name string) error { return tb.reshape(name, "cut") }

// Restore gives path name's emulator back the scenario's shaping.
func (tb *Testbed) Restore(name string) error { return tb.reshape(name, "restore") }

func (tb *Testbed) reshape(name, verb string) error {
	l, e := tb.links[name], tb.Plan.emulated(name)
	if l == nil || e == nil {
		return fmt.Errorf("testbed: cutting path %s needs its userspace emulator (not netem, not a plain link)", name)
	}
	for d, sh := range []linkemu.Shape{e.AtoB, e.BtoA} {
		if verb == "cut" {
			sh.Loss = linkemu.UniformLoss(1)
		}
		if err := l.SetShape(linkemu.Direction(d), sh); err != nil {
			return fmt.Errorf("testbed: %s %s: %w", verb, name, err)
		}
	}
	return nil
}

// SetPathDown takes the client's interface of path name down.
func (tb *Testbed) SetPathDown(name string) error {
	return tb.onPath(name, func(p Path) error { return tb.Client().SetDown(p.ClientIf) })
}

// SetPathUp brings the client's interface of path name up again, with the
// routes of the path's table that going down flushed.
func (tb *Testbed) SetPathUp(name string) error {
	return tb.onPath(name, func(p Path) error {
		if err := tb.Client().SetUp(p.ClientIf); err != nil {
			return err
		}
		return tb.pathRoutes(p)
	})
}

// pathRoutes re-adds the client's routes of path p's own table (the kernel
// drops them when their interface goes down or their source address goes).
func (tb *Testbed) pathRoutes(p Path) error {
	for _, r := range tb.Plan.Routes[tb.node(scenario.RoleClient)] {
		if r.Table != p.Table {
			continue
		}
		if err := tb.Client().AddRoute(r); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("testbed: path %s: %w", p.Name, err)
		}
	}
	return nil
}

// MovedAddr is the address Readdress gives path p's client end: a host of
// its subnet that neither end has.
func MovedAddr(p Path) netip.Prefix {
	return netip.PrefixFrom(p.ServerAddr.Next().Next().Next(), p.Subnet.Bits())
}

// Readdress moves the client's address on path name from its own to
// MovedAddr (the old one out first, so that the new one is not a secondary
// address removed with it), as a new DHCP lease does; back undoes it.
func (tb *Testbed) Readdress(name string, back bool) error {
	return tb.onPath(name, func(p Path) error {
		from, to := netip.PrefixFrom(p.ClientAddr, p.Subnet.Bits()), MovedAddr(p)
		if back {
			from, to = to, from
		}
		if err := tb.Client().DelAddr(p.ClientIf, from); err != nil {
			return err
		}
		if err := tb.Client().AddAddr(p.ClientIf, to); err != nil || !back {
			return err
		}
		return tb.pathRoutes(p)
	})
}
