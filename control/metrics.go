package control

import (
	"bytes"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The metrics endpoint writes the Prometheus text exposition format, version
// 0.0.4, by hand: braid has one collector of constant metrics and no
// histograms, and the client library (with protobuf and its registry) cost
// about 2.4 MB of the daemon's binary. The output is byte for byte what
// client_golang's registry and promhttp wrote for the same collector:
// families sorted by name, each with its HELP and TYPE lines; families with
// no sample left out; labels sorted by name; samples sorted by label values;
// a repeated series (same name and label values, say two paths with one ID)
// written once, the first collected.

// Label sets. Peers are identified by public key (unique, stable across
// restarts); the optional name rides along for dashboards. Paths carry their
// local and remote addresses, so a scrape shows who the peers are and where
// they connect from: the endpoint has no authentication, and the config
// warns when control.metrics is not a loopback address (docs/control.md).
var (
	peerLabels = []string{"peer", "name"}
	pathLabels = []string{"peer", "name", "path", "local", "remote", "device"}
)

// metricDesc describes one metric family: name, help, type and the label
// names in the order the collector passes their values.
type metricDesc struct {
	name, help, typ string
	labels          []string
	// order lists indexes into labels sorted by label name: the exposition
	// writes labels in that order.
	order []int
}

func newDesc(typ, name, help string, labels ...string) *metricDesc {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	return &metricDesc{name: name, help: help, typ: typ, labels: labels, order: order}
}

func gaugeDesc(name, help string, labels ...string) *metricDesc {
	return newDesc("gauge", name, help, labels...)
}

func counterDesc(name, help string, labels ...string) *metricDesc {
	return newDesc("counter", name, help, labels...)
}

func with(labels []string, extra string) []string {
	return append(labels[:len(labels):len(labels)], extra)
}

var (
	descInfo   = gaugeDesc("braid_info", "Always 1; labels identify the instance.", "role", "interface", "public_key")
	descUptime = gaugeDesc("braid_uptime_seconds", "Seconds since the instance started.")
	descDrops  = counterDesc("braid_drops_total", "Packets dropped, by reason.", "reason")
	descEvents = counterDesc("braid_events_total", "Other instance-wide events, by name.", "event")

	descPeerEstablished  = gaugeDesc("braid_peer_established", "1 while the peer has a session with current keys, else 0.", peerLabels...)
	descPeerHandshake    = gaugeDesc("braid_peer_last_handshake_timestamp_seconds", "Unix time of the last completed handshake (absent before the first).", peerLabels...)
	descPeerTxBytes      = counterDesc("braid_peer_tx_bytes_total", "Bytes sent to the peer through the tunnel.", peerLabels...)
	descPeerRxBytes      = counterDesc("braid_peer_rx_bytes_total", "Bytes received from the peer through the tunnel.", peerLabels...)
	descPeerTxPackets    = counterDesc("braid_peer_tx_packets_total", "Packets sent to the peer.", peerLabels...)
	descPeerRxPackets    = counterDesc("braid_peer_rx_packets_total", "Packets received from the peer.", peerLabels...)
	descPeerReorderHold  = gaugeDesc("braid_peer_reorder_hold_seconds", "Current reorder hold time.", peerLabels...)
	descPeerReorderHeld  = gaugeDesc("braid_peer_reorder_held_packets", "Packets waiting in the reorder buffers now.", peerLabels...)
	descPeerReorderTotal = counterDesc("braid_peer_reorder_packets_total", "Received packets by reorder outcome.", with(peerLabels, "outcome")...)

	descPathState      = gaugeDesc("braid_path_state", "1 for the path's current state (the state label); other states are absent.", with(pathLabels, "state")...)
	descPathSRTT       = gaugeDesc("braid_path_srtt_seconds", "Smoothed round-trip time.", pathLabels...)
	descPathRTTVar     = gaugeDesc("braid_path_rttvar_seconds", "Round-trip time variation.", pathLabels...)
	descPathMinRTT     = gaugeDesc("braid_path_min_rtt_seconds", "Minimum round-trip time observed.", pathLabels...)
	descPathLoss       = gaugeDesc("braid_path_loss_ratio", "Recent fraction of packets lost.", pathLabels...)
	descPathRate       = gaugeDesc("braid_path_delivery_rate_bits", "Recent delivery rate in bits per second.", pathLabels...)
	descPathShare      = gaugeDesc("braid_path_share_ratio", "Fraction of the peer's transmitted bytes sent on this path.", pathLabels...)
	descPathInFlight   = gaugeDesc("braid_path_in_flight_bytes", "Bytes sent and neither acknowledged nor declared lost.", pathLabels...)
	descPathQueueDelay = gaugeDesc("braid_path_queue_delay_seconds", "Estimated standing queue: one-way delay above its minimum.", pathLabels...)
	descPathOWDTrend   = gaugeDesc("braid_path_owd_trend", "Slope of the one-way delay over time (s/s); positive means a queue is building.", pathLabels...)
	descPathTxBytes    = counterDesc("braid_path_tx_bytes_total", "Bytes sent on the path.", pathLabels...)
	descPathRxBytes    = counterDesc("braid_path_rx_bytes_total", "Bytes received on the path.", pathLabels...)
	descPathTxPackets  = counterDesc("braid_path_tx_packets_total", "Packets sent on the path.", pathLabels...)
	descPathRxPackets  = counterDesc("braid_path_rx_packets_total", "Packets received on the path.", pathLabels...)
	descPathLost       = counterDesc("braid_path_lost_packets_total", "Packets declared lost on the path.", pathLabels...)
	descPathCwnd       = gaugeDesc("braid_path_cwnd_bytes", "Congestion window (absent with congestion \"none\").", pathLabels...)
	descPathSsthresh   = gaugeDesc("braid_path_ssthresh_bytes", "Slow-start threshold (absent while infinite or with congestion \"none\").", pathLabels...)
	descPathCongEvents = counterDesc("braid_path_congestion_events_total", "Congestion-window reductions (losses and timeouts).", pathLabels...)
	descPeerCCQueued   = gaugeDesc("braid_peer_cc_queued_packets", "Packets waiting for congestion-window room now.", peerLabels...)
	descPeerQueueDelay = gaugeDesc("braid_peer_queue_delay_seconds", "Smoothed time packets waited in the per-peer queue.", peerLabels...)
	descPeerCoDel      = counterDesc("braid_peer_codel_total", "CoDel verdicts on the per-peer queue (mark: ECN CE set, drop).", with(peerLabels, "verdict")...)
	descPeerRecHold    = gaugeDesc("braid_peer_recovery_hold_seconds", "How long a gap in a TCP flow is waited for a resend.", peerLabels...)
	descPeerGiveUps    = counterDesc("braid_peer_give_ups_total", "Lost packets given up and announced to the peer.", peerLabels...)
	descPathPacing     = gaugeDesc("braid_path_pacing_rate_bps", "Pacing rate in bits per second (absent when the path is not paced).", pathLabels...)
	descPathMTU        = gaugeDesc("braid_path_mtu_bytes", "Largest datagram (UDP payload) the path is known to carry, found by probing (absent before the search).", pathLabels...)
	descPathPriority   = gaugeDesc("braid_path_priority", "The path's tier: traffic uses the lowest tier with a usable path (8: backup-only, over its budget).", pathLabels...)
	descPathBudgetUsed = gaugeDesc("braid_path_budget_used_bytes", "Bytes used in the current period of the path's budget (absent without a budget).", pathLabels...)
	descPathBudgetCap  = gaugeDesc("braid_path_budget_allowance_bytes", "The path's data allowance per budget period (absent without a budget).", pathLabels...)
	descPathCCMode     = gaugeDesc("braid_path_cc_mode", "1 for the rate model's current mode (the mode label: startup, drain, probe_bw, contend); absent for the window algorithms.", with(pathLabels, "mode")...)
	descPathBandwidth  = gaugeDesc("braid_path_bandwidth_estimate_bps", "The rate model's bandwidth estimate in bits per second (absent for the window algorithms).", pathLabels...)
	descPathRecovery   = counterDesc("braid_path_recovery_packets_total", "Loss recovery per path: resent (carried here), recovered (lost here, resend acked), residual (lost here, given up), rescued (overdue here, resent elsewhere), repair_sent, repair_used.", with(pathLabels, "kind")...)

	allDescs = []*metricDesc{
		descInfo, descUptime, descDrops, descEvents,
		descPeerEstablished, descPeerHandshake, descPeerTxBytes, descPeerRxBytes, descPeerTxPackets, descPeerRxPackets,
		descPeerReorderHold, descPeerReorderHeld, descPeerReorderTotal,
		descPathState, descPathSRTT, descPathRTTVar, descPathMinRTT, descPathLoss, descPathRate, descPathShare,
		descPathInFlight, descPathQueueDelay, descPathOWDTrend,
		descPathTxBytes, descPathRxBytes, descPathTxPackets, descPathRxPackets, descPathLost,
		descPathCwnd, descPathSsthresh, descPathCongEvents, descPeerCCQueued,
		descPeerQueueDelay, descPeerCoDel, descPeerRecHold, descPeerGiveUps, descPathPacing, descPathRecovery,
		descPathMTU, descPathPriority, descPathBudgetUsed, descPathBudgetCap, descPathCCMode, descPathBandwidth,
	}
)

// metricSample is one series: label values in the order of the desc's sorted label
// names, and the value.
type metricSample struct {
	labels []string
	value  float64
}

// Collector turns a Status snapshot into metrics at scrape time, so the data
// path keeps its own counters and pays nothing for the metrics endpoint.
type Collector struct {
	provider func() Status
}

// NewCollector returns a collector that calls provider on every scrape.
func NewCollector(provider func() Status) *Collector {
	return &Collector{provider: provider}
}

// collect returns the series of one snapshot by family.
func (c *Collector) collect() map[*metricDesc][]metricSample {
	s := c.provider()
	out := make(map[*metricDesc][]metricSample, len(allDescs))
	add := func(d *metricDesc, v float64, labels ...string) {
		if len(labels) != len(d.labels) {
			// A programming error, as MustNewConstMetric's panic was.
			panic("control: " + d.name + ": " + strconv.Itoa(len(labels)) + " label values for " + strconv.Itoa(len(d.labels)) + " labels")
		}
		sorted := make([]string, len(labels))
		for i, j := range d.order {
			// The format is UTF-8; a stray byte (a device name, say) must
			// not make the page unparsable.
			sorted[i] = strings.ToValidUTF8(labels[j], "\uFFFD")
		}
		out[d] = append(out[d], metricSample{labels: sorted, value: v})
	}
	gauge := add
	counter := func(d *metricDesc, v uint64, labels ...string) {
		add(d, float64(v), labels...)
	}

	gauge(descInfo, 1, s.Role, s.Interface, s.PublicKey)
	gauge(descUptime, s.Uptime.Seconds())
	for k, v := range s.Counters {
		if reason, ok := strings.CutPrefix(k, DropPrefix); ok {
			counter(descDrops, v, reason)
		} else {
			counter(descEvents, v, k)
		}
	}

	for i := range s.Peers {
		p := &s.Peers[i]
		pl := []string{p.PublicKey, p.Name}
		established := 0.0
		if p.Established {
			established = 1
		}
		gauge(descPeerEstablished, established, pl...)
		if !p.LastHandshake.IsZero() {
			gauge(descPeerHandshake, float64(p.LastHandshake.UnixNano())/1e9, pl...)
		}
		counter(descPeerTxBytes, p.TxBytes, pl...)
		counter(descPeerRxBytes, p.RxBytes, pl...)
		counter(descPeerTxPackets, p.TxPackets, pl...)
		counter(descPeerRxPackets, p.RxPackets, pl...)
		r := &p.ReorderStats
		gauge(descPeerReorderHold, r.HoldMs/1e3, pl...)
		gauge(descPeerReorderHeld, float64(r.Held), pl...)
		for _, o := range []struct {
			outcome string
			n       uint64
		}{{"in_order", r.InOrder}, {"bypassed", r.Bypassed}, {"reordered", r.Reordered}, {"timeout", r.Timeouts}, {"late", r.Late}, {"duplicate", r.Duplicates}} {
			counter(descPeerReorderTotal, o.n, p.PublicKey, p.Name, o.outcome)
		}
		if hasCC(p) {
			gauge(descPeerCCQueued, float64(p.CCQueued), pl...)
		}
		if q := p.Queue; q != nil {
			gauge(descPeerQueueDelay, q.DelayMs/1e3, pl...)
			counter(descPeerCoDel, q.Marks, p.PublicKey, p.Name, "mark")
			counter(descPeerCoDel, q.Drops, p.PublicKey, p.Name, "drop")
		}
		if rs := p.RecoveryStats; rs != nil {
			gauge(descPeerRecHold, rs.HoldMs/1e3, pl...)
			counter(descPeerGiveUps, rs.GiveUps, pl...)
		}

		for j := range p.Paths {
			ps := &p.Paths[j]
			l := []string{p.PublicKey, p.Name, strconv.Itoa(ps.ID), ps.Local, ps.Remote, ps.Device}
			gauge(descPathState, 1, append(l[:len(l):len(l)], ps.State)...)
			gauge(descPathSRTT, ps.SRTTMs/1e3, l...)
			gauge(descPathRTTVar, ps.RTTVarMs/1e3, l...)
			gauge(descPathMinRTT, ps.MinRTTMs/1e3, l...)
			gauge(descPathLoss, ps.LossRate, l...)
			gauge(descPathRate, ps.DeliveryRateBps, l...)
			gauge(descPathShare, ps.Share, l...)
			gauge(descPathInFlight, float64(ps.InFlight), l...)
			gauge(descPathQueueDelay, ps.QueueDelayMs/1e3, l...)
			gauge(descPathOWDTrend, ps.OWDTrend, l...)
			counter(descPathTxBytes, ps.TxBytes, l...)
			counter(descPathRxBytes, ps.RxBytes, l...)
			counter(descPathTxPackets, ps.TxPackets, l...)
			counter(descPathRxPackets, ps.RxPackets, l...)
			counter(descPathLost, ps.LostPackets, l...)
			if ps.MTU > 0 {
				gauge(descPathMTU, float64(ps.MTU), l...)
			}
			gauge(descPathPriority, float64(ps.Priority), l...)
			if ps.Budget != "" {
				gauge(descPathBudgetUsed, float64(ps.BudgetUsed), l...)
				gauge(descPathBudgetCap, float64(ps.BudgetBytes), l...)
			}
			if c := ps.CC; c != nil {
				gauge(descPathCwnd, float64(c.CwndBytes), l...)
				if c.SsthreshBytes >= 0 {
					gauge(descPathSsthresh, float64(c.SsthreshBytes), l...)
				}
				counter(descPathCongEvents, c.CongestionEvents, l...)
				if c.PacingRateBps > 0 {
					gauge(descPathPacing, c.PacingRateBps, l...)
				}
				if c.Mode != "" {
					gauge(descPathCCMode, 1, append(l[:len(l):len(l)], c.Mode)...)
					gauge(descPathBandwidth, c.BandwidthBps, l...)
				}
			}
			if r := ps.Recovery; r != nil {
				for _, k := range []struct {
					kind string
					n    uint64
				}{{"resent", r.Retransmitted}, {"recovered", r.Recovered}, {"residual", r.Residual}, {"rescued", r.Rescued}, {"repair_sent", r.RepairSent}, {"repair_used", r.RepairUsed}} {
					counter(descPathRecovery, k.n, append(l[:len(l):len(l)], k.kind)...)
				}
			}
		}
	}
	return out
}

// WriteTo writes one scrape in the Prometheus text format, version 0.0.4.
func (c *Collector) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	c.appendText(&b)
	return b.WriteTo(w)
}

func (c *Collector) appendText(b *bytes.Buffer) {
	families := c.collect()
	descs := make([]*metricDesc, 0, len(families))
	for d := range families {
		descs = append(descs, d)
	}
	slices.SortFunc(descs, func(a, b *metricDesc) int { return strings.Compare(a.name, b.name) })
	var num []byte
	for _, d := range descs {
		samples := families[d]
		// Stable, so that of two series with the same labels the first
		// collected is the one kept.
		slices.SortStableFunc(samples, func(x, y metricSample) int { return slices.Compare(x.labels, y.labels) })
		b.WriteString("# HELP ")
		b.WriteString(d.name)
		b.WriteByte(' ')
		helpEscaper.WriteString(b, d.help)
		b.WriteString("\n# TYPE ")
		b.WriteString(d.name)
		b.WriteByte(' ')
		b.WriteString(d.typ)
		b.WriteByte('\n')
		for i, s := range samples {
			if i > 0 && slices.Equal(s.labels, samples[i-1].labels) {
				continue
			}
			b.WriteString(d.name)
			if len(s.labels) > 0 {
				b.WriteByte('{')
				for k, v := range s.labels {
					if k > 0 {
						b.WriteByte(',')
					}
					b.WriteString(d.labels[d.order[k]])
					b.WriteString(`="`)
					labelEscaper.WriteString(b, v)
					b.WriteByte('"')
				}
				b.WriteByte('}')
			}
			b.WriteByte(' ')
			num = appendFloat(num[:0], s.value)
			b.Write(num)
			b.WriteByte('\n')
		}
	}
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// appendFloat formats v as Prometheus does: the shortest 'g' form that reads
// back exactly, and +Inf, -Inf, NaN for the special values (negative zero is 0).
func appendFloat(dst []byte, v float64) []byte {
	switch {
	case v == 0:
		return append(dst, '0')
	case math.IsInf(v, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, 64)
}
