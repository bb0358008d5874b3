// Package results holds what a lab run measured, in the form every output (JSON,
// CSV, plots, the Markdown report) is made from: results.json, whose fields
// docs/lab.md describes.
package results

import (
	"slices"
	"time"

	"github.com/braid-vpn/braid/lab/stats"
)

// Run is one `braid lab run` of a scenario.
type Run struct {
	Scenario    string    `json:"scenario"`
	File        string    `json:"file,omitempty"`
	Description string    `json:"description,omitempty"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	Size        int64     `json:"size_bytes"` // download size
	Reps        int       `json:"reps"`
	Emulator    string    `json:"emulator"` // "userspace" or "netem"
	Host        string    `json:"host,omitempty"`
	Axes        []string  `json:"axes"`           // sweep axes, in the order of Point.Params
	Only        []string  `json:"only,omitempty"` // the --only selections (empty: all points)
	// Workload is "download" (also when empty, in files written before
	// workloads existed) or "realtime", whose flow Realtime sets.
	Workload string         `json:"workload,omitempty"`
	Realtime *RealtimeSetup `json:"realtime,omitempty"`
	// The latency probes' spacing and idle baseline (0: no probes).
	LatencyIntervalMs float64 `json:"latency_interval_ms,omitempty"`
	LatencyIdleMs     float64 `json:"latency_idle_ms,omitempty"`
	ECN               bool    `json:"ecn,omitempty"` // the TCP endpoints requested ECN
	// CompetingTransport is what the competing downloads ran through:
	// "tcp" (ordinary TCP over one path) or "braid" (a second braid
	// client); absent without competing downloads, and in files written
	// before it existed (then "tcp").
	CompetingTransport string  `json:"competing_transport,omitempty"`
	Provenance                 // its fields are written at this level of the JSON
	Parts              []Part  `json:"parts,omitempty"` // the shards a merged run was made from, in shard order
	Points             []Point `json:"points"`
}

// Provenance records what is needed to repeat a run and to judge its
// numbers (docs/lab.md, "Reproducible campaigns" and "Shards"). Seed is 0
// in files written before seeds were recorded.
type Provenance struct {
	Seed       uint64   `json:"seed,omitempty"`
	Shard      string   `json:"shard,omitempty"`
	Command    []string `json:"command,omitempty"` // os.Args; a merged run has the merge's
	Commit     string   `json:"commit,omitempty"`
	CommitFrom string   `json:"commit_from,omitempty"` // "build" or "git"
	Dirty      bool     `json:"dirty,omitempty"`
	CPUs       int      `json:"cpus,omitempty"`
	LoadStart  float64  `json:"load_start"`
	LoadMax    float64  `json:"load_max"`
	Warnings   []string `json:"warnings,omitempty"` // what may have spoilt the measurements
}

// Part is one shard of a merged run.
type Part struct {
	Provenance
	Host     string    `json:"host,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Points   int       `json:"points"` // how many of the merged points it measured
}

// RealtimeSetup is the real-time flow every repetition sent.
type RealtimeSetup struct {
	RateMbps   float64 `json:"rate_mbps"`
	Size       int     `json:"size_bytes"` // UDP payload per packet
	Seconds    float64 `json:"seconds"`
	Packets    int     `json:"packets"`
	DeadlineMs float64 `json:"deadline_ms"`
}

// Param is one sweep coordinate of a point.
type Param struct {
	Axis  string  `json:"axis"`
	Text  string  `json:"text"`
	Value float64 `json:"value"`
}

// Point is one fully resolved experiment: network parameters and a transport.
type Point struct {
	Index     int               `json:"index"`
	Params    []Param           `json:"params"`
	Transport string            `json:"transport"`         // kind: direct, mptcp-direct, braid, …
	Label     string            `json:"label"`             // the transport's label in plots and tables
	Options   map[string]string `json:"options,omitempty"` // scheduler, reorder, weights, …
	Samples   []Sample          `json:"samples"`
	Goodput   stats.Summary     `json:"goodput_mbps"` // over Samples[].GoodputMbps
	// PathShares is the fraction of the download's bytes each path carried
	// (braid: from the tunnel's per-path counters; mptcp: from subflow counters
	// where available), keyed by path name.
	PathShares map[string]float64 `json:"path_shares,omitempty"`
	// Competing, Latency, Realtime, BulkRecovery and Events summarize the
	// samples' fields of those names; nil when the samples do not have them.
	Competing    *stats.Summary       `json:"competing_mbps,omitempty"`
	Jain         *stats.Summary       `json:"jain,omitempty"`
	Offered      *stats.Summary       `json:"offered_mbps,omitempty"`
	OfferedUse   *stats.Summary       `json:"offered_use,omitempty"` // goodput ÷ offered, per download
	Latency      *LatencySummary      `json:"latency,omitempty"`
	Realtime     *RealtimeSummary     `json:"realtime,omitempty"`
	BulkRecovery *BulkRecoverySummary `json:"bulk_recovery,omitempty"`
	Events       *EventsSummary       `json:"events,omitempty"`
	Error        string               `json:"error,omitempty"` // the point could not be measured
}

// Param returns the point's value on axis, false when the axis does not
// apply to it (the scheduler of a transport without one).
func (p *Point) Param(axis string) (Param, bool) {
	i := slices.IndexFunc(p.Params, func(q Param) bool { return q.Axis == axis })
	if i < 0 {
		return Param{}, false
	}
	return p.Params[i], true
}

// BulkRecoverySummary, LatencySummary and RealtimeSummary summarize each
// figure of a point's samples (mean and 95% interval over them).
type BulkRecoverySummary struct {
	Overhead     stats.Summary `json:"overhead"`
	PathLossRate stats.Summary `json:"path_loss_rate"`
	Bound        stats.Summary `json:"bound"`
	WithinBound  int           `json:"within_bound"` // the downloads whose Overhead ≤ Bound
}

type LatencySummary struct {
	IdleMs     stats.Summary `json:"idle_median_ms"`
	AddedP50Ms stats.Summary `json:"added_p50_ms"`
	AddedP95Ms stats.Summary `json:"added_p95_ms"`
	AddedP99Ms stats.Summary `json:"added_p99_ms"`
	LossPct    stats.Summary `json:"probe_loss_pct"`
}

type RealtimeSummary struct {
	LossPct         stats.Summary `json:"loss_pct"`
	OWDP50Ms        stats.Summary `json:"owd_p50_ms"`
	OWDP99Ms        stats.Summary `json:"owd_p99_ms"`
	OWDMaxMs        stats.Summary `json:"owd_max_ms"`
	LatePct         stats.Summary `json:"late_pct"`
	MissPct         stats.Summary `json:"miss_pct"`
	OuterPerPayload stats.Summary `json:"outer_per_payload"`
}

// Sample is one download, or one repetition of the real-time flow (its
// goodput, seconds and bytes are then the flow's delivered payload).
type Sample struct {
	Rep int `json:"rep"`
	// Seed and FirstLosses: docs/lab.md, "Reproducible campaigns".
	Seed        uint64              `json:"seed,omitempty"`
	FirstLosses map[string][]uint64 `json:"first_losses,omitempty"`
	GoodputMbps float64             `json:"goodput_mbps"`
	Seconds     float64             `json:"seconds"`
	Bytes       int64               `json:"bytes"`
	MaxStallMs  float64             `json:"max_stall_ms"`
	Retransmits int64               `json:"retransmits"` // the inner TCP's (TCP_INFO at the sender); -1: unknown
	// The braid client's reorder-buffer counters (0 for other transports).
	Reordered       uint64            `json:"reordered"`
	ReorderTimeouts uint64            `json:"reorder_timeouts"`
	PathBytes       map[string]uint64 `json:"path_bytes,omitempty"`
	// The fields below are absent without competing flows, latency probes,
	// the real-time workload, braid's loss recovery or [[events]].
	// CompetingMbps is the competing downloads' goodput together, over the
	// measured download; with a competing braid client (Run.
	// CompetingTransport "braid") Jain is Jain's fairness index of the two
	// clients' goodputs, GoodputMbps and CompetingMbps (stats.Jain).
	// Events are in the scenario's order, Phases the paths' rates between
	// them (len(Events)+1: before the first, after each).
	CompetingMbps *float64 `json:"competing_mbps,omitempty"`
	Jain          *float64 `json:"jain,omitempty"`
	// OfferedMbps is the goodput the paths the transport used could have
	// carried during the download: their download directions' frame bytes
	// (a trace's delivery opportunities, or a fixed rate over the time)
	// times the transport's payload share of a frame (runner.Efficiency);
	// absent when a path's capacity is unknown (a shared medium, netem).
	OfferedMbps  *float64       `json:"offered_mbps,omitempty"`
	Latency      *Latency       `json:"latency,omitempty"`
	Realtime     *Realtime      `json:"realtime,omitempty"`
	BulkRecovery *BulkRecovery  `json:"bulk_recovery,omitempty"`
	Events       []EventOutcome `json:"events,omitempty"`
	Phases       []Phase        `json:"phases,omitempty"`
}

// EventOutcome is one path event during one download.
type EventOutcome struct {
	Event string  `json:"event"` // as the scenario has it: "cut secondary at 3s"
	Fired bool    `json:"fired"` // false when the download ended first
	AtMs  float64 `json:"at_ms"` // since the download started
	// ReactMs: docs/lab.md, "[[events]]"; absent when the paths had not
	// reacted before the download ended.
	ReactMs *float64 `json:"react_ms,omitempty"`
}

// ReactBytes is what a path must carry after an event to count as carrying
// the download (docs/lab.md, "[[events]]").
const ReactBytes = 20_000

// Phase is the time from one event to the next (or from the download's
// start, or to its end) with the rate each path delivered towards the
// client meanwhile, in kB/s.
type Phase struct {
	FromMs   float64            `json:"from_ms"`
	ToMs     float64            `json:"to_ms"`
	PathKBps map[string]float64 `json:"path_kbps"`
}

// EventsSummary is a point's path events over its downloads.
type EventsSummary struct {
	MaxStallMs stats.Summary  `json:"max_stall_ms"` // the downloads' longest stalls
	Events     []EventSummary `json:"events"`
	Phases     []PhaseSummary `json:"phases"` // "before cut secondary at 3s", "after cut secondary at 3s", …
}

// EventSummary is one event's reaction times over the downloads where it
// fired and the paths reacted; Fired and Reacted count those.
type EventSummary struct {
	Event   string        `json:"event"`
	Fired   int           `json:"fired"`
	Reacted int           `json:"reacted"`
	ReactMs stats.Summary `json:"react_ms"`
}

// PhaseSummary is one phase's per-path rates (kB/s) over the downloads.
type PhaseSummary struct {
	Label    string                   `json:"label"`
	PathKBps map[string]stats.Summary `json:"path_kbps"`
}

// BulkRecovery is the loss recovery of one download, from the sending braid
// daemon's counters summed over its paths; docs/lab.md ("Bulk recovery
// overhead") gives each field's formula and the target Overhead ≤ Bound.
type BulkRecovery struct {
	ResentBytes  uint64  `json:"resent_bytes"`
	RepairBytes  uint64  `json:"repair_bytes"`
	TxPackets    uint64  `json:"tx_packets"`
	LostPackets  uint64  `json:"lost_packets"`
	PathLossRate float64 `json:"path_loss_rate"` // LostPackets / TxPackets (0 when nothing was sent)
	Overhead     float64 `json:"overhead"`       // (ResentBytes + RepairBytes) / Sample.Bytes
	Bound        float64 `json:"bound"`          // 2 × PathLossRate + 0.05
}

// Latency is one download's UDP echo probes through the transport
// (docs/lab.md, "Latency under load").
type Latency struct {
	IdleMedianMs float64 `json:"idle_median_ms"`
	IdleProbes   int     `json:"idle_probes"`
	Probes       int     `json:"probes"` // sent during the download
	Lost         int     `json:"lost"`
	AddedP50Ms   float64 `json:"added_p50_ms"`
	AddedP95Ms   float64 `json:"added_p95_ms"`
	AddedP99Ms   float64 `json:"added_p99_ms"`
	AddedMaxMs   float64 `json:"added_max_ms"`
}

// LossPct is the share of the download's probes that got no answer.
func (l *Latency) LossPct() float64 {
	if l.Probes == 0 {
		return 0
	}
	return 100 * float64(l.Lost) / float64(l.Probes)
}

// Realtime is one repetition of the real-time flow; docs/lab.md ("Real-time
// flows") defines its figures.
type Realtime struct {
	Sent      int     `json:"sent"`
	Delivered int     `json:"delivered"` // distinct sequence numbers received
	Late      int     `json:"late"`      // delivered more than the deadline after they were sent
	LossPct   float64 `json:"loss_pct"`
	OWDP50Ms  float64 `json:"owd_p50_ms"`
	OWDP99Ms  float64 `json:"owd_p99_ms"`
	OWDMaxMs  float64 `json:"owd_max_ms"`
	LatePct   float64 `json:"late_pct"` // Late of Delivered
	MissPct   float64 `json:"miss_pct"` // lost or late, of Sent
	// OuterBytes (per path OuterPathBytes) and OuterPerPayload are 0 when
	// the emulator does not count, as with netem.
	PayloadBytes    int64             `json:"payload_bytes"`
	OuterBytes      uint64            `json:"outer_bytes"`
	OuterPathBytes  map[string]uint64 `json:"outer_path_bytes,omitempty"`
	OuterPerPayload float64           `json:"outer_per_payload"`
}
