package scenario

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/internal/tomlerr"
)

// Error is every error Parse and Load return: one line naming the file, the
// line when known, the key and the problem. It is the type braid's config
// uses too.
type Error = tomlerr.Error

// The raw* types mirror the file. Values stay strings until the parser reads
// them, so that an error names the key with its index rather than a Go type.
// Fields appear twice (rawLink and rawDir) because the symmetric keys of a
// link and its per-direction tables are separate tables in the file.
type rawFile struct {
	Name        string         `toml:"name"`
	Description string         `toml:"description"`
	Nodes       []rawNode      `toml:"nodes"`
	Links       []rawLink      `toml:"links"`
	Media       []rawMedium    `toml:"media"`
	Experiment  rawExperiment  `toml:"experiment"`
	TCP         rawTCP         `toml:"tcp"`
	Transports  []rawTransport `toml:"transports"`
	Sweep       rawSweep       `toml:"sweep"`
	Events      []rawEvent     `toml:"events"`
}

type rawNode struct {
	Name string `toml:"name"`
	Role string `toml:"role"`
}

type rawLink struct {
	Name       string  `toml:"name"`
	A          string  `toml:"a"`
	B          string  `toml:"b"`
	Via        string  `toml:"via"`
	Subnet     string  `toml:"subnet"`
	RTT        string  `toml:"rtt"`
	Rate       string  `toml:"rate"`
	Delay      string  `toml:"delay"`
	Jitter     string  `toml:"jitter"`
	Loss       string  `toml:"loss"`
	QueueLimit *int64  `toml:"queue_limit"`
	Medium     string  `toml:"medium"`
	MTU        *int64  `toml:"mtu"`
	AToB       *rawDir `toml:"a_to_b"`
	BToA       *rawDir `toml:"b_to_a"`
}

type rawMedium struct {
	Name       string `toml:"name"`
	Rate       string `toml:"rate"`
	QueueLimit *int64 `toml:"queue_limit"`
}

type rawDir struct {
	Rate       string `toml:"rate"`
	Delay      string `toml:"delay"`
	Jitter     string `toml:"jitter"`
	Loss       string `toml:"loss"`
	QueueLimit *int64 `toml:"queue_limit"`
}

type rawExperiment struct {
	Size    string `toml:"size"`
	Reps    *int64 `toml:"reps"`
	Timeout string `toml:"timeout"`
	Seed    *int64 `toml:"seed"`

	Competing     *int64 `toml:"competing"`
	CompetingPath string `toml:"competing_path"`

	Latency         *bool  `toml:"latency"`
	LatencyInterval string `toml:"latency_interval"`
	LatencyIdle     string `toml:"latency_idle"`

	Workload         string `toml:"workload"`
	RealtimeRate     string `toml:"realtime_rate"`
	RealtimeSize     *int64 `toml:"realtime_size"`
	RealtimeDuration string `toml:"realtime_duration"`
	RealtimeDeadline string `toml:"realtime_deadline"`

	ECN *bool `toml:"ecn"`
}

// rawTCP is both [tcp] and [tcp.nodes.NAME]; nodes inside a per-node table
// is refused by the parser.
type rawTCP struct {
	Congestion      string            `toml:"congestion"`
	Rmem            []int64           `toml:"rmem"`
	Wmem            []int64           `toml:"wmem"`
	CoreRmemMax     *int64            `toml:"core_rmem_max"`
	CoreRmemDefault *int64            `toml:"core_rmem_default"`
	CoreWmemMax     *int64            `toml:"core_wmem_max"`
	CoreWmemDefault *int64            `toml:"core_wmem_default"`
	NoMetricsSave   *bool             `toml:"no_metrics_save"`
	Nodes           map[string]rawTCP `toml:"nodes"`
}

type rawTransport struct {
	Name       string    `toml:"name"`
	Label      string    `toml:"label"`
	Path       string    `toml:"path"`
	Scheduler  string    `toml:"scheduler"`
	Weights    []float64 `toml:"weights"`
	Reorder    string    `toml:"reorder"`
	Congestion string    `toml:"congestion"`
	Recovery   string    `toml:"recovery"`
	Cipher     string    `toml:"cipher"`
	Subflows   *int64    `toml:"subflows"`
	Priorities []int64   `toml:"priorities"`
}

type rawSweep struct {
	RTT           []string  `toml:"rtt"`
	RTTRatio      []float64 `toml:"rtt_ratio"`
	Rate          []string  `toml:"rate"`
	RateRatio     []float64 `toml:"rate_ratio"`
	Loss          []string  `toml:"loss"`
	LossSecondary []string  `toml:"loss_secondary"`
	Scheduler     []string  `toml:"scheduler"`
	Congestion    []string  `toml:"congestion"`
}

// Load reads and parses the scenario file at path.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, tomlerr.FileError(path, err)
	}
	return Parse(path, data)
}

// Parse parses and validates data as the scenario file name (used in errors
// and, without directory and ".toml", as the default scenario name), and
// expands its sweep.
func Parse(name string, data []byte) (*Scenario, error) {
	var raw rawFile
	if err := tomlerr.Decode(name, data, &raw); err != nil {
		return nil, err
	}
	p := &parser{file: name, lines: tomlerr.KeyLines(data)}
	s := p.build(&raw)
	if p.err != nil {
		return nil, p.err
	}
	return s, nil
}

// parser keeps the first error; later checks still run but cannot replace
// it. Steps whose input depends on an earlier step stop when it failed.
type parser struct {
	file  string
	lines tomlerr.Lines
	err   error

	// explicitSched[i] is true when transports[i] set its own scheduler,
	// which the scheduler axis then leaves alone.
	explicitSched []bool
	// explicitCong is the same for the congestion controller.
	explicitCong []bool
}

func (p *parser) fail(key, format string, args ...any) {
	if p.err == nil {
		p.err = &Error{File: p.file, Line: p.lines.Line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
}

func (p *parser) build(raw *rawFile) *Scenario {
	s := &Scenario{File: p.file, Name: raw.Name, Description: raw.Description}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(p.file), ".toml")
	}
	if len(raw.Nodes) == 0 {
		s.Topology = p.patchTestbed(raw.Links)
	} else {
		s.Topology = p.topology(raw.Nodes, raw.Links)
	}
	if p.err != nil {
		return s
	}
	p.media(s.Topology, raw.Media, raw.Links)
	if p.err != nil {
		return s
	}
	paths := s.Topology.Paths()
	for i, l := range s.Topology.Links {
		if l.MTU > 0 && !slices.Contains(paths, &s.Topology.Links[i]) {
			p.fail("links", "link %q sets mtu, which only a path (a client–server link) takes", l.Name)
		}
	}
	p.tcp(s.Topology, &raw.TCP)
	p.experiment(&s.Experiment, &raw.Experiment)
	p.competingPath(s.Topology, &s.Experiment)
	s.Experiment.Events = p.events(s.Topology, raw.Events)
	if s.Experiment.ECN {
		for i := range s.Topology.Nodes {
			if n := &s.Topology.Nodes[i]; n.Role != RoleLink {
				n.TCP.ECN = true
			}
		}
	}
	s.Transports = p.transports(s.Topology, raw.Transports)
	if p.err != nil {
		return s
	}
	s.Sweep = p.sweep(s.Topology, s.Transports, &raw.Sweep)
	if p.err != nil {
		return s
	}
	s.points = p.expand(s)
	return s
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

func (p *parser) name(key, s string) bool {
	switch {
	case s == "":
		p.fail(key, "required")
	case len(s) > MaxNameLen:
		p.fail(key, "%q is %d bytes; names have at most %d (interface names are built from them)", s, len(s), MaxNameLen)
	case !nameRE.MatchString(s):
		p.fail(key, "%q is not a valid name (lower-case letters, digits and '-', starting with a letter)", s)
	default:
		return true
	}
	return false
}

// topology builds a testbed declared in full by [[nodes]] and [[links]].
func (p *parser) topology(rn []rawNode, rl []rawLink) *Topology {
	t := &Topology{}
	if len(rn) > MaxLinks {
		p.fail("nodes", "%d nodes; at most %d", len(rn), MaxLinks)
		return t
	}
	for i, n := range rn {
		key := fmt.Sprintf("nodes[%d]", i)
		p.name(key+".name", n.Name)
		if j := slices.IndexFunc(t.Nodes, func(x Node) bool { return x.Name == n.Name }); j >= 0 && n.Name != "" {
			p.fail(key+".name", "%q duplicates nodes[%d].name", n.Name, j)
		}
		role := Role(n.Role)
		if n.Role == "" {
			p.fail(key+".role", "required (one of: %s)", joinRoles())
		} else if !slices.Contains(Roles, role) {
			p.fail(key+".role", "unknown role %q (valid: %s)", n.Role, joinRoles())
		}
		t.Nodes = append(t.Nodes, Node{Name: n.Name, Role: role})
	}
	for _, r := range []Role{RoleClient, RoleServer, RoleWeb} {
		var names []string
		for _, n := range t.Nodes {
			if n.Role == r {
				names = append(names, n.Name)
			}
		}
		if len(names) != 1 {
			p.fail("nodes", "need exactly one node with role = %q, found %d%s", r, len(names), listSuffix(names))
		}
	}
	if p.err != nil {
		return t
	}

	if len(rl) == 0 {
		p.fail("links", "required with [[nodes]]: at least one client–server link and one server–web link")
		return t
	}
	if len(rl) > MaxLinks {
		p.fail("links", "%d links; at most %d", len(rl), MaxLinks)
		return t
	}
	viaUsed := map[string]int{}
	for i, r := range rl {
		key := fmt.Sprintf("links[%d]", i)
		l := Link{Name: r.Name, A: r.A, B: r.B, Via: r.Via}
		l.AB.QueueLimit = DefaultQueueLimit
		l.BA.QueueLimit = DefaultQueueLimit
		p.name(key+".name", r.Name)
		if j := slices.IndexFunc(t.Links, func(x Link) bool { return x.Name == r.Name }); j >= 0 && r.Name != "" {
			p.fail(key+".name", "%q duplicates links[%d].name", r.Name, j)
		}
		p.endpoints(t, key, r.A, r.B)
		if r.Via != "" {
			v := t.Node(r.Via)
			switch {
			case v == nil:
				p.fail(key+".via", "no node %q (nodes: %s)", r.Via, nodeNames(t))
			case v.Role != RoleLink:
				p.fail(key+".via", "node %q has role %q; via names a node with role = \"link\"", r.Via, v.Role)
			default:
				if j, ok := viaUsed[r.Via]; ok {
					p.fail(key+".via", "link node %q already carries links[%d]; a link node joins exactly two interfaces", r.Via, j)
				}
				viaUsed[r.Via] = i
			}
		}
		p.shaping(key, &l, &r)
		p.mtu(key, &l, &r)
		t.Links = append(t.Links, l)
	}
	for i, n := range t.Nodes {
		if _, ok := viaUsed[n.Name]; n.Role == RoleLink && !ok {
			p.fail(fmt.Sprintf("nodes[%d]", i), "link node %q is the via of no link", n.Name)
		}
	}
	if p.err != nil {
		return t
	}
	if len(t.Paths()) == 0 {
		p.fail("links", "no link joins the client %q and the server %q", t.Client().Name, t.Server().Name)
	}
	var web []string
	for _, l := range t.Links {
		if l.A == t.Server().Name && l.B == t.Web().Name {
			web = append(web, l.Name)
		}
	}
	if len(web) != 1 {
		p.fail("links", "need exactly one link between the server %q and the web server %q, found %d%s", t.Server().Name, t.Web().Name, len(web), listSuffix(web))
	}
	p.subnets(t, rl)
	p.checkLinks(t, rl, true)
	return t
}

// endpoints enforces the orientation that gives a_to_b and b_to_a their
// meaning: a is the end nearer the client.
func (p *parser) endpoints(t *Topology, key, a, b string) {
	na, nb := t.Node(a), t.Node(b)
	switch {
	case a == "":
		p.fail(key+".a", "required (the end nearer the client)")
	case b == "":
		p.fail(key+".b", "required (the end nearer the web server)")
	case na == nil:
		p.fail(key+".a", "no node %q (nodes: %s)", a, nodeNames(t))
	case nb == nil:
		p.fail(key+".b", "no node %q (nodes: %s)", b, nodeNames(t))
	case na.Role == RoleClient && nb.Role == RoleServer, na.Role == RoleServer && nb.Role == RoleWeb:
	case na.Role == RoleServer && nb.Role == RoleClient, na.Role == RoleWeb && nb.Role == RoleServer:
		p.fail(key, "a = %q, b = %q: a is the end nearer the client; swap them (and a_to_b with b_to_a)", a, b)
	default:
		p.fail(key, "links join a client to a server (a path) or a server to a web server; %q (%s) to %q (%s) is neither (a link node goes in via)", a, na.Role, b, nb.Role)
	}
}

// DefaultTopology is the paper's testbed (its Figure 1): a VPN client and
// server joined by two 10 Mbit/s paths, each through its own link node, and
// the web server 1 Gbit/s behind the VPN server. Both paths start at 20 ms
// RTT (Table 2's primary path) and no loss; scenario files change that.
func DefaultTopology() *Topology {
	tcp := DefaultTCP()
	path := Shaping{Rate: 10 * Mbit, Delay: 10 * time.Millisecond, QueueLimit: DefaultQueueLimit}
	lan := Shaping{Rate: 1 * Gbit, QueueLimit: DefaultQueueLimit}
	link := func(name, a, b, via string, n int, sh Shaping) Link {
		sub := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(n), 0}), 24)
		l := Link{Name: name, A: a, B: b, Via: via, Subnet: sub, AB: sh, BA: sh}
		l.AddrA, l.AddrB = hostAddrs(sub)
		return l
	}
	return &Topology{
		Nodes: []Node{
			{Name: "client", Role: RoleClient, TCP: tcp},
			{Name: "primary", Role: RoleLink, TCP: tcp},
			{Name: "secondary", Role: RoleLink, TCP: tcp},
			{Name: "server", Role: RoleServer, TCP: tcp},
			{Name: "web", Role: RoleWeb, TCP: tcp},
		},
		Links: []Link{
			link("primary", "client", "server", "primary", 1, path),
			link("secondary", "client", "server", "secondary", 2, path),
			link("lan", "server", "web", "", 3, lan),
		},
	}
}

// patchTestbed applies [[links]] entries to the built-in testbed: without
// [[nodes]], a file changes the testbed's links by name rather than
// redeclaring five nodes and three links.
func (p *parser) patchTestbed(rl []rawLink) *Topology {
	t := DefaultTopology()
	seen := map[string]int{}
	var names []string
	for _, l := range t.Links {
		names = append(names, l.Name)
	}
	for i, r := range rl {
		key := fmt.Sprintf("links[%d]", i)
		if r.Name == "" {
			p.fail(key+".name", "required (without [[nodes]], links name a link of the built-in testbed: %s)", strings.Join(names, ", "))
			continue
		}
		l := t.Link(r.Name)
		if l == nil {
			p.fail(key+".name", "no link %q in the built-in testbed (links: %s); declare [[nodes]] and every link to build another topology", r.Name, strings.Join(names, ", "))
			continue
		}
		if j, ok := seen[r.Name]; ok {
			p.fail(key+".name", "%q duplicates links[%d].name", r.Name, j)
		}
		seen[r.Name] = i
		p.mtu(key, l, &r)
		for _, f := range []struct{ k, v string }{{"a", r.A}, {"b", r.B}, {"via", r.Via}, {"subnet", r.Subnet}} {
			if f.v != "" {
				p.fail(key+"."+f.k, "is fixed in the built-in testbed; declare [[nodes]] and every link to build another topology")
			}
		}
		p.shaping(key, l, &r)
	}
	p.checkLinks(t, rl, false)
	return t
}

// shaping applies a link's symmetric keys to both directions, then its
// a_to_b and b_to_a tables.
func (p *parser) shaping(key string, l *Link, r *rawLink) {
	sym := rawDir{Rate: r.Rate, Delay: r.Delay, Jitter: r.Jitter, Loss: r.Loss, QueueLimit: r.QueueLimit}
	if r.RTT != "" {
		if r.Delay != "" {
			p.fail(key+".rtt", "set together with delay; give one (rtt is the sum of both directions' delays)")
		}
		d := p.duration(key+".rtt", r.RTT, 2*MaxDelay)
		l.AB.Delay, l.BA.Delay = splitRTT(d)
	}
	p.dir(key, &l.AB, &sym)
	p.dir(key, &l.BA, &sym)
	if r.AToB != nil {
		p.dir(key+".a_to_b", &l.AB, r.AToB)
	}
	if r.BToA != nil {
		p.dir(key+".b_to_a", &l.BA, r.BToA)
	}
}

// mtu reads a link's mtu: that of the client's end of a path, whose larger
// datagrams then vanish on the way in without an error (a black hole).
func (p *parser) mtu(key string, l *Link, r *rawLink) {
	if r.MTU == nil {
		return
	}
	m := *r.MTU
	if m < MinMTU || m > MaxMTU {
		p.fail(key+".mtu", "%d out of range (%d..%d)", m, MinMTU, MaxMTU)
	}
	l.MTU = int(m)
}

// splitRTT gives each direction half the RTT, the odd nanosecond to the
// return direction, so that the sum is exact.
func splitRTT(d time.Duration) (ab, ba time.Duration) { return d / 2, d - d/2 }

func (p *parser) dir(key string, sh *Shaping, d *rawDir) {
	if d.Rate != "" {
		r, err := ParseRate(d.Rate)
		if err != nil {
			p.fail(key+".rate", "%v", err)
		}
		sh.Rate = r
	}
	if d.Delay != "" {
		sh.Delay = p.duration(key+".delay", d.Delay, MaxDelay)
	}
	if d.Jitter != "" {
		sh.Jitter = p.duration(key+".jitter", d.Jitter, MaxDelay)
	}
	if d.Loss != "" {
		l, err := ParseLoss(d.Loss)
		if err != nil {
			p.fail(key+".loss", "%v", err)
		}
		sh.Loss = l
	}
	if d.QueueLimit != nil {
		q := *d.QueueLimit
		if q < 1 || q > MaxQueueLimit {
			p.fail(key+".queue_limit", "%d out of range (1..%d packets)", q, MaxQueueLimit)
		}
		sh.QueueLimit = int(q)
	}
}

func (p *parser) duration(key, s string, max time.Duration) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		p.fail(key, "%q is not a duration (e.g. \"20ms\", \"1.5ms\", \"100us\")", s)
		return 0
	}
	if d < 0 || d > max {
		p.fail(key, "%v out of range (0..%v)", d, max)
		return 0
	}
	return d
}

// checkLinks validates what only the resolved links show: delay, jitter and
// loss need an emulator, which runs on a link node. In a patched testbed
// (full = false) the error names the [[links]] entry that set the link.
func (p *parser) checkLinks(t *Topology, rl []rawLink, full bool) {
	for i := range t.Links {
		l := &t.Links[i]
		key := fmt.Sprintf("links[%d]", i)
		if !full {
			key = "links"
			for j, r := range rl {
				if r.Name == l.Name {
					key = fmt.Sprintf("links[%d]", j)
				}
			}
		}
		p.checkShaping(key, l, "")
	}
}

// checkShaping validates one link's resolved shaping. where, if not "",
// says which sweep point produced it.
func (p *parser) checkShaping(key string, l *Link, where string) {
	for _, d := range []struct {
		name string
		sh   *Shaping
	}{{"a_to_b", &l.AB}, {"b_to_a", &l.BA}} {
		sh := d.sh
		if !l.Emulated() && (sh.Delay != 0 || sh.Jitter != 0 || !sh.Loss.IsZero()) {
			p.fail(key, "%slink %q has no link node (via), so nothing can add its delay, jitter or loss; only rate is shaped on a plain veth pair", where, l.Name)
			return
		}
		if sh.Jitter > sh.Delay {
			p.fail(key, "%slink %q %s: jitter %v exceeds delay %v (the delay is spread over delay±jitter)", where, l.Name, d.name, sh.Jitter, sh.Delay)
			return
		}
		if sh.Rate != 0 && (sh.Rate < MinRate || sh.Rate > MaxRate) {
			p.fail(key, "%slink %q %s: rate %v out of range (%v..%v)", where, l.Name, d.name, sh.Rate, MinRate, MaxRate)
			return
		}
	}
}

// subnets assigns each link its subnet: the one given, else the first free
// 198.18.N.0/24 counting from N = 1, so the testbed's paths get
// 198.18.1.0/24 and 198.18.2.0/24 as braid's example config expects.
func (p *parser) subnets(t *Topology, rl []rawLink) {
	var taken []netip.Prefix
	for i, r := range rl {
		if r.Subnet == "" {
			continue
		}
		key := fmt.Sprintf("links[%d].subnet", i)
		pfx, err := netip.ParsePrefix(r.Subnet)
		switch {
		case err != nil:
			p.fail(key, "%q is not a prefix (e.g. \"198.18.7.0/24\")", r.Subnet)
			continue
		case pfx.Masked() != pfx:
			p.fail(key, "%q has host bits set (did you mean %q?)", r.Subnet, pfx.Masked().String())
			continue
		case !pfx.Addr().Is4() || pfx.Bits() < LabPrefix.Bits() || !LabPrefix.Contains(pfx.Addr()):
			p.fail(key, "%q is outside %v, the benchmarking range every lab link uses", r.Subnet, LabPrefix)
			continue
		case pfx.Bits() > 30:
			p.fail(key, "%q is too small: a link needs two host addresses (at most /30)", r.Subnet)
			continue
		}
		for j, q := range taken {
			if q.IsValid() && q.Overlaps(pfx) {
				p.fail(key, "%v overlaps the subnet of links[%d]", pfx, j)
			}
		}
		taken = append(taken, pfx)
		t.Links[i].Subnet = pfx
	}
	n := 1
	for i := range t.Links {
		l := &t.Links[i]
		if !l.Subnet.IsValid() {
			for {
				c := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(n), 0}), 24)
				n++
				if !slices.ContainsFunc(taken, c.Overlaps) {
					l.Subnet = c
					break
				}
			}
		}
		l.AddrA, l.AddrB = hostAddrs(l.Subnet)
	}
}

func hostAddrs(sub netip.Prefix) (a, b netip.Prefix) {
	x := sub.Addr().Next()
	return netip.PrefixFrom(x, sub.Bits()), netip.PrefixFrom(x.Next(), sub.Bits())
}

func (p *parser) tcp(t *Topology, raw *rawTCP) {
	base := DefaultTCP()
	p.applyTCP("tcp", &base, raw)
	for i := range t.Nodes {
		t.Nodes[i].TCP = base
	}
	names := make([]string, 0, len(raw.Nodes))
	for n := range raw.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		key := "tcp.nodes." + name
		rt := raw.Nodes[name]
		n := t.Node(name)
		if n == nil {
			p.fail(key, "no node %q (nodes: %s)", name, nodeNames(t))
			continue
		}
		if rt.Nodes != nil {
			p.fail(key+".nodes", "per-node settings do not nest")
		}
		tcp := base
		p.applyTCP(key, &tcp, &rt)
		n.TCP = tcp
	}
}

// coupledCC are MPTCP's coupled algorithms from the out-of-tree kernel the
// paper used; a file naming one gets a specific answer.
var coupledCC = []string{"balia", "lia", "olia", "wvegas"}

func (p *parser) applyTCP(key string, t *TCP, raw *rawTCP) {
	if raw.Congestion != "" {
		switch {
		case slices.Contains(CongestionControls, raw.Congestion):
		case slices.Contains(coupledCC, raw.Congestion):
			p.fail(key+".congestion", "%q is a coupled MPTCP algorithm of the out-of-tree MPTCP kernel; mainline Linux has none (valid: %s)", raw.Congestion, strings.Join(CongestionControls, ", "))
		default:
			p.fail(key+".congestion", "unknown congestion control %q (valid: %s)", raw.Congestion, strings.Join(CongestionControls, ", "))
		}
		t.Congestion = raw.Congestion
	}
	p.triple(key+".rmem", &t.Rmem, raw.Rmem)
	p.triple(key+".wmem", &t.Wmem, raw.Wmem)
	for _, f := range []struct {
		k   string
		v   *int64
		dst *int
	}{
		{"core_rmem_max", raw.CoreRmemMax, &t.CoreRmemMax},
		{"core_rmem_default", raw.CoreRmemDefault, &t.CoreRmemDefault},
		{"core_wmem_max", raw.CoreWmemMax, &t.CoreWmemMax},
		{"core_wmem_default", raw.CoreWmemDefault, &t.CoreWmemDefault},
	} {
		if f.v != nil {
			if *f.v < 4096 || *f.v > math.MaxInt32 {
				p.fail(key+"."+f.k, "%d out of range (4096..%d bytes)", *f.v, math.MaxInt32)
			}
			*f.dst = int(*f.v)
		}
	}
	if raw.NoMetricsSave != nil {
		t.NoMetricsSave = *raw.NoMetricsSave
	}
}

func (p *parser) triple(key string, dst *[3]int, v []int64) {
	if v == nil {
		return
	}
	if len(v) != 3 {
		p.fail(key, "%d values; give three: min, default, max (bytes)", len(v))
		return
	}
	for i, x := range v {
		if x < 1 || x > math.MaxInt32 {
			p.fail(fmt.Sprintf("%s[%d]", key, i), "%d out of range (1..%d bytes)", x, math.MaxInt32)
			return
		}
	}
	if v[0] > v[1] || v[1] > v[2] {
		p.fail(key, "[%d, %d, %d] is not ordered min ≤ default ≤ max", v[0], v[1], v[2])
		return
	}
	*dst = [3]int{int(v[0]), int(v[1]), int(v[2])}
}

func (p *parser) experiment(e *Experiment, raw *rawExperiment) {
	e.Size = DefaultSize
	if raw.Size != "" {
		n, err := ParseSize(raw.Size)
		if err != nil {
			p.fail("experiment.size", "%v", err)
		}
		e.Size = n
	}
	e.Reps = DefaultReps
	if raw.Reps != nil {
		r := *raw.Reps
		if r < 1 || r > MaxReps {
			p.fail("experiment.reps", "%d out of range (1..%d)", r, MaxReps)
		}
		e.Reps = int(r)
	}
	e.Timeout = DefaultTimeout
	if raw.Timeout != "" {
		d, err := time.ParseDuration(raw.Timeout)
		switch {
		case err != nil:
			p.fail("experiment.timeout", "%q is not a duration (e.g. \"90s\", \"5m\")", raw.Timeout)
		case d < MinTimeout || d > MaxTimeout:
			p.fail("experiment.timeout", "%v out of range (%v..%v)", d, MinTimeout, MaxTimeout)
		default:
			e.Timeout = d
		}
	}
	if raw.Seed != nil {
		if *raw.Seed < 0 {
			p.fail("experiment.seed", "%d is negative", *raw.Seed)
		}
		e.Seed = uint64(*raw.Seed)
	}
	if raw.Competing != nil {
		if n := *raw.Competing; n < 0 || n > MaxCompeting {
			p.fail("experiment.competing", "%d out of range (0..%d)", n, MaxCompeting)
		}
		e.Competing = int(*raw.Competing)
	}
	if raw.CompetingPath != "" && e.Competing == 0 {
		p.fail("experiment.competing_path", "set without competing flows (experiment.competing)")
	}
	e.CompetingPath = raw.CompetingPath
	p.latency(e, raw)
	p.workload(e, raw)
	if raw.ECN != nil {
		e.ECN = *raw.ECN
	}
}

// durationIn reads an [experiment] duration within lo..hi; def when unset.
func (p *parser) durationIn(key, s string, def, lo, hi time.Duration) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.fail(key, "%q is not a duration (e.g. \"10ms\", \"1s\")", s)
	case d < lo || d > hi:
		p.fail(key, "%v out of range (%v..%v)", d, lo, hi)
	default:
		return d
	}
	return def
}

// latency reads the latency probes' keys.
func (p *parser) latency(e *Experiment, raw *rawExperiment) {
	e.Latency = raw.Latency != nil && *raw.Latency
	for _, k := range []struct{ key, v string }{{"latency_interval", raw.LatencyInterval}, {"latency_idle", raw.LatencyIdle}} {
		if k.v != "" && !e.Latency {
			p.fail("experiment."+k.key, "set without latency = true")
		}
	}
	e.LatencyInterval = p.durationIn("experiment.latency_interval", raw.LatencyInterval, DefaultLatencyInterval, MinLatencyInterval, MaxLatencyInterval)
	e.LatencyIdle = p.durationIn("experiment.latency_idle", raw.LatencyIdle, DefaultLatencyIdle, MinLatencyIdle, MaxLatencyIdle)
}

// workload reads experiment.workload and the real-time flow's keys.
func (p *parser) workload(e *Experiment, raw *rawExperiment) {
	e.Workload = WorkloadDownload
	if raw.Workload != "" {
		e.Workload = p.oneOf("experiment.workload", "workload", raw.Workload, Workloads)
	}
	rt := e.Workload == WorkloadRealtime
	for _, k := range []struct {
		key string
		set bool
	}{{"realtime_rate", raw.RealtimeRate != ""}, {"realtime_size", raw.RealtimeSize != nil},
		{"realtime_duration", raw.RealtimeDuration != ""}, {"realtime_deadline", raw.RealtimeDeadline != ""}} {
		if k.set && !rt {
			p.fail("experiment."+k.key, "set without workload = %q", WorkloadRealtime)
		}
	}
	if !rt {
		return
	}
	if e.Latency {
		p.fail("experiment.latency", "probes the delay under a download; workload = %q measures its own packets' delay", WorkloadRealtime)
	}
	if e.Competing > 0 {
		p.fail("experiment.competing", "competing flows run during downloads, not with workload = %q", WorkloadRealtime)
	}
	r := Realtime{Rate: DefaultRealtimeRate, Size: DefaultRealtimeSize}
	if raw.RealtimeRate != "" {
		r.Rate = parseOr(p, "experiment.realtime_rate", raw.RealtimeRate, ParseRate)
		if p.err == nil && (r.Rate < MinRate || r.Rate > MaxRate) {
			p.fail("experiment.realtime_rate", "%v out of range (%v..%v)", r.Rate, MinRate, MaxRate)
		}
	}
	if raw.RealtimeSize != nil {
		if n := *raw.RealtimeSize; n < MinRealtimeSize || n > MaxRealtimeSize {
			p.fail("experiment.realtime_size", "%d out of range (%d..%d bytes of UDP payload)", n, MinRealtimeSize, MaxRealtimeSize)
		}
		r.Size = int(*raw.RealtimeSize)
	}
	r.Duration = p.durationIn("experiment.realtime_duration", raw.RealtimeDuration, DefaultRealtimeDuration, MinRealtimeDuration, MaxRealtimeDuration)
	r.Deadline = p.durationIn("experiment.realtime_deadline", raw.RealtimeDeadline, DefaultRealtimeDeadline, MinRealtimeDeadline, MaxRealtimeDeadline)
	if p.err == nil {
		if pps := float64(r.Rate) / float64(8*r.Size); pps > MaxRealtimePPS {
			p.fail("experiment.realtime_rate", "%v of %d-byte packets is %.0f packets/s; at most %d", r.Rate, r.Size, pps, MaxRealtimePPS)
		}
	}
	e.Realtime = r
}

// defaultTransports is the list a file without [[transports]] measures: the
// issue's three-way comparison.
var defaultTransports = []rawTransport{{Name: TransportDirect}, {Name: TransportMPTCPDirect}, {Name: TransportBraid}}

func (p *parser) transports(t *Topology, raw []rawTransport) []Transport {
	if len(raw) == 0 {
		raw = defaultTransports
	}
	paths := t.Paths()
	var pathNames []string
	for _, l := range paths {
		pathNames = append(pathNames, l.Name)
	}
	var out []Transport
	for i, r := range raw {
		key := fmt.Sprintf("transports[%d]", i)
		if r.Name == "" {
			p.fail(key+".name", "required (one of: %s)", strings.Join(TransportNames(), ", "))
			return nil
		}
		kind, ok := LookupTransport(r.Name)
		if !ok {
			p.fail(key+".name", "unknown transport %q (valid: %s)", r.Name, strings.Join(TransportNames(), ", "))
			return nil
		}
		set := map[string]bool{
			OptPath: r.Path != "", OptScheduler: r.Scheduler != "", OptWeights: r.Weights != nil,
			OptReorder: r.Reorder != "", OptCongestion: r.Congestion != "", OptRecovery: r.Recovery != "",
			OptCipher: r.Cipher != "", OptSubflows: r.Subflows != nil, OptPriorities: r.Priorities != nil,
		}
		for _, opt := range optionKeys {
			if set[opt] && !kind.Accepts(opt) {
				takes := "none"
				if len(kind.Options) > 0 {
					takes = strings.Join(kind.Options, ", ")
				}
				p.fail(key+"."+opt, "transport %q takes no %s option (its options: %s)", r.Name, opt, takes)
			}
		}
		tr := Transport{Name: r.Name}
		label := []string{r.Name}
		if kind.Accepts(OptPath) {
			tr.Path = paths[0].Name
			if r.Path != "" {
				if !slices.Contains(pathNames, r.Path) {
					p.fail(key+".path", "no path %q (paths, the client–server links: %s)", r.Path, strings.Join(pathNames, ", "))
				}
				tr.Path = r.Path
				label = append(label, r.Path)
			}
		}
		if kind.Accepts(OptScheduler) {
			tr.Scheduler = config.DefaultScheduler
			if r.Scheduler != "" {
				tr.Scheduler = p.oneOf(key+".scheduler", "scheduler", r.Scheduler, config.Schedulers)
				label = append(label, r.Scheduler)
			}
		}
		if kind.Accepts(OptWeights) {
			tr.Weights = p.weights(key+".weights", r.Weights, tr.Scheduler, len(paths))
			if r.Weights != nil {
				label = append(label, formatWeights(r.Weights))
			}
		}
		if kind.Accepts(OptReorder) {
			tr.Reorder = config.DefaultReorder
			if r.Reorder != "" {
				tr.Reorder = p.oneOf(key+".reorder", "reorder mode", r.Reorder, config.Reorders)
				label = append(label, "reorder="+r.Reorder)
			}
		}
		if kind.Accepts(OptCongestion) {
			tr.Congestion = config.DefaultCongestion
			if r.Congestion != "" {
				tr.Congestion = p.oneOf(key+".congestion", "congestion controller", r.Congestion, config.CongestionChoices)
				label = append(label, "cc="+r.Congestion)
			}
		}
		if kind.Accepts(OptRecovery) && r.Recovery != "" {
			tr.Recovery = p.oneOf(key+".recovery", "recovery mode", r.Recovery, config.Recoveries)
			label = append(label, "recovery="+r.Recovery)
		}
		if kind.Accepts(OptCipher) {
			tr.Cipher = CipherDefault
			if r.Cipher != "" {
				tr.Cipher = p.oneOf(key+".cipher", "cipher", r.Cipher, []string{CipherDefault, CipherNone})
				label = append(label, "cipher="+r.Cipher)
			}
		}
		if kind.Accepts(OptSubflows) {
			tr.Subflows = 1
			if r.Subflows != nil {
				if n := *r.Subflows; n < 1 || n > MaxSubflows {
					p.fail(key+".subflows", "%d out of range (1..%d)", n, MaxSubflows)
				}
				tr.Subflows = int(*r.Subflows)
				label = append(label, fmt.Sprintf("×%d", tr.Subflows))
			}
		}
		if kind.Accepts(OptPriorities) && r.Priorities != nil {
			tr.Priorities = p.priorities(key+".priorities", r.Priorities, len(paths))
			label = append(label, "tiers="+FormatTiers(tr.Priorities))
		}
		tr.Label = strings.Join(label, " ")
		if r.Label != "" {
			tr.Label = r.Label
		}
		if p.err == nil && kind.Check != nil {
			if err := kind.Check(&tr, t); err != nil {
				p.fail(key, "%v", err)
			}
		}
		if j := slices.IndexFunc(out, func(x Transport) bool { return x.Label == tr.Label }); j >= 0 {
			p.fail(key, "label %q duplicates transports[%d]; set label to tell them apart", tr.Label, j)
		}
		p.explicitSched = append(p.explicitSched, r.Scheduler != "")
		p.explicitCong = append(p.explicitCong, r.Congestion != "")
		out = append(out, tr)
	}
	return out
}

func (p *parser) oneOf(key, what, v string, valid []string) string {
	if !slices.Contains(valid, v) {
		p.fail(key, "unknown %s %q (valid: %s)", what, v, strings.Join(valid, ", "))
	}
	return v
}

// weights validates per-path weights. The weighted scheduler without
// weights splits evenly, as braid's config does.
func (p *parser) weights(key string, w []float64, sched string, paths int) []float64 {
	if sched != "weighted" {
		if w != nil {
			p.fail(key, "set, but only scheduler = \"weighted\" uses weights (scheduler is %q)", sched)
		}
		return nil
	}
	if w == nil {
		return equalWeights(paths)
	}
	if len(w) != paths {
		p.fail(key, "%d %s for %d %s (one per client–server link, in file order)", len(w), tomlerr.Plural(len(w), "weight", "weights"), paths, tomlerr.Plural(paths, "path", "paths"))
		return nil
	}
	sum := 0.0
	for i, v := range w {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			p.fail(fmt.Sprintf("%s[%d]", key, i), "%v is not a finite number ≥ 0", v)
			return nil
		}
		sum += v
	}
	if sum == 0 {
		p.fail(key, "all weights are 0; at least one path must carry traffic")
		return nil
	}
	return slices.Clone(w)
}

// priorities validates per-path tiers (braid's client.priorities).
func (p *parser) priorities(key string, v []int64, paths int) []int {
	if len(v) != paths {
		p.fail(key, "%d %s for %d %s (one per client–server link, in file order)", len(v), tomlerr.Plural(len(v), "tier", "tiers"), paths, tomlerr.Plural(paths, "path", "paths"))
		return nil
	}
	out := make([]int, len(v))
	for i, t := range v {
		if t < 0 || t > config.MaxPriority {
			p.fail(fmt.Sprintf("%s[%d]", key, i), "%d out of range (0..%d)", t, config.MaxPriority)
		}
		out[i] = int(t)
	}
	return out
}

// FormatTiers writes per-path tiers as labels and records show them: "0/4".
func FormatTiers(v []int) string { return joinSlash(v, strconv.Itoa) }

func equalWeights(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

func formatWeights(w []float64) string { return joinSlash(w, fmtFloat) }

// joinSlash writes per-path values the way labels show them: "75/25".
func joinSlash[T any](v []T, format func(T) string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = format(x)
	}
	return strings.Join(s, "/")
}

// sweep reads [sweep] and checks that the testbed can carry each axis.
func (p *parser) sweep(t *Topology, trs []Transport, raw *rawSweep) Sweep {
	var s Sweep
	s.RTT = sweepAxis(p, "sweep.rtt", raw.RTT, func(k, v string) time.Duration { return p.duration(k, v, 2*MaxDelay) }, sprint)
	s.RTTRatio = p.ratios("sweep.rtt_ratio", raw.RTTRatio)
	s.Rate = sweepAxis(p, "sweep.rate", raw.Rate, func(k, v string) Rate { return parseOr(p, k, v, ParseRate) }, sprint)
	s.RateRatio = p.ratios("sweep.rate_ratio", raw.RateRatio)
	s.Loss = sweepAxis(p, "sweep.loss", raw.Loss, func(k, v string) Loss { return parseOr(p, k, v, ParseLoss) },
		func(l Loss) string { return strconv.Quote(l.String()) })
	s.LossSecondary = sweepAxis(p, "sweep.loss_secondary", raw.LossSecondary, func(k, v string) Loss { return parseOr(p, k, v, ParseLoss) },
		func(l Loss) string { return strconv.Quote(l.String()) })
	s.Scheduler = sweepAxis(p, "sweep.scheduler", raw.Scheduler, func(k, v string) string {
		p.oneOf(k, "scheduler", v, config.Schedulers)
		return v
	}, strconv.Quote)
	s.Congestion = sweepAxis(p, "sweep.congestion", raw.Congestion, func(k, v string) string {
		p.oneOf(k, "congestion controller", v, config.CongestionChoices)
		return v
	}, strconv.Quote)
	if p.err != nil {
		return s
	}

	paths := t.Paths()
	needEmu := func(key, what string) {
		for _, l := range paths {
			if !l.Emulated() {
				p.fail(key, "path %q has no link node (via) to emulate %s", l.Name, what)
				return
			}
		}
	}
	if s.RTT != nil {
		needEmu("sweep.rtt", "delay")
	}
	if s.RTTRatio != nil {
		needEmu("sweep.rtt_ratio", "delay")
	}
	if s.Loss != nil {
		needEmu("sweep.loss", "loss")
	}
	if s.LossSecondary != nil {
		needEmu("sweep.loss_secondary", "loss")
		if len(paths) < 2 {
			p.fail("sweep.loss_secondary", "needs at least two paths (it sets every path after the first), found %d", len(paths))
		}
	}
	for _, ax := range []struct {
		key string
		on  bool
	}{{"sweep.rate", s.Rate != nil}, {"sweep.rate_ratio", s.RateRatio != nil}} {
		for _, l := range paths {
			if ax.on && l.Medium != "" {
				p.fail(ax.key, "path %q is on medium %q, which sets its rate", l.Name, l.Medium)
				return s
			}
		}
	}
	for _, ax := range []struct {
		key string
		on  bool
	}{{"sweep.rtt_ratio", s.RTTRatio != nil}, {"sweep.rate_ratio", s.RateRatio != nil}} {
		if ax.on && len(paths) < 2 {
			p.fail(ax.key, "needs at least two paths (the others are set relative to the first), found %d", len(paths))
		}
	}
	if s.RateRatio != nil && s.Rate == nil {
		if f := paths[0]; f.AB.Rate == 0 || f.BA.Rate == 0 {
			p.fail("sweep.rate_ratio", "the first path %q is unshaped in at least one direction; give it a rate (or sweep rate) for the ratio to apply to", f.Name)
		}
	}
	for _, ax := range []struct {
		key, opt string
		on       bool
		explicit []bool
	}{{"sweep.scheduler", OptScheduler, s.Scheduler != nil, p.explicitSched}, {"sweep.congestion", OptCongestion, s.Congestion != nil, p.explicitCong}} {
		if !ax.on {
			continue
		}
		takes := false
		for i, tr := range trs {
			k, _ := LookupTransport(tr.Name)
			if k.Accepts(ax.opt) && !ax.explicit[i] {
				takes = true
			}
		}
		if !takes {
			p.fail(ax.key, "no transport takes it: each either has no %s option or sets its own", ax.opt)
		}
	}
	return s
}

func (p *parser) ratios(key string, v []float64) []float64 {
	return sweepAxis(p, key, v, func(k string, x float64) float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 || x > 1000 {
			p.fail(k, "%v out of range (a ratio > 0 and ≤ 1000)", x)
		}
		return x
	}, sprint)
}

// sweepAxis reads the values of one sweep axis: each through parse (which reports
// its own errors under the element's key, e.g. "sweep.rtt[2]"), none twice (show
// formats a value for that message). A nil list stays nil: the axis is not swept;
// an empty one is an error.
func sweepAxis[R any, T comparable](p *parser, key string, raw []R, parse func(k string, v R) T, show func(T) string) []T {
	if raw == nil {
		return nil
	}
	if len(raw) == 0 {
		p.fail(key, "empty; list values or remove the key")
	}
	out := []T{}
	for i, v := range raw {
		k := fmt.Sprintf("%s[%d]", key, i)
		x := parse(k, v)
		if j := slices.Index(out, x); j >= 0 {
			p.fail(k, "%s duplicates %s[%d]", show(x), key, j)
		}
		out = append(out, x)
	}
	return out
}

// sprint formats a value as %v does (fmt.Sprint, typed for sweepAxis).
func sprint[T any](v T) string { return fmt.Sprint(v) }

// parseOr runs a value parser and reports its error under key.
func parseOr[T any](p *parser, key, v string, parse func(string) (T, error)) T {
	x, err := parse(v)
	if err != nil {
		p.fail(key, "%v", err)
	}
	return x
}

func joinRoles() string {
	s := make([]string, len(Roles))
	for i, r := range Roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

func nodeNames(t *Topology) string {
	s := make([]string, len(t.Nodes))
	for i, n := range t.Nodes {
		s[i] = n.Name
	}
	return strings.Join(s, ", ")
}

func listSuffix(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// media reads [[media]] and puts the links that name one on it. A link on a
// medium has no rate of its own: its frames, both directions, serialize on
// the medium's one queue with every other member's.
func (p *parser) media(t *Topology, rm []rawMedium, rl []rawLink) {
	for i, r := range rm {
		key := fmt.Sprintf("media[%d]", i)
		if !p.name(key+".name", r.Name) {
			return
		}
		if j := slices.IndexFunc(t.Media, func(m Medium) bool { return m.Name == r.Name }); j >= 0 {
			p.fail(key+".name", "%q duplicates media[%d].name", r.Name, j)
			return
		}
		m := Medium{Name: r.Name, QueueLimit: DefaultQueueLimit}
		if r.Rate == "" {
			p.fail(key+".rate", "required (the capacity the medium's links share)")
			return
		}
		m.Rate = parseOr(p, key+".rate", r.Rate, ParseRate)
		if p.err == nil && (m.Rate < MinRate || m.Rate > MaxRate) {
			p.fail(key+".rate", "%v out of range (%v..%v)", m.Rate, MinRate, MaxRate)
		}
		if r.QueueLimit != nil {
			if *r.QueueLimit < 1 || *r.QueueLimit > MaxQueueLimit {
				p.fail(key+".queue_limit", "%d out of range (1..%d)", *r.QueueLimit, MaxQueueLimit)
			}
			m.QueueLimit = int(*r.QueueLimit)
		}
		t.Media = append(t.Media, m)
	}
	if p.err != nil {
		return
	}
	var names []string
	for _, m := range t.Media {
		names = append(names, m.Name)
	}
	for i, r := range rl {
		if r.Medium == "" {
			continue
		}
		key := fmt.Sprintf("links[%d].medium", i)
		l := t.Link(r.Name)
		switch {
		case !slices.Contains(names, r.Medium):
			p.fail(key, "no medium %q (media: %s)", r.Medium, orNone(names))
		case l == nil:
			// The link's own error has been reported.
		case !l.Emulated():
			p.fail(key, "link %q has no link node (via); only an emulated link can share a medium", l.Name)
		case r.Rate != "" || (r.AToB != nil && r.AToB.Rate != "") || (r.BToA != nil && r.BToA.Rate != ""):
			p.fail(key, "link %q sets a rate; a link on a medium takes the medium's", l.Name)
		case r.QueueLimit != nil || (r.AToB != nil && r.AToB.QueueLimit != nil) || (r.BToA != nil && r.BToA.QueueLimit != nil):
			p.fail(key, "link %q sets a queue_limit; a link on a medium queues in the medium's", l.Name)
		default:
			l.Medium = r.Medium
			l.AB.Rate, l.BA.Rate = 0, 0
		}
	}
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none declared"
	}
	return strings.Join(names, ", ")
}

// competingPath resolves the path the competing flows take: the named one,
// or the primary.
func (p *parser) competingPath(t *Topology, e *Experiment) {
	if e.Competing == 0 {
		return
	}
	var names []string
	for _, l := range t.Paths() {
		names = append(names, l.Name)
	}
	if e.CompetingPath == "" {
		e.CompetingPath = names[0]
	} else if !slices.Contains(names, e.CompetingPath) {
		p.fail("experiment.competing_path", "no path %q (paths: %s)", e.CompetingPath, strings.Join(names, ", "))
	}
}
