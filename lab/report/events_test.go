package report

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

// A run with one path event (a cut) gets a "Path events" table with the
// longest stall, the reaction and each path's rate per phase, and the
// matching CSV columns; a download where the paths did not react leaves its
// cell empty and the count says so.
func TestEventsTable(t *testing.T) {
	r := func(v float64) *float64 { return &v }
	smp := func(rep int, stall float64, react *float64) results.Sample {
		return results.Sample{Rep: rep, GoodputMbps: 9, Seconds: 1, Bytes: 1 << 20, Retransmits: -1, MaxStallMs: stall,
			Events: []results.EventOutcome{{Event: "cut secondary at 3s", Fired: true, AtMs: 3000, ReactMs: react}},
			Phases: []results.Phase{{ToMs: 3000, PathKBps: map[string]float64{"primary": 1000, "secondary": 1000}},
				{FromMs: 3000, ToMs: 9000, PathKBps: map[string]float64{"primary": 1100, "secondary": 0}}}}
	}
	p := results.Point{Index: 0, Transport: "braid", Label: "braid", Params: []results.Param{{Axis: "transport", Text: "braid"}},
		Samples: []results.Sample{smp(0, 100, r(20)), smp(1, 300, nil)}, Goodput: stats.Summarize([]float64{9, 9})}
	p.Events = &results.EventsSummary{
		MaxStallMs: stats.Summarize([]float64{100, 300}),
		Events:     []results.EventSummary{{Event: "cut secondary at 3s", Fired: 2, Reacted: 1, ReactMs: stats.Summarize([]float64{20})}},
		Phases: []results.PhaseSummary{
			{Label: "before cut secondary at 3s", PathKBps: map[string]stats.Summary{"primary": stats.Summarize([]float64{1000, 1000}), "secondary": stats.Summarize([]float64{1000, 1000})}},
			{Label: "after cut secondary at 3s", PathKBps: map[string]stats.Summary{"primary": stats.Summarize([]float64{1100, 1100}), "secondary": stats.Summarize([]float64{0, 0})}},
		},
	}
	run := &results.Run{Scenario: "cut", Axes: []string{"transport"}, Reps: 2, Size: 1 << 20, Points: []results.Point{p}}
	var b bytes.Buffer
	if err := Markdown(&b, run, nil); err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(b.String(), "Path events:")
	if !ok {
		t.Fatalf("no path events table:\n%s", b.String())
	}
	// Stall 200 ± 12.706 · 141.42 / √2 = 1270.62.
	for _, want := range []string{"longest stall (ms)", "cut secondary at 3s: reaction (ms)", "secondary after cut secondary at 3s (kB/s)",
		"| braid | 200.00 ± 1270.62 | 20.00 ± n/a | 1000.00 ± 0.00 | 1000.00 ± 0.00 | 1100.00 ± 0.00 | 0.00 ± 0.00 | 1 of 2 |"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	b.Reset()
	if err := writeCSV(&b, sampleRows(run)); err != nil {
		t.Fatal(err)
	}
	rows, _ := csv.NewReader(&b).ReadAll()
	i, j := slices.Index(rows[0], "event1_react_ms"), slices.Index(rows[0], "phase1_primary_kbps")
	if i < 0 || j < 0 || rows[1][i] != "20" || rows[2][i] != "" || rows[1][j] != "1100.000" {
		t.Errorf("samples.csv: %v / %v", rows[0], rows[1:])
	}
	b.Reset()
	if err := writeCSV(&b, summaryRows(run)); err != nil {
		t.Fatal(err)
	}
	rows, _ = csv.NewReader(&b).ReadAll()
	if k := slices.Index(rows[0], "max_stall_ms_mean"); k < 0 || rows[1][k] != "200" {
		t.Errorf("summary.csv: %v / %v", rows[0], rows[1:])
	}
}
