// Package study runs the seed's random-topology study of disjoint
// multipath routing (seeds/003, §5.2.1, Figs 7–9) with braid's route
// package, greedy and optimal algorithms side by side:
//
//   - Fig 7: for each node count, the share of connected random layouts
//     in which each algorithm finds at least two disjoint paths;
//   - Fig 8: over layouts of RoutesNodes nodes in which LD, ND and ZD all
//     find at least two paths, the distribution of the number of paths;
//   - Fig 9: over the same layouts, the hop counts of the two preferred
//     paths (the shortest path, every greedy algorithm's second path, and
//     both paths of the cheapest disjoint pairs).
//
// Every layout comes from its own random stream, derived from the seed,
// the figure and the layout's number (Stream), so results do not depend
// on the number of workers and any single layout can be drawn again on
// its own (Topology, RoutesTopology).
package study

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/braid-vpn/braid/route"
)

// Config is one study. The defaults are the seed's.
type Config struct {
	// Seed selects the random streams. Default 1.
	Seed uint64 `json:"seed"`
	// Runs is the number of connected layouts per node count (Fig 7).
	// Default 1000, as in the seed.
	Runs int `json:"runs"`
	// Nodes are the node counts of Fig 7. Default 8, 12, …, 40.
	Nodes []int `json:"nodes"`
	// RoutesNodes is the node count of Figs 8 and 9. Default 32.
	RoutesNodes int `json:"routes_nodes"`
	// RoutesRuns is the number of layouts, among those where LD, ND and
	// ZD all find two paths, that Figs 8 and 9 are drawn from. Default
	// 1000.
	RoutesRuns int `json:"routes_runs"`
	// Side and Radius are the square's side and the radio range, in
	// metres. Defaults 100 and 20. Source and destination are the nodes
	// nearest (0.2, 0.5) and (0.8, 0.5) × Side.
	Side   float64 `json:"side_m"`
	Radius float64 `json:"radius_m"`
	// Workers is the number of goroutines; results do not depend on it.
	// Default GOMAXPROCS.
	Workers int `json:"-"`
	// MaxCandidatesPerRun bounds the Fig 8 search: at most this many
	// connected layouts are examined per wanted one before giving up
	// (with few nodes, ZD almost never finds two paths). Default 1000.
	MaxCandidatesPerRun int `json:"-"`
}

// Defaults of Config.
const (
	DefaultSeed        = 1
	DefaultRuns        = 1000
	DefaultRoutesNodes = 32
)

// DefaultNodes are Fig 7's node counts.
// maxRuns bounds the runs per node count (an int64 so that the bound
// compiles on 32-bit targets, where it exceeds int).
const maxRuns int64 = 1 << 31

func DefaultNodes() []int { return []int{8, 12, 16, 20, 24, 28, 32, 36, 40} }

// DefaultConfig is the seed's study.
func DefaultConfig() Config {
	return Config{
		Seed:        DefaultSeed,
		Runs:        DefaultRuns,
		Nodes:       DefaultNodes(),
		RoutesNodes: DefaultRoutesNodes,
		RoutesRuns:  DefaultRuns,
		Side:        route.DefaultSide,
		Radius:      route.DefaultRadius,
	}
}

func (c *Config) fill() error {
	if c.Side == 0 {
		c.Side = route.DefaultSide
	}
	if c.Radius == 0 {
		c.Radius = route.DefaultRadius
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.MaxCandidatesPerRun <= 0 {
		c.MaxCandidatesPerRun = 1000
	}
	for _, n := range append([]int{c.RoutesNodes}, c.Nodes...) {
		if n < 2 || n > 1<<16 {
			return fmt.Errorf("%w: %d nodes (want 2 to %d)", route.ErrBadParam, n, 1<<16)
		}
	}
	if _, err := route.NewGenerator(c.geo(2)); err != nil {
		return err
	}
	return nil
}

func (c *Config) geo(n int) route.GeoConfig {
	g := route.DefaultGeoConfig(n)
	g.Side, g.Radius = c.Side, c.Radius
	g.Src = route.Point{X: 0.2 * c.Side, Y: 0.5 * c.Side}
	g.Dst = route.Point{X: 0.8 * c.Side, Y: 0.5 * c.Side}
	return g
}

// The random streams: one PCG stream per layout.
const (
	streamFig7   = 1
	streamRoutes = 2
)

// Stream is the random source of layout i of a figure's layouts with n
// nodes: PCG seeded with (seed, figure<<56 | n<<32 | i), figure 1 for
// Fig 7's runs and 2 for the candidates of Figs 8–9.
func Stream(seed uint64, figure, n, i int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(figure)<<56|uint64(n)<<32|uint64(uint32(i))))
}

// Count series: how many paths each algorithm finds.
var CountSeries = []route.Algorithm{route.LD, route.ND, route.ZD, route.MaxLink, route.MaxNode}

// Hop series of Fig 9: the shortest path (every greedy algorithm's
// first), each greedy algorithm's second path, and the cheaper and the
// costlier path of the cheapest link- and node-disjoint pairs.
var HopSeries = []string{"shortest", "ld-2nd", "nd-2nd", "zd-2nd", "opt-link-1st", "opt-link-2nd", "opt-node-1st", "opt-node-2nd"}

// Pair series: the total hops of two paths.
var PairSeries = []string{"ld", "nd", "zd", "opt-link", "opt-node"}

// Outcome is what the algorithms find on one layout.
type Outcome struct {
	// Counts follows CountSeries.
	Counts [5]int
	// Hops follows HopSeries; 0 where that path does not exist.
	Hops [8]int
}

// Feasible is Figs 8–9's condition: LD, ND and ZD all find two paths.
func (o *Outcome) Feasible() bool { return o.Counts[0] >= 2 && o.Counts[1] >= 2 && o.Counts[2] >= 2 }

// Evaluate runs every algorithm on t; hops also computes the cheapest
// pairs (Fig 9), which Fig 7 does not need.
func Evaluate(s *route.Solver, t *route.Topology, hops bool) (Outcome, error) {
	var o Outcome
	for i, a := range CountSeries {
		ps, err := s.Find(t.Graph, t.Src, t.Dst, a, 0, route.HopCount)
		if err != nil {
			return o, fmt.Errorf("%s: %w", a, err)
		}
		o.Counts[i] = len(ps)
		if i < 3 {
			o.Hops[0] = ps[0].Hops()
			if len(ps) > 1 {
				o.Hops[1+i] = ps[1].Hops()
			}
		}
	}
	if !hops {
		return o, nil
	}
	for i, a := range []route.Algorithm{route.OptLink, route.OptNode} {
		if o.Counts[3+i] < 2 {
			continue
		}
		ps, err := s.Find(t.Graph, t.Src, t.Dst, a, 2, route.HopCount)
		if err != nil {
			return o, fmt.Errorf("%s: %w", a, err)
		}
		o.Hops[4+2*i] = min(ps[0].Hops(), ps[1].Hops())
		o.Hops[5+2*i] = max(ps[0].Hops(), ps[1].Hops())
	}
	return o, nil
}

// Result is a study's outcome, as `braid routes stats --json` writes it.
type Result struct {
	Config      Config        `json:"config"`
	Feasibility []Feasibility `json:"feasibility"`
	Routes      *Routes       `json:"routes,omitempty"`
}

// Feasibility is Fig 7's data for one node count.
type Feasibility struct {
	Nodes int `json:"nodes"`
	// Topologies is the number of connected layouts studied; Layouts the
	// number drawn to get them (disconnected ones are redrawn).
	Topologies int   `json:"topologies"`
	Layouts    int64 `json:"layouts"`
	// Multipath counts, per algorithm, the topologies where it found at
	// least two paths.
	Multipath map[route.Algorithm]int `json:"multipath"`
	// MeanPaths is the mean number of paths per algorithm.
	MeanPaths map[route.Algorithm]float64 `json:"mean_paths"`
	// MeanShortestHops is the mean hop count of the shortest path.
	MeanShortestHops float64 `json:"mean_shortest_hops"`
	// Missed counts the topologies where greedy LD found fewer paths than
	// max-link ("ld"), and greedy ND or ZD fewer than max-node.
	Missed map[route.Algorithm]int `json:"missed"`
	// Trapped counts the topologies where the greedy algorithm found one
	// path but two disjoint ones of its kind exist (ZD against
	// max-node: ZD paths are node-disjoint).
	Trapped map[route.Algorithm]int `json:"trapped"`
}

// Share is the fraction of topologies where a found at least two paths.
func (f *Feasibility) Share(a route.Algorithm) float64 {
	if f.Topologies == 0 {
		return 0
	}
	return float64(f.Multipath[a]) / float64(f.Topologies)
}

// Routes is Figs 8–9's data.
type Routes struct {
	Nodes int `json:"nodes"`
	// Topologies is the number of layouts where LD, ND and ZD all found
	// two paths; Candidates the connected layouts examined to get them,
	// Layouts the layouts drawn.
	Topologies int   `json:"topologies"`
	Candidates int   `json:"candidates"`
	Layouts    int64 `json:"layouts"`
	// Counts[a][k] is the number of topologies where a found k paths.
	Counts map[route.Algorithm][]int `json:"counts"`
	// Hops[s][h] is the number of topologies whose path s has h hops
	// (HopSeries).
	Hops map[string][]int `json:"hops"`
	// PairHops is the mean total hops of the first two paths of each
	// greedy algorithm and of the cheapest pairs (PairSeries).
	PairHops map[string]float64 `json:"pair_hops_mean"`
	// ShorterPair counts the topologies where the cheapest pair has
	// fewer hops in total than the greedy pair of the same kind:
	// "ld" against opt-link, "nd" and "zd" against opt-node.
	ShorterPair map[string]int `json:"shorter_pair"`
	// DetourFirst counts the topologies where the cheaper path of the
	// cheapest pair is longer than the shortest path: the optimum gives
	// the shortest path up.
	DetourFirst map[string]int `json:"detour_first"`
}

// Progress is told about each finished step: a node count of Fig 7, or
// (up to) 100 layouts of Figs 8–9. Total is the number of steps.
type Progress func(done, total int, label string)

// Steps is the number of Progress steps cfg makes.
func Steps(cfg Config) int {
	n := 0
	if cfg.Runs > 0 {
		n += len(cfg.Nodes)
	}
	return n + (cfg.RoutesRuns+99)/100
}

// Run runs the study. It stops early, returning ctx's error, when ctx is
// cancelled.
func Run(ctx context.Context, cfg Config, progress Progress) (*Result, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if cfg.Runs < 0 || cfg.RoutesRuns < 0 {
		return nil, fmt.Errorf("%w: runs %d, routes runs %d (want ≥ 0)", route.ErrBadParam, cfg.Runs, cfg.RoutesRuns)
	}
	if cfg.Runs == 0 && cfg.RoutesRuns == 0 {
		return nil, fmt.Errorf("%w: nothing to do (no runs)", route.ErrBadParam)
	}
	if int64(cfg.Runs) > maxRuns || cfg.RoutesRuns > 1<<20 {
		return nil, fmt.Errorf("%w: at most %d runs per node count and %d routes runs", route.ErrBadParam, int64(maxRuns), 1<<20)
	}
	if cfg.Runs > 0 && len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("%w: no node counts", route.ErrBadParam)
	}
	if progress == nil {
		progress = func(int, int, string) {}
	}
	res := &Result{Config: cfg}
	total, done := Steps(cfg), 0
	if cfg.Runs > 0 {
		for _, n := range cfg.Nodes {
			f, err := feasibility(ctx, &cfg, n)
			if err != nil {
				return nil, err
			}
			res.Feasibility = append(res.Feasibility, f)
			done++
			progress(done, total, fmt.Sprintf("fig 7: %d nodes, %.1f%% ND multipath", n, 100*f.Share(route.ND)))
		}
	}
	if cfg.RoutesRuns > 0 {
		before := done
		r, err := routes(ctx, &cfg, func(accepted int) {
			target := before + accepted/100
			if accepted >= cfg.RoutesRuns {
				target = total
			}
			for done < target {
				done++
				progress(done, total, fmt.Sprintf("figs 8–9: %d/%d topologies with two LD, ND and ZD paths", accepted, cfg.RoutesRuns))
			}
		})
		if err != nil {
			return nil, err
		}
		res.Routes = r
	}
	return res, nil
}

// parallel calls work(w, i) for i in [lo, hi) on cfg.Workers goroutines,
// w being the worker's number, and returns the first error.
func parallel(ctx context.Context, workers, lo, hi int, work func(w, i int) error) error {
	var next atomic.Int64
	next.Store(int64(lo))
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= hi {
					return
				}
				if i%64 == 0 {
					if err := ctx.Err(); err != nil {
						errs[w] = err
						return
					}
				}
				if err := work(w, i); err != nil {
					errs[w] = err
					next.Store(int64(hi))
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

type worker struct {
	gen    *route.Generator
	solver route.Solver
}

func workers(cfg *Config, n int) ([]*worker, error) {
	ws := make([]*worker, cfg.Workers)
	for i := range ws {
		gen, err := route.NewGenerator(cfg.geo(n))
		if err != nil {
			return nil, err
		}
		ws[i] = &worker{gen: gen}
	}
	return ws, nil
}

type sample struct {
	o       Outcome
	layouts int
}

func feasibility(ctx context.Context, cfg *Config, n int) (Feasibility, error) {
	ws, err := workers(cfg, n)
	if err != nil {
		return Feasibility{}, err
	}
	samples := make([]sample, cfg.Runs)
	err = parallel(ctx, cfg.Workers, 0, cfg.Runs, func(w, i int) error {
		t, err := ws[w].gen.Next(Stream(cfg.Seed, streamFig7, n, i))
		if err != nil {
			return err
		}
		o, err := Evaluate(&ws[w].solver, t, false)
		if err != nil {
			return fmt.Errorf("%d nodes, run %d: %w", n, i, err)
		}
		samples[i] = sample{o, t.Attempts}
		return nil
	})
	if err != nil {
		return Feasibility{}, err
	}
	f := Feasibility{
		Nodes:      n,
		Topologies: cfg.Runs,
		Multipath:  map[route.Algorithm]int{},
		MeanPaths:  map[route.Algorithm]float64{},
		Missed:     map[route.Algorithm]int{},
		Trapped:    map[route.Algorithm]int{},
	}
	for _, a := range CountSeries {
		f.Multipath[a] = 0
	}
	for _, a := range CountSeries[:3] {
		f.Missed[a], f.Trapped[a] = 0, 0
	}
	sums := map[route.Algorithm]int{}
	hops := 0
	for _, s := range samples {
		f.Layouts += int64(s.layouts)
		hops += s.o.Hops[0]
		c := s.o.Counts
		for k, a := range CountSeries {
			sums[a] += c[k]
			if c[k] >= 2 {
				f.Multipath[a]++
			}
		}
		for k, a := range CountSeries[:3] {
			best := c[4] // max-node for ND and ZD
			if k == 0 {
				best = c[3] // max-link for LD
			}
			if c[k] < best {
				f.Missed[a]++
			}
			if c[k] < 2 && best >= 2 {
				f.Trapped[a]++
			}
		}
	}
	for _, a := range CountSeries {
		f.MeanPaths[a] = float64(sums[a]) / float64(cfg.Runs)
	}
	f.MeanShortestHops = float64(hops) / float64(cfg.Runs)
	return f, nil
}

// routes collects Figs 8–9: candidates are evaluated in parallel rounds
// and accepted in candidate order, so the set is the first RoutesRuns
// feasible candidates of the stream whatever the number of workers.
func routes(ctx context.Context, cfg *Config, accepted func(int)) (*Routes, error) {
	n := cfg.RoutesNodes
	ws, err := workers(cfg, n)
	if err != nil {
		return nil, err
	}
	r := &Routes{
		Nodes:       n,
		Counts:      map[route.Algorithm][]int{},
		Hops:        map[string][]int{},
		PairHops:    map[string]float64{},
		ShorterPair: map[string]int{"ld": 0, "nd": 0, "zd": 0},
		DetourFirst: map[string]int{"opt-link": 0, "opt-node": 0},
	}
	var kept []Outcome
	limit := cfg.MaxCandidatesPerRun * cfg.RoutesRuns
	round := 256
	next := 0
	for len(kept) < cfg.RoutesRuns {
		if next >= limit {
			return nil, fmt.Errorf("%w: only %d of %d %d-node layouts where LD, ND and ZD all find two paths among %d connected ones", route.ErrNoLayout, len(kept), cfg.RoutesRuns, n, next)
		}
		hi := min(next+round, limit)
		samples := make([]sample, hi-next)
		base := next
		err := parallel(ctx, cfg.Workers, base, hi, func(w, i int) error {
			t, err := ws[w].gen.Next(Stream(cfg.Seed, streamRoutes, n, i))
			if err != nil {
				return err
			}
			o, err := Evaluate(&ws[w].solver, t, false)
			if err != nil {
				return fmt.Errorf("%d nodes, candidate %d: %w", n, i, err)
			}
			if o.Feasible() {
				if o, err = Evaluate(&ws[w].solver, t, true); err != nil {
					return fmt.Errorf("%d nodes, candidate %d: %w", n, i, err)
				}
			}
			samples[i-base] = sample{o, t.Attempts}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, s := range samples {
			r.Candidates++
			r.Layouts += int64(s.layouts)
			if s.o.Feasible() {
				kept = append(kept, s.o)
				if len(kept) == cfg.RoutesRuns {
					break
				}
			}
		}
		next = hi
		accepted(len(kept))
		// Size the next round by the acceptance rate so far.
		if len(kept) > 0 {
			round = (cfg.RoutesRuns - len(kept)) * r.Candidates / len(kept) * 11 / 10
		} else {
			round *= 4
		}
		round = max(64, min(round, 1<<16))
	}
	r.Topologies = len(kept)
	for k, a := range CountSeries {
		for _, o := range kept {
			r.Counts[a] = addHist(r.Counts[a], o.Counts[k])
		}
	}
	for k, name := range HopSeries {
		r.Hops[name] = []int{}
		for _, o := range kept {
			r.Hops[name] = addHist(r.Hops[name], o.Hops[k])
		}
	}
	sum := map[string]int{}
	for _, o := range kept {
		h := o.Hops
		pair := map[string]int{
			"ld": h[0] + h[1], "nd": h[0] + h[2], "zd": h[0] + h[3],
			"opt-link": h[4] + h[5], "opt-node": h[6] + h[7],
		}
		for name, v := range pair {
			sum[name] += v
		}
		if pair["opt-link"] < pair["ld"] {
			r.ShorterPair["ld"]++
		}
		if pair["opt-node"] < pair["nd"] {
			r.ShorterPair["nd"]++
		}
		if pair["opt-node"] < pair["zd"] {
			r.ShorterPair["zd"]++
		}
		if h[4] > h[0] {
			r.DetourFirst["opt-link"]++
		}
		if h[6] > h[0] {
			r.DetourFirst["opt-node"]++
		}
	}
	for _, name := range PairSeries {
		r.PairHops[name] = float64(sum[name]) / float64(len(kept))
	}
	return r, nil
}

func addHist(h []int, v int) []int {
	for len(h) <= v {
		h = append(h, 0)
	}
	h[v]++
	return h
}

// Topology draws run i of Fig 7's layouts with n nodes again.
func Topology(cfg Config, n, i int) (*route.Topology, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return route.RandomGeometric(Stream(cfg.Seed, streamFig7, n, i), cfg.geo(n))
}

// RoutesTopology draws the i-th (from 0) layout with n nodes in which LD,
// ND and ZD all find two paths, as Figs 8–9 count them (with n =
// cfg.RoutesNodes, the i-th of their layouts).
func RoutesTopology(cfg Config, n, i int) (*route.Topology, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if i < 0 {
		return nil, fmt.Errorf("%w: index %d", route.ErrBadParam, i)
	}
	gen, err := route.NewGenerator(cfg.geo(n))
	if err != nil {
		return nil, err
	}
	var s route.Solver
	found := 0
	limit := cfg.MaxCandidatesPerRun * (i + 1)
	for c := 0; c < limit; c++ {
		t, err := gen.Next(Stream(cfg.Seed, streamRoutes, n, c))
		if err != nil {
			return nil, err
		}
		o, err := Evaluate(&s, t, false)
		if err != nil {
			return nil, err
		}
		if o.Feasible() {
			if found == i {
				out := *t
				out.Graph = t.Graph.Clone()
				return &out, nil
			}
			found++
		}
	}
	return nil, fmt.Errorf("%w: only %d %d-node layouts where LD, ND and ZD all find two paths among %d connected ones", route.ErrNoLayout, found, n, limit)
}
