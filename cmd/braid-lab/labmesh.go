package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/lab/mesh"
	"github.com/braid-vpn/braid/lab/progress"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
	"github.com/braid-vpn/braid/route"
)

// labMeshGeteuid is os.Geteuid; tests replace it to see the non-root error.
var labMeshGeteuid = os.Geteuid

// parseChannels reads --channels: 1, 2 or both.
func parseChannels(s string) ([]mesh.Channels, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1":
		return []mesh.Channels{mesh.SingleChannel}, nil
	case "2":
		return []mesh.Channels{mesh.TwoChannels}, nil
	case "both", "1,2":
		return []mesh.Channels{mesh.SingleChannel, mesh.TwoChannels}, nil
	}
	return nil, fmt.Errorf("--channels: %q (want 1, 2 or both)", s)
}

func newLabMeshCmd() *cobra.Command {
	var (
		nodes, topologies, reps int
		seed                    uint64
		channels, size, rate    string
		out, cc, scheduler      string
		algos                   []string
		file, from, to          string
		timeout                 time.Duration
		asJSON, force           bool
	)
	cmd := &cobra.Command{
		Use:   "mesh",
		Short: "The seed's Fig. 10 on emulated meshes: TCP vs braid over LD/ND/ZD route pairs, one vs two channels (root)",
		Long: `mesh draws random topologies (--nodes nodes in 100 × 100 m, 20 m radio range) in
which the greedy LD, ND and ZD algorithms each find two disjoint paths, builds
each as one network namespace per node on the two paths with an emulated
link per hop (11 Mbit/s per channel, 1–2 ms per hop), and times HTTP downloads
of --size: single-path TCP over the shortest path, and braid over each
algorithm's route pair, with the radios on one channel (the hops of both paths
share one capacity) and on two (each path its own). It reports goodput against
the hop count of the shortest path (table; --out DIR also writes results.json,
CSV, tables.md and plots). --graph FILE --from S --to D runs one topology of
your own instead. See docs/lab.md ("Mesh lab").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if labMeshGeteuid() != 0 {
				return runner.ErrNotRoot
			}
			chs, err := parseChannels(channels)
			if err != nil {
				return err
			}
			n, err := scenario.ParseSize(size)
			if err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			r, err := scenario.ParseRate(rate)
			if err != nil || r == 0 {
				return fmt.Errorf("--rate: %v", orMsg(err, "a channel needs a rate"))
			}
			if reps < 1 || reps > scenario.MaxReps {
				return fmt.Errorf("--reps: %d is outside 1..%d", reps, scenario.MaxReps)
			}
			if topologies < 1 {
				return fmt.Errorf("--topologies: %d (want ≥ 1)", topologies)
			}
			var as []route.Algorithm
			for _, s := range algos {
				a, err := route.ParseAlgorithm(s)
				if err != nil || !a.Greedy() {
					return fmt.Errorf("--algos: %q (want ld, nd or zd)", s)
				}
				as = append(as, a)
			}
			e := mesh.Experiment{
				Nodes: nodes, Topologies: topologies, Seed: seed, Channels: chs, Algorithms: as,
				Size: n, Reps: reps, Mesh: mesh.Config{Rate: uint64(r)}, CC: cc, Scheduler: scheduler,
				Timeout: timeout, Braid: labBraidCommand(),
			}
			if file != "" {
				g, src, dst, err := readGraphFile(file, from, to)
				if err != nil {
					return err
				}
				e.Topology = &route.Topology{Graph: g, Src: src, Dst: dst}
			} else if from != "" || to != "" {
				return errors.New("--from and --to need --graph")
			}
			stderr := cmd.ErrOrStderr()
			release, _, err := startLab(stderr, out, force)
			if err != nil {
				return err
			}
			defer release()
			if _, err := netns.Cleanup(mesh.Prefix); err != nil {
				return fmt.Errorf("removing stale namespaces: %w", err)
			}
			ctx, w, stop := labContext(cmd)
			defer stop()
			bar := progress.New(w, e.Steps(), isTerminal(stderr))
			e.Progress = bar.Step
			res, runErr := mesh.Run(ctx, e)
			bar.Done()
			if res == nil {
				return runErr
			}
			res.GraphFile = file
			if errors.Is(runErr, context.Canceled) {
				runErr = fmt.Errorf("interrupted after %d of %d topologies; the namespaces were removed", len(res.Runs), res.Topologies)
			}
			if err := finishLab(cmd, out, asJSON, res.Document(), nil); err != nil {
				return err
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.IntVar(&nodes, "nodes", mesh.DefaultNodes, "nodes per random topology")
	f.IntVar(&topologies, "topologies", mesh.DefaultTopologies, "random topologies (each with two LD, ND and ZD paths)")
	f.Uint64Var(&seed, "seed", mesh.DefaultSeed, "seed of the topologies (the stream of braid routes stats' Figs 8–9)")
	f.StringVar(&channels, "channels", "both", "radio model for braid: 1 (both paths share one channel), 2 (a channel per path) or both")
	f.StringSliceVar(&algos, "algos", []string{"ld", "nd", "zd"}, "route pairs to run braid over")
	f.StringVar(&size, "size", "4MiB", `download size, e.g. "4MiB"`)
	f.IntVar(&reps, "reps", mesh.DefaultReps, "downloads per case and topology")
	f.StringVar(&rate, "rate", "11mbit", "capacity of one channel")
	f.StringVar(&cc, "cc", mesh.DefaultCC, "TCP congestion control of the downloads")
	f.StringVar(&scheduler, "scheduler", "", "braid scheduler (default: braid's)")
	f.DurationVar(&timeout, "timeout", 0, "give up on a download after this long (default: 30s + the size at 0.5 Mbit/s)")
	f.StringVar(&file, "graph", "", "run this topology (JSON, see docs/routes.md) instead of random ones")
	f.StringVar(&from, "from", "", "source node ID (with --graph)")
	f.StringVar(&to, "to", "", "destination node ID (with --graph)")
	f.StringVar(&out, "out", "", "directory for results.json, samples.csv, summary.csv, tables.md and plots (PNG, SVG)")
	f.BoolVar(&asJSON, "json", false, "print the results as one JSON document on stdout")
	registerForce(cmd, &force)
	return cmd
}

func orMsg(err error, msg string) string {
	if err != nil {
		return err.Error()
	}
	return msg
}
