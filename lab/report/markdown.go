package report

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/table"
)

// Markdown writes the report: the setup, then per figure its tables and
// plots. plots are file names relative to the report's directory (what
// Plot drew); each figure embeds its PNG and links its SVG.
func Markdown(w io.Writer, run *results.Run, plots []string) error {
	bw := bufio.NewWriter(w)
	name := cmp.Or(run.Scenario, "(unnamed)")
	fmt.Fprintf(bw, "# braid lab: %s\n\n", mdText(name))
	if run.Description != "" {
		fmt.Fprintf(bw, "%s\n\n", mdText(run.Description))
	}
	for _, w := range run.Warnings {
		fmt.Fprintf(bw, "> **⚠ WARNING:** %s\n\n", mdText(w))
	}
	fmt.Fprintf(bw, "## Setup\n\n| | |\n|---|---|\n")
	scen := mdText(name)
	if run.File != "" {
		scen += " (`" + strings.ReplaceAll(run.File, "`", "'") + "`)"
	}
	row := func(k, v string) { fmt.Fprintf(bw, "| %s | %s |\n", k, v) }
	row("Scenario", scen)
	row("Download size", sizeString(run.Size))
	row("Repetitions", strconv.Itoa(run.Reps)+" per point")
	row("Emulator", mdText(cmp.Or(run.Emulator, "unknown")))
	row("Host", mdText(cmp.Or(run.Host, "unknown")))
	row("Date", dateRange(run.Started, run.Finished))
	provenanceRows(row, run)
	pts := strconv.Itoa(len(run.Points))
	if failed := len(slices.DeleteFunc(slices.Clone(run.Points), func(p results.Point) bool { return p.Error == "" })); failed > 0 {
		pts += fmt.Sprintf(" (%d failed)", failed)
	}
	row("Points", pts)
	if len(run.Only) > 0 {
		row("Subset", "`--only "+strings.ReplaceAll(strings.Join(run.Only, "` `--only "), "|", "\\|")+"`")
	}
	if rt := run.Realtime; rt != nil {
		row("Workload", fmt.Sprintf("real-time UDP flow, web server → client: %g Mbit/s of %d-byte payloads for %g s (%d packets), deadline %g ms one-way",
			rt.RateMbps, rt.Size, rt.Seconds, rt.Packets, rt.DeadlineMs))
	}
	if run.LatencyIntervalMs > 0 {
		row("Latency probes", fmt.Sprintf("UDP echo every %g ms through the transport; idle baseline %g ms before each download", run.LatencyIntervalMs, run.LatencyIdleMs))
	}
	if run.ECN {
		row("ECN", "requested by the TCP endpoints (net.ipv4.tcp_ecn = 1)")
	}
	if run.CompetingTransport == scenario.CompetingBraid {
		row("Competing downloads", "through a second braid client of the same server (its own key, tunnel address and TUN device) over the measured transport's paths")
	}
	row("Sweep axes", cmp.Or(mdText(strings.Join(sweepAxes(run), ", ")), "none"))
	if len(run.Parts) > 0 {
		partsTable(bw, run.Parts)
	}
	fmt.Fprintf(bw, "\nGoodput is the download size divided by its duration, in Mbit/s; "+
		"each cell is the mean of the point's downloads ± the half-width of its 95%% "+
		"Student-t confidence interval (n/a with fewer than two downloads). "+
		"Path shares are the fraction of the download's bytes each path carried.\n")

	stem := func(p string) string { return strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)) }
	byStem := map[string][]string{}
	for _, p := range plots {
		byStem[stem(p)] = append(byStem[stem(p)], filepath.ToSlash(p))
	}
	if slices.ContainsFunc(run.Points, func(p results.Point) bool { return p.Jain != nil }) {
		fmt.Fprintf(bw, "\nThe Jain index is Jain's fairness index of the two braid clients' goodputs a (measured) and b (competing) "+
			"over each download, (a+b)² / (2(a²+b²)): 1 is an even split of the bottleneck, 0.5 one client taking all of it.\n")
	}
	lat, rt, rec := pointColumns(run)
	if lat != nil {
		fmt.Fprintf(bw, "\nAdded delay is a latency probe's RTT minus the median RTT of the probes on the idle transport "+
			"just before the download; each download gives its p50, p95 and p99, and a cell is their mean over the downloads ± the 95%% interval.\n")
	}
	if rt != nil {
		fmt.Fprintf(bw, "\nReal-time figures are per flow (mean ± 95%% interval over the repetitions): loss of the packets sent, one-way delay (OWD) percentiles of those delivered, "+
			"packets later than the deadline, packets lost or late, and the frames on the paths (both directions, Ethernet headers included) per delivered payload byte; "+
			"\"extra bytes\" compares that with the same transport with recovery = \"off\".\n")
	}
	if rec != nil {
		fmt.Fprintf(bw, "\nBulk recovery overhead is what braid's loss recovery sent during a download, read from the server daemon's (the sender's) "+
			"status just before and just after it: retransmitted and repair bytes over all paths, in %% of the bytes downloaded; "+
			"path loss is the packets the server declared lost of those it sent. The target is overhead ≤ 2 × path loss + 5 %%; "+
			"\"within bound\" counts the downloads that met it. Only braid transports with recovery on are listed.\n")
	}
	ev, _ := eventColumns(run)
	if ev != nil {
		fmt.Fprintf(bw, "\nPath events change the paths at the given times after each download starts. "+
			"A reaction is how long after an event the paths it concerns had carried %d bytes towards the client: "+
			"the event's own path after restore, up and readdress, the other paths after cut and down; "+
			"\"reacted\" counts the downloads where that happened of those where the event fired. "+
			"Rates are what each path delivered towards the client between events, in kB/s, from the link emulators.\n", results.ReactBytes)
	}
	paths := sharePaths(run)
	for _, f := range figures(run) {
		show := func(m pointColumn) { embed(bw, f.title, byStem[f.stemOf(m)]) }
		// Each table starts with the x value (if the figure has an x axis) and the transport.
		lead := []column{{"transport", func(p *results.Point) string { return mdText(p.Label) }}}
		if f.x != "" {
			lead = slices.Insert(lead, 0, column{mdText(f.x), func(p *results.Point) string { q, _ := p.Param(f.x); return mdText(q.Text) }})
		}
		// A part's table, where the run has the part.
		table := func(caption string, points []results.Point, part []pointColumn, extra ...column) {
			if part != nil && len(points) > 0 {
				fmt.Fprintf(bw, "\n%s\n\n", caption)
				cols := slices.Clone(lead)
				for _, c := range part {
					cols = append(cols, column{c.title, func(p *results.Point) string { return mdFigure.MeanCI(c.of(p), 2) }})
				}
				mdTable.Write(bw, pointRows(points, append(cols, extra...)))
			}
		}
		fmt.Fprintf(bw, "\n## %s\n\n", mdText(f.title))
		mdTable.Write(bw, pointRows(f.points, slices.Concat(lead, goodputColumns(f.points, paths, run.CompetingTransport))))
		show(goodput)
		table("Latency under load:", f.points, lat)
		show(addedDelay)
		table("Real-time flow:", f.points, rt, column{"extra bytes vs recovery off", func(p *results.Point) string {
			if x := extraBytesPct(run, p); !math.IsNaN(x) {
				return strconv.FormatFloat(x, 'f', 1, 64) + "%"
			}
			return "–"
		}})
		show(realtimeMiss)
		table("Path events:", f.points, ev, column{"reacted", reacted})
		recovered := slices.DeleteFunc(slices.Clone(f.points), func(p results.Point) bool { return p.BulkRecovery == nil })
		table("Bulk recovery overhead:", recovered, rec, column{"within bound", func(p *results.Point) string {
			return fmt.Sprintf("%d of %d", p.BulkRecovery.WithinBound, p.BulkRecovery.Overhead.N)
		}})
	}
	return bw.Flush()
}

// provenanceRows are the setup rows that tell how to repeat the run: seed,
// shard, command, commit and the machine's load (absent from files written
// before they were recorded).
func provenanceRows(row func(k, v string), run *results.Run) {
	if run.Seed != 0 {
		v := fmt.Sprintf("%d (`--seed %d`): ", run.Seed, run.Seed)
		if run.Emulator == "netem" {
			v += "netem draws its loss from the kernel's random numbers, so the seed does not reproduce it (use `--emulator userspace`)"
		} else {
			v += "the emulators' loss and jitter in repetition r of a network draw from (seed, network, r), the same for every transport"
		}
		row("Seed", v)
	}
	if run.Shard != "" {
		list, n, _ := strings.Cut(run.Shard, "/")
		if strings.Contains(list, ",") {
			row("Shards", fmt.Sprintf("%s of %s merged: the others' points are missing", mdText(list), mdText(n)))
		} else {
			row("Shard", fmt.Sprintf("`--shard %s`: the points whose index is %s mod %s", mdText(run.Shard), mdText(list), mdText(n)))
		}
	}
	if len(run.Command) > 0 {
		row("Command", mdCommand(run.Command))
	}
	if run.Commit != "" {
		row("Commit", commitString(run.Commit, run.CommitFrom, run.Dirty))
	}
	if run.CPUs > 0 || run.LoadStart > 0 || run.LoadMax > 0 {
		v := fmt.Sprintf("1-minute load average %.2f at the start, at most %.2f while it ran (the run's own processes included)", run.LoadStart, run.LoadMax)
		if run.CPUs > 0 {
			v += fmt.Sprintf("; %d CPUs", run.CPUs)
		}
		row("Machine load", v)
	}
}

// partsTable lists the shards a merged run was made from.
func partsTable(w io.Writer, parts []results.Part) {
	rows := [][]string{{"Shard", "Host", "Points", "Date", "Load at start / max", "CPUs", "Commit", "Command"}}
	for _, p := range parts {
		rows = append(rows, []string{mdText(cmp.Or(p.Shard, "unknown")), mdText(cmp.Or(p.Host, "unknown")), strconv.Itoa(p.Points),
			dateRange(p.Started, p.Finished), fmt.Sprintf("%.2f / %.2f", p.LoadStart, p.LoadMax), strconv.Itoa(p.CPUs),
			commitString(p.Commit, p.CommitFrom, p.Dirty), mdCommand(p.Command)})
	}
	fmt.Fprintf(w, "\n### Shards\n\n")
	mdTable.Write(w, rows)
}

// commitString is "unknown" for no commit.
func commitString(commit, from string, dirty bool) string {
	if commit == "" {
		return "unknown"
	}
	v := mdCode(commit)
	if dirty {
		v += " with uncommitted changes"
	}
	return v + map[string]string{
		"build": " (from the binary's build information)",
		"git":   " (git rev-parse HEAD in the working directory)",
	}[from]
}

// mdCode is s as a code span in a table cell.
func mdCode(s string) string {
	return "`" + strings.NewReplacer("`", "'", "|", "\\|", "\n", " ").Replace(s) + "`"
}

// mdCommand is args, as a shell would need them typed, as a code span; ""
// for none.
func mdCommand(args []string) string {
	if len(args) == 0 {
		return ""
	}
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return mdCode(strings.Join(out, " "))
}

// goodputColumns are a figure's goodput table: mean ± 95% CI in Mbit/s
// (or the point's error), n, median, the competing flows' goodput if any
// point has one (run through competitor, Run.CompetingTransport), Jain's
// index if any point has it, and the path shares if any point has them.
func goodputColumns(points []results.Point, paths []string, competitor string) []column {
	cols := []column{
		{"goodput (Mbit/s)", func(p *results.Point) string {
			if p.Error != "" {
				return "failed: " + mdText(p.Error)
			}
			return mdNum.MeanCI(summaryOf(p), mbpsDecimals)
		}},
		{"n", func(p *results.Point) string { return strconv.Itoa(summaryOf(p).N) }},
		{"median", func(p *results.Point) string { return mdNum.Num(summaryOf(p).Median, mbpsDecimals) }},
	}
	if slices.ContainsFunc(points, func(p results.Point) bool { return p.Competing != nil }) {
		head := "competing TCP (Mbit/s)"
		if competitor == scenario.CompetingBraid {
			head = "competing braid client (Mbit/s)"
		}
		cols = append(cols, column{head, func(p *results.Point) string {
			if p.Competing == nil {
				return "–"
			}
			return mdNum.MeanCI(p.Competing, mbpsDecimals)
		}})
	}
	if slices.ContainsFunc(points, func(p results.Point) bool { return p.Jain != nil }) {
		cols = append(cols, column{"Jain index", func(p *results.Point) string {
			if p.Jain == nil {
				return "–"
			}
			return mdNum.MeanCI(p.Jain, 3) // the bar is 0.95
		}})
	}
	if slices.ContainsFunc(points, func(p results.Point) bool { return p.Offered != nil }) {
		cols = append(cols, column{"offered (Mbit/s)", func(p *results.Point) string {
			if p.Offered == nil {
				return "–"
			}
			return mdNum.MeanCI(p.Offered, mbpsDecimals)
		}}, column{"of offered", func(p *results.Point) string {
			if p.OfferedUse == nil {
				return "–"
			}
			return mdNum.MeanCI(p.OfferedUse, 2)
		}})
	}
	if len(paths) > 0 {
		cols = append(cols, column{"path shares", func(p *results.Point) string { return shares(p, paths) }})
	}
	return cols
}

// embed shows a figure's first PNG and links its other files, if any.
func embed(w io.Writer, title string, files []string) {
	if len(files) == 0 {
		return
	}
	fmt.Fprintln(w)
	png := slices.IndexFunc(files, func(f string) bool { return strings.EqualFold(path.Ext(f), ".png") })
	if png >= 0 {
		fmt.Fprintf(w, "![%s](%s)\n", mdText(title), mdLink(files[png]))
	}
	for i, f := range files {
		if i != png {
			fmt.Fprintf(w, "\n[%s](%s)\n", strings.ToUpper(strings.TrimPrefix(path.Ext(f), ".")), mdLink(f))
		}
	}
}

// shares writes "primary 62.5%, secondary 37.5%" in path name order;
// "–" for a point without per-path counters.
func shares(p *results.Point, paths []string) string {
	var parts []string
	for _, name := range paths {
		v, ok := p.PathShares[name]
		if !ok || math.IsNaN(v) {
			continue
		}
		parts = append(parts, mdText(name)+" "+strconv.FormatFloat(100*v, 'f', 1, 64)+"%")
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

// mbpsDecimals is two: 10 kbit/s is below anything the lab's repetitions
// can resolve on a 10 Mbit/s path.
const mbpsDecimals = 2

// The report's tables write an undefined number (a CI of one download) as
// "n/a". A latency, real-time, recovery or event figure that a point has
// not got at all is "–" (mdFigure), but a goodput without downloads keeps
// the "n/a ± n/a" its tables have always shown (mdNum).
var (
	mdNum    = table.Style{NaN: "n/a"}
	mdFigure = table.Style{NaN: "n/a", None: "–"}
)

func dateRange(start, end time.Time) string {
	const layout = "2006-01-02 15:04:05 MST"
	if start.IsZero() {
		return "unknown"
	}
	s := start.UTC().Format(layout)
	if !end.IsZero() && !end.Before(start) {
		s += " to " + end.UTC().Format(layout) + " (" + end.Sub(start).Round(time.Second).String() + ")"
	}
	return s
}

// mdTable is the report's tables: cells escaped by mdText, every column
// left-aligned.
var mdTable = table.Markdown{First: "---", Others: "---", Escaped: true}

// mdText escapes what would break a table cell or start markup.
func mdText(s string) string {
	r := strings.NewReplacer("\\", "\\\\", "|", "\\|", "\n", " ", "\r", " ",
		"*", "\\*", "_", "\\_", "`", "\\`", "[", "\\[", "]", "\\]", "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}

// mdLink escapes a relative file name for a Markdown link target.
func mdLink(s string) string {
	return strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29").Replace(s)
}
