package report

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/lab/results"
)

// figure is one plot and its table: the points that share every sweep
// value except the x axis's.
type figure struct {
	// stem is the goodput plot's file name without extension; stemOf
	// names the other metrics' plots of the same figure.
	stem  string
	base  string // the scenario part of the stems
	key   string // the axes part of the stems
	title string
	// x is the x axis; "" when the run has no sweep axis (a bar chart).
	x     string
	fixed []results.Param
	// points are in run order, failed ones included (the table lists
	// them; the plot skips them).
	points []*results.Point
	// series are the transport labels in order of first appearance.
	series []string
}

// xScale places a sweep axis's values on the x axis.
type xScale struct {
	// numeric: positions are Param.Value; otherwise categories at 0, 1, …
	// in order of first appearance.
	numeric bool
	texts   []string  // distinct texts, in position order
	pos     []float64 // their positions
}

func (s *xScale) position(text string) (float64, bool) {
	i := slices.Index(s.texts, text)
	if i < 0 {
		return 0, false
	}
	return s.pos[i], true
}

// scaleFor builds axis's scale over the whole run, so that every figure of
// a campaign has the same ticks. An axis is numeric only if it is a known
// quantity and no two of its texts share a value (a uniform and a
// Gilbert-Elliott loss of the same mean would otherwise be drawn on top of
// each other as if they were the same setting).
func scaleFor(run *results.Run, axis string) xScale {
	type tick struct {
		text string
		val  float64
	}
	var ticks []tick
	for i := range run.Points {
		q, ok := run.Points[i].Param(axis)
		if ok && !slices.ContainsFunc(ticks, func(t tick) bool { return t.text == q.Text }) {
			ticks = append(ticks, tick{q.Text, q.Value})
		}
	}
	_, numeric := axisTitles[axis]
	for i, t := range ticks {
		if math.IsNaN(t.val) || math.IsInf(t.val, 0) || slices.ContainsFunc(ticks[:i], func(u tick) bool { return u.val == t.val }) {
			numeric = false
		}
	}
	if numeric {
		slices.SortStableFunc(ticks, func(a, b tick) int { return cmp.Compare(a.val, b.val) })
	}
	s := xScale{numeric: numeric}
	for i, t := range ticks {
		s.texts = append(s.texts, t.text)
		s.pos = append(s.pos, float64(i))
		if numeric {
			s.pos[i] = t.val
		}
	}
	return s
}

// figures splits the run into figures: x = the first sweep axis, one
// figure per combination of the other sweep axes' values in order of
// first appearance; with no sweep axis, one figure of every point.
func figures(run *results.Run) []figure {
	sweep := sweepAxes(run)
	x := ""
	var rest []string
	if len(sweep) > 0 {
		x, rest = sweep[0], sweep[1:]
	}
	base := sanitize(run.Scenario)
	base = cmp.Or(base, "run")
	var figs []figure
	keys := map[string]int{}
	for i := range run.Points {
		p := &run.Points[i]
		var fixed []results.Param
		var key strings.Builder
		for _, a := range rest {
			q, ok := p.Param(a)
			if !ok {
				q = results.Param{Axis: a}
			}
			fixed = append(fixed, q)
			key.WriteString(q.Text)
			key.WriteByte(0)
		}
		fi, ok := keys[key.String()]
		if !ok {
			fi = len(figs)
			keys[key.String()] = fi
			figs = append(figs, figure{x: x, fixed: fixed})
		}
		f := &figs[fi]
		f.points = append(f.points, p)
		if !slices.Contains(f.series, p.Label) {
			f.series = append(f.series, p.Label)
		}
	}
	used := map[string]bool{}
	for i := range figs {
		f := &figs[i]
		key := ""
		if f.x != "" {
			key += "-vs-" + sanitize(f.x)
		}
		var title []string
		for _, q := range f.fixed {
			key += "-" + sanitize(q.Axis) + "-" + sanitize(q.Text)
			title = append(title, q.Axis+" = "+q.Text)
		}
		if used[key] {
			key += "-" + strconv.Itoa(i+1)
		}
		used[key] = true
		f.base, f.key = base, key
		f.stem = f.stemOf(goodput)
		f.title = run.Scenario
		if len(title) > 0 {
			f.title += ": " + strings.Join(title, ", ")
		}
	}
	return figs
}

// stemOf is the file name, without extension, of the figure's plot of m.
func (f *figure) stemOf(m metric) string { return f.base + "-" + m.name + f.key }

// has reports whether any point of the figure has a value of m.
func (f *figure) has(m metric) bool {
	return slices.ContainsFunc(f.points, func(p *results.Point) bool { return measured(p, m) })
}

// sanitize makes a file-name part from scenario text: lower case letters,
// digits, '.', '_' and '-', with "%" spelt "pct" and ":" spelt "to" so that
// "1%" and "1:3" stay readable.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_':
			b.WriteRune(r)
		case r == '%':
			b.WriteString("pct")
		case r == ':':
			b.WriteString("to")
		case r == '/':
			b.WriteString("-per-")
		default:
			b.WriteByte('-')
		}
	}
	return strings.Join(strings.FieldsFunc(b.String(), func(r rune) bool { return r == '-' }), "-")
}
