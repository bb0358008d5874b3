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
	var variants []variant
	var fanSched, fanCong bool
	for i, tr := range s.Transports {
		kind, _ := LookupTransport(tr.Name)
		vs := []variant{{tr: tr, params: []Param{{Axis: AxisTransport, Text: tr.Label}}}}
		if sw.Scheduler != nil && kind.Accepts(OptScheduler) && !p.explicitSched[i] {
			fanSched = true
			vs = fan(vs, AxisScheduler, sw.Scheduler, func(t *Transport, sch string) {
				t.Scheduler = sch
				t.Weights = nil
				if sch == "weighted" {
					t.Weights = slices.Repeat([]float64{1}, len(s.Topology.Paths()))
				}
			})
		}
		if sw.Congestion != nil && kind.Accepts(OptCongestion) && !p.explicitCong[i] {
			fanCong = true
			vs = fan(vs, AxisCongestion, sw.Congestion, func(t *Transport, cc string) { t.Congestion = cc })
		}
		variants = append(variants, vs...)
	}
	const unused = "no transport takes it: each either has no %s option or sets its own"
	p.failIf(sw.Scheduler != nil && !fanSched, "sweep.scheduler", unused, OptScheduler)
	p.failIf(sw.Congestion != nil && !fanCong, "sweep.congestion", unused, OptCongestion)
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
		}
		seen[v.tr.Label] = i
	}

	total := len(variants)
	for _, a := range sw.networkAxes() {
		total *= a.n
	}
	if p.failIf(total > MaxPoints, "sweep", "expands to %d points; the limit is %d", total, MaxPoints) || p.err != nil {
		return nil
	}

	nets := []network{{top: s.Topology}}
	for _, a := range sw.networkAxes() {
		next := make([]network, 0, len(nets)*a.n)
		for _, base := range nets {
			for i := range a.n {
				t := base.top.Clone()
				next = append(next, network{params: append(slices.Clone(base.params), a.apply(t, i)), top: t})
			}
		}
		nets = next
	}

	// A swept value can break what the file's links allow (an RTT below
	// twice the jitter, a ratio that takes a rate out of range): check
	// every network, naming the point.
	for _, n := range nets {
		at := ""
		if len(n.params) > 0 {
			at = "at " + (&Point{Params: n.params}).String() + ": "
		}
		for i := range n.top.Links {
			p.checkShaping("sweep", &n.top.Links[i], at)
		}
		if p.err != nil {
			return nil
		}
	}

	points := make([]Point, 0, total)
	for ni, n := range nets {
		for _, v := range variants {
			params := slices.Concat(n.params, v.params)
			points = append(points, Point{Index: len(points), Network: ni, Params: params, Topology: n.top, Transport: cloneTransport(v.tr)})
		}
	}
	return points
}

// networkAxis is a swept network axis: its number of values, what it needs
// of every path (a link node to emulate something, a rate of its own, at
// least one other path) and how the i-th value sets a topology.
type networkAxis struct {
	axis     Axis
	n        int
	emulates string
	rate     bool
	others   string
	apply    func(t *Topology, i int) Param
}

// networkAxes are the sweep's network axes that have values, outermost
// first: the one order of Axes and of the points.
func (sw *Sweep) networkAxes() []networkAxis {
	const relative = "the others are set relative to the first"
	all := []networkAxis{
		{AxisRTT, len(sw.RTT), "delay", false, "", func(t *Topology, i int) Param {
			d := sw.RTT[i]
			for _, l := range t.Paths() {
				l.AB.Delay, l.BA.Delay = splitRTT(d)
			}
			return Param{Axis: AxisRTT, Text: d.String(), Value: stats.Ms(d)}
		}},
		{AxisRTTRatio, len(sw.RTTRatio), "delay", false, relative, func(t *Topology, i int) Param {
			r := sw.RTTRatio[i]
			paths := t.Paths()
			ref := paths[0].RTT()
			for _, l := range paths[1:] {
				l.AB.Delay, l.BA.Delay = splitRTT(time.Duration(math.Round(float64(ref) * r)))
			}
			return Param{Axis: AxisRTTRatio, Text: "1:" + fmtFloat(r), Value: r}
		}},
		{AxisRate, len(sw.Rate), "", true, "", func(t *Topology, i int) Param {
			r := sw.Rate[i]
			for _, l := range t.Paths() {
				l.AB.Rate, l.BA.Rate = r, r
			}
			return Param{Axis: AxisRate, Text: r.String(), Value: r.Mbps()}
		}},
		{AxisRateRatio, len(sw.RateRatio), "", true, relative, func(t *Topology, i int) Param {
			r := sw.RateRatio[i]
			paths := t.Paths()
			ref := paths[0]
			for _, l := range paths[1:] {
				l.AB.Rate = Rate(math.Round(float64(ref.AB.Rate) * r))
				l.BA.Rate = Rate(math.Round(float64(ref.BA.Rate) * r))
			}
			return Param{Axis: AxisRateRatio, Text: "1:" + fmtFloat(r), Value: r}
		}},
		{AxisLoss, len(sw.Loss), "loss", false, "", func(t *Topology, i int) Param { return setLoss(t.Paths(), AxisLoss, sw.Loss[i]) }},
		{AxisLossSecondary, len(sw.LossSecondary), "loss", false, "it sets every path after the first", func(t *Topology, i int) Param {
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
			out = append(out, variant{tr: t, params: append(slices.Clone(v.params), Param{Axis: axis, Text: val})})
		}
	}
	return out
}

func cloneTransport(t Transport) Transport {
	t.Weights, t.Priorities = slices.Clone(t.Weights), slices.Clone(t.Priorities)
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
