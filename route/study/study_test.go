package study

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/route"
)

func small() Config {
	cfg := DefaultConfig()
	cfg.Runs = 40
	cfg.Nodes = []int{16, 32}
	cfg.RoutesRuns = 15
	return cfg
}

func TestRunDeterministicAcrossWorkers(t *testing.T) {
	var out [2][]byte
	for i, w := range []int{1, 3} {
		cfg := small()
		cfg.Workers = w
		res, err := Run(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[i], _ = json.Marshal(res)
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Errorf("1 worker and 3 workers disagree:\n%s\n%s", out[0], out[1])
	}
	cfg := small()
	cfg.Seed = 2
	res, _ := Run(context.Background(), cfg, nil)
	if other, _ := json.Marshal(res); bytes.Equal(other, out[0]) {
		t.Error("seeds 1 and 2 gave the same study")
	}
}

func TestRunConsistent(t *testing.T) {
	cfg := small()
	var steps []int
	res, err := Run(context.Background(), cfg, func(done, total int, label string) {
		if total != Steps(cfg) || label == "" {
			t.Errorf("progress(%d, %d, %q), want total %d", done, total, label, Steps(cfg))
		}
		steps = append(steps, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != Steps(cfg) || steps[len(steps)-1] != Steps(cfg) {
		t.Errorf("progress steps %v, want 1..%d", steps, Steps(cfg))
	}
	for _, f := range res.Feasibility {
		if f.Topologies != cfg.Runs || f.Layouts < int64(cfg.Runs) {
			t.Errorf("%d nodes: %d topologies from %d layouts", f.Nodes, f.Topologies, f.Layouts)
		}
		if f.Multipath[route.MaxLink] < f.Multipath[route.LD] || f.Multipath[route.MaxNode] < f.Multipath[route.ND] || f.Multipath[route.MaxNode] < f.Multipath[route.ZD] {
			t.Errorf("%d nodes: optimal below greedy: %v", f.Nodes, f.Multipath)
		}
		// Rerun each topology alone: the study's sums must match.
		sum, layouts := 0, int64(0)
		var s route.Solver
		for i := range cfg.Runs {
			topo, err := Topology(cfg, f.Nodes, i)
			if err != nil {
				t.Fatal(err)
			}
			o, err := Evaluate(&s, topo, false)
			if err != nil {
				t.Fatal(err)
			}
			sum += o.Counts[1]
			layouts += int64(topo.Attempts)
		}
		if mean := float64(sum) / float64(cfg.Runs); mean != f.MeanPaths[route.ND] || layouts != f.Layouts {
			t.Errorf("%d nodes: replayed ND mean %v and %d layouts, study says %v and %d", f.Nodes, mean, layouts, f.MeanPaths[route.ND], f.Layouts)
		}
	}
	r := res.Routes
	if r.Topologies != cfg.RoutesRuns || r.Nodes != 32 || r.Candidates < r.Topologies {
		t.Fatalf("routes: %+v", r)
	}
	for _, a := range CountSeries {
		h, total := r.Counts[a], 0
		for k, c := range h {
			total += c
			if k < 2 && c > 0 {
				t.Errorf("%s found %d paths on %d of the Fig 8 topologies; all must have ≥ 2", a, k, c)
			}
		}
		if total != r.Topologies {
			t.Errorf("%s histogram holds %d topologies, want %d", a, total, r.Topologies)
		}
	}
	for _, name := range HopSeries {
		if h := r.Hops[name]; len(h) > 0 && h[0] > 0 {
			t.Errorf("%s: %d paths of 0 hops: a path is missing", name, h[0])
		}
	}
	if !(r.PairHops["opt-node"] <= r.PairHops["nd"] && r.PairHops["opt-node"] <= r.PairHops["zd"] && r.PairHops["opt-link"] <= r.PairHops["ld"]) {
		t.Errorf("the cheapest pairs are longer than greedy ones on average: %v", r.PairHops)
	}
	// The first Fig 8 topology drawn alone is the one the study used.
	topo, err := RoutesTopology(cfg, 32, 0)
	if err != nil {
		t.Fatal(err)
	}
	var s route.Solver
	o, _ := Evaluate(&s, topo, true)
	one := cfg
	one.Runs, one.RoutesRuns = 0, 1
	res1, err := Run(context.Background(), one, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, name := range HopSeries {
		if h := res1.Routes.Hops[name]; o.Hops[k] >= len(h) || h[o.Hops[k]] != 1 {
			t.Errorf("%s: the replayed topology's path has %d hops, the study's histogram is %v", name, o.Hops[k], h)
		}
	}
}

func TestRunErrors(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Nodes = []int{1} },
		func(c *Config) { c.RoutesNodes = 0 },
		func(c *Config) { c.Radius = -3 },
		func(c *Config) { c.Runs = -1 },
		func(c *Config) { c.Runs, c.RoutesRuns = 0, 0 },
		func(c *Config) { c.Nodes = nil },
	}
	for i, f := range bad {
		cfg := small()
		f(&cfg)
		if _, err := Run(context.Background(), cfg, nil); !errors.Is(err, route.ErrBadParam) {
			t.Errorf("case %d: %v, want ErrBadParam", i, err)
		}
	}
	// Two nodes have one path at most: Figs 8–9 can never fill.
	cfg := small()
	cfg.Runs, cfg.RoutesNodes, cfg.RoutesRuns, cfg.MaxCandidatesPerRun = 0, 2, 3, 10
	if _, err := Run(context.Background(), cfg, nil); !errors.Is(err, route.ErrNoLayout) {
		t.Errorf("2-node routes study: %v, want ErrNoLayout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, small(), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestHistStats(t *testing.T) {
	// values 2,2,3,3,3,4,4,5,9,9: mean 4.4, median 3 (5th of 10), p90 9.
	h := []int{0, 0, 2, 3, 2, 1, 0, 0, 0, 2}
	st := histStats(h)
	if st.mean != 4.4 || st.min != 2 || st.median != 3 || st.p90 != 9 || st.max != 9 {
		t.Errorf("histStats = %+v", st)
	}
	if st := histStats(nil); st != (stats{}) {
		t.Errorf("empty: %+v", st)
	}
}

func TestTables(t *testing.T) {
	res, err := Run(context.Background(), small(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var txt, md bytes.Buffer
	if err := WriteText(&txt, res); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Fig 7", "Fig 8", "Fig 9", "max-node", "opt-node-2nd", "zd-2nd"} {
		if !strings.Contains(txt.String(), want) || !strings.Contains(md.String(), want) {
			t.Errorf("tables lack %q", want)
		}
	}
	// One Fig 7 row per node count, with the share of ND multipath.
	f := res.Feasibility[1]
	row := "| 32 | "
	if !strings.Contains(md.String(), row) {
		t.Errorf("markdown lacks a row starting %q:\n%s", row, md.String())
	}
	if want := pct(f.Multipath[route.ND], f.Topologies); !strings.Contains(md.String(), want) {
		t.Errorf("markdown lacks the ND share %s", want)
	}
}
