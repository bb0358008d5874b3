package mesh

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"

	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/table"
	"github.com/braid-vpn/braid/route"
)

// cases are the result's cases in table order (Experiment.Cases).
func (r *Result) cases() []Case {
	return Experiment{Channels: r.Channels, Algorithms: r.Algorithms}.Cases()
}

// row finds the summary row of case name at hops.
func (r *Result) row(name string, hops int) *SummaryRow {
	if i := slices.IndexFunc(r.Summary, func(s SummaryRow) bool { return s.Case == name && s.Hops == hops }); i >= 0 {
		return &r.Summary[i]
	}
	return nil
}

// format is how the mesh lab's tables write numbers: "—" for one it has
// not got, and a mean alone where one download leaves no interval.
var format = table.Style{NaN: "—", None: "—", BareMean: true}

func hopsLabel(h int) string {
	if h == 0 {
		return "all"
	}
	return strconv.Itoa(h)
}

// hopTable is one row per shortest-path hop count, the header first: the
// topologies with it and each case's cell (TCP's only withTCP).
func (r *Result) hopTable(withTCP bool, cell func(*SummaryRow) string) [][]string {
	rows := [][]string{{"shortest path hops", "topologies"}}
	for _, c := range r.cases() {
		if withTCP || c != TCP {
			rows[0] = append(rows[0], c.Label())
		}
	}
	for _, h := range hopCounts(r.Runs) {
		topos := 0
		row := []string{hopsLabel(h), ""}
		for _, c := range r.cases() {
			s := r.row(c.Name(), h)
			if s != nil {
				topos = max(topos, s.Topologies)
			}
			switch {
			case c == TCP && !withTCP:
			case s == nil:
				row = append(row, "—")
			default:
				row = append(row, cell(s))
			}
		}
		row[1] = strconv.Itoa(topos)
		rows = append(rows, row)
	}
	return rows
}

// topologyTable is one row per topology: its pairs' hop counts and each
// case's mean goodput.
func (r *Result) topologyTable() [][]string {
	cases := r.cases()
	head := []string{"topology", "shortest hops"}
	for _, a := range r.Algorithms {
		head = append(head, strings.ToUpper(string(a))+" pair hops")
	}
	for _, c := range cases {
		head = append(head, c.Name())
	}
	out := [][]string{head}
	for _, t := range r.Runs {
		row := []string{strconv.Itoa(t.Index), strconv.Itoa(t.ShortestHops)}
		for _, a := range r.Algorithms {
			cell := "—"
			for _, p := range t.Pairs {
				if p.Algo == a && len(p.Hops) == 2 {
					cell = fmt.Sprintf("%d + %d", p.Hops[0], p.Hops[1])
				}
			}
			row = append(row, cell)
		}
		for _, c := range cases {
			cell := "—"
			if m := t.measurement(c.Name()); m != nil && m.Goodput.N > 0 {
				cell = format.Num(m.Goodput.Mean, 2)
				if m.Error != "" {
					cell += "*"
				}
			}
			row = append(row, cell)
		}
		out = append(out, row)
	}
	return out
}

// Document is the result in the lab's one shape: goodput (Mbit/s, mean ±
// 95% CI over downloads) and the ratio to TCP by shortest-path hop count,
// one row per topology, the measurements that failed; written as
// results.json, samples.csv, summary.csv, tables.md and the plots.
func (r *Result) Document() *report.Doc {
	what := fmt.Sprintf("%d topologies of %d nodes (seed %d)", len(r.Runs), r.Nodes, r.Seed)
	if r.GraphFile != "" {
		what = "graph " + r.GraphFile
	}
	d := &report.Doc{
		Lead: fmt.Sprintf("%s; %d × %s per case, %s; %s Mbit/s per channel, %s–%s ms per hop, medium queue %d frames.",
			what, r.Reps, table.Size(r.Size, " "), r.CC, format.Num(float64(r.RateBps)/1e6, 1), format.Num(r.MinDelayMs, 1), format.Num(r.MaxDelayMs, 1), r.QueuePackets),
		Tables: []report.Table{
			{Caption: "Goodput in Mbit/s, mean ± 95% CI over all downloads of the topologies with that shortest-path hop count",
				Rows: r.hopTable(true, func(s *SummaryRow) string { return format.MeanCI(&s.Goodput, 2) })},
			{Caption: "Goodput ÷ TCP's on the same topology, mean ± 95% CI over topologies",
				Rows: r.hopTable(false, func(s *SummaryRow) string { return format.MeanCI(s.Ratio, 2) })},
			{Caption: "Per topology (mean goodput in Mbit/s; * = some downloads failed)", Rows: r.topologyTable()},
		},
		// Every column but the first is a number.
		MD:           table.Markdown{First: "---", Others: "--:"},
		MarkdownFile: "tables.md",
		JSON:         r,
		CSV:          r.csv(),
		Plot:         func(dir string) ([]string, error) { return Plot(r, dir) },
	}
	for _, t := range r.Runs {
		for _, m := range t.Measurements {
			if m.Error != "" {
				d.Notes = append(d.Notes, fmt.Sprintf("error: topology %d %s: %s", t.Index, m.Case, m.Error))
			}
		}
	}
	return d
}

// csv is every sample (samples.csv) and the summary (summary.csv).
func (r *Result) csv() []report.CSV {
	samples := [][]string{{"topology", "candidate", "shortest_hops", "case", "path_hops", "rep", "goodput_mbps", "seconds", "bytes", "max_stall_ms", "retransmits", "path_bytes"}}
	for _, t := range r.Runs {
		for _, m := range t.Measurements {
			for _, s := range m.Samples {
				samples = append(samples, []string{
					strconv.Itoa(t.Index), strconv.Itoa(t.Candidate), strconv.Itoa(t.ShortestHops), m.Case,
					join(m.Hops), strconv.Itoa(s.Rep + 1), table.CSV.Num(s.GoodputMbps, 4), table.CSV.Num(s.Seconds, 4),
					strconv.FormatInt(s.Bytes, 10), table.CSV.Num(s.MaxStallMs, 1), strconv.FormatInt(s.Retransmits, 10),
					join(s.PathBytes),
				})
			}
		}
	}
	summary := [][]string{{"case", "shortest_hops", "topologies", "n", "mean_mbps", "ci95_mbps", "min_mbps", "max_mbps", "ratio_mean", "ratio_ci95"}}
	for _, s := range r.Summary {
		rm, rc := "", ""
		if s.Ratio != nil {
			rm, rc = table.CSV.Num(s.Ratio.Mean, 4), table.CSV.Num(s.Ratio.CI95, 4)
		}
		summary = append(summary, []string{s.Case, hopsLabel(s.Hops), strconv.Itoa(s.Topologies), strconv.Itoa(s.Goodput.N),
			table.CSV.Num(s.Goodput.Mean, 4), table.CSV.Num(s.Goodput.CI95, 4), table.CSV.Num(s.Goodput.Min, 4), table.CSV.Num(s.Goodput.Max, 4), rm, rc})
	}
	return []report.CSV{{Name: "samples.csv", Rows: samples}, {Name: "summary.csv", Rows: summary}}
}

// join writes numbers as "1+2+3".
func join[T int | uint64](xs []T) string {
	return strings.ReplaceAll(strings.Trim(fmt.Sprint(xs), "[]"), " ", "+")
}

// Plot draws the figures as PNG and SVG in the lab's house style (that of
// lab/report): goodput against the shortest path's hop count, one series
// per case with its 95% interval (dashed on a single channel), offset a
// little sideways so the bars do not hide each other. There is one figure
// per radio model of TCP and every pair, and with both models the seed's
// Fig. 10: TCP against MPTCP over LD routes on one channel and on two.
func Plot(r *Result, dir string) ([]string, error) {
	hops := slices.DeleteFunc(hopCounts(r.Runs), func(h int) bool { return h == 0 })
	if len(hops) == 0 {
		return nil, nil
	}
	var files []string
	draw := func(stem, title string, cases ...Case) error {
		lf := report.LineFigure{Title: title, XLabel: "hops of the shortest path", YLabel: "goodput (Mbit/s)",
			XMin: float64(hops[0]) - 0.5, XMax: float64(hops[len(hops)-1]) + 0.5}
		for _, h := range hops {
			lf.Ticks = append(lf.Ticks, plot.Tick{Value: float64(h), Label: strconv.Itoa(h)})
		}
		for si, c := range cases {
			var d report.Series
			off := (float64(si) - float64(len(cases)-1)/2) * 0.08
			for _, h := range hops {
				if s := r.row(c.Name(), h); s != nil && s.Goodput.N > 0 {
					d.Add(float64(h)+off, s.Goodput.Mean, s.Goodput.CI95)
				}
			}
			lf.Labels, lf.Series = append(lf.Labels, c.Label()), append(lf.Series, d)
			lf.Dashed = append(lf.Dashed, c != TCP && c.Channels == SingleChannel)
		}
		p, err := lf.Plot()
		if err != nil {
			return err
		}
		saved, err := report.SavePlot(p, dir, stem)
		files = append(files, saved...)
		if err != nil {
			return fmt.Errorf("mesh: %w", err)
		}
		return nil
	}
	for _, ch := range r.Channels {
		cases := Experiment{Channels: []Channels{ch}, Algorithms: r.Algorithms}.Cases()
		title := "Goodput vs shortest-path hops, single channel"
		if ch == TwoChannels {
			title = "Goodput vs shortest-path hops, two channels"
		}
		if err := draw("mesh-goodput-"+ch.String(), title, cases...); err != nil {
			return files, err
		}
	}
	if len(r.Channels) == 2 && slices.Contains(r.Algorithms, route.LD) {
		err := draw("mesh-goodput-ld", "TCP vs braid over LD route pairs (seed's Fig. 10)",
			TCP, Case{Algo: route.LD, Channels: SingleChannel}, Case{Algo: route.LD, Channels: TwoChannels})
		return files, err
	}
	return files, nil
}
