// Package testbed instantiates a scenario.Topology in Linux network
// namespaces: one per node, veth pairs for the links, a link emulator
// (lab/linkemu or netem) in every link node, addresses, routes and sysctls.
// NewPlan is pure, so that the routing can be unit-tested without root;
// Start executes a plan (the two-path testbed's or the mesh lab's),
// registering the undo of every step before taking it.
//
// Routing (docs/lab.md, "Experiment runner"): the client routes the web
// subnet via the primary path and, in each path's own table chosen by
// source address, via that path; the web node routes back via the server.
package testbed

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/linktrace"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
)

// The testbed's fixed conventions; the scenario decides everything else.
const (
	// Prefix starts the name of every namespace the lab creates, so that a
	// crashed run's leftovers are found (and only they) by netns.Cleanup.
	Prefix = "braid-lab"
	// PathTableBase+i is path i's routing table, far from main, default and
	// local (254, 253, 255); RulePriorityBase+i its source rule's priority,
	// ahead of the main table's 32766.
	PathTableBase, RulePriorityBase = 100, 1000
	// DirectMetric is the metric of the client's main-table route to the web
	// subnet: above 0, so that a tunnel's route to it wins without a conflict.
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
	NoOffloads bool // on both ends (linkemu.DisableOffloads): they feed an emulator
}

// Emulated is one link emulator to start in a link node.
type Emulated struct {
	Link       string // the scenario link's name
	Node       string // the link node
	A, B       string // the node's interfaces towards the link's A and B ends
	AtoB, BtoA linkemu.Shape
	Medium     string              // the scenario medium the link shares ("" = none)
	Spec       [2]scenario.Shaping // the scenario's [A→B, B→A], which netem takes as it is
	Seq        int                 // the link's position in the topology (see LinkSeed)
}

// Addr is an address added to an interface after the veths exist (the
// mesh lab's service address on the destination's loopback).
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
	Name                   string // the scenario link's
	Index                  int    // among the paths
	ClientIf, ServerIf     string
	ClientAddr, ServerAddr netip.Addr
	Subnet                 netip.Prefix
	Table                  int // the path's routing table in the client
	MTU                    int // if > 0, set on ClientIf (scenario.Link.MTU)
}

// Plan is everything Build does, in the order it does it.
type Plan struct {
	Nodes                  []scenario.Node
	Media                  []scenario.Medium
	Sysctls                map[string][]scenario.Sysctl // node → settings
	Veths                  []Veth
	Addrs                  []Addr
	Emulated               []Emulated
	Shaped                 []Shaped
	Routes                 map[string][]netns.Route // node → routes
	Rules                  map[string][]netns.Rule  // node → rules
	Paths                  []Path
	WebAddr, ServerLANAddr netip.Addr // the web server's; the server's on the web link
	WebSubnet              netip.Prefix
}

// IfName returns the name of the interface a link has on one side: "a-LINK"
// in A, "b-LINK" in B, and "la-LINK"/"lb-LINK" in the link node towards A
// and B. Scenario names are at most 10 bytes, so these fit the kernel's 15.
func IfName(side, link string) string { return side + "-" + link }

// Interface sides for IfName.
const SideA, SideB, SideViaA, SideViaB = "a", "b", "la", "lb"

// ShapeFor converts one direction of a scenario link to the emulator's
// terms: scenario loss is in percent (netem's units), the emulator takes
// probabilities; the queue limit is in frames. A trace profile is generated
// from traceSeed (TraceSeed: the same trace for every repetition and
// transport of a campaign), a trace file read.
func ShapeFor(s scenario.Shaping, seed, traceSeed uint64) (linkemu.Shape, error) {
	out := linkemu.Shape{Rate: uint64(s.Rate), Delay: s.Delay, Jitter: s.Jitter, QueuePackets: s.QueueLimit, QueueBytes: s.QueueBytes, Seed: seed}
	switch l := s.Loss; l.Model {
	case scenario.LossUniform:
		out.Loss = linkemu.UniformLoss(l.Percent / 100)
	case scenario.LossGE:
		out.Loss = linkemu.GELoss(l.P/100, l.R/100, l.OneMinusH/100, l.OneMinusK/100)
	}
	var err error
	switch c := s.Trace; {
	case c.File != "":
		out.Trace, err = linkemu.ReadTraceFile(c.File)
	case c.Profile != "":
		out.Trace, out.Schedule, err = generateTrace(c, traceSeed)
	}
	return out, err
}

// TraceLength is how much of a profile the testbed generates; the trace
// repeats after it. Longer than a 16 MiB download at 1 Mbit/s would be
// wasted memory on the fast profiles (a satellite trace holds about 10,000
// opportunities a second).
const TraceLength = 3 * time.Minute

// TraceSeed is the seed of direction d's trace on link i: fixed by the
// campaign's seed, unlike the loss streams (RepSeed), so every repetition
// replays the same capacity.
func TraceSeed(campaign uint64, i int, d linkemu.Direction) uint64 {
	return splitmix(LinkSeed(campaign, i) ^ uint64(d+1)<<56)
}

// tbfFor is the kernel shaping of a plain link's direction: its rate and a
// queue of QueueLimit full-size frames.
func tbfFor(s scenario.Shaping) netns.TBF {
	t := netns.TBF{Rate: uint64(s.Rate)}
	if s.QueueLimit > 0 {
		t.Limit = uint32(s.QueueLimit) * 1514
	}
	return t
}

// LinkSeed gives link i (Emulated.Seq) its own loss and jitter streams.
func LinkSeed(seed uint64, i int) uint64 { return seed ^ uint64(i+1)*0x9e3779b97f4a7c15 }

// RepSeed is the seed of the emulators during repetition rep of the points
// of network (scenario.Point.Network) in a run with seed campaign: the same
// for every transport (a paired comparison) and whichever points were
// selected (--only, --shard), new for each repetition.
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

// NodeSysctls is what Build writes in every namespace: reverse-path
// filtering off (it could drop a path's replies under policy routing), MPTCP
// on (mptcp-direct needs it at both ends), forwarding on the server only,
// then the node's TCP settings.
func NodeSysctls(n scenario.Node) []scenario.Sysctl {
	fwd := "0"
	if n.Role == scenario.RoleServer {
		fwd = "1"
	}
	return append([]scenario.Sysctl{
		{Key: "net.ipv4.conf.all.rp_filter", Value: "0"},
		{Key: "net.ipv4.conf.default.rp_filter", Value: "0"},
		{Key: "net.mptcp.enabled", Value: "1"},
		{Key: "net.ipv4.ip_forward", Value: fwd},
	}, n.TCP.Sysctls()...)
}

// NewPlan resolves a topology into the steps Build takes; seed seeds the
// emulators.
func NewPlan(top *scenario.Topology, seed uint64) (*Plan, error) {
	client, web, wl, paths := top.Client(), top.Web(), top.WebLink(), top.Paths()
	switch {
	case client == nil || top.Server() == nil || web == nil:
		return nil, fmt.Errorf("testbed: topology needs a client, a server and a web node")
	case wl == nil:
		return nil, fmt.Errorf("testbed: topology has no server–web link")
	case len(paths) == 0:
		return nil, fmt.Errorf("testbed: topology has no client–server path")
	}
	p := &Plan{Nodes: slices.Clone(top.Nodes), Media: slices.Clone(top.Media),
		Sysctls: map[string][]scenario.Sysctl{}, Routes: map[string][]netns.Route{}, Rules: map[string][]netns.Rule{},
		WebAddr: wl.AddrB.Addr(), ServerLANAddr: wl.AddrA.Addr(), WebSubnet: wl.Subnet}
	for _, n := range top.Nodes {
		p.Sysctls[n.Name] = NodeSysctls(n)
	}
	for i := range top.Links {
		l := &top.Links[i]
		ia, ib := IfName(SideA, l.Name), IfName(SideB, l.Name)
		if l.Via == "" {
			p.Veths = append(p.Veths, Veth{NodeA: l.A, IfA: ia, AddrA: l.AddrA, NodeB: l.B, IfB: ib, AddrB: l.AddrB})
			for _, e := range []Shaped{{l.A, ia, tbfFor(l.AB)}, {l.B, ib, tbfFor(l.BA)}} {
				if e.TBF.Rate > 0 {
					p.Shaped = append(p.Shaped, e)
				}
			}
			continue
		}
		la, lb := IfName(SideViaA, l.Name), IfName(SideViaB, l.Name)
		p.Veths = append(p.Veths,
			Veth{NodeA: l.A, IfA: ia, AddrA: l.AddrA, NodeB: l.Via, IfB: la, NoOffloads: true},
			Veth{NodeA: l.Via, IfA: lb, NodeB: l.B, IfB: ib, AddrB: l.AddrB, NoOffloads: true})
		s := LinkSeed(seed, i)
		e := Emulated{Link: l.Name, Node: l.Via, A: la, B: lb, Spec: [2]scenario.Shaping{l.AB, l.BA}, Medium: l.Medium, Seq: i}
		for d, dst := range []*linkemu.Shape{&e.AtoB, &e.BtoA} {
			var err error
			if *dst, err = ShapeFor(e.Spec[d], s, TraceSeed(seed, i, linkemu.Direction(d))); err != nil {
				return nil, fmt.Errorf("testbed: link %s %v: %w", l.Name, linkemu.Direction(d), err)
			}
		}
		p.Emulated = append(p.Emulated, e)
	}

	c, w, webIf := client.Name, web.Name, IfName(SideB, wl.Name)
	for i, l := range paths {
		pa := Path{Name: l.Name, Index: i, ClientIf: IfName(SideA, l.Name), ServerIf: IfName(SideB, l.Name),
			ClientAddr: l.AddrA.Addr(), ServerAddr: l.AddrB.Addr(), Subnet: l.Subnet, Table: PathTableBase + i, MTU: l.MTU}
		p.Paths = append(p.Paths, pa)
		if i == 0 {
			p.Routes[c] = append(p.Routes[c], netns.Route{Dst: wl.Subnet, Via: pa.ServerAddr, Dev: pa.ClientIf, Metric: DirectMetric})
		}
		p.Routes[c] = append(p.Routes[c],
			netns.Route{Dst: l.Subnet, Dev: pa.ClientIf, Src: pa.ClientAddr, Table: pa.Table},
			netns.Route{Dst: wl.Subnet, Via: pa.ServerAddr, Dev: pa.ClientIf, Table: pa.Table})
		p.Rules[c] = append(p.Rules[c], netns.Rule{Src: netip.PrefixFrom(pa.ClientAddr, 32), Table: pa.Table, Priority: RulePriorityBase + i})
		p.Routes[w] = append(p.Routes[w], netns.Route{Dst: l.Subnet, Via: p.ServerLANAddr, Dev: webIf})
	}
	p.Routes[w] = append(p.Routes[w], netns.Route{Dst: TunnelPrefix, Via: p.ServerLANAddr, Dev: webIf})
	return p, nil
}

// Path returns the path named name (a scenario link's name).
func (p *Plan) Path(name string) (Path, bool) {
	i := slices.IndexFunc(p.Paths, func(pa Path) bool { return pa.Name == name })
	if i < 0 {
		return Path{}, false
	}
	return p.Paths[i], true
}

// emulated returns the emulated link named link (nil if none).
func (p *Plan) emulated(link string) *Emulated {
	i := slices.IndexFunc(p.Emulated, func(e Emulated) bool { return e.Link == link })
	if i < 0 {
		return nil
	}
	return &p.Emulated[i]
}

// generateTrace makes a profile's trace (scaled to c.Mean when set) and,
// for a profile with handovers, its delay schedule.
func generateTrace(c scenario.Capacity, seed uint64) (*linkemu.Trace, *linkemu.Schedule, error) {
	p, err := linktrace.ProfileByName(c.Profile)
	if err != nil {
		return nil, nil, err
	}
	if c.Mean > 0 {
		p = p.Scaled(float64(c.Mean))
	}
	return linktrace.Generate(p, TraceLength, seed)
}
