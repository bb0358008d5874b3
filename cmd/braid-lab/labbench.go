package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/lab/bench"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenario"
)

func newLabBenchCmd() *cobra.Command {
	var (
		size, wgGo, out, cc  string
		congestion, recovery string
		reps, parallel       int
		cryptoWorkers        int
		cases                []string
		idle, timeout        time.Duration
		asJSON, force        bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Throughput and CPU per GB: kernel TCP vs braid on 1, 2 and 4 paths vs wireguard-go, on unshaped veths (root)",
		Long: `bench joins a client and a server namespace with unshaped veth pairs (two, or
four when braid-4paths runs) and times bulk HTTP downloads (cubic) over plain kernel
TCP, braid on one, two and four paths and wireguard-go (when wireguard-go and wg are
installed), round-robin, --reps times each; --parallel K splits each download into K
concurrent ones of size/K. It prints Mbit/s, CPU seconds per GB of the tunnel
daemons, of the HTTP client and server and of the whole machine, and the daemons'
peak RSS, with ratios against kernel TCP, wireguard-go and braid on one path.
docs/lab.md explains each number.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return runner.ErrNotRoot
			}
			n, err := scenario.ParseSize(size)
			if err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			if reps < 1 || reps > scenario.MaxReps {
				return fmt.Errorf("--reps: %d is outside 1..%d", reps, scenario.MaxReps)
			}
			if err := bench.CheckParallel(parallel, n); err != nil {
				return fmt.Errorf("--parallel: %w", err)
			}
			if err := bench.CheckCases(cases); err != nil {
				return fmt.Errorf("--cases: %w", err)
			}
			if congestion != "" && !slices.Contains(config.CongestionChoices, congestion) {
				return fmt.Errorf("--congestion: %q is not one of %s", congestion, strings.Join(config.CongestionChoices, ", "))
			}
			if cryptoWorkers < config.AutoCryptoWorkers || cryptoWorkers > config.MaxCryptoWorkers {
				return fmt.Errorf("--crypto-workers: %d is outside 0..%d (-1: braid's default)", cryptoWorkers, config.MaxCryptoWorkers)
			}
			if recovery != "" && !slices.Contains(config.Recoveries, recovery) {
				return fmt.Errorf("--recovery: %q is not one of %s", recovery, strings.Join(config.Recoveries, ", "))
			}
			stderr := cmd.ErrOrStderr()
			ctx, progress, stop := labContext(cmd)
			defer stop()
			cfg := bench.Config{
				Size: n, Parallel: parallel, Reps: reps, CC: cc, Cases: cases, Idle: idle, Timeout: timeout,
				Braid: labBraidCommand(), Congestion: congestion, Recovery: recovery,
				Progress: func(line string) { fmt.Fprintln(progress, line) },
			}
			if cryptoWorkers != config.AutoCryptoWorkers {
				cfg.CryptoWorkers = &cryptoWorkers
			}
			if idle == 0 {
				cfg.Idle = -1 // 0 on the command line means none
			}
			if slices.Contains(cases, bench.CaseWireGuardGo) {
				if cfg.WireGuardGo, err = bench.FindWireGuardGo(wgGo); err != nil {
					if !errors.Is(err, bench.ErrToolMissing) {
						return err
					}
					fmt.Fprintln(stderr, bench.WireGuardGoHint())
				}
				if cfg.Wg, err = bench.FindWg(); err != nil {
					if !errors.Is(err, bench.ErrToolMissing) {
						return err
					}
					fmt.Fprintln(stderr, bench.WgHint())
				}
			}
			release, _, err := startLab(stderr, out, force)
			if err != nil {
				return err
			}
			defer release()
			rep, runErr := bench.Run(ctx, cfg)
			if rep == nil {
				return runErr
			}
			if errors.Is(runErr, context.Canceled) {
				runErr = errors.New("interrupted; the namespaces were removed")
			}
			if err := finishLab(cmd, out, asJSON, rep.Document(), nil); err != nil {
				return err
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&size, "size", "1GiB", `bytes per download, e.g. "1GiB", "64MiB"`)
	f.IntVar(&reps, "reps", bench.DefaultReps, "downloads per case")
	f.IntVar(&parallel, "parallel", 1, "concurrent HTTP downloads (TCP connections) per download, of size/K bytes each")
	f.StringSliceVar(&cases, "cases", bench.AllCases, "cases to run, comma-separated")
	f.StringVar(&wgGo, "wireguard-go", "", "wireguard-go program (default: wireguard-go, or go install's wireguard, on PATH)")
	f.StringVar(&cc, "cc", bench.DefaultCC, "TCP congestion control of the downloads")
	f.StringVar(&congestion, "congestion", "", "braid's congestion option for the braid cases (default: braid's own)")
	f.StringVar(&recovery, "recovery", "", "braid's recovery option for the braid cases (default: braid's own)")
	f.IntVar(&cryptoWorkers, "crypto-workers", config.AutoCryptoWorkers, "braid's crypto_workers for the braid cases (-1: braid's default)")
	f.DurationVar(&idle, "idle", bench.DefaultIdle, "background-load window before each download (0: none)")
	f.DurationVar(&timeout, "timeout", 0, "give up on a download after this long (default: size at 20 Mbit/s, at least 1m)")
	f.BoolVar(&asJSON, "json", false, "print the results as one JSON document on stdout")
	f.StringVar(&out, "out", "", "directory for results.json and report.md")
	registerForce(cmd, &force)
	return cmd
}
