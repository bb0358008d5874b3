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

// TestBulkRecoveryTable: a run with braid (recovery on: two downloads with
// overheads 3 % and 9 % against a bound of 7 %), braid with recovery off and
// direct (neither with figures) gets a "Bulk recovery overhead" table of the
// braid point only, and the figures' CSV columns.
func TestBulkRecoveryTable(t *testing.T) {
	rec := func(o float64) *results.BulkRecovery {
		return &results.BulkRecovery{ResentBytes: 1000, RepairBytes: 500, TxPackets: 1000, LostPackets: 10,
			PathLossRate: 0.01, Overhead: o, Bound: 0.07}
	}
	pt := func(i int, kind, label string, recs ...*results.BulkRecovery) results.Point {
		p := results.Point{Index: i, Transport: kind, Label: label,
			Params: []results.Param{{Axis: "rtt", Text: "20ms", Value: 20}, {Axis: "transport", Text: label}}}
		var g []float64
		for j, r := range recs {
			p.Samples = append(p.Samples, results.Sample{Rep: j, GoodputMbps: 9, Seconds: 1, Bytes: 1 << 20, Retransmits: -1, BulkRecovery: r})
			g = append(g, 9)
		}
		p.Goodput = stats.Summarize(g)
		return p
	}
	braid := pt(1, "braid", "braid", rec(0.03), rec(0.09))
	braid.BulkRecovery = &results.BulkRecoverySummary{
		Overhead:     stats.Summarize([]float64{0.03, 0.09}),
		PathLossRate: stats.Summarize([]float64{0.01, 0.01}),
		Bound:        stats.Summarize([]float64{0.07, 0.07}),
		WithinBound:  1,
	}
	run := &results.Run{Scenario: "rec", Axes: []string{"rtt", "transport"}, Reps: 2, Size: 1 << 20, Points: []results.Point{
		pt(0, "direct", "direct", nil, nil), braid, pt(2, "braid", "braid recovery=off", nil, nil)}}

	var b bytes.Buffer
	if err := Markdown(&b, run, nil); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	_, table, ok := strings.Cut(md, "Bulk recovery overhead:")
	if !ok {
		t.Fatalf("no bulk recovery table:\n%s", md)
	}
	// Overhead 6 % ± t(0.975, 1) · 4.243 / √2 = 12.706 · 3 = 38.12.
	for _, want := range []string{"overhead (% of payload)", "path loss (%)", "bound: 2 × loss + 5 (%)", "within bound",
		"| 20ms | braid | 6.00 ± 38.12 | 1.00 ± 0.00 | 7.00 ± 0.00 | 1 of 2 |"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "direct") || strings.Contains(table, "recovery=off") {
		t.Errorf("points without recovery figures are listed:\n%s", table)
	}

	b.Reset()
	if err := writeCSV(&b, sampleRows(run)); err != nil {
		t.Fatal(err)
	}
	rows, _ := csv.NewReader(&b).ReadAll()
	i := slices.Index(rows[0], "recovery_overhead")
	if i < 0 || rows[3][i] != "0.03" || rows[1][i] != "" {
		t.Errorf("samples.csv recovery_overhead: %v / %v", rows[0], rows[1:])
	}
	for _, col := range []string{"recovery_resent_bytes", "recovery_repair_bytes", "path_loss_rate", "overhead_bound"} {
		if j := slices.Index(rows[0], col); j < 0 || rows[3][j] == "" {
			t.Errorf("samples.csv: column %s missing or empty: %v", col, rows[0])
		}
	}
	b.Reset()
	if err := writeCSV(&b, summaryRows(run)); err != nil {
		t.Fatal(err)
	}
	rows, _ = csv.NewReader(&b).ReadAll()
	i = slices.Index(rows[0], "recovery_overhead_pct_mean")
	j := slices.Index(rows[0], "within_bound")
	if i < 0 || j < 0 || rows[2][i] != "6" || rows[2][j] != "1" || rows[1][i] != "" {
		t.Errorf("summary.csv: %v / %v", rows[0], rows[1:])
	}
}
