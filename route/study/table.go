package study

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// table is a titled grid of cells, rendered as aligned text or Markdown.
type table struct {
	title  string
	header []string
	rows   [][]string
	note   string
}

func pct(n, of int) string {
	if of == 0 {
		return "–"
	}
	return strconv.FormatFloat(100*float64(n)/float64(of), 'f', 1, 64)
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// Tables returns the study's tables: Fig 7, what greedy misses, Fig 8,
// Fig 9 and the pair lengths.
func tables(res *Result) []table {
	var ts []table
	if len(res.Feasibility) > 0 {
		t := table{
			title:  fmt.Sprintf("Fig 7 — topologies with ≥ 2 disjoint paths, %% of %d connected layouts per node count", res.Config.Runs),
			header: []string{"nodes", "connected %"},
			note:   "connected % = connected layouts ÷ layouts drawn (the rest were redrawn).",
		}
		for _, a := range CountSeries {
			t.header = append(t.header, string(a))
		}
		for _, f := range res.Feasibility {
			row := []string{strconv.Itoa(f.Nodes), strconv.FormatFloat(100*float64(f.Topologies)/float64(max(f.Layouts, 1)), 'g', 3, 64)}
			for _, a := range CountSeries {
				row = append(row, pct(f.Multipath[a], f.Topologies))
			}
			t.rows = append(t.rows, row)
		}
		ts = append(ts, t)

		m := table{
			title:  "Mean number of paths, and how often greedy deletion misses paths that exist (%)",
			header: []string{"nodes"},
			note:   "shortest hops: mean hop count of the shortest path. LD<max: greedy LD found fewer paths than max-link; ND<max, ZD<max: fewer than max-node. trapped: the greedy algorithm found one path although two disjoint ones of its kind exist (for ZD: two node-disjoint ones).",
		}
		for _, a := range CountSeries {
			m.header = append(m.header, "mean "+string(a))
		}
		m.header = append(m.header, "LD<max", "ND<max", "ZD<max", "LD trapped", "ND trapped", "ZD trapped")
		m.header = append([]string{"nodes", "shortest hops"}, m.header[1:]...)
		for _, f := range res.Feasibility {
			row := []string{strconv.Itoa(f.Nodes), num(f.MeanShortestHops)}
			for _, a := range CountSeries {
				row = append(row, num(f.MeanPaths[a]))
			}
			for _, a := range CountSeries[:3] {
				row = append(row, pct(f.Missed[a], f.Topologies))
			}
			for _, a := range CountSeries[:3] {
				row = append(row, pct(f.Trapped[a], f.Topologies))
			}
			m.rows = append(m.rows, row)
		}
		ts = append(ts, m)
	}
	r := res.Routes
	if r == nil {
		return ts
	}
	maxK := 0
	for _, a := range CountSeries {
		maxK = max(maxK, len(r.Counts[a])-1)
	}
	t := table{
		title: fmt.Sprintf("Fig 8 — number of paths found, %% of %d %d-node topologies where LD, ND and ZD all find ≥ 2", r.Topologies, r.Nodes),
		note: fmt.Sprintf("%d connected layouts examined to find them (%s%% qualified); %d layouts drawn.",
			r.Candidates, pct(r.Topologies, r.Candidates), r.Layouts),
		header: []string{"algorithm"},
	}
	for k := 2; k <= maxK; k++ {
		t.header = append(t.header, strconv.Itoa(k))
	}
	t.header = append(t.header, "mean")
	for _, a := range CountSeries {
		row := []string{string(a)}
		h := r.Counts[a]
		sum := 0
		for k := 2; k <= maxK; k++ {
			c := 0
			if k < len(h) {
				c = h[k]
			}
			sum += k * c
			row = append(row, pct(c, r.Topologies))
		}
		row = append(row, num(float64(sum)/float64(max(r.Topologies, 1))))
		t.rows = append(t.rows, row)
	}
	ts = append(ts, t)

	h := table{
		title:  "Fig 9 — hop counts of the two preferred paths on the same topologies",
		header: []string{"path", "mean", "min", "median", "p90", "max"},
		note:   "shortest: the min-hop path, every greedy algorithm's first. x-2nd: the second path greedy x found. opt-*-1st/2nd: the shorter and the longer path of the pair with the fewest hops in total.",
	}
	for _, name := range HopSeries {
		st := histStats(r.Hops[name])
		h.rows = append(h.rows, []string{name, num(st.mean), strconv.Itoa(st.min), strconv.Itoa(st.median), strconv.Itoa(st.p90), strconv.Itoa(st.max)})
	}
	ts = append(ts, h)

	p := table{
		title:  "Total hops of the two paths: greedy pair against the cheapest pair of the same kind",
		header: []string{"greedy", "greedy pair", "cheapest pair", "cheapest", "cheapest is shorter %", "cheapest gives up the shortest path %"},
	}
	for _, c := range []struct{ greedy, opt string }{{"ld", "opt-link"}, {"nd", "opt-node"}, {"zd", "opt-node"}} {
		p.rows = append(p.rows, []string{c.greedy, num(r.PairHops[c.greedy]), num(r.PairHops[c.opt]), c.opt,
			pct(r.ShorterPair[c.greedy], r.Topologies), pct(r.DetourFirst[c.opt], r.Topologies)})
	}
	ts = append(ts, p)
	return ts
}

type stats struct {
	mean                  float64
	min, median, p90, max int
}

// histStats summarises a histogram h[v] = count of value v. The median
// and p90 are the smallest values with at least half and 90% of the
// samples at or below them.
func histStats(h []int) stats {
	n, sum := 0, 0
	for v, c := range h {
		n += c
		sum += v * c
	}
	if n == 0 {
		return stats{}
	}
	st := stats{mean: float64(sum) / float64(n), min: -1, median: -1, p90: -1}
	cum := 0
	for v, c := range h {
		if c == 0 {
			continue
		}
		if st.min < 0 {
			st.min = v
		}
		cum += c
		if st.median < 0 && 2*cum >= n {
			st.median = v
		}
		if st.p90 < 0 && 10*cum >= 9*n {
			st.p90 = v
		}
		st.max = v
	}
	return st
}

// WriteText writes the study's tables as aligned text.
func WriteText(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i, t := range tables(res) {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw, t.title)
		fmt.Fprintln(tw, strings.Join(t.header, "\t")+"\t")
		for _, r := range t.rows {
			fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if t.note != "" {
			if _, err := fmt.Fprintln(w, t.note); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteMarkdown writes the study's tables as Markdown.
func WriteMarkdown(w io.Writer, res *Result) error {
	var b strings.Builder
	for i, t := range tables(res) {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "**%s**\n\n", t.title)
		b.WriteString("| " + strings.Join(t.header, " | ") + " |\n")
		b.WriteString("|" + strings.Repeat("---:|", len(t.header)) + "\n")
		for _, r := range t.rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
		if t.note != "" {
			fmt.Fprintf(&b, "\n%s\n", t.note)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
