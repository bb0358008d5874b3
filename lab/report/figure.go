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
	// base and key are the scenario and the axes parts of the file names
	// of the figure's plots (stemOf).
	base, key, title string
	// x is the x axis; "" when the run has no sweep axis (a bar chart).
	x string
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
	var x string
	if len(sweep) > 0 {
		x, sweep = sweep[0], sweep[1:]
	}
	var figs []figure
	index := map[string]int{} // by the other axes' texts
	used := map[string]bool{} // keys
	for i := range run.Points {
		p := &run.Points[i]
		var texts, title []string
		key := ""
		if x != "" {
			key = "-vs-" + sanitize(x)
		}
		for _, a := range sweep {
			q, _ := p.Param(a)
			texts = append(texts, q.Text)
			key += "-" + sanitize(a) + "-" + sanitize(q.Text)
			title = append(title, a+" = "+q.Text)
		}
		fi, ok := index[strings.Join(texts, "\x00")]
		if !ok {
			if used[key] {
				key += "-" + strconv.Itoa(len(figs)+1)
			}
			used[key] = true
			fi, index[strings.Join(texts, "\x00")] = len(figs), len(figs)
			f := figure{base: cmp.Or(sanitize(run.Scenario), "run"), key: key, title: run.Scenario, x: x}
			if len(title) > 0 {
				f.title += ": " + strings.Join(title, ", ")
			}
			figs = append(figs, f)
		}
		f := &figs[fi]
		f.points = append(f.points, p)
		if !slices.Contains(f.series, p.Label) {
			f.series = append(f.series, p.Label)
		}
	}
	return figs
}

// stemOf is the file name, without extension, of the figure's plot of m.
func (f *figure) stemOf(m pointColumn) string { return f.base + "-" + m.name + f.key }

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
