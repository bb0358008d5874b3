// Package control exposes a running braid's state: a unix control socket that
// `braid status` queries, a human-readable rendering of that state, and a
// Prometheus collector.
//
// Everything is built from one snapshot type, Status, produced on demand by a
// provider function the tunnel engine supplies. The engine never pushes
// updates, so a status query or a scrape costs nothing while nobody asks, and
// the socket, the table and the metrics can never disagree about what they show.
//
// The socket protocol and the metric names are documented in docs/control.md.
package control

import (
	"encoding/json"
	"math"
	"time"
)

// Status is a snapshot of one braid instance.
type Status struct {
	Role      string `json:"role"`
	Interface string `json:"interface"`
	PublicKey string `json:"public_key"`
	// Listen holds the server's listening addresses; empty for a client.
	Listen []string `json:"listen,omitempty"`
	// ListenSockets counts the server's sockets on them: more than one per
	// address when several readers share it (SO_REUSEPORT).
	ListenSockets int `json:"listen_sockets,omitempty"`
	// Transport is what the tunnel runs over: "udp", "tcp" or "mptcp" (absent when
	// the provider does not say).
	Transport string `json:"transport,omitempty"`
	// Time is when the snapshot was taken. Ages such as "last handshake 12s
	// ago" are computed against it rather than against the reader's clock, so
	// that a saved snapshot still reads correctly. Serve fills it in when the
	// provider leaves it zero.
	Time time.Time `json:"time,omitzero"`
	// Uptime travels in JSON as "uptime_seconds", a float, because a plain
	// number is what scripts and jq compare most easily; Go's Duration would
	// otherwise appear as integer nanoseconds.
	Uptime time.Duration `json:"-"`
	// Counters are instance-wide event counters. A key "drop_<reason>" counts
	// packets dropped for <reason> (for example "drop_replay",
	// "drop_bad_mac", "drop_no_session") and is exported as
	// braid_drops_total{reason="<reason>"}; any other key is exported as
	// braid_events_total{event="<key>"}. Keys are snake_case.
	Counters map[string]uint64 `json:"counters,omitempty"`
	// Offload is what the UDP path sockets do with the kernel's segmentation
	// and receive offloads, summed over the sockets (absent for the stream
	// transports).
	Offload *OffloadStatus `json:"offload,omitempty"`
	// TUN counts the engine's batches on the TUN device.
	TUN *TUNStatus `json:"tun,omitempty"`
	// Crypto is what the crypto workers did (absent with none).
	Crypto *CryptoStatus `json:"crypto,omitempty"`
	// Memory is the daemon process's Go memory (absent when the provider does
	// not say).
	Memory *MemoryStatus `json:"memory,omitempty"`
	Peers  []PeerStatus  `json:"peers"`
}

// TUNStatus: Reads and the packets they returned, Writes and the packets
// handed to them. With the device's offloads in effect a read of a TCP
// super-packet returns its segments (many packets per read) and a write
// coalesces consecutive segments of a flow, so the ratios show whether they
// work: near 1 at speed means they do not.
type TUNStatus struct {
	Reads        uint64 `json:"reads"`
	ReadPackets  uint64 `json:"read_packets"`
	Writes       uint64 `json:"writes"`
	WritePackets uint64 `json:"write_packets"`
	// WriteRuns are the runs of one flow's packets in the writes that braid
	// laid out for the device to coalesce (none with offload = false), and
	// WriteRunPackets the packets in them.
	WriteRuns       uint64 `json:"write_runs"`
	WriteRunPackets uint64 `json:"write_run_packets"`
}

// MemoryStatus: HeapBytes is what the heap's objects hold (live, and dead
// ones not yet swept), TotalBytes all memory the Go runtime has mapped (heap,
// stacks, runtime structures; RSS is at most this plus the binary), GCs the
// collections so far.
type MemoryStatus struct {
	HeapBytes  uint64 `json:"heap_bytes"`
	TotalBytes uint64 `json:"total_bytes"`
	GCs        uint64 `json:"gcs"`
}

// OffloadStatus: GSO is "on" or "off (reason)" — reason "kernel" (no
// UDP_SEGMENT), "device" (a route's device refused a run), "disabled"; GRO is
// "on" or "off". Runs and datagrams count coalesced sends and receives.
type OffloadStatus struct {
	GSO          string `json:"gso"`
	GRO          string `json:"gro"`
	GSORuns      uint64 `json:"gso_runs"`
	GSODatagrams uint64 `json:"gso_datagrams"`
	GRORuns      uint64 `json:"gro_runs"`
	GRODatagrams uint64 `json:"gro_datagrams"`
}

// CryptoStatus: Workers seal and open datagrams beside the goroutines that
// handle them; Batches were shared with them (Items datagrams in all), and
// WorkerItems of those datagrams were done by a worker, the rest by the
// batch's own goroutine (a worker that wakes late finds the batch done).
type CryptoStatus struct {
	Workers     int    `json:"workers"`
	Batches     uint64 `json:"batches"`
	Items       uint64 `json:"items"`
	WorkerItems uint64 `json:"worker_items"`
}

// DropPrefix marks a Counters key as a drop reason.
const DropPrefix = "drop_"

// statusJSON has Status's fields without its methods, for the JSON wrappers.
type statusJSON Status

// MarshalJSON writes Uptime as uptime_seconds.
func (s Status) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		statusJSON
		UptimeSeconds float64 `json:"uptime_seconds"`
	}{statusJSON(s), s.Uptime.Seconds()})
}

// UnmarshalJSON reads uptime_seconds back into Uptime.
func (s *Status) UnmarshalJSON(b []byte) error {
	aux := struct {
		*statusJSON
		UptimeSeconds float64 `json:"uptime_seconds"`
	}{statusJSON: (*statusJSON)(s)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	s.Uptime = time.Duration(math.Round(aux.UptimeSeconds * float64(time.Second)))
	return nil
}

// PeerStatus describes the session with one peer: the server, for a client;
// one client, for a server.
type PeerStatus struct {
	// Name is the configured label, "" when none.
	Name       string   `json:"name,omitempty"`
	PublicKey  string   `json:"public_key"`
	AllowedIPs []string `json:"allowed_ips,omitempty"`
	// Established is true while the peer has keys it may send with.
	Established bool `json:"established"`
	// LastHandshake is zero (and absent from JSON) before the first handshake.
	LastHandshake time.Time `json:"last_handshake,omitzero"`
	// SessionIndex is the receiver index of the current session; on a server
	// its top bits carry the configured server_id.
	SessionIndex uint32 `json:"session_index"`
	Scheduler    string `json:"scheduler"`
	// Reorder is the reorder mode name; ReorderStats its counters.
	Reorder      string        `json:"reorder"`
	Congestion   string        `json:"congestion"`
	TxBytes      uint64        `json:"tx_bytes"`
	RxBytes      uint64        `json:"rx_bytes"`
	TxPackets    uint64        `json:"tx_packets"`
	RxPackets    uint64        `json:"rx_packets"`
	ReorderStats ReorderStatus `json:"reorder_stats"`
	// CCQueued is the packets waiting for congestion-window room now (0 with
	// congestion "none"); the ones dropped from that queue are counted in
	// Status.Counters as drop_cc_queue_full and drop_cc_queue_expired.
	CCQueued int `json:"cc_queued,omitempty"`
	// Queue is the per-peer queue's CoDel state; absent with congestion "none".
	Queue *QueueStatus `json:"queue,omitempty"`
	// Recovery is the loss-recovery mode ("retransmit", "off") and
	// RecoveryStats its state; the per-path counters are in PathStatus.Recovery.
	Recovery      string          `json:"recovery"`
	RecoveryStats *RecoveryStatus `json:"recovery_stats,omitempty"`
	Paths         []PathStatus    `json:"paths"`
}

// QueueStatus is the per-peer queue in front of the paths (docs/recovery.md).
type QueueStatus struct {
	// DelayMs is the smoothed time packets waited there.
	DelayMs float64 `json:"delay_ms"`
	// Marks and Drops count CoDel's verdicts: ECN-capable packets marked CE,
	// others dropped.
	Marks uint64 `json:"codel_marks"`
	Drops uint64 `json:"codel_drops"`
}

// RecoveryStatus is a peer's loss-recovery state.
type RecoveryStatus struct {
	// HoldMs is how long a gap in a TCP flow is waited for (the receiver's
	// recovery hold); Retained the payloads kept for a possible resend now.
	HoldMs   float64 `json:"hold_ms"`
	Retained int     `json:"retained"`
	// GiveUps counts packets given up and announced to the receiver; BudgetOut
	// the resends the budget refused (those are given up too).
	GiveUps   uint64 `json:"give_ups"`
	BudgetOut uint64 `json:"budget_refused"`
	// EarlyResends counts losses resent at once instead of after waiting for
	// the receiver to report them rebuilt: their FEC block had lost more
	// sources than it had repairs, so no report could come.
	EarlyResends uint64 `json:"early_resends"`
	// Abandoned counts gaps the peer's give-ups released here.
	Abandoned uint64 `json:"abandoned"`
	// FEC is the repair rate in use ("k+m", "" = none) and Rebuilt the packets
	// rebuilt here from the peer's repairs.
	FEC     string `json:"fec,omitempty"`
	Rebuilt uint64 `json:"rebuilt"`
}

// PathRecovery is one path's share of loss recovery.
type PathRecovery struct {
	// Retransmitted counts resends this path carried (packets and payload bytes).
	Retransmitted      uint64 `json:"retransmitted"`
	RetransmittedBytes uint64 `json:"retransmitted_bytes"`
	// Recovered counts this path's losses repaired by an acknowledged resend;
	// Residual those given up, i.e. passed on to the inner traffic.
	Recovered uint64 `json:"recovered"`
	Residual  uint64 `json:"residual"`
	// Rescued counts payloads resent on another path while still in flight
	// on this one, because they were overdue here (a fade; tunnel.rescueLate).
	Rescued uint64 `json:"rescued"`
	// RepairSent counts repair packets this path carried (RepairSentBytes
	// their frames' bytes, comparable with RetransmittedBytes); RepairUsed
	// this path's losses that the receiver rebuilt from repairs (it reports
	// them).
	RepairSent      uint64 `json:"repair_sent"`
	RepairSentBytes uint64 `json:"repair_sent_bytes"`
	RepairUsed      uint64 `json:"repair_used"`
	// RetransmittedLatencyBytes and RepairSentLatencyBytes are the part of
	// RetransmittedBytes and RepairSentBytes spent on latency-sensitive (not
	// TCP) flows, which have a budget of their own; the rest is the bulk
	// flows' recovery overhead.
	RetransmittedLatencyBytes uint64 `json:"retransmitted_latency_bytes"`
	RepairSentLatencyBytes    uint64 `json:"repair_sent_latency_bytes"`
}

// ReorderStatus summarises the receive-side reorder buffers of one peer.
type ReorderStatus struct {
	// HoldMs is the current hold time (for adaptive reordering, the value
	// chosen now; for fixed, the configured one).
	HoldMs float64 `json:"hold_ms"`
	// InOrder counts packets delivered at once because they were next in
	// sequence; Bypassed pure TCP acks delivered at once ahead of a gap (an
	// ack needs no order, and held it would stop the sender's ack clock);
	// Reordered those delivered after waiting for a gap to fill;
	// Timeouts gaps given up on when the hold expired; Late packets that
	// arrived after their gap was given up on; Duplicates packets received twice.
	InOrder    uint64 `json:"in_order"`
	Bypassed   uint64 `json:"bypassed"`
	Reordered  uint64 `json:"reordered"`
	Timeouts   uint64 `json:"timeouts"`
	Late       uint64 `json:"late"`
	Duplicates uint64 `json:"duplicates"`
	// Held is the number of packets buffered right now (a gauge, not a counter).
	Held uint64 `json:"held"`
}

// PathStatus describes one subflow: a (local, remote) socket pair.
type PathStatus struct {
	ID     int    `json:"id"`
	Local  string `json:"local"`
	Remote string `json:"remote"`
	Device string `json:"device,omitempty"`
	// State is the path manager's name for the path's state (such as
	// "probing", "active", "standby", "down").
	State string `json:"state"`
	// Round-trip estimates in milliseconds; 0 before the first sample.
	SRTTMs   float64 `json:"srtt_ms"`
	RTTVarMs float64 `json:"rttvar_ms"`
	MinRTTMs float64 `json:"min_rtt_ms"`
	// LossRate is the recent fraction of packets lost, 0..1.
	LossRate float64 `json:"loss_rate"`
	// DeliveryRateBps is the recent delivery rate in bits per second.
	DeliveryRateBps float64 `json:"delivery_rate_bps"`
	// Share is this path's fraction of the peer's transmitted bytes, 0..1.
	Share       float64 `json:"share"`
	TxBytes     uint64  `json:"tx_bytes"`
	RxBytes     uint64  `json:"rx_bytes"`
	TxPackets   uint64  `json:"tx_packets"`
	RxPackets   uint64  `json:"rx_packets"`
	LostPackets uint64  `json:"lost_packets"`
	// SpuriousLost counts packets acked after they had been declared lost:
	// losses that were reordering or late acks.
	SpuriousLost uint64 `json:"spurious_lost"`
	// InFlight is packets sent and neither acknowledged nor declared lost.
	InFlight int `json:"in_flight"` // bytes
	// QueueDelayMs is the estimated standing queue: one-way delay above its minimum.
	QueueDelayMs float64 `json:"queue_delay_ms"`
	// OWDTrend is the slope of the one-way delay over time (seconds per
	// second); positive means a queue is building on the path.
	OWDTrend float64 `json:"owd_trend"`
	// MTU is the largest datagram (UDP payload bytes) the path is known to carry,
	// found by probing (0: not searched yet).
	MTU int `json:"mtu"`
	// Priority is the path's tier (client.priorities): traffic uses the lowest
	// tier that has a usable path.
	Priority int `json:"priority"`
	// Budget is the path's data allowance (e.g. "10GiB/month"; absent: none)
	// and BudgetUsed the bytes used in the current period. A path over its
	// allowance is backup-only (its priority shows 8).
	Budget     string `json:"budget,omitempty"`
	BudgetUsed uint64 `json:"budget_used,omitempty"`
	// BudgetBytes is the allowance of Budget in bytes (per period).
	BudgetBytes uint64 `json:"budget_bytes,omitempty"`
	// CC is the path's congestion-control state; absent with congestion "none".
	CC *PathCC `json:"cc,omitempty"`
	// Recovery is the path's loss-recovery counters; absent with recovery "off".
	Recovery *PathRecovery `json:"recovery,omitempty"`
	// Stream is the TCP or MPTCP connection under the path; absent over UDP.
	Stream *StreamStatus `json:"stream,omitempty"`
}

// PathCC is a path's congestion window.
type PathCC struct {
	CwndBytes int `json:"cwnd_bytes"`
	// SsthreshBytes is -1 while it is infinite (slow start before the first loss).
	SsthreshBytes int  `json:"ssthresh_bytes"`
	SlowStart     bool `json:"slow_start"`
	InRecovery    bool `json:"in_recovery"`
	// CongestionEvents counts window reductions (losses and timeouts).
	CongestionEvents uint64 `json:"congestion_events"`
	// PacingRateBps is the path's pacing rate in bits per second (0: not
	// paced, as every window-based algorithm).
	PacingRateBps float64 `json:"pacing_rate_bps"`
	// Mode is the "rate" model's state: "startup", "drain", "probe_bw", or
	// "contend" while a loss-based flow holds a shared bottleneck's queue
	// (docs/congestion.md); empty for the window algorithms.
	Mode string `json:"mode,omitempty"`
	// BandwidthBps is the "rate" model's bandwidth estimate in bits per second.
	BandwidthBps float64 `json:"bandwidth_bps,omitempty"`
}

// StreamStatus describes the connection a path of a tcp or mptcp tunnel runs over.
type StreamStatus struct {
	// Kind is what the connection runs: "tcp" or "mptcp". An MPTCP connection to a
	// peer without MPTCP falls back to, and shows, "tcp".
	Kind      string `json:"kind"`
	Connected bool   `json:"connected"`
	// Local and Remote are the connection's addresses (for MPTCP, those of its
	// first subflow); absent while it is down.
	Local  string `json:"local,omitempty"`
	Remote string `json:"remote,omitempty"`
	// Since is when the current connection was made.
	Since time.Time `json:"since,omitzero"`
	// Connects counts connections made for this path (a client's reconnects show
	// here); LastError says why the previous one, or the last attempt, ended.
	Connects  uint64 `json:"connects"`
	LastError string `json:"last_error,omitempty"`
	// TxBytes and RxBytes are stream bytes of the current connection, framing
	// included.
	TxBytes uint64 `json:"tx_bytes"`
	RxBytes uint64 `json:"rx_bytes"`
	// TCP's own view (TCP_INFO) of a tcp connection: smoothed RTT, congestion
	// window in segments, segments retransmitted.
	RTTMs        float64 `json:"rtt_ms,omitempty"`
	CwndSegments uint32  `json:"cwnd_segments,omitempty"`
	Retransmits  uint32  `json:"retransmits,omitempty"`
	// MPTCP: the subflows besides the first (mptcpi_subflows) and their limit, and
	// one entry per subflow where the kernel has MPTCP_FULL_INFO (Linux 6.5+).
	ExtraSubflows    int             `json:"extra_subflows,omitempty"`
	ExtraSubflowsMax int             `json:"extra_subflows_max,omitempty"`
	Subflows         []SubflowStatus `json:"subflows,omitempty"`
}

// SubflowStatus is one TCP subflow of an MPTCP connection, from its tcp_info.
type SubflowStatus struct {
	Local        string  `json:"local"`
	Remote       string  `json:"remote"`
	RTTMs        float64 `json:"rtt_ms"`
	CwndSegments uint32  `json:"cwnd_segments"`
	TxBytes      uint64  `json:"tx_bytes"` // tcpi_bytes_sent (retransmissions included)
	RxBytes      uint64  `json:"rx_bytes"`
	AckedBytes   uint64  `json:"acked_bytes"`
	RetransBytes uint64  `json:"retrans_bytes"`
}
