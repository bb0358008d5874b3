package control

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label sets. Peers are identified by public key (unique, stable across
// restarts); the optional name rides along for dashboards. Paths carry their
// local and remote addresses, so a scrape shows who the peers are and where
// they connect from: the endpoint has no authentication, and the config
// warns when control.metrics is not a loopback address (docs/control.md).
var (
	peerLabels = []string{"peer", "name"}
	pathLabels = []string{"peer", "name", "path", "local", "remote", "device"}
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descInfo   = desc("braid_info", "Always 1; labels identify the instance.", "role", "interface", "public_key")
	descUptime = desc("braid_uptime_seconds", "Seconds since the instance started.")
	descDrops  = desc("braid_drops_total", "Packets dropped, by reason.", "reason")
	descEvents = desc("braid_events_total", "Other instance-wide events, by name.", "event")

	descPeerEstablished  = desc("braid_peer_established", "1 while the peer has a session with current keys, else 0.", peerLabels...)
	descPeerHandshake    = desc("braid_peer_last_handshake_timestamp_seconds", "Unix time of the last completed handshake (absent before the first).", peerLabels...)
	descPeerTxBytes      = desc("braid_peer_tx_bytes_total", "Bytes sent to the peer through the tunnel.", peerLabels...)
	descPeerRxBytes      = desc("braid_peer_rx_bytes_total", "Bytes received from the peer through the tunnel.", peerLabels...)
	descPeerTxPackets    = desc("braid_peer_tx_packets_total", "Packets sent to the peer.", peerLabels...)
	descPeerRxPackets    = desc("braid_peer_rx_packets_total", "Packets received from the peer.", peerLabels...)
	descPeerReorderHold  = desc("braid_peer_reorder_hold_seconds", "Current reorder hold time.", peerLabels...)
	descPeerReorderHeld  = desc("braid_peer_reorder_held_packets", "Packets waiting in the reorder buffers now.", peerLabels...)
	descPeerReorderTotal = desc("braid_peer_reorder_packets_total", "Received packets by reorder outcome.", append(peerLabels[:len(peerLabels):len(peerLabels)], "outcome")...)

	descPathState      = desc("braid_path_state", "1 for the path's current state (the state label); other states are absent.", append(pathLabels[:len(pathLabels):len(pathLabels)], "state")...)
	descPathSRTT       = desc("braid_path_srtt_seconds", "Smoothed round-trip time.", pathLabels...)
	descPathRTTVar     = desc("braid_path_rttvar_seconds", "Round-trip time variation.", pathLabels...)
	descPathMinRTT     = desc("braid_path_min_rtt_seconds", "Minimum round-trip time observed.", pathLabels...)
	descPathLoss       = desc("braid_path_loss_ratio", "Recent fraction of packets lost.", pathLabels...)
	descPathRate       = desc("braid_path_delivery_rate_bits", "Recent delivery rate in bits per second.", pathLabels...)
	descPathShare      = desc("braid_path_share_ratio", "Fraction of the peer's transmitted bytes sent on this path.", pathLabels...)
	descPathInFlight   = desc("braid_path_in_flight_bytes", "Bytes sent and neither acknowledged nor declared lost.", pathLabels...)
	descPathQueueDelay = desc("braid_path_queue_delay_seconds", "Estimated standing queue: one-way delay above its minimum.", pathLabels...)
	descPathOWDTrend   = desc("braid_path_owd_trend", "Slope of the one-way delay over time (s/s); positive means a queue is building.", pathLabels...)
	descPathTxBytes    = desc("braid_path_tx_bytes_total", "Bytes sent on the path.", pathLabels...)
	descPathRxBytes    = desc("braid_path_rx_bytes_total", "Bytes received on the path.", pathLabels...)
	descPathTxPackets  = desc("braid_path_tx_packets_total", "Packets sent on the path.", pathLabels...)
	descPathRxPackets  = desc("braid_path_rx_packets_total", "Packets received on the path.", pathLabels...)
	descPathLost       = desc("braid_path_lost_packets_total", "Packets declared lost on the path.", pathLabels...)
	descPathCwnd       = desc("braid_path_cwnd_bytes", "Congestion window (absent with congestion \"none\").", pathLabels...)
	descPathSsthresh   = desc("braid_path_ssthresh_bytes", "Slow-start threshold (absent while infinite or with congestion \"none\").", pathLabels...)
	descPathCongEvents = desc("braid_path_congestion_events_total", "Congestion-window reductions (losses and timeouts).", pathLabels...)
	descPeerCCQueued   = desc("braid_peer_cc_queued_packets", "Packets waiting for congestion-window room now.", peerLabels...)
	descPeerQueueDelay = desc("braid_peer_queue_delay_seconds", "Smoothed time packets waited in the per-peer queue.", peerLabels...)
	descPeerCoDel      = desc("braid_peer_codel_total", "CoDel verdicts on the per-peer queue (mark: ECN CE set, drop).", append(peerLabels[:len(peerLabels):len(peerLabels)], "verdict")...)
	descPeerRecHold    = desc("braid_peer_recovery_hold_seconds", "How long a gap in a TCP flow is waited for a resend.", peerLabels...)
	descPeerGiveUps    = desc("braid_peer_give_ups_total", "Lost packets given up and announced to the peer.", peerLabels...)
	descPathPacing     = desc("braid_path_pacing_rate_bps", "Pacing rate in bits per second (absent when the path is not paced).", pathLabels...)
	descPathRecovery   = desc("braid_path_recovery_packets_total", "Loss recovery per path: resent (carried here), recovered (lost here, resend acked), residual (lost here, given up), repair_sent, repair_used.", append(pathLabels[:len(pathLabels):len(pathLabels)], "kind")...)

	allDescs = []*prometheus.Desc{
		descInfo, descUptime, descDrops, descEvents,
		descPeerEstablished, descPeerHandshake, descPeerTxBytes, descPeerRxBytes, descPeerTxPackets, descPeerRxPackets,
		descPeerReorderHold, descPeerReorderHeld, descPeerReorderTotal,
		descPathState, descPathSRTT, descPathRTTVar, descPathMinRTT, descPathLoss, descPathRate, descPathShare,
		descPathInFlight, descPathQueueDelay, descPathOWDTrend,
		descPathTxBytes, descPathRxBytes, descPathTxPackets, descPathRxPackets, descPathLost,
		descPathCwnd, descPathSsthresh, descPathCongEvents, descPeerCCQueued,
		descPeerQueueDelay, descPeerCoDel, descPeerRecHold, descPeerGiveUps, descPathPacing, descPathRecovery,
	}
)

// collector turns a Status snapshot into constant metrics at scrape time, so
// the data path keeps its own counters and pays nothing for Prometheus.
type collector struct {
	provider func() Status
}

// NewCollector returns a collector that calls provider on every scrape.
func NewCollector(provider func() Status) prometheus.Collector {
	return &collector{provider: provider}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.provider()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
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
		}{{"in_order", r.InOrder}, {"reordered", r.Reordered}, {"timeout", r.Timeouts}, {"late", r.Late}, {"duplicate", r.Duplicates}} {
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
			if c := ps.CC; c != nil {
				gauge(descPathCwnd, float64(c.CwndBytes), l...)
				if c.SsthreshBytes >= 0 {
					gauge(descPathSsthresh, float64(c.SsthreshBytes), l...)
				}
				counter(descPathCongEvents, c.CongestionEvents, l...)
				if c.PacingRateBps > 0 {
					gauge(descPathPacing, c.PacingRateBps, l...)
				}
			}
			if r := ps.Recovery; r != nil {
				for _, k := range []struct {
					kind string
					n    uint64
				}{{"resent", r.Retransmitted}, {"recovered", r.Recovered}, {"residual", r.Residual}, {"repair_sent", r.RepairSent}, {"repair_used", r.RepairUsed}} {
					counter(descPathRecovery, k.n, append(l[:len(l):len(l)], k.kind)...)
				}
			}
		}
	}
}

// ServeMetrics serves c at http://addr/metrics until ctx is done. It serves
// anyone who can reach addr; bind it to loopback unless a firewall guards it.
func ServeMetrics(ctx context.Context, addr string, c prometheus.Collector) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ServeMetricsOn(ctx, ln, c)
}

// ServeMetricsOn is ServeMetrics on a listener the caller opened (tests use
// 127.0.0.1:0 and need to know the port). It closes ln.
//
// The registry is private: it holds c alone, without the Go runtime and
// process collectors of the default registry, so the endpoint shows braid's
// metrics and two instances in one process (as in tests) cannot collide.
func ServeMetricsOn(ctx context.Context, ln net.Listener, c prometheus.Collector) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// One inconsistent sample (say two paths with the same ID) must not
		// blank the whole page.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
