package report

import (
	"bytes"
	"encoding/csv"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

// udpRun is a hand-made run with the latency probes' and the real-time
// flow's figures: braid with and without recovery on one network.
func udpRun() *results.Run {
	pt := func(i int, label, recovery string, outer float64) results.Point {
		smp := results.Sample{Rep: 0, GoodputMbps: 0.98, Seconds: 10, Bytes: 1225000, Retransmits: -1,
			Latency:  &results.Latency{IdleMedianMs: 20, AddedP50Ms: 5, AddedP95Ms: 12, AddedP99Ms: 15, Probes: 100, Lost: 1},
			Realtime: &results.Realtime{Sent: 6250, Delivered: 6125, LossPct: 2, MissPct: 3, OuterBytes: 1000, OuterPerPayload: outer}}
		p := results.Point{Index: i, Transport: "braid", Label: label, Samples: []results.Sample{smp},
			Params:  []results.Param{{Axis: "rtt", Text: "20ms", Value: 20}, {Axis: "transport", Text: label}},
			Goodput: stats.Summarize([]float64{0.98})}
		if recovery != "" {
			p.Options = map[string]string{"recovery": recovery}
		}
		s := stats.Summarize([]float64{outer, outer})
		p.Realtime = &results.RealtimeSummary{OuterPerPayload: s, MissPct: stats.Summarize([]float64{3, 3}), LossPct: stats.Summarize([]float64{2, 2})}
		p.Latency = &results.LatencySummary{IdleMs: stats.Summarize([]float64{20}), AddedP95Ms: stats.Summarize([]float64{12, 14})}
		return p
	}
	return &results.Run{Scenario: "rt", Axes: []string{"rtt", "transport"}, Reps: 1,
		Realtime:          &results.RealtimeSetup{RateMbps: 1, Size: 200, Seconds: 10, Packets: 6250, DeadlineMs: 40},
		LatencyIntervalMs: 10, LatencyIdleMs: 1000,
		Points: []results.Point{pt(0, "braid", "", 1.5), pt(1, "braid no recovery", "off", 1.25)}}
}

func TestUDPFigures(t *testing.T) {
	run := udpRun()
	if x := extraBytesPct(run, &run.Points[0]); math.Abs(x-20) > 1e-9 {
		t.Errorf("extra bytes %v%%, want 20%% (1.5 against 1.25)", x)
	}
	if !math.IsNaN(extraBytesPct(run, &run.Points[1])) {
		t.Error("the recovery-off point is compared with itself")
	}

	var b bytes.Buffer
	if err := writeCSV(&b, sampleRows(run)); err != nil {
		t.Fatal(err)
	}
	rows, _ := csv.NewReader(&b).ReadAll()
	for _, col := range []string{"added_p95_ms", "probes_lost", "rt_miss_pct", "outer_per_payload"} {
		i := slices.Index(rows[0], col)
		if i < 0 || rows[1][i] == "" {
			t.Errorf("samples.csv: column %s missing or empty: %v", col, rows[0])
		}
	}
	b.Reset()
	if err := writeCSV(&b, summaryRows(run)); err != nil {
		t.Fatal(err)
	}
	rows, _ = csv.NewReader(&b).ReadAll()
	i := slices.Index(rows[0], "outer_extra_vs_off_pct")
	if i < 0 {
		t.Fatalf("summary.csv header %v", rows[0])
	}
	if x, err := strconv.ParseFloat(rows[1][i], 64); err != nil || math.Abs(x-20) > 1e-9 || rows[2][i] != "" {
		t.Errorf("summary.csv extra bytes: %v / %v", rows[0], rows[1:])
	}
	if !slices.Contains(rows[0], "added_p95_ms_mean") || !slices.Contains(rows[0], "rt_miss_pct_ci95") {
		t.Errorf("summary.csv header %v", rows[0])
	}

	dir := t.TempDir()
	if _, err := Document(run).Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, stem := range []string{"rt-goodput-vs-rtt", "rt-added-delay-p95-vs-rtt", "rt-realtime-miss-vs-rtt"} {
		if m, _ := filepath.Glob(filepath.Join(dir, stem+".png")); len(m) != 1 {
			t.Errorf("no plot %s.png", stem)
		}
	}
	b.Reset()
	if err := Markdown(&b, run, []string{"rt-added-delay-p95-vs-rtt.png", "rt-realtime-miss-vs-rtt.png"}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"| Workload | real-time UDP flow", "| Latency probes | UDP echo every 10 ms", "Latency under load:", "added p95 (ms)", "13.00 ± ",
		"Real-time flow:", "extra bytes vs recovery off", "| 20.0% |", "![rt](rt-added-delay-p95-vs-rtt.png)", "![rt](rt-realtime-miss-vs-rtt.png)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Other plots") {
		t.Errorf("the new plots are not placed with their tables:\n%s", md)
	}
}
