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

// TestTwoClients: a run with a competing braid client shows both goodputs
// and the Jain index in every output: per download in samples.csv, per
// point in summary.csv and the Markdown, which names the competitor.
func TestTwoClients(t *testing.T) {
	var samples []results.Sample
	var own, other, jain []float64
	for rep, g := range [][2]float64{{5, 4.5}, {4.8, 4.9}} {
		j := stats.Jain(g[0], g[1])
		samples = append(samples, results.Sample{Rep: rep, GoodputMbps: g[0], CompetingMbps: new(g[1]), Jain: new(j), Retransmits: -1})
		own, other, jain = append(own, g[0]), append(other, g[1]), append(jain, j)
	}
	comp, js := stats.Summarize(other), stats.Summarize(jain)
	run := &results.Run{Scenario: "two", Reps: 2, CompetingTransport: "braid", Points: []results.Point{{
		Transport: "braid", Label: "braid", Samples: samples, Goodput: stats.Summarize(own), Competing: &comp, Jain: &js}}}

	var b bytes.Buffer
	if err := writeCSV(&b, sampleRows(run)); err != nil {
		t.Fatal(err)
	}
	rows, _ := csv.NewReader(&b).ReadAll()
	for _, col := range []string{"goodput_mbps", "competing_mbps", "jain"} {
		if i := slices.Index(rows[0], col); i < 0 || rows[1][i] == "" || rows[2][i] == "" {
			t.Errorf("samples.csv: column %s missing or empty: %v", col, rows)
		}
	}
	b.Reset()
	if err := writeCSV(&b, summaryRows(run)); err != nil {
		t.Fatal(err)
	}
	rows, _ = csv.NewReader(&b).ReadAll()
	for _, col := range []string{"competing_mean_mbps", "jain_mean", "jain_ci95"} {
		if i := slices.Index(rows[0], col); i < 0 || rows[1][i] == "" {
			t.Errorf("summary.csv: column %s missing or empty: %v", col, rows)
		}
	}
	b.Reset()
	if err := Markdown(&b, run, nil); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"competing braid client (Mbit/s)", "Jain index", "Competing downloads", "(a+b)² / (2(a²+b²))"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "competing TCP") {
		t.Errorf("report calls the braid client competing TCP:\n%s", md)
	}
}
