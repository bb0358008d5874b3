package fleet

import (
	"math"
	"slices"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/wire"
)

// Issue 35's targets, which the report checks.
const (
	TargetJain           = 0.95
	TargetUplinkShare    = 0.85 // aggregate goodput ÷ the shaped uplink
	TargetFailoverStall  = 8 * time.Second
	TargetUndisturbStall = 100 * time.Millisecond
)

// Results is the record of a fleet run (results.json).
type Results struct {
	Scenario string    `json:"scenario"`
	Seed     uint64    `json:"seed"`
	Started  time.Time `json:"started"`
	// Window is when the measured window began (after the warm-up).
	Window   time.Time `json:"window"`
	Finished time.Time `json:"finished"`
	Setup    Setup     `json:"setup"`

	Clients []ClientResult `json:"clients"`
	Servers []ServerResult `json:"servers"`
	Events  []Event        `json:"events,omitempty"`
	Summary Summary        `json:"summary"`
	CPU     *CPU           `json:"cpu,omitempty"`
	// Samples are every client's bytes since the window began, every
	// Setup.SampleMs (written as samples.csv, not into results.json).
	Samples []Sample `json:"-"`
	// Start, BeforeKill and End are the server holding each client's
	// session (-1: none) then.
	Start      []int    `json:"-"`
	BeforeKill []int    `json:"-"`
	End        []int    `json:"-"`
	Errors     []string `json:"errors,omitempty"`
}

// Setup is the run's configuration as measured.
type Setup struct {
	Servers      int     `json:"servers"`
	Clients      int     `json:"clients"`
	Paths        int     `json:"paths_per_client"`
	Seconds      float64 `json:"seconds"`
	WarmupS      float64 `json:"warmup_seconds"`
	UplinkBps    uint64  `json:"uplink_bps,omitempty"`
	ObjectBytes  int64   `json:"object_bytes"`
	Kill         int     `json:"kill_server"` // the server killed; -1: none
	KillAtS      float64 `json:"kill_at_seconds,omitempty"`
	ReviveAtS    float64 `json:"revive_at_seconds,omitempty"`
	RekeyAfterS  float64 `json:"rekey_after_seconds,omitempty"` // 0: braid's default
	SampleMs     float64 `json:"sample_ms"`
	CC           string  `json:"cc"`
	ServerIDBits int     `json:"server_id_bits"`
}

// ClientResult is one client daemon's figures over the measured window.
type ClientResult struct {
	Index       int     `json:"index"`
	Address     string  `json:"address"` // inside the tunnel
	PublicKey   string  `json:"public_key"`
	Bytes       int64   `json:"bytes"`
	GoodputMbps float64 `json:"goodput_mbps"`
	// LongestStallMs is the longest time no byte of its download arrived,
	// StallAtS when (seconds into the window) it began.
	LongestStallMs float64 `json:"longest_stall_ms"`
	StallAtS       float64 `json:"stall_at_seconds"`
	// PhaseStallMs is the longest stall that ended before the kill,
	// between the kill and the revival, and after the revival (0 for a
	// phase the run did not have).
	PhaseStallMs []float64 `json:"phase_stall_ms"`
	// Failures counts downloads that broke and were started again.
	Failures  int    `json:"failures,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// ServerStart, ServerBeforeKill and ServerEnd hold its session then
	// (-1: none; BeforeKill only with a kill).
	ServerStart      int  `json:"server_start"`
	ServerBeforeKill *int `json:"server_before_kill,omitempty"`
	ServerEnd        int  `json:"server_end"`
	// Killed: its session was on the killed server.
	Killed bool `json:"killed,omitempty"`
	// Holders is every change of the server holding its session, as the
	// servers' status said every StatusEvery.
	Holders []Holder `json:"holders"`
	// Moves counts changes from one live server to another that a kill
	// did not force (a rekey that moved, say).
	Moves int `json:"moves"`
	// PathsUsable is, per server at the end, how many of its paths that
	// server's status lists as usable for its session there (established
	// or not yet dropped).
	PathsUsable []int `json:"paths_usable"`
	// PathsReceiving is, per server, how many of its paths brought that
	// server bytes in the last status interval (StatusEvery) of the run.
	PathsReceiving []int `json:"paths_receiving"`
	// PathsHome: every path is usable on the server of its session and
	// none brings any other server bytes.
	PathsHome bool `json:"paths_home"`
}

// Holder is a change of the server holding a session (-1: none).
type Holder struct {
	T      float64 `json:"t"`
	Server int     `json:"server"`
}

// ServerResult is one server at the end.
type ServerResult struct {
	ID     int  `json:"id"`
	Killed bool `json:"killed,omitempty"`
	// SessionsStart and Sessions are the clients whose session it held
	// when the window began and at the end.
	SessionsStart int `json:"sessions_start"`
	Sessions      int `json:"sessions"`
	// Established is its peers with keys at the end, which includes
	// sessions whose client went elsewhere until they expire.
	Established int `json:"established"`
	// Paths is the usable paths of the sessions it held at the end;
	// StrayPaths the paths of clients held elsewhere that brought it bytes
	// in the last status interval.
	Paths      int `json:"paths"`
	StrayPaths int `json:"stray_paths"`
}

// Event is something the lab did during the window.
type Event struct {
	T    float64 `json:"t"`
	What string  `json:"what"`
}

// Sample is every client's bytes at T seconds into the window.
type Sample struct {
	T     float64
	Bytes []int64
}

// Summary is the run's headline figures.
type Summary struct {
	AggregateMbps float64 `json:"aggregate_mbps"`
	// UplinkShare is AggregateMbps over the servers' shaped uplinks
	// together (absent unshaped); UplinkCeiling the most it can be
	// (uplinkCeiling).
	UplinkShare    float64 `json:"uplink_share,omitempty"`
	UplinkCeiling  float64 `json:"uplink_ceiling,omitempty"`
	Jain           float64 `json:"jain"`
	MinMbps        float64 `json:"min_mbps"`
	MedianMbps     float64 `json:"median_mbps"`
	MaxMbps        float64 `json:"max_mbps"`
	LongestStallMs float64 `json:"longest_stall_ms"`
	// With a kill: the killed server's clients, their longest stall from
	// the kill on and where each landed first (-1: nowhere); the others'
	// longest stall from the kill on, and before it (their baseline).
	KilledClients int     `json:"killed_clients,omitempty"`
	KilledStallMs float64 `json:"killed_longest_stall_ms,omitempty"`
	KilledLanded  []int   `json:"killed_landed_on,omitempty"`
	// KilledSessionBackS is the longest time from the kill until a killed
	// client's session was seen on a live server (within StatusEvery): the
	// tunnel's part of their stall, the rest being TCP's and the routes'.
	KilledSessionBackS  float64 `json:"killed_session_back_seconds,omitempty"`
	OthersStallMs       float64 `json:"others_longest_stall_ms,omitempty"`
	OthersBaselineMs    float64 `json:"others_stall_before_kill_ms,omitempty"`
	ClientsPathsHome    int     `json:"clients_paths_home"`
	Moves               int     `json:"moves"`
	ClientsWithFailures int     `json:"clients_with_failures"`
}

// uplinkCeiling is the TCP payload's share of the bytes a shaped uplink
// carries when every tunnel packet is full: a TCP segment (with
// timestamps) in braid's default inner MTU, and braid's, UDP's, IPv4's and
// Ethernet's headers around it (tbf counts the frame). The clients' ACKs
// toward the backend also cross the uplink and lower it a little more.
var uplinkCeiling = float64(config.DefaultMTU-tcpIPHeaders) / float64(config.DefaultMTU+wire.DataPacketOverhead+udpIPEthHeaders)

const (
	tcpIPHeaders    = 20 + 32 // IPv4, TCP with timestamps
	udpIPEthHeaders = 8 + 20 + 14
)

func newResults(cfg Config) *Results {
	r := &Results{Scenario: cfg.Scenario, Seed: cfg.Seed, Started: time.Now(), Setup: Setup{
		Servers: cfg.Servers, Clients: cfg.Clients, Paths: cfg.Paths, Seconds: cfg.Duration.Seconds(), WarmupS: cfg.Warmup.Seconds(),
		UplinkBps: cfg.Uplink, ObjectBytes: cfg.Object, Kill: -1, RekeyAfterS: cfg.RekeyAfter.Seconds(),
		SampleMs: float64(cfg.Sample) / float64(time.Millisecond), CC: cfg.CC,
	}}
	if cfg.Servers > 1 {
		r.Setup.ServerIDBits = serverIDBits(cfg.Servers)
	}
	if cfg.KillAt > 0 { // the server is named when it is killed (KillBusiest)
		r.Setup.KillAtS, r.Setup.ReviveAtS = cfg.KillAt.Seconds(), cfg.ReviveAt.Seconds()
	}
	r.Clients = make([]ClientResult, cfg.Clients)
	for i := range r.Clients {
		r.Clients[i].Index, r.Clients[i].Address = i, clientInner(i).Addr().String()
	}
	return r
}

func (r *Results) holdersAt(dst *[]int, holders []int) { *dst = slices.Clone(holders) }

// finish fills c's result from its download over [t0, end].
func (cr *ClientResult) finish(c *client, base int64, t0, end time.Time) {
	cr.PublicKey = c.pub
	cr.Bytes = c.dl.bytes.Load() - base
	cr.GoodputMbps = float64(cr.Bytes) * 8 / end.Sub(t0).Seconds() / 1e6
	cr.LongestStallMs = float64(c.dl.maxStall.Load()) / 1e6
	for i := range phases {
		cr.PhaseStallMs = append(cr.PhaseStallMs, float64(c.dl.phaseStall[i].Load())/1e6)
	}
	if at := c.dl.stallAt.Load(); at > 0 {
		cr.StallAtS = time.Unix(0, at).Sub(t0).Seconds()
	}
	cr.Failures = int(c.dl.failures.Load())
	if e, ok := c.dl.lastErr.Load().(string); ok {
		cr.LastError = e
	}
}

// finish works out the per-server figures, the session changes and the
// summary from each client's usable and receiving paths on each server and
// each server's established peers at the end (watch.pathsOn).
func (r *Results) finish(usable, receiving [][]int, established []int) {
	killAt := r.Setup.KillAtS
	r.Servers = make([]ServerResult, r.Setup.Servers)
	for j := range r.Servers {
		r.Servers[j] = ServerResult{ID: j, Killed: j == r.Setup.Kill}
		for i := range r.Clients {
			if r.Start[i] == j {
				r.Servers[j].SessionsStart++
			}
			if r.End[i] == j {
				r.Servers[j].Sessions++
			}
		}
	}
	s := &r.Summary
	var goodputs []float64
	for i := range r.Clients {
		c := &r.Clients[i]
		c.ServerStart, c.ServerEnd = r.Start[i], r.End[i]
		if r.BeforeKill != nil {
			c.ServerBeforeKill = &r.BeforeKill[i]
			c.Killed = r.BeforeKill[i] == r.Setup.Kill
		}
		goodputs = append(goodputs, c.GoodputMbps)
		s.AggregateMbps += c.GoodputMbps
		s.LongestStallMs = max(s.LongestStallMs, c.LongestStallMs)
		if c.Failures > 0 {
			s.ClientsWithFailures++
		}
		// Moves: a change to a live server from another that was not the
		// killed one failing over.
		prev := r.Start[i]
		landed := -1
		for _, h := range c.Holders {
			if h.Server < 0 {
				continue
			}
			forced := c.Killed && prev == r.Setup.Kill && h.T >= killAt
			if prev >= 0 && h.Server != prev && !forced {
				c.Moves++
			}
			if c.Killed && h.T >= killAt && landed < 0 && h.Server != r.Setup.Kill {
				landed = h.Server
				s.KilledSessionBackS = max(s.KilledSessionBackS, h.T-killAt)
			}
			prev = h.Server
		}
		s.Moves += c.Moves
		afterKill := slices.Max(c.PhaseStallMs[phaseAfterKill:])
		if c.Killed {
			s.KilledClients++
			s.KilledStallMs = max(s.KilledStallMs, afterKill)
			s.KilledLanded = append(s.KilledLanded, landed)
		} else if r.BeforeKill != nil {
			s.OthersStallMs = max(s.OthersStallMs, afterKill)
			s.OthersBaselineMs = max(s.OthersBaselineMs, c.PhaseStallMs[phaseBeforeKill])
		}
	}
	for j := range r.Servers {
		r.Servers[j].Established = established[j]
	}
	for i := range r.Clients {
		c := &r.Clients[i]
		c.PathsUsable, c.PathsReceiving = usable[i], receiving[i]
		home := c.ServerEnd >= 0 && usable[i][c.ServerEnd] == r.Setup.Paths
		for j := range r.Servers {
			if j == c.ServerEnd {
				r.Servers[j].Paths += usable[i][j]
			} else if receiving[i][j] > 0 {
				r.Servers[j].StrayPaths += receiving[i][j]
				home = false
			}
		}
		if c.PathsHome = home; home {
			s.ClientsPathsHome++
		}
	}
	s.Jain = stats.Jain(goodputs...)
	s.MinMbps, s.MaxMbps = slices.Min(goodputs), slices.Max(goodputs)
	s.MedianMbps = stats.Median(goodputs)
	if r.Setup.UplinkBps > 0 {
		s.UplinkShare = s.AggregateMbps * 1e6 / float64(r.Setup.UplinkBps*uint64(r.Setup.Servers))
		s.UplinkCeiling = uplinkCeiling
		s.UplinkCeiling = uplinkCeiling
	}
	if math.IsNaN(s.Jain) {
		s.Jain = 0 // no bytes at all: JSON has no NaN
	}
}
