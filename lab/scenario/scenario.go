// Package scenario reads the lab's scenario files (the format is documented
// in docs/lab.md): the emulated testbed, the experiment run on it and the
// sweeps that turn one file into a campaign of points.
//
// Files are strict TOML, like braid's config: an unknown key, a value of the
// wrong type or out of range is a one-line error naming the file, line and
// key. A campaign that silently ran with a default because of a misspelt
// "rtt_ratio" would cost hours and prove nothing.
//
// Everything is resolved here, once: each Point carries a complete Topology
// and Transport, so the emulator and the runner never interpret the file.
package scenario

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults and limits, in one block so that docs/lab.md (which says why each
// is what it is), the validation and the tests point at the same numbers.
const (
	// DefaultSize is the paper's 16 MB download, read as 16 MiB.
	DefaultSize  = 16 << 20
	DefaultReps  = 20
	MaxReps      = 10000
	MaxCompeting = 16

	DefaultTimeout = 5 * time.Minute
	MinTimeout     = time.Second
	MaxTimeout     = 24 * time.Hour

	DefaultQueueLimit = 1000
	MaxQueueLimit     = 1_000_000
	// A byte limit below one full frame would drop every frame.
	MinQueueBytes = 1514
	MaxQueueBytes = 1 << 30

	// MaxDelay bounds one-way delay and jitter: satellite paths reach
	// 600 ms RTT; seconds are a typo.
	MaxDelay = 10 * time.Second

	// MaxNameLen keeps node and link names short enough that the runner can
	// build interface names (at most 15 bytes) from them.
	MaxNameLen = 10

	// MaxPoints stops an accidental cartesian explosion before a campaign
	// of weeks starts.
	MaxPoints = 10000

	// MaxLinks bounds automatic /24 subnet assignment (198.18.1.0/24, …).
	MaxLinks = 64

	DefaultLatencyInterval = 10 * time.Millisecond
	MinLatencyInterval     = time.Millisecond
	MaxLatencyInterval     = time.Second
	DefaultLatencyIdle     = time.Second
	MinLatencyIdle         = 100 * time.Millisecond
	MaxLatencyIdle         = time.Minute

	DefaultRealtimeRate     = 1 * Mbit
	DefaultRealtimeSize     = 200
	DefaultRealtimeDuration = 10 * time.Second
	DefaultRealtimeDeadline = 40 * time.Millisecond
	// MinRealtimeSize holds the packet header (sequence number and send
	// time); MaxRealtimeSize fits every tunnel's inner MTU with its IP and
	// UDP headers.
	MinRealtimeSize = 32
	MaxRealtimeSize = 1200
	// MaxRealtimePPS bounds the packet rate the sender paces one packet at
	// a time.
	MaxRealtimePPS      = 20000
	MinRealtimeDuration = time.Second
	MaxRealtimeDuration = time.Hour
	MinRealtimeDeadline = time.Millisecond
	MaxRealtimeDeadline = 10 * time.Second
)

// Workloads: what one repetition of a point measures ([experiment] workload):
// the paper's HTTP download of Experiment.Size, or Experiment.Realtime.
const (
	WorkloadDownload = "download"
	WorkloadRealtime = "realtime"
)

// Workloads lists the valid workloads.
var Workloads = []string{WorkloadDownload, WorkloadRealtime}

// Competing transports ([experiment] competing_transport): what the
// competing downloads run through. CompetingTCP: ordinary TCP over one path;
// CompetingBraid: a second braid client of the measured transport's braid
// server, over its paths, so that two braid clients share every bottleneck.
const (
	CompetingTCP   = "tcp"
	CompetingBraid = "braid"
)

// CompetingTransports lists the valid competing transports.
var CompetingTransports = []string{CompetingTCP, CompetingBraid}

// LabPrefix is where every emulated link takes its subnet: the benchmarking
// range of RFC 2544, which no real network routes.
var LabPrefix = netip.MustParsePrefix("198.18.0.0/15")

// Role is what a node does in the testbed (docs/lab.md, [[nodes]]).
type Role string

const (
	RoleClient Role = "client"
	RoleLink   Role = "link"
	RoleServer Role = "server"
	RoleWeb    Role = "web"
)

// Roles lists the valid roles in the order the testbed is drawn.
var Roles = []Role{RoleClient, RoleLink, RoleServer, RoleWeb}

// Scenario is a parsed, validated scenario file with every default applied.
type Scenario struct {
	File        string // as given to Parse or Load
	Name        string // defaults to the file's base name without ".toml"
	Description string

	Topology   *Topology // before any sweep is applied
	Experiment Experiment
	// Transports are the [[transports]] entries before the option axes
	// expand them.
	Transports []Transport

	// The declared [sweep] axes: network axes (outermost first), then the
	// transport option axes.
	network, options []sweptAxis
	points           []Point
}

// Experiment is the measurement done at every point: [experiment] and
// [[events]] as docs/lab.md describes them.
type Experiment struct {
	Size    int64 // bytes
	Reps    int   // downloads per point
	Timeout time.Duration
	// Seed seeds the emulators' random loss and jitter; 0 lets the runner
	// choose (and record) one.
	Seed          uint64
	Competing     int
	CompetingPath string // CompetingTCP only
	// CompetingTransport is CompetingTCP or CompetingBraid with competing
	// flows, "" without.
	CompetingTransport string

	Latency         bool
	LatencyInterval time.Duration
	LatencyIdle     time.Duration

	Workload string   // WorkloadDownload or WorkloadRealtime
	Realtime Realtime // WorkloadRealtime only

	// ECN is copied to the TCP.ECN of the client, server and web nodes.
	ECN bool

	Events []Event // in time order
}

// Realtime is a constant-rate UDP flow, web server → client through the
// transport: Size bytes of payload every Size·8/Rate, for Duration. A
// packet arriving more than Deadline after it was sent is late.
type Realtime struct {
	Rate     Rate
	Size     int
	Duration time.Duration
	Deadline time.Duration
}

// Interval is the spacing of the flow's packets.
func (r Realtime) Interval() time.Duration {
	if r.Rate == 0 {
		return 0
	}
	return time.Duration(float64(r.Size*8) / float64(r.Rate) * float64(time.Second))
}

// Packets is how many packets the flow sends.
func (r Realtime) Packets() int {
	iv := r.Interval()
	if iv <= 0 {
		return 0
	}
	return int(r.Duration / iv)
}

// Node is one network namespace of the testbed.
type Node struct {
	Name string
	Role Role
	TCP  TCP
}

// Link joins nodes A and B. A path link (client–server) may pass through a
// link node (Via), whose emulator applies AB and BA; a link without Via is a
// plain veth pair and can only be rate-shaped (by the kernel's tbf).
//
// Orientation is fixed so that directions mean something: A is the end
// nearer the client (client–server: A = client; server–web: A = server). A
// download therefore flows B→A.
type Link struct {
	Name string
	A, B string
	Via  string
	// Subnet is shared by both ends (a link node has no address);
	// AddrA and AddrB are its first and second hosts.
	Subnet       netip.Prefix
	AddrA, AddrB netip.Prefix
	AB, BA       Shaping // upload, download
	// Medium names the Topology.Media entry whose capacity the link shares
	// ("" = its own). Its Rate fields are then 0.
	Medium string
	MTU    int // of a path's client end; 0 = unchanged
}

// Medium is a capacity several emulated links share ([[media]]): one queue
// and one transmitter for every frame of every member, both directions.
type Medium struct {
	Name       string
	Rate       Rate
	QueueLimit int // frames
}

// RTT is the link's round-trip propagation delay (without queueing or
// serialization): the sum of both directions' delays.
func (l *Link) RTT() time.Duration { return l.AB.Delay + l.BA.Delay }

// Traced reports whether a direction of a link of t follows a trace, which
// only the userspace emulator replays.
func (t *Topology) Traced() bool {
	return slices.ContainsFunc(t.Links, func(l Link) bool { return !l.AB.Trace.IsZero() || !l.BA.Trace.IsZero() })
}

// Emulated reports whether the link passes through a link node.
func (l *Link) Emulated() bool { return l.Via != "" }

// Shaping is what one direction of a link does to frames.
type Shaping struct {
	Rate  Rate // 0 = unshaped
	Delay time.Duration
	// Jitter spreads the delay uniformly over [Delay-Jitter, Delay+Jitter]
	// (netem's jitter without a distribution table). Jitter ≤ Delay.
	Jitter     time.Duration
	Loss       Loss
	QueueLimit int // frames; more are tail-dropped
	QueueBytes int // bytes of frames waiting; 0 = no byte limit
	// Trace, when set, is the capacity over time instead of Rate (then 0).
	Trace Capacity
}

// Topology is a complete testbed: nodes and the links between them.
type Topology struct {
	Nodes []Node
	Links []Link
	Media []Medium
}

// find returns the first element of xs that ok accepts, or nil.
func find[T any](xs []T, ok func(*T) bool) *T {
	for i := range xs {
		if ok(&xs[i]) {
			return &xs[i]
		}
	}
	return nil
}

// Node returns the node named name, or nil.
func (t *Topology) Node(name string) *Node {
	return find(t.Nodes, func(n *Node) bool { return n.Name == name })
}

// Link returns the link named name, or nil.
func (t *Topology) Link(name string) *Link {
	return find(t.Links, func(l *Link) bool { return l.Name == name })
}

func (t *Topology) byRole(r Role) *Node {
	return find(t.Nodes, func(n *Node) bool { return n.Role == r })
}

func (n Node) name() string { return n.Name }
func (l Link) name() string { return l.Name }

// joins reports whether l joins the nodes a and b (a nearer the client).
func (t *Topology) joins(l *Link, a, b *Node) bool {
	return a != nil && b != nil && l.A == a.Name && l.B == b.Name
}

// Client, Server and Web return the one node of each of those roles.
func (t *Topology) Client() *Node { return t.byRole(RoleClient) }
func (t *Topology) Server() *Node { return t.byRole(RoleServer) }
func (t *Topology) Web() *Node    { return t.byRole(RoleWeb) }

// Paths returns the client–server links in file order. The first is the
// primary path: rtt_ratio and rate_ratio scale the others relative to it,
// and the "direct" transport uses it unless told otherwise.
func (t *Topology) Paths() []*Link {
	var out []*Link
	c, s := t.Client(), t.Server()
	for i := range t.Links {
		if t.joins(&t.Links[i], c, s) {
			out = append(out, &t.Links[i])
		}
	}
	return out
}

// WebLink returns the server–web link.
func (t *Topology) WebLink() *Link {
	return find(t.Links, func(l *Link) bool { return t.joins(l, t.Server(), t.Web()) })
}

// TCP holds the TCP settings of one namespace: the paper's Table 3.
// The fields are the sysctls Sysctls writes; docs/lab.md ([tcp]) says why
// each is set.
type TCP struct {
	Congestion string
	Rmem, Wmem [3]int // min, default, max

	CoreRmemMax, CoreRmemDefault, CoreWmemMax, CoreWmemDefault int

	NoMetricsSave bool
	// ECN is net.ipv4.tcp_ecn = 1; false leaves the kernel's default (2:
	// accept it when asked).
	ECN bool
}

// DefaultTCP returns the paper's Table 3 with cubic, Linux's default
// congestion control (the paper also ran MPTCP's BALIA, which mainline Linux
// does not have).
func DefaultTCP() TCP {
	return TCP{Congestion: "cubic", Rmem: [3]int{4096, 87380, 6291456}, Wmem: [3]int{4096, 16384, 4194304},
		CoreRmemMax: 212992, CoreRmemDefault: 212992, CoreWmemMax: 212992, CoreWmemDefault: 212992, NoMetricsSave: true}
}

// CongestionControls are the algorithms of mainline Linux a scenario may
// name; whether a given kernel has one built is the runner's to find out.
var CongestionControls = []string{"cubic", "reno", "bbr", "bic", "cdg", "dctcp", "highspeed", "htcp", "hybla", "illinois", "lp", "nv", "scalable", "vegas", "veno", "westwood", "yeah"}

// Sysctl is one key and value as sysctl(8) writes them.
type Sysctl struct{ Key, Value string }

// Sysctls returns the settings as sysctl keys and values, the congestion
// control first.
func (t TCP) Sysctls() []Sysctl {
	triple := func(v [3]int) string { return fmt.Sprintf("%d %d %d", v[0], v[1], v[2]) }
	nms := "0"
	if t.NoMetricsSave {
		nms = "1"
	}
	out := []Sysctl{
		{"net.ipv4.tcp_congestion_control", t.Congestion},
		{"net.ipv4.tcp_rmem", triple(t.Rmem)},
		{"net.ipv4.tcp_wmem", triple(t.Wmem)},
		{"net.core.rmem_max", strconv.Itoa(t.CoreRmemMax)},
		{"net.core.rmem_default", strconv.Itoa(t.CoreRmemDefault)},
		{"net.core.wmem_max", strconv.Itoa(t.CoreWmemMax)},
		{"net.core.wmem_default", strconv.Itoa(t.CoreWmemDefault)},
		{"net.ipv4.tcp_no_metrics_save", nms},
	}
	if t.ECN {
		out = append(out, Sysctl{"net.ipv4.tcp_ecn", "1"})
	}
	return out
}

// Transport is one transport under test with its options resolved.
// Its fields are the kind's options (the Opt* keys); a kind's other fields
// are zero.
type Transport struct {
	Name string // the kind
	// Label names this transport in tables, plots and JSON; unique within a
	// scenario. Defaults to Name plus the options set explicitly.
	Label string
	Path  string

	Scheduler, Reorder, Congestion, Recovery string // Recovery "" = braid's default

	Weights    []float64
	Cipher     string
	Subflows   int
	Priorities []int // nil = every path in tier 0
}

// Axis names one sweep dimension, as its key in [sweep] (docs/lab.md says
// what each sets); the transport axis is the [[transports]] list.
type Axis string

const (
	AxisRTT           Axis = "rtt"
	AxisRTTRatio      Axis = "rtt_ratio"
	AxisRate          Axis = "rate"
	AxisRateRatio     Axis = "rate_ratio"
	AxisLoss          Axis = "loss"
	AxisLossSecondary Axis = "loss_secondary"
	AxisTransport     Axis = "transport"
	AxisScheduler     Axis = "scheduler"
	AxisCongestion    Axis = "congestion"
)

// Axes returns the axes of the scenario in the order Points nests them
// (outermost first); the transport axis is always present.
func (s *Scenario) Axes() []Axis {
	name := func(a sweptAxis) Axis { return a.axis }
	return slices.Concat(mapf(s.network, name), []Axis{AxisTransport}, mapf(s.options, name))
}

// Param is one axis value of a point.
type Param struct {
	Axis Axis
	// Text is the value as tables and legends show it: "20ms", "1:3",
	// "10Mbit/s", "gemodel 1% 75% 50% 0.5%", "braid 75/25", "rtt-aware".
	Text string
	// Value is the value as a plot's x axis takes it: milliseconds for
	// rtt, the ratio, Mbit/s for rate, the expected one-way loss in
	// percent for loss; 0 for transport and scheduler.
	Value float64
}

// Point is one fully resolved configuration to measure.
type Point struct {
	// Index is the point's position in Points().
	Index int
	// Network numbers the distinct network configurations in order; points
	// with the same Network share one Topology (same pointer), so a runner
	// can build the testbed once and run every transport on it.
	Network int
	// Params are the point's axis values in Axes() order. A transport that
	// the scheduler axis does not apply to has no scheduler param.
	Params []Param
	// Topology is read-only: it is shared with the other points of the
	// same Network.
	Topology  *Topology
	Transport Transport
}

// Param returns the point's value on axis a.
func (p *Point) Param(a Axis) (Param, bool) {
	if q := find(p.Params, func(q *Param) bool { return q.Axis == a }); q != nil {
		return *q, true
	}
	return Param{}, false
}

// String lists the point's params: "rtt=20ms loss=random 1% transport=braid".
func (p *Point) String() string {
	return strings.Join(mapf(p.Params, func(q Param) string { return string(q.Axis) + "=" + q.Text }), " ")
}

// Points returns the scenario's points: the cartesian product of the
// declared axes, network axes outermost so that consecutive points share a
// testbed, then the transports in file order, then schedulers. A scenario
// without [sweep] has one point per transport.
func (s *Scenario) Points() []Point {
	return slices.Clone(s.points)
}
