package scenario

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/internal/tomlerr"
	"github.com/braid-vpn/braid/lab/linkemu"
)

// The raw* types mirror the file; tomlerr.Decode checks keys and types
// against them. Values stay strings until the parser reads them, so that an
// error names the key with its index rather than a Go type. A link's
// symmetric keys repeat rawDir's because its per-direction tables are
// separate tables in the file.
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
	QueueBytes *int64  `toml:"queue_bytes"`
	Trace      string  `toml:"trace"`
	Medium     string  `toml:"medium"`
	MTU        *int64  `toml:"mtu"`
	AToB       *rawDir `toml:"a_to_b"`
	BToA       *rawDir `toml:"b_to_a"`
}

// sym returns the link's symmetric keys, which apply to both directions.
func (r *rawLink) sym() *rawDir {
	return &rawDir{Rate: r.Rate, Delay: r.Delay, Jitter: r.Jitter, Loss: r.Loss, QueueLimit: r.QueueLimit, QueueBytes: r.QueueBytes, Trace: r.Trace}
}

// sets reports whether has holds for the link's symmetric keys or either
// direction's table.
func (r *rawLink) sets(has func(*rawDir) bool) bool {
	return has(r.sym()) || r.AToB != nil && has(r.AToB) || r.BToA != nil && has(r.BToA)
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
	QueueBytes *int64 `toml:"queue_bytes"`
	Trace      string `toml:"trace"`
}

type rawExperiment struct {
	Size    string `toml:"size"`
	Reps    *int64 `toml:"reps"`
	Timeout string `toml:"timeout"`
	Seed    *int64 `toml:"seed"`

	Competing          *int64 `toml:"competing"`
	CompetingPath      string `toml:"competing_path"`
	CompetingTransport string `toml:"competing_transport"`

	Latency         bool   `toml:"latency"`
	LatencyInterval string `toml:"latency_interval"`
	LatencyIdle     string `toml:"latency_idle"`

	Workload         string `toml:"workload"`
	RealtimeRate     string `toml:"realtime_rate"`
	RealtimeSize     *int64 `toml:"realtime_size"`
	RealtimeDuration string `toml:"realtime_duration"`
	RealtimeDeadline string `toml:"realtime_deadline"`

	ECN bool `toml:"ecn"`
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

// Parse parses, validates and expands data as the scenario file name. Its
// errors, and Load's, are *tomlerr.Error, as braid's config's are.
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

	// explicit[i] holds the options transports[i] set itself, which the
	// option axes then leave alone.
	explicit []map[string]bool
}

func (p *parser) fail(key, format string, args ...any) {
	if p.err == nil {
		p.err = &tomlerr.Error{File: p.file, Line: p.lines.Line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
}

func (p *parser) failIf(bad bool, key, format string, args ...any) bool {
	if bad {
		p.fail(key, format, args...)
	}
	return bad
}

func (p *parser) build(raw *rawFile) *Scenario {
	s := &Scenario{File: p.file, Name: cmp.Or(raw.Name, strings.TrimSuffix(filepath.Base(p.file), ".toml")), Description: raw.Description}
	if media := p.media(raw.Media); len(raw.Nodes) == 0 {
		s.Topology = p.patchTestbed(media, raw.Links)
	} else {
		s.Topology = p.topology(media, raw.Nodes, raw.Links)
	}
	// What only the resolved links show (delay, jitter and loss need an
	// emulator, which runs on a link node), under the [[links]] entry that
	// set the link.
	for i, r := range raw.Links {
		if l := s.Topology.Link(r.Name); l != nil {
			p.checkShaping(fmt.Sprintf("links[%d]", i), l, "")
		}
	}
	if p.err != nil {
		return s
	}
	t := s.Topology
	p.tcp(t, &raw.TCP, raw.Experiment.ECN)
	p.experiment(&s.Experiment, &raw.Experiment, t)
	s.Experiment.Events = p.events(t, raw.Events)
	s.Transports = p.transports(t, raw.Transports)
	p.competingBraid(s)
	p.sweep(s, &raw.Sweep)
	s.points = p.expand(s)
	return s
}

// num reads an optional integer key that must lie within lo..hi (unit
// follows the range in the error); def when unset.
func (p *parser) num(key string, v *int64, def int, lo, hi int64, unit string) int {
	if v == nil {
		return def
	}
	p.failIf(*v < lo || *v > hi, key, "%d out of range (%d..%d%s)", *v, lo, hi, unit)
	return int(*v)
}

// Examples of durations for the errors of the keys that take them.
const (
	egDelay = `"20ms", "1.5ms", "100us"`
	egShort = `"10ms", "1s"`
)

// durIn reads a duration that must lie within lo..hi; eg shows valid ones.
func durIn(lo, hi time.Duration, eg string) func(string) (time.Duration, error) {
	from := lo.String()
	if lo == 0 {
		from = "0"
	}
	return func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return d, fmt.Errorf("%q is not a duration (e.g. %s)", s, eg)
		case d < lo || d > hi:
			return d, fmt.Errorf("%v out of range (%s..%v)", d, from, hi)
		}
		return d, nil
	}
}

// parseOr runs a value parser and reports its error under key.
func parseOr[V, T any](p *parser, key string, v V, parse func(V) (T, error)) T {
	x, err := parse(v)
	p.failIf(err != nil, key, "%v", err)
	return x
}

// parseOpt is parseOr for an optional key: def when unset.
func parseOpt[T any](p *parser, key, v string, def T, parse func(string) (T, error)) T {
	if v == "" {
		return def
	}
	return parseOr(p, key, v, parse)
}

// rate reads a rate that must be shaped (not "unlimited"); def when unset.
func (p *parser) rate(key, s string, def Rate) Rate {
	r := parseOpt(p, key, s, def, ParseRate)
	p.failIf(r < MinRate || r > MaxRate, key, "%v out of range (%v..%v)", r, MinRate, MaxRate)
	return r
}

// oneOf reads one of valid (what names the kind of value).
func oneOf(what string, valid []string) func(string) (string, error) {
	return func(v string) (string, error) {
		if !slices.Contains(valid, v) {
			return v, fmt.Errorf("unknown %s %q (valid: %s)", what, v, strings.Join(valid, ", "))
		}
		return v, nil
	}
}

// path checks that v names a path of t.
func (p *parser) path(key, v string, t *Topology) bool {
	names := mapf(t.Paths(), (*Link).name)
	ok := slices.Contains(names, v)
	p.failIf(!ok, key, "no path %q (paths, the client–server links: %s)", v, strings.Join(names, ", "))
	return ok
}

// without fails for each of keys (of [experiment]) set while the setting
// they belong to, what, is off.
func (p *parser) without(on bool, what string, keys []string, set ...bool) {
	for i, k := range keys {
		p.failIf(set[i] && !on, "experiment."+k, "set without %s", what)
	}
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// name checks s, the name of entry i of table, and that it repeats no
// earlier entry; seen holds the earlier names and their indices.
func (p *parser) name(seen map[string]int, key, table, s string, i int) {
	switch j, dup := seen[s]; {
	case s == "":
		p.fail(key, "required")
	case len(s) > MaxNameLen:
		p.fail(key, "%q is %d bytes; names have at most %d (interface names are built from them)", s, len(s), MaxNameLen)
	case !nameRE.MatchString(s):
		p.fail(key, "%q is not a valid name (lower-case letters, digits and '-', starting with a letter)", s)
	case dup:
		p.fail(key, "%q duplicates %s[%d].name", s, table, j)
	}
	seen[s] = i
}

// topology builds a testbed declared in full by [[nodes]] and [[links]].
func (p *parser) topology(media []Medium, rn []rawNode, rl []rawLink) *Topology {
	t := &Topology{Media: media}
	p.failIf(len(rn) > MaxLinks, "nodes", "%d nodes; at most %d", len(rn), MaxLinks)
	roles := join(Roles)
	seen := map[string]int{}
	for i, n := range rn {
		key := fmt.Sprintf("nodes[%d]", i)
		p.name(seen, key+".name", "nodes", n.Name, i)
		p.failIf(n.Role == "", key+".role", "required (one of: %s)", roles)
		p.failIf(!slices.Contains(Roles, Role(n.Role)), key+".role", "unknown role %q (valid: %s)", n.Role, roles)
		t.Nodes = append(t.Nodes, Node{Name: n.Name, Role: Role(n.Role), TCP: DefaultTCP()})
	}
	for _, r := range []Role{RoleClient, RoleServer, RoleWeb} {
		others := func(n Node) bool { return n.Role != r }
		p.exactlyOne("nodes", mapf(slices.DeleteFunc(slices.Clone(t.Nodes), others), Node.name), "node with role = %q", r)
	}
	if p.err != nil {
		return t
	}

	p.failIf(len(rl) == 0, "links", "required with [[nodes]]: at least one client–server link and one server–web link")
	p.failIf(len(rl) > MaxLinks, "links", "%d links; at most %d", len(rl), MaxLinks)
	seen, viaUsed := map[string]int{}, map[string]int{}
	for i, r := range rl {
		key := fmt.Sprintf("links[%d]", i)
		sh := Shaping{QueueLimit: DefaultQueueLimit}
		l := Link{Name: r.Name, A: r.A, B: r.B, Via: r.Via, AB: sh, BA: sh}
		p.name(seen, key+".name", "links", r.Name, i)
		p.endpoints(t, key, r.A, r.B)
		if v := t.Node(r.Via); r.Via != "" {
			switch j, used := viaUsed[r.Via]; {
			case v == nil:
				p.fail(key+".via", "no node %q (nodes: %s)", r.Via, nodeNames(t))
			case v.Role != RoleLink:
				p.fail(key+".via", "node %q has role %q; via names a node with role = \"link\"", r.Via, v.Role)
			case used:
				p.fail(key+".via", "link node %q already carries links[%d]; a link node joins exactly two interfaces", r.Via, j)
			default:
				viaUsed[r.Via] = i
			}
		}
		p.link(t, key, &l, &r)
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
	p.failIf(len(t.Paths()) == 0, "links", "no link joins the client %q and the server %q", t.Client().Name, t.Server().Name)
	webLinks := slices.DeleteFunc(slices.Clone(t.Links), func(l Link) bool { return !t.joins(&l, t.Server(), t.Web()) })
	p.exactlyOne("links", mapf(webLinks, Link.name), "link between the server %q and the web server %q", t.Server().Name, t.Web().Name)
	p.subnets(t, rl)
	return t
}

// exactlyOne fails unless names (of the things what describes) has one
// element.
func (p *parser) exactlyOne(key string, names []string, what string, args ...any) {
	if len(names) != 1 {
		list := ""
		if len(names) > 0 {
			list = " (" + strings.Join(names, ", ") + ")"
		}
		p.fail(key, "need exactly one %s, found %d%s", fmt.Sprintf(what, args...), len(names), list)
	}
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

// DefaultTopology is the paper's testbed (its Figure 1, declared below):
// two 10 Mbit/s paths of 20 ms RTT (Table 2's primary path), each through
// its own link node, and the web server 1 Gbit/s behind the VPN server.
func DefaultTopology() *Topology { return Default().Topology }

// The built-in testbed, declared as a file would.
var (
	defaultNodes = []rawNode{{"client", "client"}, {"primary", "link"}, {"secondary", "link"}, {"server", "server"}, {"web", "web"}}
	defaultLinks = []rawLink{
		{Name: "primary", A: "client", B: "server", Via: "primary", Rate: "10mbit", RTT: "20ms"},
		{Name: "secondary", A: "client", B: "server", Via: "secondary", Rate: "10mbit", RTT: "20ms"},
		{Name: "lan", A: "server", B: "web", Rate: "1gbit"},
	}
)

// patchTestbed applies [[links]] entries to the built-in testbed: without
// [[nodes]], a file changes the testbed's links by name rather than
// redeclaring five nodes and three links.
func (p *parser) patchTestbed(media []Medium, rl []rawLink) *Topology {
	t := p.topology(media, defaultNodes, defaultLinks)
	names := strings.Join(mapf(t.Links, Link.name), ", ")
	seen := map[string]int{}
	for i, r := range rl {
		key := fmt.Sprintf("links[%d]", i)
		l := t.Link(r.Name)
		switch {
		case r.Name == "":
			p.fail(key+".name", "required (without [[nodes]], links name a link of the built-in testbed: %s)", names)
			continue
		case l == nil:
			p.fail(key+".name", "no link %q in the built-in testbed (links: %s); declare [[nodes]] and every link to build another topology", r.Name, names)
			continue
		}
		p.name(seen, key+".name", "links", r.Name, i)
		for _, f := range []struct{ k, v string }{{"a", r.A}, {"b", r.B}, {"via", r.Via}, {"subnet", r.Subnet}} {
			p.failIf(f.v != "", key+"."+f.k, "is fixed in the built-in testbed; declare [[nodes]] and every link to build another topology")
		}
		p.link(t, key, l, &r)
	}
	return t
}

// link applies a link's keys: its mtu, its symmetric keys to both
// directions, then its a_to_b and b_to_a tables, then its medium.
func (p *parser) link(t *Topology, key string, l *Link, r *rawLink) {
	l.MTU = p.num(key+".mtu", r.MTU, l.MTU, MinMTU, MaxMTU, "")
	p.failIf(r.MTU != nil && !t.joins(l, t.Client(), t.Server()), key+".mtu", "link %q sets mtu, which only a path (a client–server link) takes", l.Name)
	if r.RTT != "" {
		p.failIf(r.Delay != "", key+".rtt", "set together with delay; give one (rtt is the sum of both directions' delays)")
		l.AB.Delay, l.BA.Delay = splitRTT(parseOr(p, key+".rtt", r.RTT, durIn(0, 2*MaxDelay, egDelay)))
	}
	p.dir(key, &l.AB, r.sym())
	p.dir(key, &l.BA, r.sym())
	p.dir(key+".a_to_b", &l.AB, r.AToB)
	p.dir(key+".b_to_a", &l.BA, r.BToA)
	media := mapf(t.Media, func(m Medium) string { return m.Name })
	switch key += ".medium"; {
	case r.Medium == "":
	case !slices.Contains(media, r.Medium):
		p.fail(key, "no medium %q (media: %s)", r.Medium, cmp.Or(strings.Join(media, ", "), "none declared"))
	case !l.Emulated():
		p.fail(key, "link %q has no link node (via); only an emulated link can share a medium", l.Name)
	case r.sets(func(d *rawDir) bool { return d.Rate != "" || d.Trace != "" }):
		p.fail(key, "link %q sets a rate or trace; a link on a medium takes the medium's", l.Name)
	case r.sets(func(d *rawDir) bool { return d.QueueLimit != nil || d.QueueBytes != nil }):
		p.fail(key, "link %q sets a queue_limit; a link on a medium queues in the medium's", l.Name)
	default:
		l.Medium = r.Medium
		l.AB.Rate, l.BA.Rate = 0, 0
	}
}

// splitRTT gives each direction half the RTT, the odd nanosecond to the
// return direction, so that the sum is exact.
func splitRTT(d time.Duration) (ab, ba time.Duration) { return d / 2, d - d/2 }

// dir applies a table of shaping keys, if there is one, to one direction.
func (p *parser) dir(key string, sh *Shaping, d *rawDir) {
	if d == nil {
		return
	}
	// A table's trace replaces the rate an earlier table set, and its rate
	// the trace: the per-direction tables override the symmetric keys.
	switch {
	case d.Rate != "" && d.Trace != "":
		p.fail(key+".trace", "set together with rate; a direction's capacity is a fixed rate or a trace")
	case d.Trace != "":
		sh.Rate, sh.Trace = 0, p.capacity(key+".trace", d.Trace)
	case d.Rate != "":
		sh.Rate, sh.Trace = parseOpt(p, key+".rate", d.Rate, sh.Rate, ParseRate), Capacity{}
	}
	sh.Delay = parseOpt(p, key+".delay", d.Delay, sh.Delay, durIn(0, MaxDelay, egDelay))
	sh.Jitter = parseOpt(p, key+".jitter", d.Jitter, sh.Jitter, durIn(0, MaxDelay, egDelay))
	sh.Loss = parseOpt(p, key+".loss", d.Loss, sh.Loss, ParseLoss)
	sh.QueueLimit = p.num(key+".queue_limit", d.QueueLimit, sh.QueueLimit, 1, MaxQueueLimit, " packets")
	sh.QueueBytes = p.num(key+".queue_bytes", d.QueueBytes, sh.QueueBytes, MinQueueBytes, MaxQueueBytes, " bytes")
}

// capacity reads a trace key; a trace file is taken relative to the
// scenario file's directory and must read as a Mahimahi trace.
func (p *parser) capacity(key, v string) Capacity {
	c := parseOr(p, key, v, ParseCapacity)
	if c.File != "" {
		if !filepath.IsAbs(c.File) {
			c.File = filepath.Join(filepath.Dir(p.file), c.File)
		}
		_, err := linkemu.ReadTraceFile(c.File)
		p.failIf(err != nil, key, "%v", err)
	}
	return c
}

// checkShaping validates one link's resolved shaping. where, if not "",
// says which sweep point produced it.
func (p *parser) checkShaping(key string, l *Link, where string) {
	for i, sh := range []*Shaping{&l.AB, &l.BA} {
		dir := [2]string{"a_to_b", "b_to_a"}[i]
		switch {
		case !l.Emulated() && (sh.Delay != 0 || sh.Jitter != 0 || !sh.Loss.IsZero() || !sh.Trace.IsZero() || sh.QueueBytes != 0):
			p.fail(key, "%slink %q has no link node (via), so nothing can add its delay, jitter, loss, trace or queue_bytes; only rate is shaped on a plain veth pair", where, l.Name)
		case sh.Jitter > sh.Delay:
			p.fail(key, "%slink %q %s: jitter %v exceeds delay %v (the delay is spread over delay±jitter)", where, l.Name, dir, sh.Jitter, sh.Delay)
		case sh.Rate != 0 && (sh.Rate < MinRate || sh.Rate > MaxRate):
			p.fail(key, "%slink %q %s: rate %v out of range (%v..%v)", where, l.Name, dir, sh.Rate, MinRate, MaxRate)
		}
	}
}

// subnets assigns each link its subnet: the one given, else the first free
// 198.18.N.0/24 counting from N = 1, so the testbed's paths get
// 198.18.1.0/24 and 198.18.2.0/24 as braid's example config expects.
func (p *parser) subnets(t *Topology, rl []rawLink) {
	taken := make([]netip.Prefix, len(rl)) // by link; invalid for none
	for i, r := range rl {
		if r.Subnet == "" {
			continue
		}
		key := fmt.Sprintf("links[%d].subnet", i)
		pfx, err := netip.ParsePrefix(r.Subnet)
		switch {
		case err != nil:
			p.fail(key, "%q is not a prefix (e.g. \"198.18.7.0/24\")", r.Subnet)
		case pfx.Masked() != pfx:
			p.fail(key, "%q has host bits set (did you mean %q?)", r.Subnet, pfx.Masked().String())
		case !pfx.Addr().Is4() || pfx.Bits() < LabPrefix.Bits() || !LabPrefix.Contains(pfx.Addr()):
			p.fail(key, "%q is outside %v, the benchmarking range every lab link uses", r.Subnet, LabPrefix)
		case pfx.Bits() > 30:
			p.fail(key, "%q is too small: a link needs two host addresses (at most /30)", r.Subnet)
		default:
			if j := slices.IndexFunc(taken, pfx.Overlaps); j >= 0 {
				p.fail(key, "%v overlaps the subnet of links[%d]", pfx, j)
			}
			taken[i], t.Links[i].Subnet = pfx, pfx
		}
	}
	n := 1
	for i := range t.Links {
		l := &t.Links[i]
		for !l.Subnet.IsValid() {
			c := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(n), 0}), 24)
			if n++; !slices.ContainsFunc(taken, c.Overlaps) {
				l.Subnet = c
			}
		}
		a := l.Subnet.Addr().Next()
		l.AddrA, l.AddrB = netip.PrefixFrom(a, l.Subnet.Bits()), netip.PrefixFrom(a.Next(), l.Subnet.Bits())
	}
}

// tcp sets every node's TCP: [tcp], then its [tcp.nodes.NAME]; ecn for
// the client, server and web nodes.
func (p *parser) tcp(t *Topology, raw *rawTCP, ecn bool) {
	base := DefaultTCP()
	p.applyTCP("tcp", &base, raw)
	for i := range t.Nodes {
		n := &t.Nodes[i]
		n.TCP = base
		n.TCP.ECN = ecn && n.Role != RoleLink
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Nodes)) {
		key, rt, n := "tcp.nodes."+name, raw.Nodes[name], t.Node(name)
		if p.failIf(n == nil, key, "no node %q (nodes: %s)", name, nodeNames(t)) {
			continue
		}
		p.failIf(rt.Nodes != nil, key+".nodes", "per-node settings do not nest")
		p.applyTCP(key, &n.TCP, &rt)
	}
}

func (p *parser) applyTCP(key string, t *TCP, raw *rawTCP) {
	// MPTCP's coupled algorithms, of the out-of-tree kernel the paper used,
	// get a specific answer.
	p.failIf(slices.Contains([]string{"balia", "lia", "olia", "wvegas"}, raw.Congestion), key+".congestion",
		"%q is a coupled MPTCP algorithm of the out-of-tree MPTCP kernel; mainline Linux has none (valid: %s)", raw.Congestion, strings.Join(CongestionControls, ", "))
	t.Congestion = parseOpt(p, key+".congestion", raw.Congestion, t.Congestion, oneOf("congestion control", CongestionControls))
	p.triple(key+".rmem", &t.Rmem, raw.Rmem)
	p.triple(key+".wmem", &t.Wmem, raw.Wmem)
	core := func(k string, v *int64, dst *int) { *dst = p.num(key+"."+k, v, *dst, 4096, math.MaxInt32, " bytes") }
	core("core_rmem_max", raw.CoreRmemMax, &t.CoreRmemMax)
	core("core_rmem_default", raw.CoreRmemDefault, &t.CoreRmemDefault)
	core("core_wmem_max", raw.CoreWmemMax, &t.CoreWmemMax)
	core("core_wmem_default", raw.CoreWmemDefault, &t.CoreWmemDefault)
	if raw.NoMetricsSave != nil {
		t.NoMetricsSave = *raw.NoMetricsSave
	}
}

func (p *parser) triple(key string, dst *[3]int, v []int64) {
	if v == nil || p.failIf(len(v) != 3, key, "%d values; give three: min, default, max (bytes)", len(v)) {
		return
	}
	for i, x := range v {
		p.failIf(x < 1 || x > math.MaxInt32, fmt.Sprintf("%s[%d]", key, i), "%d out of range (1..%d bytes)", x, math.MaxInt32)
	}
	p.failIf(v[0] > v[1] || v[1] > v[2], key, "[%d, %d, %d] is not ordered min ≤ default ≤ max", v[0], v[1], v[2])
	*dst = [3]int{int(v[0]), int(v[1]), int(v[2])}
}

func (p *parser) experiment(e *Experiment, raw *rawExperiment, t *Topology) {
	e.Size = parseOpt(p, "experiment.size", raw.Size, DefaultSize, ParseSize)
	e.Reps = p.num("experiment.reps", raw.Reps, DefaultReps, 1, MaxReps, "")
	e.Timeout = parseOpt(p, "experiment.timeout", raw.Timeout, DefaultTimeout, durIn(MinTimeout, MaxTimeout, `"90s", "5m"`))
	if raw.Seed != nil {
		p.failIf(*raw.Seed < 0, "experiment.seed", "%d is negative", *raw.Seed)
		e.Seed = uint64(*raw.Seed)
	}
	e.Competing = p.num("experiment.competing", raw.Competing, 0, 0, MaxCompeting, "")
	p.without(e.Competing != 0, "competing flows (experiment.competing)", []string{"competing_path", "competing_transport"},
		raw.CompetingPath != "", raw.CompetingTransport != "")

	e.Latency = raw.Latency
	p.without(e.Latency, "latency = true", []string{"latency_interval", "latency_idle"}, raw.LatencyInterval != "", raw.LatencyIdle != "")
	e.LatencyInterval = parseOpt(p, "experiment.latency_interval", raw.LatencyInterval, DefaultLatencyInterval, durIn(MinLatencyInterval, MaxLatencyInterval, egShort))
	e.LatencyIdle = parseOpt(p, "experiment.latency_idle", raw.LatencyIdle, DefaultLatencyIdle, durIn(MinLatencyIdle, MaxLatencyIdle, egShort))

	e.Workload = parseOr(p, "experiment.workload", cmp.Or(raw.Workload, WorkloadDownload), oneOf("workload", Workloads))
	rt := e.Workload == WorkloadRealtime
	p.without(rt, fmt.Sprintf("workload = %q", WorkloadRealtime), []string{"realtime_rate", "realtime_size", "realtime_duration", "realtime_deadline"},
		raw.RealtimeRate != "", raw.RealtimeSize != nil, raw.RealtimeDuration != "", raw.RealtimeDeadline != "")
	if rt {
		p.failIf(e.Latency, "experiment.latency", "probes the delay under a download; workload = %q measures its own packets' delay", WorkloadRealtime)
		p.failIf(e.Competing > 0, "experiment.competing", "competing flows run during downloads, not with workload = %q", WorkloadRealtime)
		r := &e.Realtime
		r.Rate = p.rate("experiment.realtime_rate", raw.RealtimeRate, DefaultRealtimeRate)
		r.Size = p.num("experiment.realtime_size", raw.RealtimeSize, DefaultRealtimeSize, MinRealtimeSize, MaxRealtimeSize, " bytes of UDP payload")
		r.Duration = parseOpt(p, "experiment.realtime_duration", raw.RealtimeDuration, DefaultRealtimeDuration, durIn(MinRealtimeDuration, MaxRealtimeDuration, egShort))
		r.Deadline = parseOpt(p, "experiment.realtime_deadline", raw.RealtimeDeadline, DefaultRealtimeDeadline, durIn(MinRealtimeDeadline, MaxRealtimeDeadline, egShort))
		pps := float64(r.Rate) / float64(8*r.Size)
		p.failIf(pps > MaxRealtimePPS, "experiment.realtime_rate", "%v of %d-byte packets is %.0f packets/s; at most %d", r.Rate, r.Size, pps, MaxRealtimePPS)
	}
	e.ECN = raw.ECN
	if e.Competing == 0 {
		return
	}
	e.CompetingTransport = parseOpt(p, "experiment.competing_transport", raw.CompetingTransport, CompetingTCP, oneOf("competing transport", CompetingTransports))
	if e.CompetingTransport == CompetingBraid {
		// The second client mirrors the measured one, on all its paths.
		p.failIf(raw.CompetingPath != "", "experiment.competing_path", `a competing braid client takes the measured transport's paths; competing_path is for competing_transport = "tcp"`)
		return
	}
	e.CompetingPath = cmp.Or(raw.CompetingPath, t.Paths()[0].Name)
	p.path("experiment.competing_path", e.CompetingPath, t)
}

// competingBraid checks that every transport has a braid server for the
// competing braid client to share (its downloads' far end).
func (p *parser) competingBraid(s *Scenario) {
	if s.Experiment.CompetingTransport != CompetingBraid {
		return
	}
	var braid []string
	for _, k := range kinds {
		if k.Braid {
			braid = append(braid, k.Name)
		}
	}
	for _, tr := range s.Transports {
		if k, _ := LookupTransport(tr.Name); !k.Braid {
			p.fail("experiment.competing_transport", "transport %q has no braid server for a competing braid client to share (those that do: %s)", tr.Name, strings.Join(braid, ", "))
			return
		}
	}
}

func (p *parser) transports(t *Topology, raw []rawTransport) []Transport {
	if len(raw) == 0 {
		// the three-way comparison
		raw = []rawTransport{{Name: TransportDirect}, {Name: TransportMPTCPDirect}, {Name: TransportBraid}}
	}
	paths := t.Paths()
	var out []Transport
	for i, r := range raw {
		key := fmt.Sprintf("transports[%d]", i)
		kind, ok := LookupTransport(r.Name)
		valid := strings.Join(TransportNames(), ", ")
		p.failIf(r.Name == "", key+".name", "required (one of: %s)", valid)
		p.failIf(!ok, key+".name", "unknown transport %q (valid: %s)", r.Name, valid)
		set := map[string]bool{
			OptPath: r.Path != "", OptScheduler: r.Scheduler != "", OptWeights: r.Weights != nil,
			OptReorder: r.Reorder != "", OptCongestion: r.Congestion != "", OptRecovery: r.Recovery != "",
			OptCipher: r.Cipher != "", OptSubflows: r.Subflows != nil, OptPriorities: r.Priorities != nil,
		}
		for _, opt := range optionKeys {
			p.failIf(set[opt] && !kind.Accepts(opt), key+"."+opt, "transport %q takes no %s option (its options: %s)", r.Name, opt, cmp.Or(strings.Join(kind.Options, ", "), "none"))
		}
		label := []string{r.Name}
		word := func(set bool, w string) {
			if set {
				label = append(label, w)
			}
		}
		// choose resolves a string option: def, or the value set, which
		// the label then shows after prefix.
		choose := func(opt, what, v, def, prefix string, valid []string) string {
			if !kind.Accepts(opt) {
				return ""
			}
			word(v != "", prefix+v)
			return parseOpt(p, key+"."+opt, v, def, oneOf(what, valid))
		}
		tr := Transport{Name: r.Name}
		if kind.Accepts(OptPath) {
			tr.Path = cmp.Or(r.Path, paths[0].Name)
			word(r.Path != "", r.Path)
			p.path(key+".path", tr.Path, t)
		}
		tr.Scheduler = choose(OptScheduler, "scheduler", r.Scheduler, config.DefaultScheduler, "", config.Schedulers)
		if kind.Accepts(OptWeights) {
			tr.Weights = p.weights(key+".weights", r.Weights, tr.Scheduler, len(paths))
			word(r.Weights != nil, joinSlash(r.Weights, fmtFloat))
		}
		tr.Reorder = choose(OptReorder, "reorder mode", r.Reorder, config.DefaultReorder, "reorder=", config.Reorders)
		tr.Congestion = choose(OptCongestion, "congestion controller", r.Congestion, config.DefaultCongestion, "cc=", config.CongestionChoices)
		tr.Recovery = choose(OptRecovery, "recovery mode", r.Recovery, "", "recovery=", config.Recoveries)
		tr.Cipher = choose(OptCipher, "cipher", r.Cipher, CipherDefault, "cipher=", []string{CipherDefault, CipherNone})
		if kind.Accepts(OptSubflows) {
			tr.Subflows = p.num(key+".subflows", r.Subflows, 1, 1, MaxSubflows, "")
			word(r.Subflows != nil, fmt.Sprintf("×%d", tr.Subflows))
		}
		if kind.Accepts(OptPriorities) && r.Priorities != nil {
			// braid's client.priorities: a tier per path
			k := key + ".priorities"
			p.perPath(k, len(r.Priorities), len(paths), "tier")
			tr.Priorities = make([]int, len(r.Priorities))
			for i := range r.Priorities {
				tr.Priorities[i] = p.num(fmt.Sprintf("%s[%d]", k, i), &r.Priorities[i], 0, 0, config.MaxPriority, "")
			}
			word(true, "tiers="+FormatTiers(tr.Priorities))
		}
		tr.Label = cmp.Or(r.Label, strings.Join(label, " "))
		if j := slices.IndexFunc(out, func(x Transport) bool { return x.Label == tr.Label }); j >= 0 {
			p.fail(key, "label %q duplicates transports[%d]; set label to tell them apart", tr.Label, j)
		}
		p.explicit = append(p.explicit, set)
		out = append(out, tr)
	}
	return out
}

// perPath fails unless a list of n values (each one what) has one per path.
func (p *parser) perPath(key string, n, paths int, what string) {
	p.failIf(n != paths, key, "%d %s for %d %s (one per client–server link, in file order)", n, tomlerr.Plural(n, what, what+"s"), paths, tomlerr.Plural(paths, "path", "paths"))
}

// weights validates per-path weights. The weighted scheduler without
// weights splits evenly, as braid's config does.
func (p *parser) weights(key string, w []float64, sched string, paths int) []float64 {
	switch {
	case sched != "weighted":
		p.failIf(w != nil, key, "set, but only scheduler = \"weighted\" uses weights (scheduler is %q)", sched)
		return nil
	case w == nil:
		return slices.Repeat([]float64{1}, paths)
	}
	p.perPath(key, len(w), paths, "weight")
	sum := 0.0
	for i, v := range w {
		p.failIf(math.IsNaN(v) || math.IsInf(v, 0) || v < 0, fmt.Sprintf("%s[%d]", key, i), "%v is not a finite number ≥ 0", v)
		sum += v
	}
	p.failIf(sum == 0, key, "all weights are 0; at least one path must carry traffic")
	return slices.Clone(w)
}

// FormatTiers writes per-path tiers as labels and records show them: "0/4".
func FormatTiers(v []int) string { return joinSlash(v, strconv.Itoa) }

// joinSlash writes per-path values the way labels show them: "75/25".
func joinSlash[T any](v []T, format func(T) string) string { return strings.Join(mapf(v, format), "/") }

func mapf[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// join lists names for a message: "a, b, c".
func join[T ~string](names []T) string {
	return strings.Join(mapf(names, func(n T) string { return string(n) }), ", ")
}

func nodeNames(t *Topology) string { return join(mapf(t.Nodes, Node.name)) }

func (p *parser) media(rm []rawMedium) []Medium {
	var out []Medium
	seen := map[string]int{}
	for i, r := range rm {
		key := fmt.Sprintf("media[%d]", i)
		p.name(seen, key+".name", "media", r.Name, i)
		p.failIf(r.Rate == "", key+".rate", "required (the capacity the medium's links share)")
		rate, ql := p.rate(key+".rate", r.Rate, 0), p.num(key+".queue_limit", r.QueueLimit, DefaultQueueLimit, 1, MaxQueueLimit, "")
		out = append(out, Medium{Name: r.Name, Rate: rate, QueueLimit: ql})
	}
	return out
}
