package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/lab/bench"
	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenario"
)

func newLabBenchCmd() *cobra.Command {
	var (
		cfg           bench.Config
		o             labOut
		size, wgGo    string
		cryptoWorkers int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Throughput and CPU per GB: kernel TCP vs braid on 1, 2 and 4 paths vs wireguard-go, on unshaped veths (root)",
		Long: `bench times bulk HTTP downloads over unshaped veth pairs: plain kernel TCP,
braid on one, two and four paths and wireguard-go (when installed), --reps times
each, and prints Mbit/s, CPU seconds per GB and the daemons' peak RSS, with
ratios. docs/lab.md ("Throughput bench") explains each number.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return runner.ErrNotRoot
			}
			var err error
			if cfg.Size, err = scenario.ParseSize(size); err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			if cfg.Reps < 1 || cfg.Reps > scenario.MaxReps {
				return fmt.Errorf("--reps: %d is outside 1..%d", cfg.Reps, scenario.MaxReps)
			}
			if err := bench.CheckParallel(cfg.Parallel, cfg.Size); err != nil {
				return fmt.Errorf("--parallel: %w", err)
			}
			if err := bench.CheckCases(cfg.Cases); err != nil {
				return fmt.Errorf("--cases: %w", err)
			}
			if c := cfg.Congestion; c != "" && !slices.Contains(config.CongestionChoices, c) {
				return fmt.Errorf("--congestion: %q is not one of %s", c, strings.Join(config.CongestionChoices, ", "))
			}
			if cryptoWorkers < config.AutoCryptoWorkers || cryptoWorkers > config.MaxCryptoWorkers {
				return fmt.Errorf("--crypto-workers: %d is outside 0..%d (-1: braid's default)", cryptoWorkers, config.MaxCryptoWorkers)
			}
			if r := cfg.Recovery; r != "" && !slices.Contains(config.Recoveries, r) {
				return fmt.Errorf("--recovery: %q is not one of %s", r, strings.Join(config.Recoveries, ", "))
			}
			if cryptoWorkers != config.AutoCryptoWorkers {
				cfg.CryptoWorkers = &cryptoWorkers
			}
			if cfg.Idle == 0 {
				cfg.Idle = -1 // 0 on the command line means none
			}
			if slices.Contains(cfg.Cases, bench.CaseWireGuardGo) {
				var errs [2]error
				cfg.WireGuardGo, errs[0] = bench.FindWireGuardGo(wgGo)
				cfg.Wg, errs[1] = bench.FindWg()
				for i, hint := range []string{bench.WireGuardGoHint(), bench.WgHint()} {
					if errors.Is(errs[i], bench.ErrToolMissing) {
						fmt.Fprintln(cmd.ErrOrStderr(), hint)
					} else if errs[i] != nil {
						return errs[i]
					}
				}
			}
			cfg.Braid = labBraidCommand()
			return o.drive(cmd, func(ctx context.Context, progress io.Writer, _ string) (*report.Doc, func(io.Writer), error) {
				cfg.Progress = func(line string) { fmt.Fprintln(progress, line) }
				rep, err := bench.Run(ctx, cfg)
				if rep == nil {
					return nil, nil, err
				}
				if errors.Is(err, context.Canceled) {
					err = errors.New("interrupted; the namespaces were removed")
				}
				return rep.Document(), nil, err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&size, "size", "1GiB", `bytes per download, e.g. "1GiB", "64MiB"`)
	f.IntVar(&cfg.Reps, "reps", bench.DefaultReps, "downloads per case")
	f.IntVar(&cfg.Parallel, "parallel", 1, "concurrent HTTP downloads (TCP connections) per download, of size/K bytes each")
	f.StringSliceVar(&cfg.Cases, "cases", bench.AllCases, "cases to run, comma-separated")
	f.StringVar(&wgGo, "wireguard-go", "", "wireguard-go program (default: wireguard-go, or go install's wireguard, on PATH)")
	f.StringVar(&cfg.CC, "cc", bench.DefaultCC, "TCP congestion control of the downloads")
	f.StringVar(&cfg.Congestion, "congestion", "", "braid's congestion option for the braid cases (default: braid's own)")
	f.StringVar(&cfg.Recovery, "recovery", "", "braid's recovery option for the braid cases (default: braid's own)")
	f.IntVar(&cryptoWorkers, "crypto-workers", config.AutoCryptoWorkers, "braid's crypto_workers for the braid cases (-1: braid's default)")
	f.DurationVar(&cfg.Idle, "idle", bench.DefaultIdle, "background-load window before each download (0: none)")
	f.DurationVar(&cfg.Timeout, "timeout", 0, "give up on a download after this long (default: size at 20 Mbit/s, at least 1m)")
	o.register(cmd, "results.json and report.md", true)
	return cmd
}
