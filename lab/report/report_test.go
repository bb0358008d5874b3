package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
	"gonum.org/v1/plot"
)

// t95df2 is Student's t 0.975-quantile with 2 degrees of freedom, from
// tables: the interval of three samples is 4.3027·s/√3.
const t95df2 = 4.302652729911275

// samples makes samples with the given goodputs and fixed other fields,
// rep numbering from 1.
func samples(gs ...float64) []results.Sample {
	out := make([]results.Sample, len(gs))
	for i, g := range gs {
		out[i] = results.Sample{Rep: i + 1, GoodputMbps: g, Seconds: 8 / g, Bytes: 1 << 20,
			MaxStallMs: 12.5, Retransmits: int64(i), Reordered: uint64(10 * i), ReorderTimeouts: uint64(i)}
	}
	return out
}

// sweepRun is a 2 RTT ratios × 2 losses × 2 transports campaign. Every
// point has goodputs {g-2, g, g+2} (mean g, s = 2, CI = 4.3027·2/√3 =
// 4.968), with g different per point so the tables can be checked.
func sweepRun() *results.Run {
	run := &results.Run{
		Scenario: "rtt-ratio", File: "lab/scenarios/rtt-ratio.toml",
		Description: "test sweep",
		Started:     time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
		Finished:    time.Date(2026, 3, 1, 10, 30, 5, 0, time.UTC),
		Size:        16 << 20, Reps: 3, Emulator: "userspace", Host: "labhost",
		Axes: []string{"rtt_ratio", "loss", "transport"},
	}
	ratios := []results.Param{{Axis: "rtt_ratio", Text: "1:1", Value: 1}, {Axis: "rtt_ratio", Text: "1:2", Value: 2}}
	losses := []results.Param{{Axis: "loss", Text: "none", Value: 0}, {Axis: "loss", Text: "random 1%", Value: 1}}
	g := 10.0
	for _, r := range ratios {
		for _, l := range losses {
			for _, tr := range []string{"mptcp-direct", "braid"} {
				p := results.Point{
					Index:     len(run.Points),
					Params:    []results.Param{r, l, {Axis: "transport", Text: tr}},
					Transport: tr, Label: tr,
					Samples:    samples(g-2, g, g+2),
					PathShares: map[string]float64{"primary": 0.75, "secondary": 0.25},
				}
				p.Goodput = stats.Summarize([]float64{g - 2, g, g + 2})
				run.Points = append(run.Points, p)
				g += 4
			}
		}
	}
	return run
}

// barRun has no sweep axis: three transports, one of which failed.
func barRun() *results.Run {
	run := &results.Run{Scenario: "demo", Size: 8 << 20, Reps: 3, Emulator: "netem", Axes: []string{"transport"}}
	for i, tr := range []string{"direct", "mptcp-direct", "braid"} {
		p := results.Point{Index: i, Params: []results.Param{{Axis: "transport", Text: tr}}, Transport: tr, Label: tr}
		if tr == "mptcp-direct" {
			p.Error = "mptcp not enabled"
			p.Goodput = stats.Summarize(nil)
		} else {
			p.Samples = samples(7, 9, 11)
			p.Goodput = stats.Summarize([]float64{7, 9, 11})
		}
		run.Points = append(run.Points, p)
	}
	return run
}

func TestSampleRows(t *testing.T) {
	run := &results.Run{
		Scenario: "s", Axes: []string{"rtt", "transport", "scheduler"},
		Points: []results.Point{
			{
				Index: 0, Params: []results.Param{{Axis: "rtt", Text: "20ms", Value: 20}, {Axis: "transport", Text: "direct"}},
				Transport: "direct", Label: "direct",
				Samples: []results.Sample{{Rep: 1, GoodputMbps: 9.5, Seconds: 14.125, Bytes: 16777216, MaxStallMs: 3.25, Retransmits: -1}},
			},
			{
				Index: 1, Params: []results.Param{{Axis: "rtt", Text: "20ms", Value: 20}, {Axis: "transport", Text: "braid"}, {Axis: "scheduler", Text: "minrtt"}},
				Transport: "braid", Label: "braid minrtt",
				Options: map[string]string{"scheduler": "minrtt", "reorder": "adaptive"},
				Samples: []results.Sample{
					{Rep: 1, GoodputMbps: 18.75, Seconds: 7.5, Bytes: 16777216, MaxStallMs: 0, Retransmits: 4, Reordered: 120, ReorderTimeouts: 2,
						PathBytes: map[string]uint64{"secondary": 100, "primary": 300}},
					{Rep: 2, GoodputMbps: 19, Seconds: 7.25, Bytes: 16777216, MaxStallMs: 1.5, Retransmits: 0, Reordered: 0, ReorderTimeouts: 0,
						PathBytes: map[string]uint64{"primary": 7}},
				},
			},
		},
	}
	var b bytes.Buffer
	if err := writeCSV(&b, sampleRows(run)); err != nil {
		t.Fatal(err)
	}
	want := "point,rtt,rtt_value,transport,scheduler,kind,label,options,rep,goodput_mbps,seconds,bytes,max_stall_ms,retransmits,reordered,reorder_timeouts,bytes_primary,bytes_secondary\n" +
		"0,20ms,20,direct,,direct,direct,,1,9.5,14.125,16777216,3.25,,0,0,,\n" +
		"1,20ms,20,braid,minrtt,braid,braid minrtt,reorder=adaptive;scheduler=minrtt,1,18.75,7.5,16777216,0,4,120,2,300,100\n" +
		"1,20ms,20,braid,minrtt,braid,braid minrtt,reorder=adaptive;scheduler=minrtt,2,19,7.25,16777216,1.5,0,0,0,7,\n"
	if got := b.String(); got != want {
		t.Errorf("samples CSV:\n got %q\nwant %q", got, want)
	}
}

func TestSummaryRows(t *testing.T) {
	run := barRun()
	run.Points[0].PathShares = map[string]float64{"primary": 1}
	// Point 2 has samples but no Goodput: the summary is computed from
	// the samples {7, 9, 11}: mean 9, median 9, s = 2, CI = 4.3027·2/√3.
	run.Points[2].Goodput = stats.Summary{}
	var b bytes.Buffer
	if err := writeCSV(&b, summaryRows(run)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want header + 3 rows, got %d lines:\n%s", len(lines), b.String())
	}
	if want := "point,transport,kind,label,options,n,mean_mbps,ci95_mbps,median_mbps,min_mbps,max_mbps,std_dev_mbps,share_primary,error"; lines[0] != want {
		t.Errorf("header %q, want %q", lines[0], want)
	}
	ci := t95df2 * 2 / math.Sqrt(3)
	// The CI is compared as a number: the stored summary's t quantile is
	// computed, the table's is rounded.
	r0 := strings.Split(lines[1], ",")
	got, err := strconv.ParseFloat(r0[7], 64)
	if err != nil || math.Abs(got-ci) > 1e-9 {
		t.Errorf("row 0 CI %q, want %v", r0[7], ci)
	}
	r0[7] = "CI"
	if want := "0,direct,direct,direct,,3,9,CI,9,7,11,2,1,"; strings.Join(r0, ",") != want {
		t.Errorf("row 0 %q, want %q", lines[1], want)
	}
	if want := "1,mptcp-direct,mptcp-direct,mptcp-direct,,0,,,,,,,,mptcp not enabled"; lines[2] != want {
		t.Errorf("failed row %q, want %q", lines[2], want)
	}
	f := strings.Split(lines[3], ",")
	if f[5] != "3" || f[6] != "9" || f[8] != "9" || f[9] != "7" || f[10] != "11" || f[11] != "2" {
		t.Errorf("row from samples %q: want n=3 mean=9 median=9 min=7 max=11 sd=2", lines[3])
	}
	if got, err := strconv.ParseFloat(f[7], 64); err != nil || math.Abs(got-4.968275) > 1e-6 {
		t.Errorf("CI from samples %q, want 4.968275", f[7])
	}
}

// writeCSV writes rows as Doc.Write writes a CSV file.
func writeCSV(w io.Writer, rows [][]string) error { return csv.NewWriter(w).WriteAll(rows) }

func TestDocJSONRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := (&Doc{JSON: barRun()}).Write(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.NewBuffer(raw)
	var back results.Run
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("JSON does not read back: %v\n%s", err, b.String())
	}
	if back.Scenario != "demo" || len(back.Points) != 3 || back.Points[1].Error != "mptcp not enabled" {
		t.Errorf("read back %+v", back)
	}
	if g := back.Points[0].Goodput; g.N != 3 || g.Mean != 9 || g.Median != 9 {
		t.Errorf("goodput read back %+v", g)
	}
	// The failed point's summary is all NaN, written as null.
	if !strings.Contains(b.String(), `"mean": null`) {
		t.Error("NaN mean not written as null")
	}
}

func TestFigures(t *testing.T) {
	figs := figures(sweepRun())
	if len(figs) != 2 {
		t.Fatalf("want one figure per loss, got %d", len(figs))
	}
	wantStems := []string{"rtt-ratio-goodput-vs-rtt_ratio-loss-none", "rtt-ratio-goodput-vs-rtt_ratio-loss-random-1pct"}
	for i, f := range figs {
		if f.stemOf(goodput) != wantStems[i] {
			t.Errorf("figure %d stem %q, want %q", i, f.stemOf(goodput), wantStems[i])
		}
		if f.x != "rtt_ratio" || len(f.points) != 4 || len(f.series) != 2 || f.series[0] != "mptcp-direct" {
			t.Errorf("figure %d: x %q, %d points, series %v", i, f.x, len(f.points), f.series)
		}
	}
	if figs[1].title != "rtt-ratio: loss = random 1%" {
		t.Errorf("title %q", figs[1].title)
	}
	bars := figures(barRun())
	if len(bars) != 1 || bars[0].x != "" || bars[0].stemOf(goodput) != "demo-goodput" || len(bars[0].series) != 3 {
		t.Errorf("bar figure %+v", bars)
	}
}

func TestScale(t *testing.T) {
	run := &results.Run{Axes: []string{"loss"}}
	add := func(text string, v float64) {
		run.Points = append(run.Points, results.Point{Params: []results.Param{{Axis: "loss", Text: text, Value: v}}})
	}
	add("random 1%", 1)
	add("none", 0)
	add("random 0.1%", 0.1)
	labels := func(ticks []plot.Tick) (out []string) {
		for _, t := range ticks {
			out = append(out, t.Label)
		}
		return out
	}
	ticks, numeric := scaleFor(run, "loss")
	if !numeric || strings.Join(labels(ticks), ",") != "none,random 0.1%,random 1%" || ticks[2].Value != 1 {
		t.Errorf("numeric loss scale %+v", ticks)
	}
	// A GE model with the same mean as a uniform one: categories, in
	// order of appearance.
	add("gemodel 1% 75% 50% 0%", 1)
	ticks, numeric = scaleFor(run, "loss")
	if numeric || labels(ticks)[0] != "random 1%" || ticks[3].Value != 3 {
		t.Errorf("colliding loss scale should be categorical: %+v", ticks)
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"gemodel 1% 75% 50% 0.5%": "gemodel-1pct-75pct-50pct-0.5pct",
		"1:3":                     "1to3",
		"10Mbit/s":                "10mbit-per-s",
		" Braid  50/50 ":          "braid-50-per-50",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// checkSVG parses an SVG file as XML and returns its text content.
func checkSVG(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(raw))
	var text strings.Builder
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", name, err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
			}
		case xml.CharData:
			text.Write(v)
			text.WriteByte('\n')
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q", name, root)
	}
	return text.String()
}

func checkPNG(t *testing.T, name string) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s does not decode: %v", name, err)
	}
	b := img.Bounds()
	if b.Dx() != int(PlotWidthInches*PlotDPI) || b.Dy() != int(PlotHeightInches*PlotDPI) {
		t.Errorf("%s is %dx%d", name, b.Dx(), b.Dy())
	}
}

func TestPlotSweep(t *testing.T) {
	dir := t.TempDir()
	files, err := Plot(sweepRun(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, stem := range []string{"rtt-ratio-goodput-vs-rtt_ratio-loss-none", "rtt-ratio-goodput-vs-rtt_ratio-loss-random-1pct"} {
		want = append(want, filepath.Join(dir, stem+".png"), filepath.Join(dir, stem+".svg"))
	}
	if strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Fatalf("files\n%v\nwant\n%v", files, want)
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".png") {
			checkPNG(t, f)
			continue
		}
		text := checkSVG(t, f)
		for _, s := range []string{"mptcp-direct", "braid", "goodput (Mbit/s)", "RTT ratio (primary:secondary)", "1:1", "1:2"} {
			if !strings.Contains(text, s) {
				t.Errorf("%s lacks text %q", f, s)
			}
		}
	}
	if !strings.Contains(checkSVG(t, files[3]), "loss = random 1%") {
		t.Error("second figure's title lacks its loss")
	}

	// Same input, same bytes.
	dir2 := t.TempDir()
	files2, err := Plot(sweepRun(), dir2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		a, _ := os.ReadFile(files[i])
		b, _ := os.ReadFile(files2[i])
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two plots of the same run", filepath.Base(files[i]))
		}
	}
}

func TestPlotBars(t *testing.T) {
	dir := t.TempDir()
	files, err := Plot(barRun(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || filepath.Base(files[0]) != "demo-goodput.png" || filepath.Base(files[1]) != "demo-goodput.svg" {
		t.Fatalf("files %v", files)
	}
	checkPNG(t, files[0])
	text := checkSVG(t, files[1])
	for _, s := range []string{"direct", "mptcp-direct", "braid"} {
		if !strings.Contains(text, s) {
			t.Errorf("bar chart lacks %q", s)
		}
	}
}

func TestPlotSinglePointAndNaN(t *testing.T) {
	// One x value, one sample (CI NaN): must not panic on an empty x
	// range or NaN error bars.
	run := &results.Run{Scenario: "one", Axes: []string{"rtt", "transport"}, Points: []results.Point{{
		Params: []results.Param{{Axis: "rtt", Text: "20ms", Value: 20}, {Axis: "transport", Text: "braid"}},
		Label:  "braid", Samples: samples(9), Goodput: stats.Summarize([]float64{9}),
	}}}
	files, err := Plot(run, t.TempDir())
	if err != nil || len(files) != 2 {
		t.Fatalf("files %v, err %v", files, err)
	}
	checkPNG(t, files[0])
	checkSVG(t, files[1])
}

func TestMarkdown(t *testing.T) {
	run := sweepRun()
	plots := []string{"rtt-ratio-goodput-vs-rtt_ratio-loss-none.png", "rtt-ratio-goodput-vs-rtt_ratio-loss-none.svg"}
	var b bytes.Buffer
	if err := Markdown(&b, run, plots); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	// Points are numbered in run order with g = 10, 14, 18, …: the figure
	// for loss "random 1%" holds points 2, 3 (ratio 1:1: g = 18, 22) and
	// 6, 7 (ratio 1:2: g = 34, 38). Every CI is 4.3027·2/√3 = 4.97.
	for _, want := range []string{
		"| Scenario | rtt-ratio (`lab/scenarios/rtt-ratio.toml`) |",
		"| Download size | 16 MiB (16777216 bytes) |",
		"| Repetitions | 3 per point |",
		"| Emulator | userspace |",
		"| Host | labhost |",
		"| Date | 2026-03-01 10:00:00 UTC to 2026-03-01 10:30:05 UTC (30m5s) |",
		"| Points | 8 |",
		"## rtt-ratio: loss = none",
		"## rtt-ratio: loss = random 1%",
		"| rtt\\_ratio | transport | goodput (Mbit/s) | n | median | path shares |",
		"| 1:1 | mptcp-direct | 10.00 ± 4.97 | 3 | 10.00 | primary 75.0%, secondary 25.0% |",
		"| 1:1 | braid | 14.00 ± 4.97 | 3 | 14.00 | primary 75.0%, secondary 25.0% |",
		"| 1:2 | mptcp-direct | 26.00 ± 4.97 | 3 | 26.00 |",
		"| 1:1 | mptcp-direct | 18.00 ± 4.97 | 3 | 18.00 |",
		"| 1:2 | braid | 38.00 ± 4.97 | 3 | 38.00 |",
		"![rtt-ratio: loss = none](rtt-ratio-goodput-vs-rtt_ratio-loss-none.png)",
		"[SVG](rtt-ratio-goodput-vs-rtt_ratio-loss-none.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The loss=none table comes before the random 1% one, and its rows
	// are in run order.
	if i, j := strings.Index(md, "loss = none"), strings.Index(md, "loss = random 1%"); i < 0 || j < i {
		t.Error("figures out of order")
	}
	if i, j := strings.Index(md, "| 10.00 ± 4.97"), strings.Index(md, "| 30.00 ± 4.97"); i < 0 || j < i {
		t.Error("rows out of order")
	}
	// No plot was given for the second figure: nothing is embedded for it.
	if strings.Contains(md, "random-1pct.png") {
		t.Error("embedded a plot that was not passed")
	}
}

func TestMarkdownFailedAndSinglePoint(t *testing.T) {
	run := barRun()
	run.Points[2].Samples = samples(9)
	run.Points[2].Goodput = stats.Summarize([]float64{9})
	run.Points[2].Label = "braid|x"
	var b bytes.Buffer
	if err := Markdown(&b, run, nil); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| Points | 3 (1 failed) |",
		"| Download size | 8 MiB (8388608 bytes) |",
		"| Date | unknown |",
		"| Sweep axes | none |",
		"| transport | goodput (Mbit/s) | n | median |",
		"| direct | 9.00 ± 4.97 | 3 | 9.00 |",
		"| mptcp-direct | failed: mptcp not enabled | 0 | n/a |",
		"| braid\\|x | 9.00 ± n/a | 1 | 9.00 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q\n%s", want, md)
		}
	}
}

func TestDocument(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := Document(sweepRun()).Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{FileJSON, FileSamples, FileSummary, FileMarkdown,
		"rtt-ratio-goodput-vs-rtt_ratio-loss-none.png", "rtt-ratio-goodput-vs-rtt_ratio-loss-random-1pct.svg"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, FileMarkdown))
	// Links are relative to the report's directory.
	if !strings.Contains(string(md), "](rtt-ratio-goodput-vs-rtt_ratio-loss-random-1pct.png)") || strings.Contains(string(md), dir) {
		t.Errorf("report links not relative:\n%s", md)
	}
	csv, _ := os.ReadFile(filepath.Join(dir, FileSamples))
	if n := strings.Count(string(csv), "\n"); n != 1+8*3 {
		t.Errorf("samples.csv has %d lines, want 25", n)
	}
}

// TestMarkdownProvenance: the seed, shard, command, commit and load are in
// the setup, a warning comes first and loud, and a merged run lists its
// shards.
func TestMarkdownProvenance(t *testing.T) {
	run := sweepRun()
	run.Seed, run.Shard = 4242, "1/3"
	run.Command = []string{"braid-lab", "lab", "run", "x.toml", "--only", "loss=random 1%", "--seed", "4242"}
	run.Commit, run.CommitFrom, run.Dirty = "0123abcd", "build", true
	run.CPUs, run.LoadStart, run.LoadMax = 2, 1.25, 2.5
	run.Warnings = []string{"THE MACHINE WAS BUSY: load 1.25"}
	var b bytes.Buffer
	if err := Markdown(&b, run, nil); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"> **⚠ WARNING:** THE MACHINE WAS BUSY: load 1.25",
		"| Seed | 4242 (`--seed 4242`): ",
		"| Shard | `--shard 1/3`: the points whose index is 1 mod 3 |",
		"| Command | `braid-lab lab run x.toml --only 'loss=random 1%' --seed 4242` |",
		"| Commit | `0123abcd` with uncommitted changes (from the binary's build information) |",
		"| Machine load | 1-minute load average 1.25 at the start, at most 2.50 while it ran",
		"; 2 CPUs |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q\n%s", want, md)
		}
	}
	if i, j := strings.Index(md, "WARNING"), strings.Index(md, "## Setup"); i < 0 || i > j {
		t.Error("the warning is not above the setup")
	}

	// A merged run: a table of its shards.
	run.Shard, run.Warnings = "", nil
	run.Parts = []results.Part{
		{Provenance: results.Provenance{Shard: "0/2", Commit: "0123abcd", CPUs: 4, LoadStart: 0.5, LoadMax: 3, Command: []string{"a"}}, Host: "m1", Points: 4},
		{Provenance: results.Provenance{Shard: "1/2", CPUs: 2}, Host: "m2", Points: 4},
	}
	b.Reset()
	if err := Markdown(&b, run, nil); err != nil {
		t.Fatal(err)
	}
	md = b.String()
	for _, want := range []string{
		"### Shards",
		"| 0/2 | m1 | 4 | unknown | 0.50 / 3.00 | 4 | `0123abcd` | `a` |",
		"| 1/2 | m2 | 4 | unknown | 0.00 / 0.00 | 2 | unknown |  |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("merged report lacks %q\n%s", want, md)
		}
	}
	if strings.Contains(md, "| Shard |") && !strings.Contains(md, "| Shard | Host |") {
		t.Error("a merged run of every shard shows a Shard row")
	}
}
