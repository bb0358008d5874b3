package runner

import (
	"cmp"
	"errors"
	"time"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

// AddedDelay is one download's latency figures (docs/lab.md) from the RTTs
// of its probes before (idle) and during it (load); -1: no answer.
func AddedDelay(idle, load []time.Duration) (results.Latency, error) {
	answered := func(rs []time.Duration) []float64 {
		var out []float64
		for _, r := range rs {
			if r >= 0 {
				out = append(out, stats.Ms(r))
			}
		}
		return out
	}
	base, under := answered(idle), answered(load)
	if len(base) == 0 {
		return results.Latency{}, errors.New("latency: no probe was answered on the idle transport")
	}
	if len(under) == 0 {
		return results.Latency{}, errors.New("latency: no probe was answered during the download")
	}
	l := results.Latency{IdleMedianMs: stats.Median(base), IdleProbes: len(idle), Probes: len(load), Lost: len(load) - len(under)}
	for i := range under {
		under[i] -= l.IdleMedianMs
	}
	l.AddedP50Ms, l.AddedP95Ms = stats.Percentile(under, 50), stats.Percentile(under, 95)
	l.AddedP99Ms, l.AddedMaxMs = stats.Percentile(under, 99), stats.Percentile(under, 100)
	return l, nil
}

// RealtimeStats is one real-time flow's figures (docs/lab.md) from the
// one-way delay of each packet sent (-1: lost) of size bytes, late when
// above deadline.
func RealtimeStats(size int, deadline time.Duration, delays []time.Duration) (results.Realtime, error) {
	sent := len(delays)
	var owd []float64
	r := results.Realtime{Sent: sent}
	for _, d := range delays {
		if d >= 0 {
			owd = append(owd, stats.Ms(d))
			if d > deadline {
				r.Late++
			}
		}
	}
	if r.Delivered = len(owd); r.Delivered == 0 {
		return r, errors.New("realtime: no packet of the flow arrived")
	}
	r.PayloadBytes = int64(r.Delivered) * int64(size)
	r.LossPct = 100 * float64(sent-r.Delivered) / float64(sent)
	r.OWDP50Ms, r.OWDP99Ms, r.OWDMaxMs = stats.Percentile(owd, 50), stats.Percentile(owd, 99), stats.Percentile(owd, 100)
	r.LatePct = 100 * float64(r.Late) / float64(r.Delivered)
	r.MissPct = 100 * float64(sent-r.Delivered+r.Late) / float64(sent)
	return r, nil
}

// setOuter records the outer bytes the paths carried during the flow.
func setOuter(r *results.Realtime, perPath map[string]uint64) {
	r.OuterPathBytes, r.OuterBytes = perPath, 0
	for _, v := range perPath {
		r.OuterBytes += v
	}
	if r.PayloadBytes > 0 {
		r.OuterPerPayload = float64(r.OuterBytes) / float64(r.PayloadBytes)
	}
}

// BulkOverheadSlack is the recovery target's fixed allowance (docs/lab.md).
const BulkOverheadSlack = 0.05

// BulkOverhead is the recovery cost of one download of payload bytes from
// the sender's status before and after it (docs/lab.md); nil with recovery
// off or nothing downloaded.
func BulkOverhead(before, after control.Status, payload int64) *results.BulkRecovery {
	type pathKey struct { // path ids are unique within a peer
		peer string
		id   int
	}
	old := map[pathKey]control.PathStatus{}
	for _, peer := range before.Peers {
		for _, ps := range peer.Paths {
			old[pathKey{peer.PublicKey, ps.ID}] = ps
		}
	}
	var r results.BulkRecovery
	on := false
	for _, peer := range after.Peers {
		for _, ps := range peer.Paths {
			if ps.Recovery == nil {
				continue
			}
			on = true
			was := old[pathKey{peer.PublicKey, ps.ID}]
			w, now := cmp.Or(was.Recovery, &control.PathRecovery{}), ps.Recovery
			// The probes' repairs and resends have their own budget.
			r.ResentBytes += sub(now.RetransmittedBytes, w.RetransmittedBytes) - sub(now.RetransmittedLatencyBytes, w.RetransmittedLatencyBytes)
			r.RepairBytes += sub(now.RepairSentBytes, w.RepairSentBytes) - sub(now.RepairSentLatencyBytes, w.RepairSentLatencyBytes)
			r.TxPackets += sub(ps.TxPackets, was.TxPackets)
			r.LostPackets += sub(ps.LostPackets, was.LostPackets)
		}
	}
	if !on || payload <= 0 {
		return nil
	}
	if r.TxPackets > 0 {
		r.PathLossRate = float64(r.LostPackets) / float64(r.TxPackets)
	}
	r.Overhead = float64(r.ResentBytes+r.RepairBytes) / float64(payload)
	r.Bound = 2*r.PathLossRate + BulkOverheadSlack
	return &r
}

// summarize summarizes, figure by figure, figs of the samples' *T where
// get finds one; nil when no sample has one.
func summarize[T any](samples []results.Sample, get func(*results.Sample) *T, figs func(*T) []float64) []stats.Summary {
	var cols [][]float64
	for i := range samples {
		if v := get(&samples[i]); v != nil {
			for j, x := range figs(v) {
				if j == len(cols) {
					cols = append(cols, nil)
				}
				cols[j] = append(cols[j], x)
			}
		}
	}
	var out []stats.Summary
	for _, c := range cols {
		out = append(out, stats.Summarize(c))
	}
	return out
}

// summarizeOne summarizes the one figure get finds in the samples; nil
// when no sample has it.
func summarizeOne(samples []results.Sample, get func(*results.Sample) *float64) *stats.Summary {
	if s := summarize(samples, get, func(v *float64) []float64 { return []float64{*v} }); s != nil {
		return &s[0]
	}
	return nil
}

// SummarizeLatency is a point's latency figures over its downloads (nil
// when none has probes).
func SummarizeLatency(samples []results.Sample) *results.LatencySummary {
	s := summarize(samples, func(s *results.Sample) *results.Latency { return s.Latency }, func(l *results.Latency) []float64 {
		return []float64{l.IdleMedianMs, l.AddedP50Ms, l.AddedP95Ms, l.AddedP99Ms, l.LossPct()}
	})
	if s == nil {
		return nil
	}
	return &results.LatencySummary{IdleMs: s[0], AddedP50Ms: s[1], AddedP95Ms: s[2], AddedP99Ms: s[3], LossPct: s[4]}
}

// SummarizeRealtime is a point's real-time figures over its repetitions
// (nil when none ran the flow).
func SummarizeRealtime(samples []results.Sample) *results.RealtimeSummary {
	s := summarize(samples, func(s *results.Sample) *results.Realtime { return s.Realtime }, func(r *results.Realtime) []float64 {
		return []float64{r.LossPct, r.OWDP50Ms, r.OWDP99Ms, r.OWDMaxMs, r.LatePct, r.MissPct, r.OuterPerPayload}
	})
	if s == nil {
		return nil
	}
	return &results.RealtimeSummary{LossPct: s[0], OWDP50Ms: s[1], OWDP99Ms: s[2], OWDMaxMs: s[3], LatePct: s[4], MissPct: s[5], OuterPerPayload: s[6]}
}

// SummarizeBulkRecovery is a point's recovery figures over its downloads
// (nil when none has them).
func SummarizeBulkRecovery(samples []results.Sample) *results.BulkRecoverySummary {
	within := 0
	s := summarize(samples, func(s *results.Sample) *results.BulkRecovery { return s.BulkRecovery }, func(r *results.BulkRecovery) []float64 {
		if r.Overhead <= r.Bound {
			within++
		}
		return []float64{r.Overhead, r.PathLossRate, r.Bound}
	})
	if s == nil {
		return nil
	}
	return &results.BulkRecoverySummary{Overhead: s[0], PathLossRate: s[1], Bound: s[2], WithinBound: within}
}
