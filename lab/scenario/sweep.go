package scenario

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/braid-vpn/braid/config"
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

// sweep reads [sweep] into the scenario's axes, network axes outermost
// first (the one order of Axes and of the points), and checks that the
// testbed can carry each.
func (p *parser) sweep(s *Scenario, raw *rawSweep) {
	rtt := durIn(0, 2*MaxDelay, egDelay)
	ratio := func(x float64) (float64, error) {
		if math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 || x > 1000 {
			return x, fmt.Errorf("%v out of range (a ratio > 0 and ≤ 1000)", x)
		}
		return x, nil
	}
	paths := s.Topology.Paths()
	const relative = "the others are set relative to the first"
	ratioText := func(r float64) (string, float64) { return "1:" + fmtFloat(r), r }
	lossText := func(m Loss) (string, float64) { return m.String(), 100 * m.MeanLoss() }
	setLoss := func(l, _ *Link, m Loss) { l.AB.Loss, l.BA.Loss = m, m }
	s.network = slices.Concat(
		sweepAxis(p, AxisRTT, raw.RTT, rtt, "%v", func(d time.Duration) (string, float64) { return d.String(), stats.Ms(d) }, sweptAxis{emulates: "delay"}, func(l, _ *Link, d time.Duration) {
			l.AB.Delay, l.BA.Delay = splitRTT(d)
		}),
		sweepAxis(p, AxisRTTRatio, raw.RTTRatio, ratio, "%v", ratioText, sweptAxis{emulates: "delay", others: relative}, func(l, first *Link, r float64) {
			l.AB.Delay, l.BA.Delay = splitRTT(time.Duration(math.Round(float64(first.RTT()) * r)))
		}),
		sweepAxis(p, AxisRate, raw.Rate, ParseRate, "%v", func(r Rate) (string, float64) { return r.String(), float64(r) / 1e6 }, sweptAxis{rate: true}, func(l, _ *Link, r Rate) {
			l.AB.Rate, l.BA.Rate = r, r
		}),
		sweepAxis(p, AxisRateRatio, raw.RateRatio, ratio, "%v", ratioText, sweptAxis{rate: true, others: relative}, func(l, first *Link, r float64) {
			l.AB.Rate = Rate(math.Round(float64(first.AB.Rate) * r))
			l.BA.Rate = Rate(math.Round(float64(first.BA.Rate) * r))
		}),
		sweepAxis(p, AxisLoss, raw.Loss, ParseLoss, "%q", lossText, sweptAxis{emulates: "loss"}, setLoss),
		sweepAxis(p, AxisLossSecondary, raw.LossSecondary, ParseLoss, "%q", lossText, sweptAxis{emulates: "loss", others: "it sets every path after the first"}, setLoss),
	)
	text := func(v string) (string, float64) { return v, 0 }
	s.options = slices.Concat(
		sweepAxis(p, AxisScheduler, raw.Scheduler, oneOf("scheduler", config.Schedulers), "%q", text, sweptAxis{opt: OptScheduler, set: func(t *Transport, sch string) {
			t.Scheduler = sch
			t.Weights = nil
			if sch == "weighted" {
				t.Weights = slices.Repeat([]float64{1}, len(paths))
			}
		}}, nil),
		sweepAxis(p, AxisCongestion, raw.Congestion, oneOf("congestion controller", config.CongestionChoices), "%q", text, sweptAxis{opt: OptCongestion, set: func(t *Transport, cc string) { t.Congestion = cc }}, nil),
	)
	for _, ax := range s.network {
		key := "sweep." + string(ax.axis)
		for _, l := range paths {
			if ax.emulates != "" && !l.Emulated() {
				p.fail(key, "path %q has no link node (via) to emulate %s", l.Name, ax.emulates)
			} else if ax.rate && l.Medium != "" {
				p.fail(key, "path %q is on medium %q, which sets its rate", l.Name, l.Medium)
			}
		}
		p.failIf(ax.others != "" && len(paths) < 2, key, "needs at least two paths (%s), found %d", ax.others, len(paths))
	}
	f := paths[0]
	p.failIf(raw.RateRatio != nil && raw.Rate == nil && (f.AB.Rate == 0 || f.BA.Rate == 0), "sweep.rate_ratio", "the first path %q is unshaped in at least one direction; give it a rate (or sweep rate) for the ratio to apply to", f.Name)
}

// sweepAxis makes the axis of one [sweep] key (none when the key is not
// set): its values read through parse (its errors are reported under the
// element's key, e.g. "sweep.rtt[2]"), none twice (dupVerb, "%v" or
// "%q", writes the value in that message), each shown as show shows it; apply, for a network
// axis, sets one path to a value: every path, or with a.others every path
// after the first, which it gets too.
func sweepAxis[R any, T comparable](p *parser, axis Axis, raw []R, parse func(R) (T, error), dupVerb string,
	show func(T) (string, float64), a sweptAxis, apply func(l, first *Link, v T)) []sweptAxis {
	if raw == nil {
		return nil
	}
	key := "sweep." + string(axis)
	p.failIf(len(raw) == 0, key, "empty; list values or remove the key")
	var vals []T
	for i, v := range raw {
		k := fmt.Sprintf("%s[%d]", key, i)
		x := parseOr(p, k, v, parse)
		if j := slices.Index(vals, x); j >= 0 {
			p.fail(k, dupVerb+" duplicates %s[%d]", x, key, j)
		}
		vals = append(vals, x)
		text, value := show(x)
		a.params = append(a.params, Param{axis, text, value})
	}
	a.axis = axis
	if apply != nil {
		a.apply = func(paths []*Link, i int) {
			set := paths
			if a.others != "" {
				set = paths[1:]
			}
			for _, l := range set {
				apply(l, paths[0], vals[i])
			}
		}
	}
	return []sweptAxis{a}
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
		nets = fan(nets, a)
	}

	// A swept value can break what the file's links allow (an RTT below
	// twice the jitter, a ratio that takes a rate out of range): check
	// every network, naming the point. (Without network axes the one
	// network is the file's, whose links passed these checks already.)
	for _, n := range nets {
		for i := range n.Topology.Links {
			p.checkShaping("sweep", &n.Topology.Links[i], "at "+n.String()+": ")
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

// fan multiplies the partial points vs by the values of axis a: a network
// axis sets a deep copy of each one's testbed (nodes and links hold no
// references), an option axis a copy of its transport, labelled with the
// value.
func fan(vs []Point, a sweptAxis) []Point {
	out := make([]Point, 0, len(vs)*len(a.params))
	for _, v := range vs {
		for i, q := range a.params {
			w := Point{Params: append(slices.Clone(v.Params), q), Transport: cloneTransport(v.Transport)}
			if b := v.Topology; a.apply != nil {
				w.Topology = &Topology{Nodes: slices.Clone(b.Nodes), Links: slices.Clone(b.Links), Media: slices.Clone(b.Media)}
				a.apply(w.Topology.Paths(), i)
			} else {
				a.set(&w.Transport, q.Text)
				w.Transport.Label += " " + q.Text
			}
			out = append(out, w)
		}
	}
	return out
}

func cloneTransport(t Transport) Transport {
	t.Weights, t.Priorities = slices.Clone(t.Weights), slices.Clone(t.Priorities)
	return t
}

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// Default is the scenario of an empty file: every default applied to the
// built-in testbed.
func Default() *Scenario {
	s, err := Parse("default", nil)
	if err != nil {
		panic(fmt.Sprintf("scenario: the built-in default does not parse: %v", err))
	}
	return s
}
