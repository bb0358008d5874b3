package scenario

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/internal/tomlerr"
)

func mustParse(t *testing.T, doc string) *Scenario {
	t.Helper()
	s, err := Parse("t.toml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func TestDefault(t *testing.T) {
	s := Default()
	if s.Name != "default" {
		t.Errorf("Name = %q", s.Name)
	}
	top := s.Topology
	var got []string
	for _, n := range top.Nodes {
		got = append(got, n.Name+":"+string(n.Role))
	}
	want := []string{"client:client", "primary:link", "secondary:link", "server:server", "web:web"}
	if !slices.Equal(got, want) {
		t.Errorf("nodes = %v, want %v", got, want)
	}
	if top.Client().Name != "client" || top.Server().Name != "server" || top.Web().Name != "web" {
		t.Errorf("role lookups: %v %v %v", top.Client(), top.Server(), top.Web())
	}

	for _, tc := range []struct {
		name, a, b, via, subnet, addrA, addrB string
		rate                                  Rate
		rtt                                   time.Duration
	}{
		{"primary", "client", "server", "primary", "198.18.1.0/24", "198.18.1.1/24", "198.18.1.2/24", 10_000_000, 20 * time.Millisecond},
		{"secondary", "client", "server", "secondary", "198.18.2.0/24", "198.18.2.1/24", "198.18.2.2/24", 10_000_000, 20 * time.Millisecond},
		{"lan", "server", "web", "", "198.18.3.0/24", "198.18.3.1/24", "198.18.3.2/24", 1_000_000_000, 0},
	} {
		l := top.Link(tc.name)
		if l == nil {
			t.Errorf("no link %s", tc.name)
			continue
		}
		if l.A != tc.a || l.B != tc.b || l.Via != tc.via || l.Subnet.String() != tc.subnet ||
			l.AddrA.String() != tc.addrA || l.AddrB.String() != tc.addrB {
			t.Errorf("link %s = %+v", tc.name, l)
		}
		for _, sh := range []Shaping{l.AB, l.BA} {
			if sh.Rate != tc.rate || sh.Delay != tc.rtt/2 || sh.Jitter != 0 || sh.Loss.Model != LossNone || sh.QueueLimit != 1000 {
				t.Errorf("link %s shaping = %+v", tc.name, sh)
			}
		}
		if l.RTT() != tc.rtt {
			t.Errorf("link %s RTT = %v, want %v", tc.name, l.RTT(), tc.rtt)
		}
	}
	var paths []string
	for _, l := range top.Paths() {
		paths = append(paths, l.Name)
	}
	if !slices.Equal(paths, []string{"primary", "secondary"}) || top.WebLink().Name != "lan" {
		t.Errorf("paths = %v, web link = %v", paths, top.WebLink())
	}

	table3 := TCP{
		Congestion: "cubic", Rmem: [3]int{4096, 87380, 6291456}, Wmem: [3]int{4096, 16384, 4194304},
		CoreRmemMax: 212992, CoreRmemDefault: 212992, CoreWmemMax: 212992, CoreWmemDefault: 212992, NoMetricsSave: true,
	}
	for _, n := range top.Nodes {
		if n.TCP != table3 {
			t.Errorf("node %s TCP = %+v", n.Name, n.TCP)
		}
	}

	e := s.Experiment
	if e.Size != 16777216 || e.Reps != 20 || e.Timeout != 5*time.Minute || e.Seed != 0 {
		t.Errorf("experiment = %+v", e)
	}

	wantTr := []Transport{
		{Name: "direct", Label: "direct", Path: "primary"},
		{Name: "mptcp-direct", Label: "mptcp-direct"},
		{Name: "braid", Label: "braid", Scheduler: config.DefaultScheduler, Reorder: config.DefaultReorder, Congestion: config.DefaultCongestion},
	}
	if len(s.Transports) != len(wantTr) {
		t.Fatalf("transports = %+v", s.Transports)
	}
	for i, w := range wantTr {
		if g := s.Transports[i]; g.Name != w.Name || g.Label != w.Label || g.Path != w.Path || g.Scheduler != w.Scheduler ||
			g.Reorder != w.Reorder || g.Congestion != w.Congestion || g.Weights != nil {
			t.Errorf("transport %d = %+v, want %+v", i, g, w)
		}
	}

	pts := s.Points()
	if len(pts) != 3 {
		t.Fatalf("%d points, want 3", len(pts))
	}
	for i, p := range pts {
		if p.Index != i || p.Network != 0 || p.Topology != s.Topology || p.Transport.Label != wantTr[i].Label {
			t.Errorf("point %d = %+v", i, p)
		}
		if p.String() != "transport="+wantTr[i].Label {
			t.Errorf("point %d String = %q", i, p.String())
		}
	}
	if !slices.Equal(s.Axes(), []Axis{AxisTransport}) {
		t.Errorf("axes = %v", s.Axes())
	}

	// An empty file is the default scenario.
	e2 := mustParse(t, "")
	if e2.Name != "t" || len(e2.Points()) != 3 || e2.Topology.Link("secondary").BA != top.Link("secondary").BA {
		t.Errorf("empty file differs from Default: %+v", e2)
	}
}

func TestSysctls(t *testing.T) {
	got := DefaultTCP().Sysctls()
	want := []Sysctl{
		{"net.ipv4.tcp_congestion_control", "cubic"},
		{"net.ipv4.tcp_rmem", "4096 87380 6291456"},
		{"net.ipv4.tcp_wmem", "4096 16384 4194304"},
		{"net.core.rmem_max", "212992"},
		{"net.core.rmem_default", "212992"},
		{"net.core.wmem_max", "212992"},
		{"net.core.wmem_default", "212992"},
		{"net.ipv4.tcp_no_metrics_save", "1"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Sysctls = %v", got)
	}
}

func TestPatchTestbed(t *testing.T) {
	s := mustParse(t, `
name = "patched"
[[links]]
name = "secondary"
rtt = "41ms"
rate = "5mbit"
jitter = "2ms"
loss = "gemodel 1% 75% 50% 0.5%"
queue_limit = 100
[links.b_to_a]
rate = "20mbit"
delay = "30ms"
[[links]]
name = "lan"
rate = "unlimited"
`)
	l := s.Topology.Link("secondary")
	ge := Loss{Model: LossGE, P: 1, R: 75, OneMinusH: 50, OneMinusK: 0.5}
	if want := (Shaping{Rate: 5 * Mbit, Delay: 20500 * time.Microsecond, Jitter: 2 * time.Millisecond, Loss: ge, QueueLimit: 100}); l.AB != want {
		t.Errorf("a_to_b = %+v, want %+v", l.AB, want)
	}
	if want := (Shaping{Rate: 20 * Mbit, Delay: 30 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: ge, QueueLimit: 100}); l.BA != want {
		t.Errorf("b_to_a = %+v, want %+v", l.BA, want)
	}
	if l.RTT() != 50500*time.Microsecond {
		t.Errorf("RTT = %v", l.RTT())
	}
	if p := s.Topology.Link("primary"); p.AB.Delay != 10*time.Millisecond || p.AB.Rate != 10*Mbit {
		t.Errorf("unpatched primary changed: %+v", p)
	}
	if lan := s.Topology.Link("lan"); lan.AB.Rate != 0 || lan.BA.Rate != 0 {
		t.Errorf("lan = %+v", lan)
	}
	// An odd RTT keeps its exact sum: the extra nanosecond goes to b_to_a.
	odd := mustParse(t, "[[links]]\nname = \"primary\"\nrtt = \"1.000001ms\"\n").Topology.Link("primary")
	if odd.AB.Delay != 500000 || odd.BA.Delay != 500001 {
		t.Errorf("1.000001ms split into %d + %d ns", odd.AB.Delay, odd.BA.Delay)
	}
	// The built-in testbed is not modified by patching.
	if d := DefaultTopology().Link("secondary"); d.AB.Rate != 10*Mbit {
		t.Errorf("DefaultTopology changed: %+v", d)
	}
}

const customTopology = `
[[nodes]]
name = "c"
role = "client"
[[nodes]]
name = "l1"
role = "link"
[[nodes]]
name = "l2"
role = "link"
[[nodes]]
name = "s"
role = "server"
[[nodes]]
name = "w"
role = "web"

[[links]]
name = "wifi"
a = "c"
b = "s"
via = "l1"
subnet = "198.18.1.0/24"
rate = "20mbit"
delay = "5ms"
jitter = "1ms"
loss = "0.5%"
queue_limit = 50
[links.b_to_a]
rate = "40mbit"
loss = "gemodel 2%"

[[links]]
name = "lte"
a = "c"
b = "s"
via = "l2"
rtt = "61ms"

[[links]]
name = "eth"
a = "c"
b = "s"

[[links]]
name = "lan"
a = "s"
b = "w"
subnet = "198.19.255.252/30"
`

func TestCustomTopology(t *testing.T) {
	s := mustParse(t, customTopology+`
[tcp]
congestion = "reno"
no_metrics_save = false
[tcp.nodes.s]
congestion = "bbr"
wmem = [1, 2, 3]

[[transports]]
name = "braid"
scheduler = "weighted"
weights = [1, 2, 3]
[[transports]]
name = "direct"
path = "lte"
`)
	top := s.Topology
	var paths []string
	for _, l := range top.Paths() {
		paths = append(paths, l.Name)
	}
	if !slices.Equal(paths, []string{"wifi", "lte", "eth"}) || top.WebLink().Name != "lan" {
		t.Errorf("paths = %v, web = %v", paths, top.WebLink())
	}
	// wifi took 198.18.1.0/24 explicitly, so automatic assignment starts
	// at 198.18.2.0/24.
	for _, tc := range []struct{ link, a, b string }{
		{"wifi", "198.18.1.1/24", "198.18.1.2/24"},
		{"lte", "198.18.2.1/24", "198.18.2.2/24"},
		{"eth", "198.18.3.1/24", "198.18.3.2/24"},
		{"lan", "198.19.255.253/30", "198.19.255.254/30"},
	} {
		l := top.Link(tc.link)
		if l.AddrA != netip.MustParsePrefix(tc.a) || l.AddrB != netip.MustParsePrefix(tc.b) {
			t.Errorf("%s: %v %v, want %s %s", tc.link, l.AddrA, l.AddrB, tc.a, tc.b)
		}
	}
	wifi := top.Link("wifi")
	if want := (Shaping{Rate: 20 * Mbit, Delay: 5 * time.Millisecond, Jitter: time.Millisecond, Loss: Loss{Model: LossUniform, Percent: 0.5}, QueueLimit: 50}); wifi.AB != want {
		t.Errorf("wifi a_to_b = %+v", wifi.AB)
	}
	if want := (Shaping{Rate: 40 * Mbit, Delay: 5 * time.Millisecond, Jitter: time.Millisecond, Loss: Loss{Model: LossGE, P: 2, R: 98, OneMinusH: 100}, QueueLimit: 50}); wifi.BA != want {
		t.Errorf("wifi b_to_a = %+v", wifi.BA)
	}
	if lte := top.Link("lte"); lte.AB.Delay != 30500*time.Microsecond || lte.BA.Delay != 30500*time.Microsecond || lte.AB.Rate != 0 || lte.AB.QueueLimit != DefaultQueueLimit {
		t.Errorf("lte = %+v", lte)
	}
	if eth := top.Link("eth"); eth.Emulated() || eth.AB != (Shaping{QueueLimit: DefaultQueueLimit}) {
		t.Errorf("eth = %+v", eth)
	}

	c, srv := top.Node("c").TCP, top.Node("s").TCP
	if c.Congestion != "reno" || c.NoMetricsSave || c.Wmem != DefaultTCP().Wmem {
		t.Errorf("client TCP = %+v", c)
	}
	if srv.Congestion != "bbr" || srv.NoMetricsSave || srv.Wmem != [3]int{1, 2, 3} || srv.Rmem != DefaultTCP().Rmem {
		t.Errorf("server TCP = %+v", srv)
	}

	if tr := s.Transports[0]; tr.Label != "braid weighted 1/2/3" || !slices.Equal(tr.Weights, []float64{1, 2, 3}) {
		t.Errorf("braid = %+v", tr)
	}
	if tr := s.Transports[1]; tr.Label != "direct lte" || tr.Path != "lte" {
		t.Errorf("direct = %+v", tr)
	}
}

func TestWeightedDefaults(t *testing.T) {
	s := mustParse(t, "[[transports]]\nname = \"braid\"\nscheduler = \"weighted\"\nreorder = \"off\"\ncongestion = \"none\"\n")
	tr := s.Transports[0]
	if !slices.Equal(tr.Weights, []float64{1, 1}) || tr.Label != "braid weighted reorder=off cc=none" || tr.Reorder != "off" {
		t.Errorf("transport = %+v", tr)
	}
}

// TestErrors covers every class of error: syntax, unknown keys, types,
// values of each section, topology structure, transports and sweeps. The
// wanted text is the whole line, so a change of wording is a decision.
func TestErrors(t *testing.T) {
	const custom2 = "[[nodes]]\nname = \"c\"\nrole = \"client\"\n[[nodes]]\nname = \"l\"\nrole = \"link\"\n[[nodes]]\nname = \"s\"\nrole = \"server\"\n[[nodes]]\nname = \"w\"\nrole = \"web\"\n"
	// custom2 ends on line 12; links start on line 13.
	for _, tc := range []struct {
		name, doc, want string
	}{
		// Decoding.
		{"syntax", "[experiment\n", `t.toml: line 1: expected ']' to close table name`},
		{"unknown top key", "name = \"x\"\nreps = 3\n", `t.toml: line 2: unknown key "reps"`},
		{"unknown key hint", "[experiment]\nrep = 3\n", `t.toml: line 2: unknown key "experiment.rep" (did you mean "reps"?)`},
		{"unknown table", "[sweeps]\n", `t.toml: line 1: unknown table "sweeps" (did you mean "sweep"?)`},
		{"unknown per-direction key", "[[links]]\nname = \"primary\"\n[links.a_to_b]\nrtt = \"20ms\"\n", `t.toml: line 4: unknown key "links.a_to_b.rtt"`},
		{"unknown per-node key", "[tcp.nodes.client]\ncongestoin = \"reno\"\n", `t.toml: line 2: unknown key "tcp.nodes.client.congestoin" (did you mean "congestion"?)`},
		{"type", "[experiment]\nreps = \"3\"\n", `t.toml: line 2: experiment.reps: expected an integer, found a string`},
		{"array type", "[sweep]\nrtt_ratio = [\"1:2\"]\n", `t.toml: line 2: sweep.rtt_ratio: expected an array of numbers, found an array containing a string`},

		// Experiment.
		{"size unit", "[experiment]\nsize = \"16\"\n", `t.toml: line 2: experiment.size: "16" has no unit (e.g. "16MiB" or "16B")`},
		{"reps", "[experiment]\nreps = 0\n", `t.toml: line 2: experiment.reps: 0 out of range (1..10000)`},
		{"timeout", "[experiment]\ntimeout = \"5\"\n", `t.toml: line 2: experiment.timeout: "5" is not a duration (e.g. "90s", "5m")`},
		{"timeout range", "[experiment]\ntimeout = \"10ms\"\n", `t.toml: line 2: experiment.timeout: 10ms out of range (1s..24h0m0s)`},
		{"seed", "[experiment]\nseed = -1\n", `t.toml: line 2: experiment.seed: -1 is negative`},

		// Link values (patching the testbed).
		{"rtt and delay", "[[links]]\nname = \"primary\"\nrtt = \"20ms\"\ndelay = \"10ms\"\n", `t.toml: line 3: links[0].rtt: set together with delay; give one (rtt is the sum of both directions' delays)`},
		{"duration", "[[links]]\nname = \"primary\"\nrtt = \"20\"\n", `t.toml: line 3: links[0].rtt: "20" is not a duration (e.g. "20ms", "1.5ms", "100us")`},
		{"delay range", "[[links]]\nname = \"primary\"\n[links.b_to_a]\ndelay = \"11s\"\n", `t.toml: line 4: links[0].b_to_a.delay: 11s out of range (0..10s)`},
		{"negative jitter", "[[links]]\nname = \"primary\"\njitter = \"-1ms\"\n", `t.toml: line 3: links[0].jitter: -1ms out of range (0..10s)`},
		{"rate bytes", "[[links]]\nname = \"primary\"\nrate = \"10mbps\"\n", `t.toml: line 3: links[0].rate: "10mbps" is ambiguous (tc reads "mbps" as bytes per second); write bits, e.g. "10mbit"`},
		{"loss", "[[links]]\nname = \"primary\"\nloss = \"120%\"\n", `t.toml: line 3: links[0].loss: "120%" is outside 0%..100%`},
		{"gemodel", "[[links]]\nname = \"primary\"\n[links.a_to_b]\nloss = \"gemodel 1% 2% 3% 4% 5%\"\n", `t.toml: line 4: links[0].a_to_b.loss: "gemodel 1% 2% 3% 4% 5%": gemodel takes 1 to 4 percentages: p [r [1-h [1-k]]]`},
		{"queue limit", "[[links]]\nname = \"primary\"\nqueue_limit = 0\n", `t.toml: line 3: links[0].queue_limit: 0 out of range (1..1000000 packets)`},
		{"jitter over delay", "[[links]]\nname = \"primary\"\n[links.a_to_b]\njitter = \"20ms\"\n", `t.toml: line 1: links[0]: link "primary" a_to_b: jitter 20ms exceeds delay 10ms (the delay is spread over delay±jitter)`},
		{"delay without via", "[[links]]\nname = \"lan\"\nrtt = \"1ms\"\n", `t.toml: line 1: links[0]: link "lan" has no link node (via), so nothing can add its delay, jitter, loss, trace or queue_bytes; only rate is shaped on a plain veth pair`},

		// Traces.
		{"trace and rate", "[[links]]\nname = \"primary\"\n[links.b_to_a]\nrate = \"10mbit\"\ntrace = \"fading\"\n", `t.toml: line 5: links[0].b_to_a.trace: set together with rate; a direction's capacity is a fixed rate or a trace`},
		{"trace profile", "[[links]]\nname = \"primary\"\ntrace = \"fadeing\"\n", `t.toml: line 3: links[0].trace: "fadeing": `},
		{"trace mean", "[[links]]\nname = \"primary\"\ntrace = \"steady 20mbps\"\n", `t.toml: line 3: links[0].trace: "steady 20mbps": mean rate: `},
		{"trace words", "[[links]]\nname = \"primary\"\ntrace = \"steady 20mbit 3\"\n", `t.toml: line 3: links[0].trace: "steady 20mbit 3": a trace is a profile and an optional mean rate (e.g. "steady 20mbit"), or "file PATH"`},
		{"trace file missing", "[[links]]\nname = \"primary\"\ntrace = \"file no-such.trace\"\n", `t.toml: line 3: links[0].trace: `},
		{"trace without via", "[[links]]\nname = \"lan\"\ntrace = \"steady\"\n", `t.toml: line 1: links[0]: link "lan" has no link node (via), so nothing can add its delay, jitter, loss, trace or queue_bytes; only rate is shaped on a plain veth pair`},
		{"queue bytes", "[[links]]\nname = \"primary\"\nqueue_bytes = 100\n", `t.toml: line 3: links[0].queue_bytes: 100 out of range (1514..1073741824 bytes)`},
		{"patch unknown link", "[[links]]\nname = \"third\"\n", `t.toml: line 2: links[0].name: no link "third" in the built-in testbed (links: primary, secondary, lan); declare [[nodes]] and every link to build another topology`},
		{"patch without name", "[[links]]\nrtt = \"1ms\"\n", `t.toml: line 1: links[0].name: required (without [[nodes]], links name a link of the built-in testbed: primary, secondary, lan)`},
		{"patch twice", "[[links]]\nname = \"primary\"\n[[links]]\nname = \"primary\"\n", `t.toml: line 4: links[1].name: "primary" duplicates links[0].name`},
		{"patch structure", "[[links]]\nname = \"primary\"\nvia = \"x\"\n", `t.toml: line 3: links[0].via: is fixed in the built-in testbed; declare [[nodes]] and every link to build another topology`},

		// Topology structure.
		{"node name", "[[nodes]]\nname = \"Client\"\nrole = \"client\"\n", `t.toml: line 2: nodes[0].name: "Client" is not a valid name (lower-case letters, digits and '-', starting with a letter)`},
		{"node name length", "[[nodes]]\nname = \"clientclient\"\nrole = \"client\"\n", `t.toml: line 2: nodes[0].name: "clientclient" is 12 bytes; names have at most 10 (interface names are built from them)`},
		{"node role", "[[nodes]]\nname = \"c\"\nrole = \"router\"\n", `t.toml: line 3: nodes[0].role: unknown role "router" (valid: client, link, server, web)`},
		{"node role missing", "[[nodes]]\nname = \"c\"\n", `t.toml: line 1: nodes[0].role: required (one of: client, link, server, web)`},
		{"duplicate node", "[[nodes]]\nname = \"c\"\nrole = \"client\"\n[[nodes]]\nname = \"c\"\nrole = \"server\"\n", `t.toml: line 5: nodes[1].name: "c" duplicates nodes[0].name`},
		{"role count", "[[nodes]]\nname = \"c\"\nrole = \"client\"\n", `t.toml: line 1: nodes: need exactly one node with role = "server", found 0`},
		{"two clients", custom2 + "[[nodes]]\nname = \"d\"\nrole = \"client\"\n", `t.toml: line 1: nodes: need exactly one node with role = "client", found 2 (c, d)`},
		{"no links", custom2, `t.toml: links: required with [[nodes]]: at least one client–server link and one server–web link`},
		{"reversed link", custom2 + "[[links]]\nname = \"p\"\na = \"s\"\nb = \"c\"\nvia = \"l\"\n", `t.toml: line 13: links[0]: a = "s", b = "c": a is the end nearer the client; swap them (and a_to_b with b_to_a)`},
		{"client to web", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"w\"\n", `t.toml: line 13: links[0]: links join a client to a server (a path) or a server to a web server; "c" (client) to "w" (web) is neither (a link node goes in via)`},
		{"unknown endpoint", custom2 + "[[links]]\nname = \"p\"\na = \"x\"\nb = \"s\"\n", `t.toml: line 15: links[0].a: no node "x" (nodes: c, l, s, w)`},
		{"missing endpoint", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\n", `t.toml: line 13: links[0].b: required (the end nearer the web server)`},
		{"via not link", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\nvia = \"w\"\n", `t.toml: line 17: links[0].via: node "w" has role "web"; via names a node with role = "link"`},
		{"via twice", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\nvia = \"l\"\n[[links]]\nname = \"q\"\na = \"c\"\nb = \"s\"\nvia = \"l\"\n", `t.toml: line 22: links[1].via: link node "l" already carries links[0]; a link node joins exactly two interfaces`},
		{"unused link node", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\n", `t.toml: line 4: nodes[1]: link node "l" is the via of no link`},
		{"no web link", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\nvia = \"l\"\n", `t.toml: line 13: links: need exactly one link between the server "s" and the web server "w", found 0`},
		{"subnet outside", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\nvia = \"l\"\nsubnet = \"10.0.0.0/24\"\n[[links]]\nname = \"lan\"\na = \"s\"\nb = \"w\"\n", `t.toml: line 18: links[0].subnet: "10.0.0.0/24" is outside 198.18.0.0/15, the benchmarking range every lab link uses`},
		{"subnet host bits", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\nvia = \"l\"\nsubnet = \"198.18.9.1/24\"\n[[links]]\nname = \"lan\"\na = \"s\"\nb = \"w\"\n", `t.toml: line 18: links[0].subnet: "198.18.9.1/24" has host bits set (did you mean "198.18.9.0/24"?)`},
		{"subnet small", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\nvia = \"l\"\nsubnet = \"198.18.9.0/31\"\n[[links]]\nname = \"lan\"\na = \"s\"\nb = \"w\"\n", `t.toml: line 18: links[0].subnet: "198.18.9.0/31" is too small: a link needs two host addresses (at most /30)`},
		{"subnet overlap", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\nvia = \"l\"\nsubnet = \"198.18.8.0/22\"\n[[links]]\nname = \"lan\"\na = \"s\"\nb = \"w\"\nsubnet = \"198.18.9.0/24\"\n", `t.toml: line 23: links[1].subnet: 198.18.9.0/24 overlaps the subnet of links[0]`},
		{"subnet overlap after an automatic one", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\nvia = \"l\"\n[[links]]\nname = \"lan\"\na = \"s\"\nb = \"w\"\nsubnet = \"198.18.8.0/24\"\n[[links]]\nname = \"q\"\na = \"c\"\nb = \"s\"\nsubnet = \"198.18.8.0/25\"\n", `t.toml: line 27: links[2].subnet: 198.18.8.0/25 overlaps the subnet of links[1]`},

		// TCP.
		{"congestion", "[tcp]\ncongestion = \"fast\"\n", `t.toml: line 2: tcp.congestion: unknown congestion control "fast" (valid: cubic, reno, bbr, bic, cdg, dctcp, highspeed, htcp, hybla, illinois, lp, nv, scalable, vegas, veno, westwood, yeah)`},
		{"coupled congestion", "[tcp.nodes.server]\ncongestion = \"balia\"\n", `t.toml: line 2: tcp.nodes.server.congestion: "balia" is a coupled MPTCP algorithm of the out-of-tree MPTCP kernel; mainline Linux has none (valid: cubic, reno, bbr, bic, cdg, dctcp, highspeed, htcp, hybla, illinois, lp, nv, scalable, vegas, veno, westwood, yeah)`},
		{"rmem order", "[tcp]\nrmem = [1, 3, 2]\n", `t.toml: line 2: tcp.rmem: [1, 3, 2] is not ordered min ≤ default ≤ max`},
		{"rmem count", "[tcp]\nrmem = [1, 3]\n", `t.toml: line 2: tcp.rmem: 2 values; give three: min, default, max (bytes)`},
		{"wmem range", "[tcp]\nwmem = [0, 3, 4]\n", `t.toml: line 2: tcp.wmem[0]: 0 out of range (1..2147483647 bytes)`},
		{"core range", "[tcp]\ncore_rmem_max = 100\n", `t.toml: line 2: tcp.core_rmem_max: 100 out of range (4096..2147483647 bytes)`},
		{"tcp unknown node", "[tcp.nodes.nobody]\ncongestion = \"reno\"\n", `t.toml: line 1: tcp.nodes.nobody: no node "nobody" (nodes: client, primary, secondary, server, web)`},
		{"tcp nested", "[tcp.nodes.web.nodes.client]\n", `t.toml: line 1: tcp.nodes.web.nodes: per-node settings do not nest`},

		// Transports.
		{"transport missing name", "[[transports]]\nlabel = \"x\"\n", `t.toml: line 1: transports[0].name: required (one of: direct, mptcp-direct, braid`},
		{"transport unknown", "[[transports]]\nname = \"openvpn\"\n", `t.toml: line 2: transports[0].name: unknown transport "openvpn" (valid: direct, mptcp-direct, braid`},
		{"option not taken", "[[transports]]\nname = \"direct\"\nscheduler = \"minrtt\"\n", `t.toml: line 3: transports[0].scheduler: transport "direct" takes no scheduler option (its options: path)`},
		{"option of optionless kind", "[[transports]]\nname = \"mptcp-direct\"\npath = \"primary\"\n", `t.toml: line 3: transports[0].path: transport "mptcp-direct" takes no path option (its options: none)`},
		{"scheduler", "[[transports]]\nname = \"braid\"\nscheduler = \"fastest\"\n", `t.toml: line 3: transports[0].scheduler: unknown scheduler "fastest" (valid: roundrobin, weighted, minrtt, rtt-aware, earliest-arrival, redundant)`},
		{"reorder", "[[transports]]\nname = \"braid\"\nreorder = \"always\"\n", `t.toml: line 3: transports[0].reorder: unknown reorder mode "always" (valid: off, fixed, adaptive)`},
		{"congestion option", "[[transports]]\nname = \"braid\"\ncongestion = \"bbr\"\n", `t.toml: line 3: transports[0].congestion: unknown congestion controller "bbr" (valid: ` + strings.Join(config.CongestionChoices, ", ") + `)`},
		{"weights without weighted", "[[transports]]\nname = \"braid\"\nweights = [1, 2]\n", `t.toml: line 3: transports[0].weights: set, but only scheduler = "weighted" uses weights (scheduler is "earliest-arrival")`},
		{"weights count", "[[transports]]\nname = \"braid\"\nscheduler = \"weighted\"\nweights = [1, 2, 3]\n", `t.toml: line 4: transports[0].weights: 3 weights for 2 paths (one per client–server link, in file order)`},
		{"weights negative", "[[transports]]\nname = \"braid\"\nscheduler = \"weighted\"\nweights = [1, -2]\n", `t.toml: line 4: transports[0].weights[1]: -2 is not a finite number ≥ 0`},
		{"weights zero", "[[transports]]\nname = \"braid\"\nscheduler = \"weighted\"\nweights = [0, 0]\n", `t.toml: line 4: transports[0].weights: all weights are 0; at least one path must carry traffic`},
		{"duplicate label", "[[transports]]\nname = \"braid\"\n[[transports]]\nname = \"braid\"\n", `t.toml: line 3: transports[1]: label "braid" duplicates transports[0]; set label to tell them apart`},
		{"path", "[[transports]]\nname = \"direct\"\npath = \"lan\"\n", `t.toml: line 3: transports[0].path: no path "lan" (paths, the client–server links: primary, secondary)`},

		// Sweeps.
		{"empty axis", "[sweep]\nrtt = []\n", `t.toml: line 2: sweep.rtt: empty; list values or remove the key`},
		{"duplicate value", "[sweep]\nrtt = [\"1ms\", \"1ms\"]\n", `t.toml: line 2: sweep.rtt[1]: 1ms duplicates sweep.rtt[0]`},
		{"duplicate loss", "[sweep]\nloss = [\"1%\",\n  \"random 1%\"]\n", `t.toml: line 3: sweep.loss[1]: "random 1%" duplicates sweep.loss[0]`},
		{"bad axis value", "[sweep]\nrate = [\"10mbit\", \"fast\"]\n", `t.toml: line 2: sweep.rate[1]: "fast" is not a rate (e.g. "10mbit", "1gbit", "500kbit")`},
		{"ratio", "[sweep]\nrtt_ratio = [0]\n", `t.toml: line 2: sweep.rtt_ratio[0]: 0 out of range (a ratio > 0 and ≤ 1000)`},
		{"unknown axis", "[sweep]\nbandwidth = [1]\n", `t.toml: line 2: unknown key "sweep.bandwidth"`},
		{"scheduler axis unused", "[sweep]\nscheduler = [\"minrtt\"]\n[[transports]]\nname = \"direct\"\n", `t.toml: line 2: sweep.scheduler: no transport takes it: each either has no scheduler option or sets its own`},
		{"scheduler axis unknown", "[sweep]\nscheduler = [\"minrtt\", \"fastest\"]\n", `t.toml: line 2: sweep.scheduler[1]: unknown scheduler "fastest" (valid: roundrobin, weighted, minrtt, rtt-aware, earliest-arrival, redundant)`},
		{"scheduler label clash", "[sweep]\nscheduler = [\"minrtt\"]\n[[transports]]\nname = \"braid\"\n[[transports]]\nname = \"braid\"\nlabel = \"braid minrtt\"\nscheduler = \"minrtt\"\n", `t.toml: line 2: sweep.scheduler: expands two transports to the label "braid minrtt" (variants 0 and 1); set label on the [[transports]] entries`},
		{"swept jitter", "[[links]]\nname = \"primary\"\njitter = \"6ms\"\n[sweep]\nrtt = [\"20ms\", \"10ms\"]\n", `t.toml: line 4: sweep: at rtt=10ms: link "primary" a_to_b: jitter 6ms exceeds delay 5ms (the delay is spread over delay±jitter)`},
		{"swept rate ratio", "[sweep]\nrate_ratio = [0.0001]\n", `t.toml: line 1: sweep: at rate_ratio=1:0.0001: link "secondary" a_to_b: rate 1kbit/s out of range (8kbit/s..100Gbit/s)`},
		{"ratio needs rate", "[[links]]\nname = \"primary\"\nrate = \"unlimited\"\n[sweep]\nrate_ratio = [0.5]\n", `t.toml: line 5: sweep.rate_ratio: the first path "primary" is unshaped in at least one direction; give it a rate (or sweep rate) for the ratio to apply to`},
		{"sweep needs emulator", customTopology + "[sweep]\nloss = [\"1%\"]\n", `t.toml: line 51: sweep.loss: path "eth" has no link node (via) to emulate loss`},
		{"competing range", "[experiment]\ncompeting = 17\n", `t.toml: line 2: experiment.competing: 17 out of range (0..16)`},
		{"competing path", "[experiment]\ncompeting = 1\ncompeting_path = \"lan\"\n", `t.toml: line 3: experiment.competing_path: no path "lan" (paths, the client–server links: primary, secondary)`},
		{"competing path alone", "[experiment]\ncompeting_path = \"primary\"\n", `t.toml: line 2: experiment.competing_path: set without competing flows (experiment.competing)`},
		{"competing transport alone", "[experiment]\ncompeting_transport = \"braid\"\n", `t.toml: line 2: experiment.competing_transport: set without competing flows (experiment.competing)`},
		{"competing transport unknown", "[experiment]\ncompeting = 1\ncompeting_transport = \"quic\"\n", `t.toml: line 3: experiment.competing_transport: unknown competing transport "quic" (valid: tcp, braid)`},
		{"competing braid with a path", "[experiment]\ncompeting = 1\ncompeting_transport = \"braid\"\ncompeting_path = \"primary\"\n[[transports]]\nname = \"braid\"\n",
			`t.toml: line 4: experiment.competing_path: a competing braid client takes the measured transport's paths; competing_path is for competing_transport = "tcp"`},
		{"competing braid against direct", "[experiment]\ncompeting = 1\ncompeting_transport = \"braid\"\n[[transports]]\nname = \"braid\"\n[[transports]]\nname = \"direct\"\n",
			`t.toml: line 3: experiment.competing_transport: transport "direct" has no braid server for a competing braid client to share (those that do: braid, udp-tunnel, tcp-tunnel, mptcp-tunnel)`},
		{"competing braid, default transports", "[experiment]\ncompeting = 1\ncompeting_transport = \"braid\"\n",
			`t.toml: line 3: experiment.competing_transport: transport "direct" has no braid server for a competing braid client to share (those that do: braid, udp-tunnel, tcp-tunnel, mptcp-tunnel)`},
		// Shared media.
		{"medium unknown", "[[links]]\nname = \"primary\"\nmedium = \"air\"\n", `t.toml: line 3: links[0].medium: no medium "air" (media: none declared)`},
		{"medium rate", "[[media]]\nname = \"air\"\n", `t.toml: line 1: media[0].rate: required (the capacity the medium's links share)`},
		{"medium bad rate", "[[media]]\nname = \"air\"\nrate = \"1kbit\"\n", `t.toml: line 3: media[0].rate: "1kbit" out of range (8kbit/s..100Gbit/s; omit the key or write "unlimited" for an unshaped link)`},
		{"medium duplicate", "[[media]]\nname = \"air\"\nrate = \"1Mbit\"\n[[media]]\nname = \"air\"\nrate = \"1Mbit\"\n", `t.toml: line 5: media[1].name: "air" duplicates media[0].name`},
		{"medium and own rate", "[[media]]\nname = \"air\"\nrate = \"11Mbit\"\n[[links]]\nname = \"primary\"\nrate = \"5Mbit\"\nmedium = \"air\"\n", `t.toml: line 7: links[0].medium: link "primary" sets a rate or trace; a link on a medium takes the medium's`},
		{"medium plain link", "[[media]]\nname = \"air\"\nrate = \"11Mbit\"\n[[links]]\nname = \"lan\"\nmedium = \"air\"\n", `t.toml: line 6: links[0].medium: link "lan" has no link node (via); only an emulated link can share a medium`},
		{"medium rate sweep", "[[media]]\nname = \"air\"\nrate = \"11Mbit\"\n[[links]]\nname = \"primary\"\nmedium = \"air\"\n[sweep]\nrate = [\"5Mbit\"]\n", `t.toml: line 8: sweep.rate: path "primary" is on medium "air", which sets its rate`},
		{"ratio needs two paths", custom2 + "[[links]]\nname = \"p\"\na = \"c\"\nb = \"s\"\nvia = \"l\"\n[[links]]\nname = \"lan\"\na = \"s\"\nb = \"w\"\n[sweep]\nrtt_ratio = [2]\n", `t.toml: line 23: sweep.rtt_ratio: needs at least two paths (the others are set relative to the first), found 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(tc.doc))
			if err == nil {
				t.Fatalf("no error, want %s", tc.want)
			}
			got := err.Error()
			// Lists of registered transports may grow at the end.
			if strings.HasSuffix(tc.want, ": ") || strings.Contains(tc.want, "direct, mptcp-direct, braid") && !strings.HasSuffix(tc.want, ")") {
				if !strings.HasPrefix(got, tc.want) {
					t.Errorf("error\n got: %s\nwant: %s…", got, tc.want)
				}
			} else if got != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", got, tc.want)
			}
			if strings.Contains(got, "\n") {
				t.Errorf("error spans several lines")
			}
			var se *tomlerr.Error
			if !errors.As(err, &se) || se.File != "t.toml" {
				t.Errorf("error is %T, not *Error for t.toml", err)
			}
		})
	}
}

func TestTooManyPoints(t *testing.T) {
	var rtts, losses []string
	for i := 1; i <= 101; i++ {
		rtts = append(rtts, `"`+time.Duration(i*int(time.Millisecond)).String()+`"`)
	}
	for i := 1; i <= 40; i++ {
		losses = append(losses, `"`+strconv.Itoa(i)+`%"`)
	}
	doc := "[sweep]\nrtt = [" + strings.Join(rtts, ", ") + "]\nloss = [" + strings.Join(losses, ", ") + "]\n"
	_, err := Parse("t.toml", []byte(doc))
	// 101 × 40 × 3 default transports = 12120 points.
	if err == nil || err.Error() != "t.toml: line 1: sweep: expands to 12120 points; the limit is 10000" {
		t.Errorf("err = %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mine.toml")
	if err := os.WriteFile(path, []byte("[experiment]\nreps = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "mine" || s.File != path || s.Experiment.Reps != 2 {
		t.Errorf("scenario = %+v", s)
	}
	missing := filepath.Join(dir, "none.toml")
	_, err = Load(missing)
	if err == nil || err.Error() != missing+": no such file or directory" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

var registerTest sync.Once

// TestRegisterTransport is the seam for transports implemented elsewhere:
// the runner registers them, and files naming them parse.
func TestRegisterTransport(t *testing.T) {
	registerTest.Do(func() {
		RegisterTransport(TransportKind{
			Name:    "test-tunnel",
			Summary: "a single-path tunnel, for this test",
			Options: []string{OptPath},
		})
	})
	if names := TransportNames(); !slices.Equal(names[:3], []string{"direct", "mptcp-direct", "braid"}) || !slices.Contains(names, "test-tunnel") {
		t.Errorf("TransportNames = %v", names)
	}
	s := mustParse(t, "[[transports]]\nname = \"test-tunnel\"\n")
	if tr := s.Transports[0]; tr.Name != "test-tunnel" || tr.Path != "primary" || tr.Label != "test-tunnel" || tr.Scheduler != "" {
		t.Errorf("transport = %+v", tr)
	}
	_, err := Parse("t.toml", []byte("[[transports]]\nname = \"nope\"\n"))
	if err == nil || !strings.HasSuffix(err.Error(), ", test-tunnel)") || !strings.Contains(err.Error(), "(valid: direct, mptcp-direct, braid, ") {
		t.Errorf("unknown transport error does not list the registered one: %v", err)
	}

	for _, k := range []TransportKind{{Name: "braid"}, {Name: ""}, {Name: "x", Options: []string{"colour"}}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterTransport(%+v) did not panic", k)
				}
			}()
			RegisterTransport(k)
		}()
	}
}

func TestMediaParse(t *testing.T) {
	doc := `
[[media]]
name = "air"
rate = "11Mbit"
queue_limit = 50

[[links]]
name = "primary"
medium = "air"

[[links]]
name = "secondary"
medium = "air"
rtt = "4ms"
`
	s, err := Parse("m.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	top := s.Topology
	if len(top.Media) != 1 || top.Media[0] != (Medium{Name: "air", Rate: 11_000_000, QueueLimit: 50}) {
		t.Fatalf("media %+v", top.Media)
	}
	for _, name := range []string{"primary", "secondary"} {
		l := top.Link(name)
		if l.Medium != "air" || l.AB.Rate != 0 || l.BA.Rate != 0 {
			t.Errorf("link %s: medium %q, rates %v/%v; want air and no own rate", name, l.Medium, l.AB.Rate, l.BA.Rate)
		}
	}
	if l := top.Link("lan"); l.Medium != "" {
		t.Errorf("lan joined medium %q", l.Medium)
	}
	// Points share the media declaration.
	if p := s.Points(); len(p[0].Topology.Media) != 1 {
		t.Errorf("point topology lost its media")
	}
}

func TestCompetingParse(t *testing.T) {
	s, err := Parse("c.toml", []byte("[experiment]\ncompeting = 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e := s.Experiment; e.Competing != 2 || e.CompetingPath != "primary" || e.CompetingTransport != CompetingTCP {
		t.Errorf("competing %d %s over %q, want 2 tcp over the primary path", e.Competing, e.CompetingTransport, e.CompetingPath)
	}
	s, err = Parse("c.toml", []byte("[experiment]\ncompeting = 1\ncompeting_transport = \"braid\"\n[[transports]]\nname = \"braid\"\n[[transports]]\nname = \"udp-tunnel\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e := s.Experiment; e.Competing != 1 || e.CompetingTransport != CompetingBraid || e.CompetingPath != "" {
		t.Errorf("competing %d %s over %q, want 1 braid over the measured transport's paths", e.Competing, e.CompetingTransport, e.CompetingPath)
	}
	if s, err := Parse("c.toml", []byte("[experiment]\n")); err != nil || s.Experiment.CompetingTransport != "" {
		t.Errorf("no competing flows: competing transport %q, error %v; want none", s.Experiment.CompetingTransport, err)
	}
}

func TestTunnelTransportOptions(t *testing.T) {
	s := mustParse(t, `
[[transports]]
name = "openvpn-udp"
cipher = "none"
path = "secondary"
[[transports]]
name = "openvpn-mptcp"
subflows = 2
[[transports]]
name = "tcp-tunnel"
`)
	got := []Transport{s.Transports[0], s.Transports[1], s.Transports[2]}
	if tr := got[0]; tr.Cipher != CipherNone || tr.Path != "secondary" || tr.Label != "openvpn-udp secondary cipher=none" {
		t.Errorf("openvpn-udp: %+v", tr)
	}
	if tr := got[1]; tr.Cipher != CipherDefault || tr.Subflows != 2 || tr.Label != "openvpn-mptcp ×2" {
		t.Errorf("openvpn-mptcp: %+v", tr)
	}
	if tr := got[2]; tr.Path != "primary" || tr.Subflows != 0 || tr.Cipher != "" {
		t.Errorf("tcp-tunnel: %+v", tr)
	}
	for doc, want := range map[string]string{
		"[[transports]]\nname = \"openvpn-tcp\"\ncipher = \"aes\"\n": `transports[0].cipher: unknown cipher "aes" (valid: default, none)`,
		"[[transports]]\nname = \"mptcp-tunnel\"\nsubflows = 9\n":    `transports[0].subflows: 9 out of range (1..8)`,
		"[[transports]]\nname = \"udp-tunnel\"\nsubflows = 2\n":      `transports[0].subflows: transport "udp-tunnel" takes no subflows option (its options: path, reorder, recovery)`,
	} {
		_, err := Parse("t.toml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want …%s", doc, err, want)
		}
	}
}

func TestTraceParse(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lte.down"), []byte("1\n1\n2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := "[[links]]\nname = \"primary\"\ntrace = \"steady 20mbit\"\nqueue_bytes = 375000\n" +
		"[links.b_to_a]\ntrace = \"file lte.down\"\n" +
		"[[links]]\nname = \"secondary\"\ntrace = \"fading\"\n[links.a_to_b]\nrate = \"5mbit\"\n"
	path := filepath.Join(dir, "s.toml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	top := s.Points()[0].Topology
	pri, sec := top.Link("primary"), top.Link("secondary")
	for _, c := range []struct {
		name string
		sh   Shaping
		rate Rate
		tr   Capacity
	}{
		// A table's trace replaces the symmetric rate, a table's rate the symmetric trace.
		{"primary a_to_b", pri.AB, 0, Capacity{Profile: "steady", Mean: 20 * Mbit}},
		{"primary b_to_a", pri.BA, 0, Capacity{File: filepath.Join(dir, "lte.down")}},
		{"secondary a_to_b", sec.AB, 5 * Mbit, Capacity{}},
		{"secondary b_to_a", sec.BA, 0, Capacity{Profile: "fading"}},
	} {
		if c.sh.Rate != c.rate || c.sh.Trace != c.tr {
			t.Errorf("%s: rate %v trace %+v, want %v %+v", c.name, c.sh.Rate, c.sh.Trace, c.rate, c.tr)
		}
	}
	if pri.AB.QueueBytes != 375000 || pri.BA.QueueBytes != 375000 || sec.BA.QueueBytes != 0 {
		t.Errorf("queue_bytes: %d %d %d", pri.AB.QueueBytes, pri.BA.QueueBytes, sec.BA.QueueBytes)
	}
	for _, in := range []string{"none", "fading", "steady 20Mbit", "file /x/y"} {
		c, err := ParseCapacity(in)
		if in == "file /x/y" {
			c, err = Capacity{File: "/x/y"}, nil
		}
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		back, err := ParseCapacity(c.String())
		if err != nil || back != c {
			t.Errorf("%q → %q → %+v, %v", in, c.String(), back, err)
		}
	}
}
