// Package testbed instantiates a scenario.Topology in Linux network
// namespaces: one namespace per node, veth pairs for the links, the userspace
// link emulator (lab/linkemu) in every link node, addresses, forwarding,
// policy routing and the TCP sysctls of every node.
//
// The work is split in two. Plan is pure: it turns a topology into the list of
// veth pairs, emulated links, routes, rules and sysctls, so that the routing
// decisions can be unit-tested without root. Start executes a plan (Build is
// NewPlan then Start), registering the undo of every step before taking it,
// so that a failure half-way (or Close) leaves nothing behind. Start is the
// lab's one topology builder: the mesh lab (lab/mesh) turns its plan into a
// testbed Plan of nodes, link nodes, veths, media and emulated links and
// starts it the same way.
//
// Routing, and why:
//
//   - client: the web subnet is routed via the primary path in the main table
//     with metric DirectMetric, so that braid's TUN route for the same prefix
//     (metric 0) wins while braid runs and the direct route comes back when it
//     stops. Each path also has a table of its own (PathTableBase+i) selected
//     by a rule on the path's source address: a socket bound to a path's
//     address, an MPTCP subflow opened from it, leaves through that path's
//     link and no other.
//   - server: forwards (ip_forward=1); every subnet is connected.
//   - web: the path subnets and the tunnel's inner prefix (TunnelPrefix) are
//     routed back via the server.
package testbed

import (
	"fmt"
	"net/netip"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
)

// Defaults. They are the testbed's fixed conventions; the scenario decides
// everything else.
const (
	// Prefix starts the name of every namespace the lab creates, so that a
	// crashed run's leftovers are found (and only they) by netns.Cleanup.
	Prefix = "braid-lab"

	// PathTableBase is the routing table of the first path; path i uses
	// PathTableBase+i. Far from main (254), default (253) and local (255).
	PathTableBase = 100
	// RulePriorityBase is the priority of the first path's source rule,
	// ahead of the main table's 32766.
	RulePriorityBase = 1000
	// DirectMetric is the metric of the client's main-table route to the web
	// subnet: above 0 so that a tunnel's own route to the same prefix takes
	// precedence without a conflict.
	DirectMetric = 100
)

// TunnelPrefix is the inner prefix of tunnels under test (braid's 100.64.0.1
// server, 100.64.0.2 client); the web server routes it back via the server.
var TunnelPrefix = netip.MustParsePrefix("100.64.0.0/24")

// Veth is one veth pair to create: ends in two nodes.
type Veth struct {
	NodeA, IfA string
	AddrA      netip.Prefix // zero for a link node's end
	NodeB, IfB string
	AddrB      netip.Prefix
	// NoOffloads turns segmentation and checksum offloads off on both
	// ends: everything feeding an emulator must send plain frames.
	NoOffloads bool
}

// Emulated is one link emulator to start in a link node.
type Emulated struct {
	Link string // the scenario link's name
	Node string // the link node
	A, B string // the node's interfaces towards the link's A and B ends
	AtoB linkemu.Shape
	BtoA linkemu.Shape
	// Medium names the scenario medium the link shares ("" = none).
	Medium string
	// Spec is the scenario's shaping of each direction [A→B, B→A], which
	// the netem backend passes to tc as it is.
	Spec [2]scenario.Shaping
	// Seq is the link's position in the topology: with the run seed it
	// makes the link's own loss and jitter streams (see LinkSeed).
	Seq int
}

// Addr is an address added to an interface after the veths exist (the
// mesh lab's service address on the destination's loopback, which its
// routes name as their source).
type Addr struct {
	Node, If string
	Prefix   netip.Prefix
}

// Shaped is a plain veth end rate-limited by the kernel's tbf.
type Shaped struct {
	Node, If string
	TBF      netns.TBF
}

// Path is one client–server path as the transports see it.
type Path struct {
	// Name is the scenario link's name; Index its position among the paths.
	Name  string
	Index int
	// ClientIf and ServerIf are the interfaces in the client and the server.
	ClientIf, ServerIf     string
	ClientAddr, ServerAddr netip.Addr
	Subnet                 netip.Prefix
	// Table is the path's routing table in the client.
	Table int
	// MTU, if > 0, is set on ClientIf (scenario.Link.MTU).
	MTU int
}

// Plan is everything Build does, in the order it does it.
type Plan struct {
	Nodes    []scenario.Node
	Media    []scenario.Medium
	Sysctls  map[string][]scenario.Sysctl // node → settings
	Veths    []Veth
	Addrs    []Addr
	Emulated []Emulated
	Shaped   []Shaped
	Routes   map[string][]netns.Route // node → routes
	Rules    map[string][]netns.Rule  // node → rules
	Paths    []Path
	// WebAddr is the web server's address; ServerLANAddr the server's on the
	// web link.
	WebAddr, ServerLANAddr netip.Addr
	WebSubnet              netip.Prefix
}

// IfName returns the name of the interface a link has in one of its nodes:
// "a-LINK" in A, "b-LINK" in B, and "la-LINK"/"lb-LINK" in the link node
// (towards A and towards B). Scenario names are at most 10 bytes, so these
// fit the kernel's 15.
func IfName(side, link string) string { return side + "-" + link }

// Interface sides for IfName.
const (
	SideA    = "a"
	SideB    = "b"
	SideViaA = "la"
	SideViaB = "lb"
)

// ShapeFor converts one direction of a scenario link to the emulator's
// terms: scenario loss is in percent (netem's units), the emulator takes
// probabilities; the queue limit is in frames.
func ShapeFor(s scenario.Shaping, seed uint64) linkemu.Shape {
	out := linkemu.Shape{
		Rate:         uint64(s.Rate),
		Delay:        s.Delay,
		Jitter:       s.Jitter,
		JitterDist:   linkemu.JitterUniform,
		QueuePackets: s.QueueLimit,
		Seed:         seed,
	}
	switch s.Loss.Model {
	case scenario.LossUniform:
		out.Loss = linkemu.UniformLoss(s.Loss.Percent / 100)
	case scenario.LossGE:
		l := s.Loss
		out.Loss = linkemu.GELoss(l.P/100, l.R/100, l.OneMinusH/100, l.OneMinusK/100)
	}
	return out
}

// tbfFor is the kernel shaping of a plain link's direction: the rate and a
// queue of QueueLimit full-size frames.
func tbfFor(s scenario.Shaping) netns.TBF {
	t := netns.TBF{Rate: uint64(s.Rate)}
	if s.QueueLimit > 0 {
		t.Limit = uint32(s.QueueLimit) * 1514
	}
	return t
}

// LinkSeed gives every link its own loss and jitter streams from one seed:
// i is the link's position in the topology (Emulated.Seq). Directions are
// already separated inside linkemu.
func LinkSeed(seed uint64, i int) uint64 { return seed ^ uint64(i+1)*0x9e3779b97f4a7c15 }

// RepSeed is the seed of the emulators during repetition rep of the points
// of network (scenario.Point.Network) in a run with seed campaign. It does
// not depend on the transport: every transport measured on one network meets
// the same loss sequence in repetition rep (a paired comparison), and each
// repetition draws a new one. Neither does it depend on which points were
// selected (--only, --shard), since networks keep their numbers.
func RepSeed(campaign uint64, network, rep int) uint64 {
	return splitmix(splitmix(splitmix(campaign)^uint64(network)) ^ uint64(rep))
}

// splitmix is SplitMix64's finalizer: nearby inputs give unrelated outputs.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// NodeSysctls is what Build writes in every namespace: IPv4 forwarding on
// the server, MPTCP on everywhere (the mptcp-direct transport needs it at
// both ends; it costs plain TCP nothing), reverse-path filtering off (the
// inherited host setting could drop a path's replies under policy routing),
// then the node's TCP settings.
func NodeSysctls(n scenario.Node) []scenario.Sysctl {
	out := []scenario.Sysctl{
		{Key: "net.ipv4.conf.all.rp_filter", Value: "0"},
		{Key: "net.ipv4.conf.default.rp_filter", Value: "0"},
		{Key: "net.mptcp.enabled", Value: "1"},
	}
	fwd := "0"
	if n.Role == scenario.RoleServer {
		fwd = "1"
	}
	out = append(out, scenario.Sysctl{Key: "net.ipv4.ip_forward", Value: fwd})
	return append(out, n.TCP.Sysctls()...)
}

// NewPlan resolves a topology into the steps Build takes. seed seeds the
// emulators (one stream per link and direction).
func NewPlan(top *scenario.Topology, seed uint64) (*Plan, error) {
	client, server, web := top.Client(), top.Server(), top.Web()
	if client == nil || server == nil || web == nil {
		return nil, fmt.Errorf("testbed: topology needs a client, a server and a web node")
	}
	wl := top.WebLink()
	if wl == nil {
		return nil, fmt.Errorf("testbed: topology has no server–web link")
	}
	paths := top.Paths()
	if len(paths) == 0 {
		return nil, fmt.Errorf("testbed: topology has no client–server path")
	}
	p := &Plan{
		Nodes:         append([]scenario.Node(nil), top.Nodes...),
		Media:         append([]scenario.Medium(nil), top.Media...),
		Sysctls:       map[string][]scenario.Sysctl{},
		Routes:        map[string][]netns.Route{},
		Rules:         map[string][]netns.Rule{},
		WebAddr:       wl.AddrB.Addr(),
		ServerLANAddr: wl.AddrA.Addr(),
		WebSubnet:     wl.Subnet,
	}
	for _, n := range top.Nodes {
		p.Sysctls[n.Name] = NodeSysctls(n)
	}
	for i := range top.Links {
		l := &top.Links[i]
		ia, ib := IfName(SideA, l.Name), IfName(SideB, l.Name)
		if l.Via == "" {
			p.Veths = append(p.Veths, Veth{NodeA: l.A, IfA: ia, AddrA: l.AddrA, NodeB: l.B, IfB: ib, AddrB: l.AddrB})
			if l.AB.Rate > 0 {
				p.Shaped = append(p.Shaped, Shaped{Node: l.A, If: ia, TBF: tbfFor(l.AB)})
			}
			if l.BA.Rate > 0 {
				p.Shaped = append(p.Shaped, Shaped{Node: l.B, If: ib, TBF: tbfFor(l.BA)})
			}
			continue
		}
		la, lb := IfName(SideViaA, l.Name), IfName(SideViaB, l.Name)
		p.Veths = append(p.Veths,
			Veth{NodeA: l.A, IfA: ia, AddrA: l.AddrA, NodeB: l.Via, IfB: la, NoOffloads: true},
			Veth{NodeA: l.Via, IfA: lb, NodeB: l.B, IfB: ib, AddrB: l.AddrB, NoOffloads: true})
		s := LinkSeed(seed, i)
		p.Emulated = append(p.Emulated, Emulated{Link: l.Name, Node: l.Via, A: la, B: lb,
			AtoB: ShapeFor(l.AB, s), BtoA: ShapeFor(l.BA, s), Spec: [2]scenario.Shaping{l.AB, l.BA}, Medium: l.Medium, Seq: i})
	}

	for i, l := range paths {
		pa := Path{
			Name: l.Name, Index: i,
			ClientIf: IfName(SideA, l.Name), ServerIf: IfName(SideB, l.Name),
			ClientAddr: l.AddrA.Addr(), ServerAddr: l.AddrB.Addr(),
			Subnet: l.Subnet, Table: PathTableBase + i, MTU: l.MTU,
		}
		p.Paths = append(p.Paths, pa)
		if i == 0 {
			p.Routes[client.Name] = append(p.Routes[client.Name],
				netns.Route{Dst: wl.Subnet, Via: pa.ServerAddr, Dev: pa.ClientIf, Metric: DirectMetric})
		}
		p.Routes[client.Name] = append(p.Routes[client.Name],
			netns.Route{Dst: l.Subnet, Dev: pa.ClientIf, Src: pa.ClientAddr, Table: pa.Table},
			netns.Route{Dst: wl.Subnet, Via: pa.ServerAddr, Dev: pa.ClientIf, Table: pa.Table})
		p.Rules[client.Name] = append(p.Rules[client.Name],
			netns.Rule{Src: netip.PrefixFrom(pa.ClientAddr, 32), Table: pa.Table, Priority: RulePriorityBase + i})
		p.Routes[web.Name] = append(p.Routes[web.Name],
			netns.Route{Dst: l.Subnet, Via: p.ServerLANAddr, Dev: IfName(SideB, wl.Name)})
	}
	p.Routes[web.Name] = append(p.Routes[web.Name],
		netns.Route{Dst: TunnelPrefix, Via: p.ServerLANAddr, Dev: IfName(SideB, wl.Name)})
	return p, nil
}

// Path returns the path named name (a scenario link's name).
func (p *Plan) Path(name string) (Path, bool) {
	for _, pa := range p.Paths {
		if pa.Name == name {
			return pa, true
		}
	}
	return Path{}, false
}
