package scenario

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/braid-vpn/braid/lab/stats"
)

// sweptAxis is one declared [sweep] axis: its values as the points show them
// and how the i-th value sets the paths of a testbed (network axes) or a
// transport (option axes, which fan out the transports that take opt and
// do not set it).
type sweptAxis struct {
	axis   Axis
	params []Param
	apply  func(paths []*Link, i int)
	opt    string
	set    func(t *Transport, v string)
	// What a network axis needs of every path: a link node to emulate
	// something, a rate of its own, at least one other path.
	emulates string
	rate     bool
	others   string
}

// axisOf makes the axis of vals (nil when the axis is not declared), each
// value shown as param shows it.
func axisOf[T any](axis Axis, vals []T, param func(T) (string, float64), a sweptAxis) []sweptAxis {
	if vals == nil {
		return nil
	}
	a.axis = axis
	a.params = mapf(vals, func(v T) Param { text, x := param(v); return Param{axis, text, x} })
	return []sweptAxis{a}
}

// networkAxes are the declared network axes, outermost first: the one order
// of Axes and of the points.
func networkAxes(rtts []time.Duration, rttRatios []float64, rates []Rate, rateRatios []float64, losses, secondary []Loss) []sweptAxis {
	const relative = "the others are set relative to the first"
	ratio := func(r float64) (string, float64) { return "1:" + fmtFloat(r), r }
	loss := func(m Loss) (string, float64) { return m.String(), 100 * m.MeanLoss() }
	setLoss := func(paths []*Link, m Loss) {
		for _, l := range paths {
			l.AB.Loss, l.BA.Loss = m, m
		}
	}
	return slices.Concat(
		axisOf(AxisRTT, rtts, func(d time.Duration) (string, float64) { return d.String(), stats.Ms(d) }, sweptAxis{emulates: "delay", apply: func(paths []*Link, i int) {
			for _, l := range paths {
				l.AB.Delay, l.BA.Delay = splitRTT(rtts[i])
			}
		}}),
		axisOf(AxisRTTRatio, rttRatios, ratio, sweptAxis{emulates: "delay", others: relative, apply: func(paths []*Link, i int) {
			ref := paths[0].RTT()
			for _, l := range paths[1:] {
				l.AB.Delay, l.BA.Delay = splitRTT(time.Duration(math.Round(float64(ref) * rttRatios[i])))
			}
		}}),
		axisOf(AxisRate, rates, func(r Rate) (string, float64) { return r.String(), r.Mbps() }, sweptAxis{rate: true, apply: func(paths []*Link, i int) {
			for _, l := range paths {
				l.AB.Rate, l.BA.Rate = rates[i], rates[i]
			}
		}}),
		axisOf(AxisRateRatio, rateRatios, ratio, sweptAxis{rate: true, others: relative, apply: func(paths []*Link, i int) {
			ref := paths[0]
			for _, l := range paths[1:] {
				l.AB.Rate = Rate(math.Round(float64(ref.AB.Rate) * rateRatios[i]))
				l.BA.Rate = Rate(math.Round(float64(ref.BA.Rate) * rateRatios[i]))
			}
		}}),
		axisOf(AxisLoss, losses, loss, sweptAxis{emulates: "loss", apply: func(paths []*Link, i int) { setLoss(paths, losses[i]) }}),
		axisOf(AxisLossSecondary, secondary, loss, sweptAxis{emulates: "loss", others: "it sets every path after the first", apply: func(paths []*Link, i int) {
			setLoss(paths[1:], secondary[i])
		}}),
	)
}

// optionAxes are the declared transport option axes, in the order Points
// nests them.
func optionAxes(paths int, scheds, ccs []string) []sweptAxis {
	text := func(v string) (string, float64) { return v, 0 }
	return slices.Concat(
		axisOf(AxisScheduler, scheds, text, sweptAxis{opt: OptScheduler, set: func(t *Transport, sch string) {
			t.Scheduler = sch
			t.Weights = nil
			if sch == "weighted" {
				t.Weights = slices.Repeat([]float64{1}, paths)
			}
		}}),
		axisOf(AxisCongestion, ccs, text, sweptAxis{opt: OptCongestion, set: func(t *Transport, cc string) { t.Congestion = cc }}),
	)
}

// expand builds the points: the network axes' cartesian product (each a
// Point with only Params and Topology) times the transports, each transport
// times the option axes that apply to it (a Point with only Params and
// Transport).
func (p *parser) expand(s *Scenario) []Point {
	var variants []Point
	fanned := map[Axis]bool{}
	for i, tr := range s.Transports {
		kind, _ := LookupTransport(tr.Name)
		vs := []Point{{Transport: tr, Params: []Param{{Axis: AxisTransport, Text: tr.Label}}}}
		for _, a := range s.options {
			if kind.Accepts(a.opt) && !p.explicit[i][a.opt] {
				fanned[a.axis] = true
				vs = fan(vs, a)
			}
		}
		variants = append(variants, vs...)
	}
	clashKey := "sweep"
	for _, a := range s.options {
		p.failIf(!fanned[a.axis], "sweep."+string(a.axis), "no transport takes it: each either has no %s option or sets its own", a.opt)
		if len(s.options) == 1 {
			clashKey = "sweep." + string(a.axis)
		}
	}
	seen := map[string]int{}
	for i, v := range variants {
		if j, ok := seen[v.Transport.Label]; ok {
			p.fail(clashKey, "expands two transports to the label %q (variants %d and %d); set label on the [[transports]] entries", v.Transport.Label, j, i)
		}
		seen[v.Transport.Label] = i
	}

	total := len(variants)
	for _, a := range s.network {
		total *= len(a.params)
	}
	if p.failIf(total > MaxPoints, "sweep", "expands to %d points; the limit is %d", total, MaxPoints) || p.err != nil {
		return nil
	}

	nets := []Point{{Topology: s.Topology}}
	for _, a := range s.network {
		next := make([]Point, 0, len(nets)*len(a.params))
		for _, base := range nets {
			for i, q := range a.params {
				t := base.Topology.Clone()
				a.apply(t.Paths(), i)
				next = append(next, Point{Params: append(slices.Clone(base.Params), q), Topology: t})
			}
		}
		nets = next
	}

	// A swept value can break what the file's links allow (an RTT below
	// twice the jitter, a ratio that takes a rate out of range): check
	// every network, naming the point.
	for _, n := range nets {
		at := ""
		if len(n.Params) > 0 {
			at = "at " + n.String() + ": "
		}
		for i := range n.Topology.Links {
			p.checkShaping("sweep", &n.Topology.Links[i], at)
		}
		if p.err != nil {
			return nil
		}
	}

	points := make([]Point, 0, total)
	for ni, n := range nets {
		for _, v := range variants {
			params := slices.Concat(n.Params, v.Params)
			points = append(points, Point{Index: len(points), Network: ni, Params: params, Topology: n.Topology, Transport: cloneTransport(v.Transport)})
		}
	}
	return points
}

// fan multiplies variants by the values of option axis a, appending each
// value to the label.
func fan(vs []Point, a sweptAxis) []Point {
	out := make([]Point, 0, len(vs)*len(a.params))
	for _, v := range vs {
		for _, q := range a.params {
			t := cloneTransport(v.Transport)
			a.set(&t, q.Text)
			t.Label = v.Transport.Label + " " + q.Text
			out = append(out, Point{Transport: t, Params: append(slices.Clone(v.Params), q)})
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
