package mesh

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/route"
	"github.com/braid-vpn/braid/route/study"
)

func TestCases(t *testing.T) {
	e := Experiment{Topologies: 2, Reps: 3}
	if err := e.fill(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range e.Cases() {
		names = append(names, c.Name())
	}
	r := &Result{Channels: []Channels{1, 2}, Algorithms: Algorithms}
	if !reflect.DeepEqual(r.cases(), e.Cases()) {
		t.Errorf("a result's cases %v, want %v", r.cases(), e.Cases())
	}
	want := []string{"tcp", "ld-1ch", "ld-2ch", "nd-1ch", "nd-2ch", "zd-1ch", "zd-2ch"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("cases %v, want %v", names, want)
	}
	// 2 topologies × 3 reps × (TCP + 3 algorithms × 2 channel models).
	if n := e.Steps(); n != 42 {
		t.Errorf("steps %d, want 42", n)
	}
	if l := (Case{Algo: route.ZD, Channels: TwoChannels}).Label(); l != "braid ZD, 2 channels" {
		t.Errorf("label %q", l)
	}
	for _, bad := range []Experiment{
		{Channels: []Channels{3}},
		{Algorithms: []route.Algorithm{route.OptLink}},
		{Reps: -1},
		{Mesh: Config{QueuePackets: -2}},
	} {
		if err := bad.fill(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	e = Experiment{Size: 4 << 20}
	e.fill()
	// 30 s + 4 MiB at 0.5 Mbit/s = 30 + 67.1 s.
	if got := e.Timeout.Seconds(); math.Abs(got-(30+4*8*1.048576*2)) > 0.01 {
		t.Errorf("default timeout %.2f s, want %.2f", got, 30+4*8*1.048576*2)
	}
}

// TestTopologies: the experiment's layouts are `braid routes stats`'
// Figs 8–9 layouts, in order, so `braid routes show --feasible --index I`
// draws topology I.
func TestTopologies(t *testing.T) {
	ts, cands, err := Topologies(32, 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3 || len(cands) != 3 || !(cands[0] < cands[1] && cands[1] < cands[2]) {
		t.Fatalf("%d topologies, candidates %v", len(ts), cands)
	}
	cfg := study.DefaultConfig()
	cfg.Seed = 7
	for i, tp := range ts {
		want, err := study.RoutesTopology(cfg, 32, i)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(tp.Graph)
		b, _ := json.Marshal(want.Graph)
		if !bytes.Equal(a, b) || tp.Src != want.Src || tp.Dst != want.Dst {
			t.Errorf("topology %d differs from study.RoutesTopology", i)
		}
		for _, algo := range Algorithms {
			ps, err := route.Find(tp.Graph, tp.Src, tp.Dst, algo, 0, route.HopCount)
			if err != nil || len(ps) < 2 {
				t.Errorf("topology %d: %s finds %d paths (%v)", i, algo, len(ps), err)
			}
		}
	}
}

func sample(g float64, pb ...uint64) Sample { return Sample{GoodputMbps: g, PathBytes: pb} }

func meas(c Case, gs ...float64) Measurement {
	m := Measurement{Case: c.Name(), Label: c.Label()}
	for _, g := range gs {
		m.Samples = append(m.Samples, sample(g, 1, 1))
	}
	var xs []float64
	for _, s := range m.Samples {
		xs = append(xs, s.GoodputMbps)
	}
	m.Goodput = stats.Summarize(xs)
	return m
}

// fakeResult: topologies A and B with 3-hop shortest paths, C with 4;
// C's ld-2ch failed.
func fakeResult() *Result {
	ld2 := Case{Algo: route.LD, Channels: TwoChannels}
	failed := Measurement{Case: ld2.Name(), Label: ld2.Label(), Goodput: stats.Summarize(nil), Error: "braid exited"}
	runs := []TopologyRun{
		{Index: 0, ShortestHops: 3, Pairs: []Pair{{Algo: route.LD, Found: 2, Hops: []int{3, 4}}}, Measurements: []Measurement{meas(TCP, 2, 4), meas(ld2, 6, 6)}},
		{Index: 1, ShortestHops: 3, Pairs: []Pair{{Algo: route.LD, Found: 3, Hops: []int{3, 3}}}, Measurements: []Measurement{meas(TCP, 3, 3), meas(ld2, 3, 6)}},
		{Index: 2, ShortestHops: 4, Pairs: []Pair{{Algo: route.LD, Found: 2, Hops: []int{4, 6}}}, Measurements: []Measurement{meas(TCP, 1, 1), failed}},
	}
	cases := []Case{TCP, ld2}
	return &Result{
		Nodes: 32, Topologies: 3, Seed: 1, Channels: []Channels{2}, Algorithms: []route.Algorithm{"ld"}, Size: 4 << 20, Reps: 2, CC: "cubic",
		RateBps: 11e6, MinDelayMs: 1, MaxDelayMs: 2, QueuePackets: 100, Cases: []string{"tcp", "ld-2ch"},
		Runs: runs, Summary: Summarize(runs, cases),
	}
}

func TestSummarize(t *testing.T) {
	r := fakeResult()
	close := func(a, b float64) bool { return math.Abs(a-b) < 1e-3 }
	type want struct {
		topos, n      int
		mean, ci      float64
		ratio, ratioN float64
	}
	// ld-2ch at 3 hops: samples 6, 6, 3, 6: mean 5.25, s = 1.5,
	// CI = t(0.975, 3) · 1.5 / 2 = 3.18245 · 0.75; ratios 6/3 and 4.5/3.
	for _, c := range []struct {
		name string
		hops int
		w    want
	}{
		{"tcp", 3, want{2, 4, 3, stats.TQuantile(0.975, 3) * math.Sqrt(2.0/3) / 2, 0, 0}},
		{"ld-2ch", 3, want{2, 4, 5.25, 3.182446 * 0.75, 1.75, 2}},
		{"tcp", 4, want{1, 2, 1, 0, 0, 0}},
		{"ld-2ch", 4, want{0, 0, math.NaN(), math.NaN(), math.NaN(), 0}},
		{"tcp", 0, want{3, 6, 14.0 / 6, math.NaN(), 0, 0}},
		{"ld-2ch", 0, want{2, 4, 5.25, 3.182446 * 0.75, 1.75, 2}},
	} {
		s := r.row(c.name, c.hops)
		if s == nil {
			t.Errorf("%s at %d hops: no row", c.name, c.hops)
			continue
		}
		g := s.Goodput
		if s.Topologies != c.w.topos || g.N != c.w.n {
			t.Errorf("%s/%d: %d topologies, %d downloads; want %d, %d", c.name, c.hops, s.Topologies, g.N, c.w.topos, c.w.n)
		}
		if !(close(g.Mean, c.w.mean) || math.IsNaN(g.Mean) && math.IsNaN(c.w.mean)) {
			t.Errorf("%s/%d: mean %v, want %v", c.name, c.hops, g.Mean, c.w.mean)
		}
		if !math.IsNaN(c.w.ci) && !close(g.CI95, c.w.ci) {
			t.Errorf("%s/%d: CI %v, want %v", c.name, c.hops, g.CI95, c.w.ci)
		}
		if c.name == "tcp" {
			if s.Ratio != nil {
				t.Errorf("tcp has a ratio to itself")
			}
			continue
		}
		if s.Ratio == nil || float64(s.Ratio.N) != c.w.ratioN || (c.w.ratioN > 0 && !close(s.Ratio.Mean, c.w.ratio)) {
			t.Errorf("%s/%d: ratio %+v, want mean %v over %v topologies", c.name, c.hops, s.Ratio, c.w.ratio, c.w.ratioN)
		}
	}
	if hs := hopCounts(r.Runs); !reflect.DeepEqual(hs, []int{3, 4, 0}) {
		t.Errorf("hop counts %v, want [3 4 0]", hs)
	}
}

func TestWriteFiles(t *testing.T) {
	r := fakeResult()
	dir := t.TempDir()
	files, err := r.Document().Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	// One channel model measured: its figure only (the LD figure needs
	// both).
	want := []string{filepath.Join(dir, "mesh-goodput-2ch.png"), filepath.Join(dir, "mesh-goodput-2ch.svg")}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("plots %v, want %v", files, want)
	}
	f, err := os.Open(want[0])
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != int(report.PlotWidthInches*report.PlotDPI) || b.Dy() != int(report.PlotHeightInches*report.PlotDPI) {
		t.Errorf("PNG %v, want the house size", b)
	}
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != 3 || back.Runs[2].Measurements[1].Error != "braid exited" || !math.IsNaN(back.Runs[2].Measurements[1].Goodput.Mean) {
		t.Errorf("results.json round trip lost something: %+v", back.Runs)
	}
	rows := readCSV(t, filepath.Join(dir, "samples.csv"))
	// Header + 2+2 + 2+2 + 2 samples (the failed case has none).
	if len(rows) != 11 || rows[1][3] != "tcp" || rows[1][6] != "2.0000" || rows[1][11] != "1+1" {
		t.Errorf("samples.csv: %v", rows)
	}
	sum := readCSV(t, filepath.Join(dir, "summary.csv"))
	var found bool
	for _, row := range sum {
		if row[0] == "ld-2ch" && row[1] == "3" {
			found = true
			if row[4] != "5.2500" || row[8] != "1.7500" {
				t.Errorf("summary row %v, want mean 5.2500 and ratio 1.7500", row)
			}
		}
		if row[0] == "ld-2ch" && row[1] == "4" && row[4] != "" {
			t.Errorf("summary row %v: an undefined mean must be empty", row)
		}
	}
	if !found || len(sum) != 7 {
		t.Errorf("summary.csv: %v", sum)
	}
	md, err := os.ReadFile(filepath.Join(dir, "tables.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| 3 | 2 | 3.00 ± 1.30 | 5.25 ± 2.39 |", "| 0 | 3 | 3 + 4 | 3.00 | 6.00 |", "| 2 | 4 | 4 + 6 | 1.00 | — |", "topology 2 ld-2ch: braid exited"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("tables.md lacks %q:\n%s", s, md)
		}
	}
	var text bytes.Buffer
	r.Document().WriteText(&text)
	if !strings.Contains(text.String(), "5.25 ± 2.39") || !strings.Contains(text.String(), "1.75") {
		t.Errorf("text tables:\n%s", text.String())
	}
}

func readCSV(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
