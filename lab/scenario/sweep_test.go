package scenario

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/stats"
)

const sweepDoc = `
[[transports]]
name = "direct"
[[transports]]
name = "braid"
[[transports]]
name = "braid"
label = "fixed"
scheduler = "weighted"
weights = [3, 1]

[sweep]
rtt = ["10ms", "30ms"]
rtt_ratio = [1, 2.5]
loss = ["none", "gemodel 1% 75% 50% 0%"]
scheduler = ["minrtt", "weighted"]
`

func TestSweepExpansion(t *testing.T) {
	s := mustParse(t, sweepDoc)
	if !slices.Equal(s.Axes(), []Axis{AxisRTT, AxisRTTRatio, AxisLoss, AxisTransport, AxisScheduler}) {
		t.Errorf("axes = %v", s.Axes())
	}
	pts := s.Points()
	// Networks: 2 rtt × 2 ratios × 2 losses = 8. Transports: direct, braid
	// × {minrtt, weighted}, fixed (sets its own scheduler) = 4. 8 × 4 = 32.
	if len(pts) != 32 {
		t.Fatalf("%d points, want 32", len(pts))
	}
	labels := []string{"direct", "braid minrtt", "braid weighted", "fixed"}
	for i, p := range pts {
		if p.Index != i || p.Network != i/4 || p.Transport.Label != labels[i%4] {
			t.Errorf("point %d: index %d network %d label %q", i, p.Index, p.Network, p.Transport.Label)
		}
		if p.Topology != pts[p.Network*4].Topology {
			t.Errorf("point %d does not share its network's topology", i)
		}
		if i%4 == 0 && i > 0 && p.Topology == pts[i-1].Topology {
			t.Errorf("point %d shares the previous network's topology", i)
		}
	}

	// Network 6 = rtt index 1 (30ms), ratio index 1 (2.5), loss index 0:
	// ((1×2)+1)×2+0. Its braid weighted variant is point 6×4+2 = 26.
	p := pts[26]
	wantParams := []Param{
		{Axis: AxisRTT, Text: "30ms", Value: 30},
		{Axis: AxisRTTRatio, Text: "1:2.5", Value: 2.5},
		{Axis: AxisLoss, Text: "none", Value: 0},
		{Axis: AxisTransport, Text: "braid"},
		{Axis: AxisScheduler, Text: "weighted"},
	}
	if !slices.Equal(p.Params, wantParams) {
		t.Errorf("point 26 params = %+v", p.Params)
	}
	if p.String() != "rtt=30ms rtt_ratio=1:2.5 loss=none transport=braid scheduler=weighted" {
		t.Errorf("point 26 = %s", p.String())
	}
	tr := p.Transport
	if tr.Name != "braid" || tr.Scheduler != "weighted" || !slices.Equal(tr.Weights, []float64{1, 1}) || tr.Reorder != "adaptive" {
		t.Errorf("point 26 transport = %+v", tr)
	}
	prim, sec := p.Topology.Link("primary"), p.Topology.Link("secondary")
	if prim.AB.Delay != 15*time.Millisecond || prim.BA.Delay != 15*time.Millisecond {
		t.Errorf("primary = %v / %v, want 15ms each way", prim.AB.Delay, prim.BA.Delay)
	}
	// 30 ms × 2.5 = 75 ms, split 37.5 ms each way.
	if sec.AB.Delay != 37500*time.Microsecond || sec.BA.Delay != 37500*time.Microsecond || sec.RTT() != 75*time.Millisecond {
		t.Errorf("secondary = %v / %v", sec.AB.Delay, sec.BA.Delay)
	}
	if !prim.AB.Loss.IsZero() || prim.AB.Rate != 10*Mbit || p.Topology.Link("lan").AB.Delay != 0 {
		t.Errorf("point 26 links changed beyond the axes: %+v", p.Topology.Links)
	}

	// Point 27, "fixed", keeps its own scheduler and weights and has no
	// scheduler param; point 25 is braid with minrtt and no weights.
	if f := pts[27]; f.Transport.Scheduler != "weighted" || !slices.Equal(f.Transport.Weights, []float64{3, 1}) {
		t.Errorf("fixed = %+v", f.Transport)
	} else if _, ok := f.Param(AxisScheduler); ok {
		t.Errorf("fixed has a scheduler param: %+v", f.Params)
	}
	if m := pts[25].Transport; m.Scheduler != "minrtt" || m.Weights != nil {
		t.Errorf("braid minrtt = %+v", m)
	}

	// Network 1 = rtt 10ms, ratio 1, GE loss: both paths, both directions.
	ge := Loss{Model: LossGE, P: 1, R: 75, OneMinusH: 50, OneMinusK: 0}
	q := pts[4]
	for _, l := range q.Topology.Paths() {
		if l.AB.Loss != ge || l.BA.Loss != ge || l.RTT() != 10*time.Millisecond {
			t.Errorf("network 1 link %s = %+v", l.Name, l)
		}
	}
	if lp, _ := q.Param(AxisLoss); lp.Text != "gemodel 1% 75% 50% 0%" || math.Abs(lp.Value-0.657895) > 1e-6 {
		t.Errorf("loss param = %+v", lp)
	}
	if q.Topology.Link("lan").AB.Loss != (Loss{}) {
		t.Errorf("loss applied to the server–web link")
	}

	// The scenario's own topology is untouched by the sweep.
	if s.Topology.Link("secondary").RTT() != 20*time.Millisecond || s.Topology.Link("primary").AB.Loss.Model != LossNone {
		t.Errorf("base topology changed: %+v", s.Topology.Links)
	}
}

func TestSweepRates(t *testing.T) {
	s := mustParse(t, "[sweep]\nrate = [\"5mbit\", \"20mbit\"]\nrate_ratio = [0.5, 2]\n")
	pts := s.Points()
	// 2 rates × 2 ratios × 3 default transports.
	if len(pts) != 12 {
		t.Fatalf("%d points, want 12", len(pts))
	}
	for _, tc := range []struct {
		point     int
		prim, sec Rate
		params    string
	}{
		{0, 5 * Mbit, 2500 * Kbit, "rate=5Mbit/s rate_ratio=1:0.5 transport=direct"},
		{3, 5 * Mbit, 10 * Mbit, "rate=5Mbit/s rate_ratio=1:2 transport=direct"},
		{7, 20 * Mbit, 10 * Mbit, "rate=20Mbit/s rate_ratio=1:0.5 transport=mptcp-direct"},
		{11, 20 * Mbit, 40 * Mbit, "rate=20Mbit/s rate_ratio=1:2 transport=braid"},
	} {
		p := pts[tc.point]
		prim, sec := p.Topology.Link("primary"), p.Topology.Link("secondary")
		if prim.AB.Rate != tc.prim || prim.BA.Rate != tc.prim || sec.AB.Rate != tc.sec || sec.BA.Rate != tc.sec {
			t.Errorf("point %d: primary %v/%v secondary %v/%v", tc.point, prim.AB.Rate, prim.BA.Rate, sec.AB.Rate, sec.BA.Rate)
		}
		if p.String() != tc.params {
			t.Errorf("point %d = %q, want %q", tc.point, p.String(), tc.params)
		}
		if p.Topology.Link("lan").AB.Rate != Gbit {
			t.Errorf("rate applied to the server–web link")
		}
	}
	if rp, _ := pts[7].Param(AxisRate); rp.Value != 20 {
		t.Errorf("rate param value = %v, want 20 (Mbit/s)", rp.Value)
	}
}

// TestRateRatioPerDirection: a ratio scales each direction of the first
// path separately.
func TestRateRatioPerDirection(t *testing.T) {
	s := mustParse(t, "[[links]]\nname = \"primary\"\n[links.a_to_b]\nrate = \"2mbit\"\n[sweep]\nrate_ratio = [0.25]\n")
	sec := s.Points()[0].Topology.Link("secondary")
	if sec.AB.Rate != 500*Kbit || sec.BA.Rate != 2500*Kbit {
		t.Errorf("secondary = %v / %v, want 500kbit/s / 2.5Mbit/s", sec.AB.Rate, sec.BA.Rate)
	}
}

func TestSweepSingleAxis(t *testing.T) {
	s := mustParse(t, "[[transports]]\nname = \"mptcp-direct\"\n[sweep]\nrtt = [\"1ms\", \"10ms\", \"20ms\", \"40ms\", \"60ms\", \"80ms\", \"100ms\"]\n")
	pts := s.Points()
	if len(pts) != 7 {
		t.Fatalf("%d points, want 7", len(pts))
	}
	want := []float64{1, 10, 20, 40, 60, 80, 100}
	for i, p := range pts {
		rp, ok := p.Param(AxisRTT)
		if !ok || rp.Value != want[i] || p.Network != i {
			t.Errorf("point %d: %+v", i, p.Params)
		}
		for _, l := range p.Topology.Paths() {
			if stats.Ms(l.RTT()) != want[i] {
				t.Errorf("point %d: %s RTT %v", i, l.Name, l.RTT())
			}
		}
	}
	// 1 ms splits into 500 µs each way.
	if l := pts[0].Topology.Link("primary"); l.AB.Delay != 500*time.Microsecond {
		t.Errorf("1ms RTT: a_to_b delay %v", l.AB.Delay)
	}
}

func TestPointsIsACopy(t *testing.T) {
	s := mustParse(t, "")
	a := s.Points()
	a[0].Transport.Label = "changed"
	a = append(a[:0], a[1:]...)
	if b := s.Points(); len(b) != 3 || b[0].Transport.Label != "direct" {
		t.Errorf("Points shares its slice: %+v", b)
	}
}

func TestCongestionAndSecondaryLossAxes(t *testing.T) {
	s, err := Parse("cc.toml", []byte(`
[[transports]]
name = "direct"
[[transports]]
name = "braid"
[[transports]]
name = "braid"
label = "braid reno"
congestion = "reno"
[sweep]
loss_secondary = ["none", "10%"]
scheduler = ["minrtt", "earliest-arrival"]
congestion = ["none", "lia"]
`))
	if err != nil {
		t.Fatal(err)
	}
	// Per network: direct, braid × 2 schedulers × 2 controllers, braid reno
	// × 2 schedulers = 7; two networks.
	pts := s.Points()
	if len(pts) != 14 {
		t.Fatalf("%d points, want 14", len(pts))
	}
	var labels []string
	for _, p := range pts[:7] {
		labels = append(labels, p.Transport.Label+"/"+p.Transport.Scheduler+"/"+p.Transport.Congestion)
	}
	want := []string{
		"direct//",
		"braid minrtt none/minrtt/none", "braid minrtt lia/minrtt/lia",
		"braid earliest-arrival none/earliest-arrival/none", "braid earliest-arrival lia/earliest-arrival/lia",
		"braid reno minrtt/minrtt/reno", "braid reno earliest-arrival/earliest-arrival/reno",
	}
	if strings.Join(labels, ",") != strings.Join(want, ",") {
		t.Errorf("variants\n got %q\nwant %q", labels, want)
	}
	if q, ok := pts[2].Param(AxisCongestion); !ok || q.Text != "lia" {
		t.Errorf("point 2 congestion param %+v", q)
	}
	lossy := pts[7].Topology
	if !lossy.Link("primary").BA.Loss.IsZero() || lossy.Link("secondary").BA.Loss.Percent != 10 || lossy.Link("secondary").AB.Loss.Percent != 10 {
		t.Errorf("loss_secondary 10%%: primary %v, secondary %v/%v", lossy.Link("primary").BA.Loss, lossy.Link("secondary").AB.Loss, lossy.Link("secondary").BA.Loss)
	}
	if got := s.Axes(); fmt.Sprint(got) != "[loss_secondary transport scheduler congestion]" {
		t.Errorf("axes %v", got)
	}
}
