package scenario

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/braid-vpn/braid/lab/stats"
)

// network is one point of the network axes: a testbed with its params.
type network struct {
	params []Param
	top    *Topology
}

// expand builds the points: the network axes' cartesian product (rtt,
// rtt_ratio, rate, rate_ratio, loss, outermost first) times the transports,
// each transport that takes a scheduler and sets none times the scheduler
// axis.
func (p *parser) expand(s *Scenario) []Point {
	sw := &s.Sweep
	nets := []network{{top: s.Topology}}
	step := func(n int, apply func(t *Topology, i int) Param) {
		next := make([]network, 0, len(nets)*n)
		for _, base := range nets {
			for i := 0; i < n; i++ {
				t := base.top.Clone()
				q := apply(t, i)
				params := append(append([]Param(nil), base.params...), q)
				next = append(next, network{params: params, top: t})
			}
		}
		nets = next
	}

	var variants []variant
	for i, tr := range s.Transports {
		kind, _ := LookupTransport(tr.Name)
		vs := []variant{{tr: tr, params: []Param{{Axis: AxisTransport, Text: tr.Label}}}}
		if sw.Scheduler != nil && kind.Accepts(OptScheduler) && !p.explicitSched[i] {
			vs = fan(vs, AxisScheduler, sw.Scheduler, func(t *Transport, sch string) {
				t.Scheduler = sch
				t.Weights = nil
				if sch == "weighted" {
					t.Weights = equalWeights(len(s.Topology.Paths()))
				}
			})
		}
		if sw.Congestion != nil && kind.Accepts(OptCongestion) && !p.explicitCong[i] {
			vs = fan(vs, AxisCongestion, sw.Congestion, func(t *Transport, cc string) { t.Congestion = cc })
		}
		variants = append(variants, vs...)
	}
	seen := map[string]int{}
	clashKey := "sweep"
	switch {
	case sw.Congestion == nil:
		clashKey = "sweep.scheduler"
	case sw.Scheduler == nil:
		clashKey = "sweep.congestion"
	}
	for i, v := range variants {
		if j, ok := seen[v.tr.Label]; ok {
			p.fail(clashKey, "expands two transports to the label %q (variants %d and %d); set label on the [[transports]] entries", v.tr.Label, j, i)
			return nil
		}
		seen[v.tr.Label] = i
	}

	total := len(variants)
	for _, a := range sw.networkAxes() {
		total *= a.n
	}
	if total > MaxPoints {
		p.fail("sweep", "expands to %d points; the limit is %d", total, MaxPoints)
		return nil
	}

	for _, a := range sw.networkAxes() {
		step(a.n, a.apply)
	}

	// A swept value can break what the file's links allow (an RTT below
	// twice the jitter, a ratio that takes a rate out of range): check
	// every network, naming the point.
	for _, n := range nets {
		where := ""
		if len(n.params) > 0 {
			pt := Point{Params: n.params}
			where = "at " + pt.String() + ": "
		}
		for i := range n.top.Links {
			p.checkShaping("sweep", &n.top.Links[i], where)
		}
		if p.err != nil {
			return nil
		}
	}

	points := make([]Point, 0, total)
	for ni, n := range nets {
		for _, v := range variants {
			params := append(append([]Param(nil), n.params...), v.params...)
			points = append(points, Point{
				Index:     len(points),
				Network:   ni,
				Params:    params,
				Topology:  n.top,
				Transport: cloneTransport(v.tr),
			})
		}
	}
	return points
}

// networkAxis is a swept network axis: its number of values and how the
// i-th sets a topology.
type networkAxis struct {
	axis  Axis
	n     int
	apply func(t *Topology, i int) Param
}

// networkAxes are the sweep's network axes that have values, outermost
// first: the one order of Axes and of the points.
func (sw *Sweep) networkAxes() []networkAxis {
	all := []networkAxis{
		{AxisRTT, len(sw.RTT), func(t *Topology, i int) Param {
			d := sw.RTT[i]
			for _, l := range t.Paths() {
				l.AB.Delay, l.BA.Delay = splitRTT(d)
			}
			return Param{Axis: AxisRTT, Text: d.String(), Value: stats.Ms(d)}
		}},
		{AxisRTTRatio, len(sw.RTTRatio), func(t *Topology, i int) Param {
			r := sw.RTTRatio[i]
			paths := t.Paths()
			ref := paths[0].RTT()
			for _, l := range paths[1:] {
				l.AB.Delay, l.BA.Delay = splitRTT(time.Duration(math.Round(float64(ref) * r)))
			}
			return Param{Axis: AxisRTTRatio, Text: "1:" + fmtFloat(r), Value: r}
		}},
		{AxisRate, len(sw.Rate), func(t *Topology, i int) Param {
			r := sw.Rate[i]
			for _, l := range t.Paths() {
				l.AB.Rate, l.BA.Rate = r, r
			}
			return Param{Axis: AxisRate, Text: r.String(), Value: r.Mbps()}
		}},
		{AxisRateRatio, len(sw.RateRatio), func(t *Topology, i int) Param {
			r := sw.RateRatio[i]
			paths := t.Paths()
			ref := paths[0]
			for _, l := range paths[1:] {
				l.AB.Rate = Rate(math.Round(float64(ref.AB.Rate) * r))
				l.BA.Rate = Rate(math.Round(float64(ref.BA.Rate) * r))
			}
			return Param{Axis: AxisRateRatio, Text: "1:" + fmtFloat(r), Value: r}
		}},
		{AxisLoss, len(sw.Loss), func(t *Topology, i int) Param { return setLoss(t.Paths(), AxisLoss, sw.Loss[i]) }},
		{AxisLossSecondary, len(sw.LossSecondary), func(t *Topology, i int) Param {
			return setLoss(t.Paths()[1:], AxisLossSecondary, sw.LossSecondary[i])
		}},
	}
	return slices.DeleteFunc(all, func(a networkAxis) bool { return a.n == 0 })
}

// setLoss gives paths loss model m both ways.
func setLoss(paths []*Link, axis Axis, m Loss) Param {
	for _, l := range paths {
		l.AB.Loss, l.BA.Loss = m, m
	}
	return Param{Axis: axis, Text: m.String(), Value: 100 * m.MeanLoss()}
}

// variant is a transport with the sweep params that made it.
type variant struct {
	tr     Transport
	params []Param
}

// fan multiplies variants by the values of an option axis, appending each
// value to the label.
func fan(vs []variant, axis Axis, values []string, set func(*Transport, string)) []variant {
	out := make([]variant, 0, len(vs)*len(values))
	for _, v := range vs {
		for _, val := range values {
			t := cloneTransport(v.tr)
			set(&t, val)
			t.Label = v.tr.Label + " " + val
			params := append(append([]Param(nil), v.params...), Param{Axis: axis, Text: val})
			out = append(out, variant{tr: t, params: params})
		}
	}
	return out
}

func cloneTransport(t Transport) Transport {
	if t.Weights != nil {
		t.Weights = append([]float64(nil), t.Weights...)
	}
	return t
}

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// Default is the scenario of an empty file: the paper's testbed (see
// DefaultTopology), Table 3's TCP settings with cubic, 20 downloads of
// 16 MiB, measured with direct, mptcp-direct and braid with its default
// options.
func Default() *Scenario {
	s, err := Parse("default", nil)
	if err != nil {
		panic(fmt.Sprintf("scenario: the built-in default does not parse: %v", err))
	}
	return s
}
