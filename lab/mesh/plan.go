package mesh

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
	"github.com/braid-vpn/braid/route"
)

// Defaults of Config (docs/lab.md, "Mesh lab", says why these) and the
// lab's fixed conventions.
const (
	// DefaultRate is one channel's capacity, 802.11b's top PHY rate.
	DefaultRate = 11_000_000
	// DefaultMinDelay and DefaultMaxDelay bound a hop's one-way delay: a
	// relay's MAC access and forwarding latency, not propagation.
	DefaultMinDelay = time.Millisecond
	DefaultMaxDelay = 2 * time.Millisecond
	// DefaultQueuePackets is a medium's FIFO limit (~110 ms at 11 Mbit/s).
	DefaultQueuePackets = 100

	// Prefix starts the name of every namespace Build creates, so that
	// netns.Cleanup finds a crashed run's leftovers (and only those).
	Prefix = "braid-mesh"
	// SourceMetric is the metric of the source's main-table route to the
	// service address over path 0, for tools run by hand (ping) without
	// a path address; the measurements always bind one.
	SourceMetric = 100
	// MaxPaths bounds the paths of one plan (each takes a table).
	MaxPaths = 16
)

// Addresses: hop h gets HopSubnet(h) (upstream end .1, downstream end
// .2); the destination holds Service on its loopback. Both are in the
// benchmarking block 198.18.0.0/15: nothing can leak onto a real network.
var (
	HopBase = netip.MustParsePrefix("198.18.0.0/16")
	Service = netip.MustParseAddr("198.19.0.1")
)

// maxHops is how many /30s HopBase holds.
const maxHops = 1 << (32 - 16 - 2)

// Channels is the radio model: how many orthogonal channels the mesh
// has (see MediaGroups).
type Channels int

const (
	SingleChannel Channels = 1
	TwoChannels   Channels = 2
)

func (c Channels) String() string { return fmt.Sprintf("%dch", int(c)) }

func (c Channels) valid() bool { return c == SingleChannel || c == TwoChannels }

// Config is the link model. Zero fields take the defaults above.
type Config struct {
	Rate uint64 // one channel's capacity in bit/s, shared by a contention group
	// MinDelay and MaxDelay bound each hop's one-way delay: MinDelay +
	// (MaxDelay-MinDelay)·length/radius for a graph with positions and a
	// radius, their midpoint otherwise.
	MinDelay, MaxDelay time.Duration
	QueuePackets       int // each medium's FIFO limit in frames
}

func (c *Config) fill() error {
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	if c.MinDelay == 0 && c.MaxDelay == 0 {
		c.MinDelay, c.MaxDelay = DefaultMinDelay, DefaultMaxDelay
	}
	switch {
	case c.MinDelay < 0 || c.MaxDelay < c.MinDelay:
		return fmt.Errorf("mesh: hop delay range %v..%v", c.MinDelay, c.MaxDelay)
	case c.QueuePackets < 0:
		return fmt.Errorf("mesh: queue of %d frames", c.QueuePackets)
	}
	c.QueuePackets = cmp.Or(c.QueuePackets, DefaultQueuePackets)
	return nil
}

// Hop is one link of a path, emulated as From —veth— link node —veth— To.
// From is the end nearer the source; the link node's A side faces it, so
// the emulator's AtoB direction carries traffic towards the destination.
// Hop h's interfaces are "hopH" in From and To, "hopH-a" and "hopH-b" in
// the link node (facing From and To).
type Hop struct {
	Path, Index      int        // which path, and the hop's position on it from 0
	From, To         int        // graph node indices
	FromAddr, ToAddr netip.Addr // .1 and .2 of HopSubnet(h)
	Length           float64    // the link's length in metres (NaN without positions)
	Delay            time.Duration
}

// PathPlan is one path through the mesh.
type PathPlan struct {
	Nodes route.Path
	Hops  []int // indices into Plan.Hops, from the source
	// ClientAddr, the source's address on the path's first hop, is the
	// path's identity (docs/lab.md, "Mesh lab": Routing).
	ClientAddr netip.Addr
	Table      int // path k's: testbed.PathTableBase+k
	Priority   int
}

// Plan is everything Build does, decided without touching the system, so
// that addresses, routes and media can be tested without root.
type Plan struct {
	Graph    *route.Graph
	Src, Dst int
	Config   Config // defaults filled in
	Paths    []PathPlan
	Hops     []Hop
	Service  netip.Addr // the destination's address, on its loopback
	// Testbed is the plan as testbed.Start takes it: the path nodes by ID
	// (index order), then a link node per hop with a veth (no offloads:
	// the emulator wants plain frames) to each hop end and an emulated
	// link (the hop's delay both ways; SetChannels adds the medium); the
	// service address, sysctls, routes and rules.
	Testbed testbed.Plan
}

// noIPv6 is written in every node and link node, so that no stack sends
// anything (router solicitations, MLD reports) onto an emulated link: it
// carries only what the experiment sends (IPv4).
var noIPv6 = []scenario.Sysctl{
	{Key: "net.ipv6.conf.all.disable_ipv6", Value: "1"},
	{Key: "net.ipv6.conf.default.disable_ipv6", Value: "1"},
}

// nodeSysctls are a mesh node's settings. Reverse-path filtering is off
// because under policy routing a node may receive a path's packets on an
// interface its main table would not choose.
func nodeSysctls(relay bool) []scenario.Sysctl {
	fwd := "0"
	if relay {
		fwd = "1"
	}
	return slices.Concat([]scenario.Sysctl{
		{Key: "net.ipv4.conf.all.rp_filter", Value: "0"},
		{Key: "net.ipv4.conf.default.rp_filter", Value: "0"},
	}, noIPv6, []scenario.Sysctl{{Key: "net.ipv4.ip_forward", Value: fwd}})
}

// NewPlan lays paths from src to dst of g out as a mesh. The paths must
// be valid simple paths of g between the two, pairwise link-disjoint
// (each hop is one emulated link owned by one path). Intermediate nodes
// may be shared, as link-disjoint paths may do.
func NewPlan(g *route.Graph, src, dst int, paths []route.Path, cfg Config) (*Plan, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	switch {
	case g == nil:
		return nil, fmt.Errorf("mesh: no graph")
	case src == dst:
		return nil, fmt.Errorf("mesh: %w", route.ErrSameNode)
	case len(paths) == 0 || len(paths) > MaxPaths:
		return nil, fmt.Errorf("mesh: %d paths (want 1 to %d)", len(paths), MaxPaths)
	}
	for k, p := range paths {
		if err := g.ValidPath(p, src, dst); err != nil {
			return nil, fmt.Errorf("mesh: path %d: %w", k, err)
		}
	}
	if err := route.CheckDisjoint(g, paths, route.LinkDisjoint); err != nil {
		return nil, fmt.Errorf("mesh: the paths must be link-disjoint: %w", err)
	}
	nhops := 0
	for _, path := range paths {
		nhops += path.Hops()
	}
	if nhops > maxHops {
		return nil, fmt.Errorf("mesh: %d hops, but %v holds only %d /30 subnets", nhops, HopBase, maxHops)
	}
	nodes, svc := route.PathNodes(paths), netip.PrefixFrom(Service, 32)
	p := &Plan{
		Graph: g, Src: src, Dst: dst, Config: cfg, Service: Service,
		Testbed: testbed.Plan{
			Sysctls: map[string][]scenario.Sysctl{}, Routes: map[string][]netns.Route{}, Rules: map[string][]netns.Rule{},
			Addrs: []testbed.Addr{{Node: g.ID(dst), If: "lo", Prefix: svc}},
		},
	}
	tp := &p.Testbed
	for _, v := range nodes {
		id := g.ID(v)
		for h := range nhops {
			if id == linkNodeName(h) {
				return nil, fmt.Errorf("mesh: node ID %q is the name of a link node", id)
			}
		}
		tp.Nodes = append(tp.Nodes, scenario.Node{Name: id})
		tp.Sysctls[id] = nodeSysctls(v != src && v != dst)
	}
	for k, path := range paths {
		pp := PathPlan{Nodes: route.ClonePath(path), Table: testbed.PathTableBase + k, Priority: testbed.RulePriorityBase + k}
		for i := 1; i < len(path); i++ {
			h := len(p.Hops)
			sub := HopSubnet(h).Addr()
			ifname, la, lb := fmt.Sprintf("hop%d", h), fmt.Sprintf("hop%d-a", h), fmt.Sprintf("hop%d-b", h)
			hop := Hop{Path: k, Index: i - 1, From: path[i-1], To: path[i], FromAddr: sub.Next(), ToAddr: sub.Next().Next()}
			hop.Length, hop.Delay = hopDelay(g, hop.From, hop.To, cfg)
			p.Hops = append(p.Hops, hop)
			pp.Hops = append(pp.Hops, h)
			if i == 1 {
				pp.ClientAddr = hop.FromAddr
			}
			from, to, ln, sh := g.ID(hop.From), g.ID(hop.To), linkNodeName(h), linkemu.Shape{Delay: hop.Delay}
			tp.Nodes = append(tp.Nodes, scenario.Node{Name: ln})
			tp.Sysctls[ln] = noIPv6
			tp.Veths = append(tp.Veths,
				testbed.Veth{NodeA: from, IfA: ifname, AddrA: netip.PrefixFrom(hop.FromAddr, 30), NodeB: ln, IfB: la, NoOffloads: true},
				testbed.Veth{NodeA: ln, IfA: lb, NodeB: to, IfB: ifname, AddrB: netip.PrefixFrom(hop.ToAddr, 30), NoOffloads: true})
			tp.Emulated = append(tp.Emulated, testbed.Emulated{Link: hopName(h), Node: ln, A: la, B: lb, Seq: h, AtoB: sh, BtoA: sh})
			// Forward by source address (and path 0 in the source's main
			// table), back by destination.
			client := netip.PrefixFrom(pp.ClientAddr, 32)
			fwd := netns.Route{Dst: svc, Via: hop.ToAddr, Dev: ifname, Table: pp.Table}
			tp.Routes[from] = append(tp.Routes[from], fwd)
			tp.Rules[from] = append(tp.Rules[from], netns.Rule{Src: client, Table: pp.Table, Priority: pp.Priority})
			if k == 0 && i == 1 {
				fwd.Table, fwd.Metric = 0, SourceMetric
				tp.Routes[from] = append(tp.Routes[from], fwd)
			}
			back := netns.Route{Dst: client, Via: hop.FromAddr, Dev: ifname}
			if hop.To == dst {
				back.Src = Service
			}
			tp.Routes[to] = append(tp.Routes[to], back)
		}
		p.Paths = append(p.Paths, pp)
	}
	return p, nil
}

// HopSubnet is hop h's /30: the h-th block of four addresses of HopBase.
func HopSubnet(h int) netip.Prefix {
	b := HopBase.Addr().As4()
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])+uint32(4*h))
	return netip.PrefixFrom(netip.AddrFrom4(b), 30)
}

// hopDelay is the link's length and its one-way delay (see Config).
func hopDelay(g *route.Graph, a, b int, cfg Config) (float64, time.Duration) {
	na, nb := g.Node(a), g.Node(b)
	mid := cfg.MinDelay + (cfg.MaxDelay-cfg.MinDelay)/2
	if !na.HasPos || !nb.HasPos {
		return math.NaN(), mid
	}
	d := na.Pos.Dist(nb.Pos)
	if g.Radius() <= 0 {
		return d, mid
	}
	f := math.Min(d/g.Radius(), 1)
	return d, cfg.MinDelay + time.Duration(math.Round(f*float64(cfg.MaxDelay-cfg.MinDelay)))
}

// MediaGroups partitions the hops into the contention groups of the radio
// model ch, each to serialize on one linkemu.Medium: every hop with
// SingleChannel, each path with TwoChannels, as transitive contention
// always makes them (docs/lab.md, "Radio model"). Groups hold hop indices
// in increasing order.
func (p *Plan) MediaGroups(ch Channels) ([][]int, error) {
	if !ch.valid() {
		return nil, fmt.Errorf("mesh: %d channels (want 1 or 2)", int(ch))
	}
	var groups [][]int
	for _, pp := range p.Paths {
		if ch == TwoChannels || groups == nil {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], pp.Hops...)
	}
	return groups, nil
}
