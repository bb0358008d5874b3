package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot/vg"

	"github.com/braid-vpn/braid/lab/progress"
	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/table"
	"github.com/braid-vpn/braid/route"
	"github.com/braid-vpn/braid/route/figures"
	"github.com/braid-vpn/braid/route/study"
)

func newRoutesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "routes",
		Short: "Disjoint multipath routes over mesh topologies (greedy LD/ND/ZD and optimal)",
		Long: `Find link-, node- and zone-disjoint paths through a mesh: the seed's greedy
algorithms (ld, nd, zd), the most disjoint paths (max-link, max-node) and the k
disjoint paths of least total cost (opt-link, opt-node). See docs/routes.md.`,
	}
	c.AddCommand(newRoutesStatsCmd(), newRoutesPathsCmd(), newRoutesShowCmd())
	return c
}

func newRoutesStatsCmd() *cobra.Command {
	cfg := study.DefaultConfig()
	var asJSON, markdown bool
	var out string
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "The seed's Figs 7–9 on random topologies: how many disjoint paths each algorithm finds",
		Long: `Draw random meshes and run every algorithm on them: Fig 7, the share of
topologies with ≥ 2 disjoint paths per node count (--runs each); Fig 8, the number
of paths at --routes-nodes nodes over --routes-runs topologies where ld, nd and zd
all find ≥ 2; Fig 9, the hop counts of the two preferred paths on those. Prints
tables (or --json, --markdown); --out DIR also writes routes.json, tables.md and
the figures as PNG and SVG. Results depend only on the flags. See docs/routes.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON && markdown {
				return errors.New("--json and --markdown exclude each other")
			}
			if !cmd.Flags().Changed("routes-runs") {
				cfg.RoutesRuns = cfg.Runs
			}
			if out != "" {
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
			}
			stderr := cmd.ErrOrStderr()
			bar := progress.New(stderr, study.Steps(cfg), isTerminal(stderr))
			start := time.Now()
			res, err := study.Run(cmd.Context(), cfg, func(_, _ int, label string) { bar.Step(label) })
			bar.Done()
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "study took %.1f s\n", time.Since(start).Seconds())
			if out != "" {
				if err := writeStudy(res, out); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "routes.json, tables.md and figures written to %s\n", out)
			}
			switch stdout := cmd.OutOrStdout(); {
			case asJSON:
				return writeJSON(stdout, res)
			case markdown:
				return study.WriteMarkdown(stdout, res)
			default:
				return study.WriteText(stdout, res)
			}
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed; the same seed gives the same topologies")
	f.IntVar(&cfg.Runs, "runs", cfg.Runs, "connected topologies per node count (Fig 7)")
	f.IntSliceVar(&cfg.Nodes, "nodes", cfg.Nodes, "node counts of Fig 7")
	f.IntVar(&cfg.RoutesNodes, "routes-nodes", cfg.RoutesNodes, "node count of Figs 8 and 9")
	f.IntVar(&cfg.RoutesRuns, "routes-runs", cfg.RoutesRuns, "topologies of Figs 8 and 9 (default: --runs)")
	f.Float64Var(&cfg.Side, "side", cfg.Side, "side of the square in metres")
	f.Float64Var(&cfg.Radius, "radius", cfg.Radius, "radio range in metres")
	f.IntVar(&cfg.Workers, "workers", 0, "parallel workers (default: all CPUs); results do not depend on it")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.BoolVar(&markdown, "markdown", false, "print the tables as Markdown")
	f.StringVar(&out, "out", "", "also write routes.json, tables.md and the figures (PNG, SVG) to this directory")
	return cmd
}

func writeStudy(res *study.Result, dir string) error {
	if err := writeJSONFile(filepath.Join(dir, "routes.json"), res); err != nil {
		return err
	}
	_, err := (&report.Doc{
		MarkdownFile: "tables.md",
		Markdown:     func(w io.Writer, _ []string) error { return study.WriteMarkdown(w, res) },
		Plot:         func(dir string) ([]string, error) { return figures.WriteStudy(res, dir) },
	}).Write(dir)
	return err
}

// writeJSONFile writes v to the file name as writeJSON does.
func writeJSONFile(name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(name, append(data, '\n'), 0o644)
}

// algoFlags are the flags paths and show share.
type algoFlags struct {
	algo, metric string
	k            int
}

func (a *algoFlags) register(cmd *cobra.Command, defAlgo string) {
	f := cmd.Flags()
	f.StringVar(&a.algo, "algo", defAlgo, "ld, nd, zd (greedy), max-link, max-node (most paths), opt-link, opt-node (k paths of least total cost)")
	f.IntVar(&a.k, "k", 2, "number of paths for opt-link and opt-node")
	f.StringVar(&a.metric, "metric", "hops", "path cost: hops, or weight (the links' weights)")
}

func (a *algoFlags) parse(cmd *cobra.Command) (route.Algorithm, route.Metric, error) {
	algo, err := route.ParseAlgorithm(a.algo)
	if err != nil {
		return "", 0, err
	}
	m, err := route.ParseMetric(a.metric)
	if err != nil {
		return "", 0, err
	}
	if cmd.Flags().Changed("k") && !algo.UsesK() {
		return "", 0, fmt.Errorf("--k applies to opt-link and opt-node only, not %s", algo)
	}
	return algo, m, nil
}

// readGraphFile reads a graph file as a topology between the nodes from and to.
func readGraphFile(file, from, to string) (*route.Topology, error) {
	if file == "" {
		return nil, errors.New("--graph FILE is required")
	}
	if from == "" || to == "" {
		return nil, errors.New("--from and --to are required")
	}
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	t := &route.Topology{}
	if t.Graph, err = route.ReadGraph(fh); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if t.Src, err = t.Graph.Index(from); err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	if t.Dst, err = t.Graph.Index(to); err != nil {
		return nil, fmt.Errorf("--to: %w", err)
	}
	return t, nil
}

// pathsReport is `braid routes paths --json`.
type pathsReport struct {
	Algo         route.Algorithm `json:"algo"`
	Disjointness string          `json:"disjointness"`
	Metric       string          `json:"metric"`
	K            int             `json:"k,omitempty"`
	From         string          `json:"from"`
	To           string          `json:"to"`
	Paths        []pathReport    `json:"paths"`
}

type pathReport struct {
	Nodes []string `json:"nodes"`
	Hops  int      `json:"hops"`
	Cost  float64  `json:"cost"`
}

// findPaths finds the paths of algorithm a (k of them, where it takes k)
// on t, as their report.
func findPaths(t *route.Topology, a route.Algorithm, k int, m route.Metric) (pathsReport, []route.Path, error) {
	g := t.Graph
	ps, err := route.Find(g, t.Src, t.Dst, a, k, m)
	r := pathsReport{Algo: a, Disjointness: a.Disjointness().String(), Metric: m.String(), From: g.ID(t.Src), To: g.ID(t.Dst), Paths: []pathReport{}}
	if a.UsesK() {
		r.K = k
	}
	for _, p := range ps {
		r.Paths = append(r.Paths, pathReport{Nodes: g.IDs(p), Hops: p.Hops(), Cost: g.PathCost(p, m)})
	}
	return r, ps, err
}

func printPaths(w io.Writer, r pathsReport) {
	fmt.Fprintf(w, "%s: %d %s-disjoint path(s) from %s to %s (cost: %s)\n", r.Algo, len(r.Paths), r.Disjointness, r.From, r.To, r.Metric)
	var rows [][]string
	for i, p := range r.Paths {
		rows = append(rows, []string{fmt.Sprintf("  %d", i+1), strings.Join(p.Nodes, " → "), fmt.Sprintf("%d hops", p.Hops), fmt.Sprintf("cost %g", p.Cost)})
	}
	table.WriteText(w, rows)
}

func newRoutesPathsCmd() *cobra.Command {
	var file, from, to string
	var af algoFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "paths --graph FILE --from S --to D [--algo ALGO] [--k K]",
		Short: "Disjoint paths between two nodes of your own topology",
		Long: `Read a topology (JSON, see docs/routes.md) and print the disjoint paths
--algo finds from --from to --to. Greedy algorithms list the paths in the order
found (the first is the shortest path); the others cheapest first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			algo, m, err := af.parse(cmd)
			if err != nil {
				return err
			}
			t, err := readGraphFile(file, from, to)
			if err != nil {
				return err
			}
			r, _, err := findPaths(t, algo, af.k, m)
			switch {
			case err != nil:
				return err
			case asJSON:
				return writeJSON(cmd.OutOrStdout(), r)
			}
			printPaths(cmd.OutOrStdout(), r)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "graph", "", "topology file (JSON)")
	cmd.Flags().StringVar(&from, "from", "", "source node ID")
	cmd.Flags().StringVar(&to, "to", "", "destination node ID")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the paths as JSON")
	af.register(cmd, "nd")
	return cmd
}

func newRoutesShowCmd() *cobra.Command {
	var file, from, to, out, title, graphOut string
	var af algoFlags
	var nodes, index int
	var seed uint64
	var feasible bool
	cmd := &cobra.Command{
		Use:   "show --out FILE.png|FILE.svg [--graph FILE --from S --to D | --nodes N --seed S --index I]",
		Short: "Draw one topology with the paths an algorithm finds (the seed's Fig 6)",
		Long: `Draw a topology and the paths --algo finds on it, and print the paths. The
topology is your --graph file (nodes without positions go on a circle) or a
random one as 'braid routes stats' draws them: --index I (from 0) of its Fig 7
stream, or with --feasible of its Figs 8–9 stream. See docs/routes.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out FILE.png or FILE.svg is required")
			}
			if ext := strings.ToLower(filepath.Ext(out)); ext != ".png" && ext != ".svg" {
				return fmt.Errorf("--out %s: want a .png or .svg file", out)
			}
			algo, m, err := af.parse(cmd)
			if err != nil {
				return err
			}
			var t *route.Topology
			if file != "" {
				for _, fl := range []string{"nodes", "seed", "index", "feasible"} {
					if cmd.Flags().Changed(fl) {
						return fmt.Errorf("--%s draws a random topology; it cannot go with --graph", fl)
					}
				}
				if t, err = readGraphFile(file, from, to); err != nil {
					return err
				}
				title = cmp.Or(title, fmt.Sprintf("%s: %s", filepath.Base(file), algo))
			} else {
				if from != "" || to != "" {
					return errors.New("--from and --to go with --graph; a random topology's ends are the nodes nearest (20%, 50%) and (80%, 50%)")
				}
				if index < 0 {
					return fmt.Errorf("--index %d: want ≥ 0", index)
				}
				cfg := study.DefaultConfig()
				cfg.Seed = seed
				pick, kind := study.Topology, "topology"
				if feasible {
					pick, kind = study.RoutesTopology, "multipath topology"
				}
				if t, err = pick(cfg, nodes, index); err != nil {
					return err
				}
				title = cmp.Or(title, fmt.Sprintf("%d nodes, seed %d, %s %d: %s", nodes, seed, kind, index, algo))
			}
			r, ps, err := findPaths(t, algo, af.k, m)
			if err != nil {
				return err
			}
			p, err := figures.Topology(t.Graph, t.Src, t.Dst, ps, title)
			if err != nil {
				return err
			}
			side := vg.Length(figures.TopologyInches) * vg.Inch
			if err := figures.Save(p, out, side, side); err != nil {
				return err
			}
			printPaths(cmd.OutOrStdout(), r)
			fmt.Fprintf(cmd.ErrOrStderr(), "drawn to %s\n", out)
			if graphOut != "" {
				if err := writeJSONFile(graphOut, t.Graph); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "topology written to %s (source %s, destination %s)\n", graphOut, t.Graph.ID(t.Src), t.Graph.ID(t.Dst))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "image file to write (.png or .svg)")
	f.StringVar(&file, "graph", "", "topology file (JSON); default a random topology")
	f.StringVar(&from, "from", "", "source node ID (with --graph)")
	f.StringVar(&to, "to", "", "destination node ID (with --graph)")
	f.IntVar(&nodes, "nodes", 16, "nodes of the random topology")
	f.Uint64Var(&seed, "seed", study.DefaultSeed, "seed of the random topology (as in stats)")
	f.IntVar(&index, "index", 0, "which random topology of the seed's stream")
	f.BoolVar(&feasible, "feasible", false, "pick among topologies where ld, nd and zd all find two paths")
	f.StringVar(&title, "title", "", "figure title")
	f.StringVar(&graphOut, "graph-out", "", "also write the topology as a graph file (for paths, or a mesh lab)")
	af.register(cmd, "ld")
	return cmd
}
