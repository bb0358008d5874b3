// Package results holds what a lab run measured, in the form every output (JSON,
// CSV, plots, the Markdown report) is made from.
package results

import (
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
	Axes        []string  `json:"axes"` // sweep axes, in the order of Point.Params
	// Only lists the --only selections when the run covered part of the
	// scenario's points (empty: all of them).
	Only   []string `json:"only,omitempty"`
	Points []Point  `json:"points"`
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
	// Competing summarizes Samples[].CompetingMbps (nil without competing
	// flows).
	Competing *stats.Summary `json:"competing_mbps,omitempty"`
	Error     string         `json:"error,omitempty"` // the point could not be measured
}

// Sample is one download.
type Sample struct {
	Rep         int     `json:"rep"`
	GoodputMbps float64 `json:"goodput_mbps"`
	Seconds     float64 `json:"seconds"`
	Bytes       int64   `json:"bytes"`
	MaxStallMs  float64 `json:"max_stall_ms"`
	// Retransmits is the inner TCP's retransmitted segments (TCP_INFO of the
	// sending socket); -1 when unknown.
	Retransmits int64 `json:"retransmits"`
	// Reordered and ReorderTimeouts are the braid client's reorder-buffer counters
	// during this download (0 for other transports).
	Reordered       uint64            `json:"reordered"`
	ReorderTimeouts uint64            `json:"reorder_timeouts"`
	PathBytes       map[string]uint64 `json:"path_bytes,omitempty"`
	// CompetingMbps is the goodput the competing TCP downloads got together
	// while this download ran (absent without competing flows).
	CompetingMbps *float64 `json:"competing_mbps,omitempty"`
}
