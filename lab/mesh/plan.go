package mesh

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
	"github.com/braid-vpn/braid/route"
)

// Defaults of Config and the lab's fixed conventions.
const (
	// DefaultRate is one channel's capacity: 11 Mbit/s, 802.11b's top PHY
	// rate, the seed's radios. The emulator counts Ethernet frame bytes
	// only, so this is an upper bound no real 802.11b MAC reaches (its
	// overheads leave about half of it to TCP).
	DefaultRate = 11_000_000
	// DefaultMinDelay and DefaultMaxDelay bound a hop's one-way delay. It
	// stands for the per-hop MAC access and forwarding latency of a mesh
	// relay, not propagation (20 m of air is 67 ns): the shortest link
	// gets the minimum, a link as long as the radio range the maximum,
	// since in the disk model the long links are the weak ones.
	DefaultMinDelay = time.Millisecond
	DefaultMaxDelay = 2 * time.Millisecond
	// DefaultQueuePackets is each medium's FIFO limit in frames: about
	// 110 ms of a channel at 11 Mbit/s with full-size frames, several
	// times the bandwidth-delay product of any path here, so a TCP flow
	// keeps the channel busy without a bloated queue.
	DefaultQueuePackets = 100
	// DefaultInterferenceFactor times the graph's radio range is the
	// interference range when Config.InterferenceRange is 0: 802.11
	// carrier sense reaches roughly twice the data range.
	DefaultInterferenceFactor = 2.0

	// Prefix starts the name of every namespace Build creates, so that
	// netns.Cleanup finds a crashed run's leftovers (and only those).
	Prefix = "braid-mesh"
	// PathTableBase is path k's routing table (PathTableBase+k) on every
	// node of the path; RulePriorityBase the priority of its rule.
	PathTableBase    = 100
	RulePriorityBase = 1000
	// SourceMetric is the metric of the source's main-table route to the
	// service address over path 0, for tools run by hand (ping) without
	// a path address; the measurements always bind one.
	SourceMetric = 100
	// MaxPaths bounds the paths of one plan (each takes a table).
	MaxPaths = 16
)

// Addresses. Every hop gets a /30 of HopBase in plan order (its upstream
// end .1, its downstream end .2 of the block); the destination holds the
// service address on its loopback. Both are in 198.18.0.0/15, the
// benchmarking block: nothing here can leak onto a real network.
var (
	HopBase = netip.MustParsePrefix("198.18.0.0/16")
	Service = netip.MustParseAddr("198.19.0.1")
)

// maxHops is how many /30s HopBase holds.
const maxHops = 1 << (32 - 16 - 2)

// Channels is the radio model: how many orthogonal channels the mesh
// has.
type Channels int

const (
	// SingleChannel: every hop of both paths that interferes with another
	// (route.ContentionGroups over the paths together) shares one
	// capacity budget.
	SingleChannel Channels = 1
	// TwoChannels: each path has a channel of its own, so the paths do
	// not contend with each other; hops of one path still do.
	TwoChannels Channels = 2
)

func (c Channels) String() string {
	switch c {
	case SingleChannel:
		return "1ch"
	case TwoChannels:
		return "2ch"
	}
	return fmt.Sprintf("Channels(%d)", int(c))
}

func (c Channels) valid() bool { return c == SingleChannel || c == TwoChannels }

// Config is the link model. Zero fields take the defaults above.
type Config struct {
	// Rate is one channel's capacity in bit/s, shared by all the hops of
	// a contention group. Default DefaultRate.
	Rate uint64
	// MinDelay and MaxDelay bound each hop's one-way delay: MinDelay +
	// (MaxDelay-MinDelay)·length/radius for a graph with positions and a
	// radius, their midpoint otherwise. Defaults DefaultMinDelay and
	// DefaultMaxDelay.
	MinDelay, MaxDelay time.Duration
	// QueuePackets is each medium's FIFO limit in frames. Default
	// DefaultQueuePackets.
	QueuePackets int
	// InterferenceRange is the distance in metres within which two hops'
	// ends contend (route.Graph.Interferes). 0 means
	// DefaultInterferenceFactor × the graph's radius when the graph has
	// one and positions, else the graph itself (two nodes hear each other
	// when linked); a negative value asks for the graph itself.
	InterferenceRange float64
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
	case math.IsNaN(c.InterferenceRange) || math.IsInf(c.InterferenceRange, 0):
		return fmt.Errorf("mesh: interference range %v", c.InterferenceRange)
	}
	c.QueuePackets = cmp.Or(c.QueuePackets, DefaultQueuePackets)
	return nil
}

// Sysctl is one setting written in a namespace.
type Sysctl = scenario.Sysctl

// Hop is one link of a path, emulated as From —veth— link node —veth— To.
// From is the end nearer the source; the link node's A side faces it, so
// the emulator's AtoB direction carries traffic towards the destination.
type Hop struct {
	Path, Index      int // which path, and the hop's position on it from 0
	From, To         int // graph node indices
	Subnet           netip.Prefix
	FromAddr, ToAddr netip.Addr
	// FromIf and ToIf are the interfaces in From and To; LinkA and LinkB
	// the link node's, facing From and To.
	FromIf, ToIf string
	LinkA, LinkB string
	// Length is the link's length in metres (NaN without positions).
	Length float64
	Delay  time.Duration
}

// Link is the hop as the route package names it.
func (h Hop) Link() route.Link { return route.Link{A: min(h.From, h.To), B: max(h.From, h.To)} }

// PathPlan is one path through the mesh.
type PathPlan struct {
	Nodes route.Path
	// Hops are indices into Plan.Hops, from the source.
	Hops []int
	// ClientAddr is the source's address on the path's first hop. It is
	// the path's identity: as a source address it selects Table on every
	// node of the path, and as a destination every node routes it back
	// along the path.
	ClientAddr netip.Addr
	Table      int
	Priority   int
}

// Plan is everything Build does, decided without touching the system, so
// that addresses, routes and media can be tested without root.
type Plan struct {
	Graph    *route.Graph
	Src, Dst int
	Config   Config // defaults filled in
	// InterferenceRange is the range MediaGroups uses (0: the graph's
	// links decide who hears whom).
	InterferenceRange float64
	Paths             []PathPlan
	Hops              []Hop
	// Nodes are the graph nodes to instantiate (every node on a path), in
	// index order.
	Nodes   []int
	Sysctls map[int][]Sysctl
	Routes  map[int][]netns.Route
	Rules   map[int][]netns.Rule
	// Service is the destination's address, on its loopback.
	Service netip.Addr
}

// LinkNodeSysctls are written in every link node: no IPv6, so that the
// node's own stack sends nothing (router solicitations, MLD reports)
// onto the wire the emulator owns.
var LinkNodeSysctls = []Sysctl{
	{Key: "net.ipv6.conf.all.disable_ipv6", Value: "1"},
	{Key: "net.ipv6.conf.default.disable_ipv6", Value: "1"},
}

// nodeSysctls are a mesh node's settings. Reverse-path filtering is off
// because under policy routing a node may receive a path's packets on an
// interface its main table would not choose; IPv6 is off so that the
// emulated links carry only what the experiment sends (IPv4).
func nodeSysctls(relay bool) []Sysctl {
	fwd := "0"
	if relay {
		fwd = "1"
	}
	return []Sysctl{
		{Key: "net.ipv4.conf.all.rp_filter", Value: "0"},
		{Key: "net.ipv4.conf.default.rp_filter", Value: "0"},
		{Key: "net.ipv6.conf.all.disable_ipv6", Value: "1"},
		{Key: "net.ipv6.conf.default.disable_ipv6", Value: "1"},
		{Key: "net.ipv4.ip_forward", Value: fwd},
	}
}

// NodeIf is the interface hop h has in its From and To nodes.
func NodeIf(h int) string { return fmt.Sprintf("hop%d", h) }

// LinkIfs are the link node's interfaces of hop h, facing From and To.
func LinkIfs(h int) (a, b string) { return fmt.Sprintf("hop%d-a", h), fmt.Sprintf("hop%d-b", h) }

// NewPlan lays paths from src to dst of g out as a mesh. The paths must
// be valid simple paths of g between the two, pairwise link-disjoint
// (each hop is one emulated link owned by one path). Intermediate nodes
// may be shared, as link-disjoint paths may do.
func NewPlan(g *route.Graph, src, dst int, paths []route.Path, cfg Config) (*Plan, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("mesh: no graph")
	}
	if src == dst {
		return nil, fmt.Errorf("mesh: %w", route.ErrSameNode)
	}
	if len(paths) == 0 || len(paths) > MaxPaths {
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
	p := &Plan{
		Graph: g, Src: src, Dst: dst, Config: cfg,
		Nodes:   route.PathNodes(paths),
		Sysctls: map[int][]Sysctl{},
		Routes:  map[int][]netns.Route{},
		Rules:   map[int][]netns.Rule{},
		Service: Service,
	}
	p.InterferenceRange = interferenceRange(g, p.Nodes, cfg.InterferenceRange)

	nhops := 0
	for _, path := range paths {
		nhops += path.Hops()
	}
	if nhops > maxHops {
		return nil, fmt.Errorf("mesh: %d hops, but %v holds only %d /30 subnets", nhops, HopBase, maxHops)
	}
	for k, path := range paths {
		pp := PathPlan{Nodes: route.ClonePath(path), Table: PathTableBase + k, Priority: RulePriorityBase + k}
		for i := 1; i < len(path); i++ {
			h := len(p.Hops)
			sub := HopSubnet(h)
			la, lb := LinkIfs(h)
			hop := Hop{
				Path: k, Index: i - 1,
				From: path[i-1], To: path[i],
				Subnet:   sub,
				FromAddr: sub.Addr().Next(), ToAddr: sub.Addr().Next().Next(),
				FromIf: NodeIf(h), ToIf: NodeIf(h),
				LinkA: la, LinkB: lb,
			}
			hop.Length, hop.Delay = hopDelay(g, hop.From, hop.To, cfg)
			p.Hops = append(p.Hops, hop)
			pp.Hops = append(pp.Hops, h)
		}
		pp.ClientAddr = p.Hops[pp.Hops[0]].FromAddr
		p.Paths = append(p.Paths, pp)
	}

	for _, v := range p.Nodes {
		p.Sysctls[v] = nodeSysctls(v != src && v != dst)
	}
	for k, pp := range p.Paths {
		client := netip.PrefixFrom(pp.ClientAddr, 32)
		for i, h := range pp.Hops {
			hop := p.Hops[h]
			// Forward: every node but the destination sends the path's
			// packets (source = ClientAddr) on along the path.
			p.Routes[hop.From] = append(p.Routes[hop.From], netns.Route{
				Dst: netip.PrefixFrom(p.Service, 32), Via: hop.ToAddr, Dev: hop.FromIf, Table: pp.Table})
			p.Rules[hop.From] = append(p.Rules[hop.From], netns.Rule{Src: client, Table: pp.Table, Priority: pp.Priority})
			if k == 0 && i == 0 {
				p.Routes[hop.From] = append(p.Routes[hop.From], netns.Route{
					Dst: netip.PrefixFrom(p.Service, 32), Via: hop.ToAddr, Dev: hop.FromIf, Metric: SourceMetric})
			}
			// Back: every node but the source routes the path's address
			// back along it; the destination answers from the service
			// address.
			r := netns.Route{Dst: client, Via: hop.FromAddr, Dev: hop.ToIf}
			if hop.To == dst {
				r.Src = p.Service
			}
			p.Routes[hop.To] = append(p.Routes[hop.To], r)
		}
	}
	return p, nil
}

// HopSubnet is hop h's /30: the h-th block of four addresses of HopBase.
func HopSubnet(h int) netip.Prefix {
	b := HopBase.Addr().As4()
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])+uint32(4*h))
	return netip.PrefixFrom(netip.AddrFrom4(b), 30)
}

// interferenceRange resolves Config.InterferenceRange for g.
func interferenceRange(g *route.Graph, nodes []int, want float64) float64 {
	if want < 0 {
		return 0
	}
	if want > 0 {
		return want
	}
	if g.Radius() <= 0 {
		return 0
	}
	for _, v := range nodes {
		if !g.Node(v).HasPos {
			return 0
		}
	}
	return DefaultInterferenceFactor * g.Radius()
}

// hopDelay is the link's length and its one-way delay (see Config).
func hopDelay(g *route.Graph, a, b int, cfg Config) (float64, time.Duration) {
	na, nb := g.Node(a), g.Node(b)
	if !na.HasPos || !nb.HasPos {
		return math.NaN(), cfg.MinDelay + (cfg.MaxDelay-cfg.MinDelay)/2
	}
	d := na.Pos.Dist(nb.Pos)
	if g.Radius() <= 0 {
		return d, cfg.MinDelay + (cfg.MaxDelay-cfg.MinDelay)/2
	}
	f := math.Min(d/g.Radius(), 1)
	return d, cfg.MinDelay + time.Duration(math.Round(f*float64(cfg.MaxDelay-cfg.MinDelay)))
}

// MediaGroups partitions the hops into the capacity budgets of the radio
// model ch: each group becomes one linkemu.Medium that every direction of
// its hops serializes on. SingleChannel groups the hops of all paths
// together with route.ContentionGroups; TwoChannels does so path by path,
// so no group spans two paths. Groups hold hop indices in increasing
// order and are ordered by their first hop.
//
// Since consecutive hops of a path share a node, and all paths share the
// source and the destination, the transitive grouping makes each path one
// group in TwoChannels and everything one group in SingleChannel, whatever
// the interference range: a path of n hops carries at most Rate/n.
func (p *Plan) MediaGroups(ch Channels) ([][]int, error) {
	if !ch.valid() {
		return nil, fmt.Errorf("mesh: %d channels (want 1 or 2)", int(ch))
	}
	var sets [][]route.Path
	if ch == SingleChannel {
		all := make([]route.Path, len(p.Paths))
		for k, pp := range p.Paths {
			all[k] = pp.Nodes
		}
		sets = [][]route.Path{all}
	} else {
		for _, pp := range p.Paths {
			sets = append(sets, []route.Path{pp.Nodes})
		}
	}
	hopOf := map[route.Link]int{}
	for h, hop := range p.Hops {
		hopOf[hop.Link()] = h
	}
	var out [][]int
	for _, set := range sets {
		groups, err := p.Graph.ContentionGroups(set, p.InterferenceRange)
		if err != nil {
			return nil, fmt.Errorf("mesh: contention groups: %w", err)
		}
		for _, grp := range groups {
			var hs []int
			for _, l := range grp {
				h, ok := hopOf[l]
				if !ok {
					return nil, fmt.Errorf("mesh: contention group names link %d–%d, which no path uses", l.A, l.B)
				}
				hs = append(hs, h)
			}
			slices.Sort(hs)
			out = append(out, hs)
		}
	}
	// Order by first hop, so the result does not depend on how the sets
	// were split.
	slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out, nil
}

// PathString is path k as node IDs, "s → a → d".
func (p *Plan) PathString(k int) string {
	return strings.Join(p.Graph.IDs(p.Paths[k].Nodes), " → ")
}

// String describes the plan: one line per path and per hop.
func (p *Plan) String() string {
	var b strings.Builder
	for k, pp := range p.Paths {
		fmt.Fprintf(&b, "path %d: %s (%d hops, address %v, table %d)\n", k, p.PathString(k), pp.Nodes.Hops(), pp.ClientAddr, pp.Table)
		for _, h := range pp.Hops {
			hop := p.Hops[h]
			fmt.Fprintf(&b, "  hop %d: %s %v —[%s]— %s %v, %v\n", h, p.Graph.ID(hop.From), hop.FromAddr,
				hop.Delay, p.Graph.ID(hop.To), hop.ToAddr, hop.Subnet)
		}
	}
	return b.String()
}
