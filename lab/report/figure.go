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
	var texts []string
	var vals []float64
	for i := range run.Points {
		q, ok := run.Points[i].Param(axis)
		if !ok || slices.Contains(texts, q.Text) {
			continue
		}
		texts = append(texts, q.Text)
		vals = append(vals, q.Value)
	}
	numeric := numericAxes[axis]
	for i, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) || slices.Contains(vals[:i], v) {
			numeric = false
		}
	}
	s := xScale{numeric: numeric}
	if !numeric {
		s.texts = texts
		for i := range texts {
			s.pos = append(s.pos, float64(i))
		}
		return s
	}
	idx := make([]int, len(texts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case vals[a] < vals[b]:
			return -1
		case vals[a] > vals[b]:
			return 1
		}
		return 0
	})
	for _, i := range idx {
		s.texts = append(s.texts, texts[i])
		s.pos = append(s.pos, vals[i])
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
	dash := false
	for _, r := range strings.ToLower(s) {
		var part string
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_':
			part = string(r)
		case r == '%':
			part = "pct"
		case r == ':':
			part = "to"
		case r == '/':
			part = "-per-"
		default:
			part = "-"
		}
		for _, c := range part {
			if c == '-' {
				if dash || b.Len() == 0 {
					continue
				}
				dash = true
			} else {
				dash = false
			}
			b.WriteRune(c)
		}
	}
	return strings.TrimRight(b.String(), "-")
}
