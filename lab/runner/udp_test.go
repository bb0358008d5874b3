package runner

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/scenario"
)

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestAddedDelay(t *testing.T) {
	msd := func(xs ...float64) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x * float64(time.Millisecond))
		}
		return out
	}
	// Idle median 20 ms (one idle probe lost); under load 21 probes of
	// 20…120 ms in 5 ms steps, one lost: added delays 0, 5, …, 100 ms.
	idle := msd(19, 20, -1, 21, 20)
	var load []float64
	for i := 0; i <= 20; i++ {
		load = append(load, 20+5*float64(i))
	}
	load = append(load, -1)
	l, err := AddedDelay(idle, msd(load...))
	if err != nil {
		t.Fatal(err)
	}
	near(t, "idle median", l.IdleMedianMs, 20)
	near(t, "p50", l.AddedP50Ms, 50)
	near(t, "p95", l.AddedP95Ms, 95) // rank 0.95·20 = 19 → 95 ms
	near(t, "p99", l.AddedP99Ms, 99) // rank 19.8 → 95 + 0.8·5
	near(t, "max", l.AddedMaxMs, 100)
	if l.IdleProbes != 5 || l.Probes != 22 || l.Lost != 1 {
		t.Errorf("counts: %+v", l)
	}
	near(t, "probe loss", l.LossPct(), 100.0/22)

	if _, err := AddedDelay(msd(-1), msd(20)); err == nil || !strings.Contains(err.Error(), "idle") {
		t.Errorf("no idle answer: %v", err)
	}
	if _, err := AddedDelay(msd(20), msd(-1, -1)); err == nil || !strings.Contains(err.Error(), "during the download") {
		t.Errorf("no answer under load: %v", err)
	}
}

func TestRealtimeStats(t *testing.T) {
	ms := time.Millisecond
	// 10 packets sent; 3 and 7 lost. One-way delays 10…80 ms; 5 (50 ms),
	// 8 (70 ms) and 9 (80 ms) miss a 45 ms deadline.
	r, err := RealtimeStats(200, 45*ms, []time.Duration{10 * ms, 20 * ms, 30 * ms, -1, 40 * ms, 50 * ms, 30 * ms, -1, 70 * ms, 80 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 10 || r.Delivered != 8 || r.Late != 3 || r.PayloadBytes != 1600 {
		t.Errorf("counts: %+v", r)
	}
	near(t, "loss", r.LossPct, 20)
	near(t, "late", r.LatePct, 100*3.0/8)
	near(t, "miss", r.MissPct, 50) // 2 lost + 3 late of 10
	// Delays sorted: 10 20 30 30 40 50 70 80.
	near(t, "owd p50", r.OWDP50Ms, 35)
	near(t, "owd p99", r.OWDP99Ms, 70+0.93*10)
	near(t, "owd max", r.OWDMaxMs, 80)

	setOuter(&r, map[string]uint64{"primary": 3000, "secondary": 1000})
	if r.OuterBytes != 4000 {
		t.Errorf("outer %d", r.OuterBytes)
	}
	near(t, "outer per payload", r.OuterPerPayload, 2.5)

	if _, err := RealtimeStats(200, ms, []time.Duration{-1, -1, -1, -1, -1}); err == nil {
		t.Error("a flow of which nothing arrived has statistics")
	}
}

func TestSummaries(t *testing.T) {
	smp := []results.Sample{
		{Latency: &results.Latency{IdleMedianMs: 20, AddedP95Ms: 10, Probes: 10, Lost: 1}},
		{Latency: &results.Latency{IdleMedianMs: 22, AddedP95Ms: 30, Probes: 10}},
		{},
	}
	l := SummarizeLatency(smp)
	if l == nil || l.IdleMs.N != 2 || l.AddedP95Ms.Mean != 20 || l.LossPct.Mean != 5 {
		t.Errorf("latency summary %+v", l)
	}
	if SummarizeRealtime(smp) != nil || SummarizeLatency(nil) != nil {
		t.Error("summary of samples without the figures is not nil")
	}
	rt := SummarizeRealtime([]results.Sample{{Realtime: &results.Realtime{LossPct: 2, MissPct: 4}}, {Realtime: &results.Realtime{LossPct: 4, MissPct: 6}}})
	if rt == nil || rt.LossPct.Mean != 3 || rt.MissPct.Mean != 5 {
		t.Errorf("realtime summary %+v", rt)
	}
}

// TestLatencyAndRealtime runs both new measurements over the direct
// transport on the built-in testbed: a 2 MiB download with probes (idle
// baseline, then the download fills the path's 1000-packet queue, so the
// added delay grows far beyond the idle RTT), then the real-time flow
// over a path with 2% loss.
func TestLatencyAndRealtime(t *testing.T) {
	run := runInNamespaces(t, "latency.toml", "braid-rlt", `
[experiment]
size = "2MiB"
reps = 1
latency = true
latency_idle = "500ms"
[[links]]
name = "primary"
rtt = "20ms"
[[transports]]
name = "direct"
`)
	p := run.Points[0]
	if p.Error != "" || len(p.Samples) != 1 || p.Samples[0].Latency == nil || p.Latency == nil {
		t.Fatalf("latency point: error %q, %d samples, summary %+v", p.Error, len(p.Samples), p.Latency)
	}
	l := p.Samples[0].Latency
	t.Logf("idle RTT %.2f ms; added p50 %.1f p95 %.1f p99 %.1f ms; %d probes, %d lost", l.IdleMedianMs, l.AddedP50Ms, l.AddedP95Ms, l.AddedP99Ms, l.Probes, l.Lost)
	if l.IdleMedianMs < 19 || l.IdleMedianMs > 30 || l.IdleProbes < 40 || l.Probes < 50 {
		t.Errorf("idle RTT %.2f ms over %d probes, %d probes under load; want ≈ 20 ms and 10 ms spacing", l.IdleMedianMs, l.IdleProbes, l.Probes)
	}
	if l.AddedP95Ms < 20 || l.AddedP95Ms < l.AddedP50Ms || l.AddedP99Ms < l.AddedP95Ms {
		t.Errorf("added delay p50 %.1f p95 %.1f p99 %.1f ms; want a queue to build (p95 > 20 ms) and ordered percentiles", l.AddedP50Ms, l.AddedP95Ms, l.AddedP99Ms)
	}

	run = runInNamespaces(t, "realtime.toml", "braid-rlt", `
[experiment]
reps = 1
workload = "realtime"
realtime_duration = "3s"
realtime_deadline = "40ms"
[[links]]
name = "primary"
rtt = "20ms"
loss = "2%"
[[transports]]
name = "direct"
`)
	p = run.Points[0]
	if p.Error != "" || len(p.Samples) != 1 || p.Samples[0].Realtime == nil || p.Realtime == nil || run.Realtime == nil {
		t.Fatalf("realtime point: error %q, %d samples, summary %+v", p.Error, len(p.Samples), p.Realtime)
	}
	r := p.Samples[0].Realtime
	t.Logf("realtime: %d sent, %d delivered (%.2f%% lost), OWD p50 %.2f p99 %.2f max %.2f ms, %.2f%% missed 40 ms; %d outer bytes (%.3f per payload byte)",
		r.Sent, r.Delivered, r.LossPct, r.OWDP50Ms, r.OWDP99Ms, r.OWDMaxMs, r.MissPct, r.OuterBytes, r.OuterPerPayload)
	if r.Sent != 1875 || r.LossPct < 0.5 || r.LossPct > 4.5 {
		t.Errorf("sent %d (want 3 s × 625/s = 1875), lost %.2f%% (want ≈ 2%%)", r.Sent, r.LossPct)
	}
	// 10 ms one-way plus 200 B serialization at 10 Mbit/s; the emulator
	// and the scheduler add well under a few ms.
	if r.OWDP50Ms < 10 || r.OWDP50Ms > 15 || r.LatePct > 1 {
		t.Errorf("one-way delay p50 %.2f ms, %.2f%% late; want ≈ 10 ms and none late", r.OWDP50Ms, r.LatePct)
	}
	// Each 200-byte payload is a 242-byte frame (UDP, IP, Ethernet
	// headers), and lost frames were sent too: ≈ 1.21 / 0.98.
	if r.OuterPerPayload < 1.2 || r.OuterPerPayload > 1.3 {
		t.Errorf("outer bytes per payload byte %.3f, want ≈ 1.23", r.OuterPerPayload)
	}
}

// recovery is written into braid's client config only when the transport
// sets it (unset keeps braid's default), and recorded with the options.
func TestBraidRecoveryOption(t *testing.T) {
	web := netip.MustParsePrefix("198.18.3.0/24")
	sk, _ := keys.Generate()
	if s := string(encode(t, BraidClientConfig(scenario.Transport{Name: "braid", Recovery: "off"}, testPaths, web, sk, "x.sock"))); !strings.Contains(s, "\nrecovery = 'off'\n") {
		t.Errorf("recovery not written:\n%s", s)
	}
	if s := string(encode(t, BraidClientConfig(scenario.Transport{Name: "braid"}, testPaths, web, sk, "x.sock"))); strings.Contains(s, "recovery") {
		t.Errorf("unset recovery written:\n%s", s)
	}
	if o := TransportOptions(scenario.Transport{Recovery: "retransmit"}); o["recovery"] != "retransmit" {
		t.Errorf("options %v", o)
	}
}
