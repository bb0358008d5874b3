package runner

import (
	"errors"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

// AddedDelay computes one download's latency figures from its probes' RTTs:
// idle were sent on the idle transport before the download, load while it
// ran; a negative RTT is a probe that got no answer. Added delay is each
// answered load probe's RTT minus the median idle RTT.
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
	base := answered(idle)
	if len(base) == 0 {
		return results.Latency{}, errors.New("latency: no probe was answered on the idle transport")
	}
	under := answered(load)
	if len(under) == 0 {
		return results.Latency{}, errors.New("latency: no probe was answered during the download")
	}
	l := results.Latency{IdleMedianMs: stats.Median(base), IdleProbes: len(idle), Probes: len(load), Lost: len(load) - len(under)}
	for i := range under {
		under[i] -= l.IdleMedianMs
	}
	l.AddedP50Ms = stats.Percentile(under, 50)
	l.AddedP95Ms = stats.Percentile(under, 95)
	l.AddedP99Ms = stats.Percentile(under, 99)
	l.AddedMaxMs = stats.Percentile(under, 100)
	return l, nil
}

// Arrival is one real-time packet as the client received it.
type Arrival struct {
	Seq int
	// OWD is the one-way delay: arrival time minus the send time in the
	// packet.
	OWD time.Duration
}

// RealtimeStats accounts for a real-time flow of sent packets of size
// bytes: a sequence number counts once (duplicates and numbers the flow
// never sent are ignored), a packet is late when its one-way delay exceeds
// deadline, and one the application could not play (MissPct) is lost or
// late.
func RealtimeStats(sent, size int, deadline time.Duration, arrivals []Arrival) (results.Realtime, error) {
	seen := make([]bool, sent)
	var owd []float64
	r := results.Realtime{Sent: sent}
	for _, a := range arrivals {
		if a.Seq < 0 || a.Seq >= sent || seen[a.Seq] {
			continue
		}
		seen[a.Seq] = true
		owd = append(owd, stats.Ms(a.OWD))
		if a.OWD > deadline {
			r.Late++
		}
	}
	r.Delivered = len(owd)
	if r.Delivered == 0 {
		return r, errors.New("realtime: no packet of the flow arrived")
	}
	r.PayloadBytes = int64(r.Delivered) * int64(size)
	r.LossPct = 100 * float64(sent-r.Delivered) / float64(sent)
	r.OWDP50Ms = stats.Percentile(owd, 50)
	r.OWDP99Ms = stats.Percentile(owd, 99)
	r.OWDMaxMs = stats.Percentile(owd, 100)
	r.LatePct = 100 * float64(r.Late) / float64(r.Delivered)
	r.MissPct = 100 * float64(sent-r.Delivered+r.Late) / float64(sent)
	return r, nil
}

// SetOuter records the outer bytes the paths carried during the flow.
func setOuter(r *results.Realtime, perPath map[string]uint64) {
	r.OuterPathBytes = perPath
	r.OuterBytes = 0
	for _, v := range perPath {
		r.OuterBytes += v
	}
	if r.PayloadBytes > 0 {
		r.OuterPerPayload = float64(r.OuterBytes) / float64(r.PayloadBytes)
	}
}

// summarizeBy summarizes f over the samples that have what f reads.
func summarizeBy[T any](samples []results.Sample, get func(*results.Sample) *T, f func(*T) float64) stats.Summary {
	var xs []float64
	for i := range samples {
		if v := get(&samples[i]); v != nil {
			xs = append(xs, f(v))
		}
	}
	return stats.Summarize(xs)
}

// SummarizeLatency is a point's latency figures over its downloads (nil
// when none has probes).
func SummarizeLatency(samples []results.Sample) *results.LatencySummary {
	get := func(s *results.Sample) *results.Latency { return s.Latency }
	s := results.LatencySummary{
		IdleMs:     summarizeBy(samples, get, func(l *results.Latency) float64 { return l.IdleMedianMs }),
		AddedP50Ms: summarizeBy(samples, get, func(l *results.Latency) float64 { return l.AddedP50Ms }),
		AddedP95Ms: summarizeBy(samples, get, func(l *results.Latency) float64 { return l.AddedP95Ms }),
		AddedP99Ms: summarizeBy(samples, get, func(l *results.Latency) float64 { return l.AddedP99Ms }),
		LossPct:    summarizeBy(samples, get, (*results.Latency).LossPct),
	}
	if s.IdleMs.N == 0 {
		return nil
	}
	return &s
}

// SummarizeRealtime is a point's real-time figures over its repetitions
// (nil when none ran the flow).
func SummarizeRealtime(samples []results.Sample) *results.RealtimeSummary {
	get := func(s *results.Sample) *results.Realtime { return s.Realtime }
	s := results.RealtimeSummary{
		LossPct:         summarizeBy(samples, get, func(r *results.Realtime) float64 { return r.LossPct }),
		OWDP50Ms:        summarizeBy(samples, get, func(r *results.Realtime) float64 { return r.OWDP50Ms }),
		OWDP99Ms:        summarizeBy(samples, get, func(r *results.Realtime) float64 { return r.OWDP99Ms }),
		OWDMaxMs:        summarizeBy(samples, get, func(r *results.Realtime) float64 { return r.OWDMaxMs }),
		LatePct:         summarizeBy(samples, get, func(r *results.Realtime) float64 { return r.LatePct }),
		MissPct:         summarizeBy(samples, get, func(r *results.Realtime) float64 { return r.MissPct }),
		OuterPerPayload: summarizeBy(samples, get, func(r *results.Realtime) float64 { return r.OuterPerPayload }),
	}
	if s.LossPct.N == 0 {
		return nil
	}
	return &s
}
