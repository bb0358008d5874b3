package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/lab/mesh"
	"github.com/braid-vpn/braid/lab/progress"
	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/route"
)

// labMeshGeteuid is os.Geteuid; tests replace it to see the non-root error.
var labMeshGeteuid = os.Geteuid

// parseChannels reads --channels: 1, 2 or both.
func parseChannels(s string) ([]mesh.Channels, error) {
	both := []mesh.Channels{mesh.SingleChannel, mesh.TwoChannels}
	choices := map[string][]mesh.Channels{"1": {mesh.SingleChannel}, "2": {mesh.TwoChannels}, "both": both, "1,2": both}
	chs, ok := choices[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return nil, fmt.Errorf("--channels: %q (want 1, 2 or both)", s)
	}
	return chs, nil
}

func newLabMeshCmd() *cobra.Command {
	var (
		e                    mesh.Experiment
		o                    labOut
		channels, size, rate string
		algos                []string
		file, from, to       string
	)
	cmd := &cobra.Command{
		Use:   "mesh",
		Short: "The seed's Fig. 10 on emulated meshes: TCP vs braid over LD/ND/ZD route pairs, one vs two channels (root)",
		Long: `mesh builds random topologies (or --graph FILE --from S --to D, one of your
own) as one network namespace per node with an emulated radio link per hop, and
times HTTP downloads: single-path TCP over the shortest path and braid over the
LD, ND and ZD route pairs, on one radio channel and on two. See docs/lab.md
("Mesh lab").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if labMeshGeteuid() != 0 {
				return runner.ErrNotRoot
			}
			var err error
			if e.Channels, err = parseChannels(channels); err != nil {
				return err
			}
			if e.Size, err = scenario.ParseSize(size); err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			r, err := scenario.ParseRate(rate)
			if err == nil && r == 0 {
				err = errors.New("a channel needs a rate")
			}
			if err != nil {
				return fmt.Errorf("--rate: %w", err)
			}
			if e.Reps < 1 || e.Reps > scenario.MaxReps {
				return fmt.Errorf("--reps: %d is outside 1..%d", e.Reps, scenario.MaxReps)
			}
			if e.Topologies < 1 {
				return fmt.Errorf("--topologies: %d (want ≥ 1)", e.Topologies)
			}
			for _, s := range algos {
				a, err := route.ParseAlgorithm(s)
				if err != nil || !a.Greedy() {
					return fmt.Errorf("--algos: %q (want ld, nd or zd)", s)
				}
				e.Algorithms = append(e.Algorithms, a)
			}
			e.Mesh, e.Braid = mesh.Config{Rate: uint64(r)}, labBraidCommand()
			if file != "" {
				if e.Topology, err = readGraphFile(file, from, to); err != nil {
					return err
				}
			} else if from != "" || to != "" {
				return errors.New("--from and --to need --graph")
			}
			return o.drive(cmd, func(ctx context.Context, w io.Writer, _ string) (*report.Doc, func(io.Writer), error) {
				bar := progress.New(w, e.Steps(), isTerminal(cmd.ErrOrStderr()))
				e.Progress = bar.Step
				res, err := mesh.Run(ctx, e)
				bar.Done()
				if res == nil {
					return nil, nil, err
				}
				res.GraphFile = file
				if errors.Is(err, context.Canceled) {
					err = fmt.Errorf("interrupted after %d of %d topologies; the namespaces were removed", len(res.Runs), res.Topologies)
				}
				return res.Document(), nil, err
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&e.Nodes, "nodes", mesh.DefaultNodes, "nodes per random topology")
	f.IntVar(&e.Topologies, "topologies", mesh.DefaultTopologies, "random topologies (each with two LD, ND and ZD paths)")
	f.Uint64Var(&e.Seed, "seed", mesh.DefaultSeed, "seed of the topologies (the stream of braid routes stats' Figs 8–9)")
	f.StringVar(&channels, "channels", "both", "radio model for braid: 1 (both paths share one channel), 2 (a channel per path) or both")
	f.StringSliceVar(&algos, "algos", []string{"ld", "nd", "zd"}, "route pairs to run braid over")
	f.StringVar(&size, "size", "4MiB", `download size, e.g. "4MiB"`)
	f.IntVar(&e.Reps, "reps", mesh.DefaultReps, "downloads per case and topology")
	f.StringVar(&rate, "rate", "11mbit", "capacity of one channel")
	f.StringVar(&e.CC, "cc", mesh.DefaultCC, "TCP congestion control of the downloads")
	f.StringVar(&e.Scheduler, "scheduler", "", "braid scheduler (default: braid's)")
	f.DurationVar(&e.Timeout, "timeout", 0, "give up on a download after this long (default: 30s + the size at 0.5 Mbit/s)")
	f.StringVar(&file, "graph", "", "run this topology (JSON, see docs/routes.md) instead of random ones")
	f.StringVar(&from, "from", "", "source node ID (with --graph)")
	f.StringVar(&to, "to", "", "destination node ID (with --graph)")
	o.register(cmd, "results.json, samples.csv, summary.csv, tables.md and plots (PNG, SVG)", true)
	return cmd
}
