package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/lab/load"
	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/runner"
)

func newLabLoadCmd() *cobra.Command {
	var (
		cfg load.Config
		o   labOut
	)
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Load a braid server with N client engines in one process: handshakes/s, RSS per client, CPU per GB and per handshake, drops (root)",
		Long: `load starts one braid server daemon in a namespace and --clients client engines
in one process in another, each with its own key, inner address and --paths
source addresses, and measures the server over three phases: the ramp (every
client handshakes), an idle hold (RSS per client) and traffic (--rate inner
packets a second per client to a sink behind the server: CPU per GB). It
counts handshakes per second over the run (--rekey-after shortens the rekey
interval so a short run shows rekeys) and the server's drops.
docs/lab.md ("Load test") explains each number.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return runner.ErrNotRoot
			}
			if err := cfg.Check(); err != nil {
				return err
			}
			cfg.Braid = labBraidCommand()
			return o.drive(cmd, func(ctx context.Context, progress io.Writer, warning string) (*report.Doc, func(io.Writer), error) {
				cfg.Progress = func(line string) { fmt.Fprintln(progress, line) }
				res, err := load.Run(ctx, cfg)
				if res == nil {
					return nil, nil, err
				}
				if warning != "" {
					res.Notes = append(res.Notes, warning)
				}
				if errors.Is(err, context.Canceled) {
					err = errors.New("interrupted; the namespaces were removed")
				}
				return res.Document(), nil, err
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Clients, "clients", load.DefaultClients, "client engines")
	f.IntVar(&cfg.Paths, "paths", load.DefaultPaths, "paths per client, each from its own source address")
	f.Float64Var(&cfg.Rate, "rate", load.DefaultRate, "inner packets a second per client in the traffic phase")
	f.IntVar(&cfg.PacketSize, "packet-size", load.DefaultPacketSize, "bytes per inner packet (IPv4 and UDP headers included)")
	f.Float64Var(&cfg.StartRate, "start-rate", 0, "clients started a second (0: all at once)")
	f.DurationVar(&cfg.RampTimeout, "ramp-timeout", load.DefaultRampTimeout, "how long every client gets to come up")
	f.DurationVar(&cfg.Hold, "hold", load.DefaultHold, "the idle phase")
	f.DurationVar(&cfg.Traffic, "traffic", load.DefaultTraffic, "the traffic phase")
	f.DurationVar(&cfg.RekeyAfter, "rekey-after", 0, "rekey_after_time of server and clients (0: braid's default)")
	o.register(cmd, "results.json, report.md and handshakes.csv", true)
	cmd.AddCommand(&cobra.Command{
		Use:    "clients SPEC",
		Short:  "The load test's client process (started by load inside its namespace)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			replies, requests := os.NewFile(load.ReplyFD, "replies"), os.NewFile(load.RequestFD, "requests")
			if replies == nil || requests == nil {
				return errors.New("the client process needs the pipes of braid lab load")
			}
			return load.RunClients(cmd.Context(), args[0], requests, replies, cmd.ErrOrStderr())
		},
	})
	return cmd
}
