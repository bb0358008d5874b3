package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/lab/fleet"
	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenario"
)

// fleetScenario is a fleet subcommand's defaults.
type fleetScenario struct {
	name, short             string
	servers, clients, paths int
	seconds                 time.Duration
	uplink, kill            string
	revive, rekey           time.Duration
}

var fleetScenarios = []fleetScenario{
	{name: "fairness", short: "30 client daemons on one path each share one server's 200 Mbit/s uplink: Jain's index and the aggregate",
		servers: 1, clients: 30, paths: 1, seconds: 30 * time.Second, uplink: "200mbit"},
	{name: "scaleout", short: "20 two-path client daemons, 3 servers behind the nftables balancer, one killed and started again: stalls, where sessions land, paths per server, rekeys",
		servers: 3, clients: 20, paths: 2, seconds: 50 * time.Second, uplink: "100mbit", kill: "1@15s", revive: 35 * time.Second, rekey: 10 * time.Second},
}

func newLabFleetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Many braid client daemons through one or several servers (root)",
		Long: `fleet runs real braid daemons, each client in its own namespace, downloading in
bulk from a backend through one server or several behind the nftables balancer,
and reports each client's goodput and longest stall, Jain's index and where every
session is. docs/lab.md ("Fleet") describes both scenarios and every figure.`,
	}
	for _, sc := range fleetScenarios {
		cmd.AddCommand(newLabFleetScenarioCmd(sc))
	}
	return cmd
}

func newLabFleetScenarioCmd(sc fleetScenario) *cobra.Command {
	var (
		cfg                  fleet.Config
		o                    labOut
		uplink, object, kill string
	)
	cmd := &cobra.Command{
		Use:   sc.name,
		Short: sc.short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return runner.ErrNotRoot
			}
			cfg.Scenario = sc.name
			if uplink != "" && uplink != "0" {
				r, err := scenario.ParseRate(uplink)
				if err != nil {
					return fmt.Errorf("--uplink: %w", err)
				}
				cfg.Uplink = uint64(r)
			}
			if object != "" {
				n, err := scenario.ParseSize(object)
				if err != nil {
					return fmt.Errorf("--object: %w", err)
				}
				cfg.Object = n
			}
			var err error
			if cfg.Kill, cfg.KillAt, err = parseKill(kill); err != nil {
				return fmt.Errorf("--kill: %w", err)
			}
			if cfg.KillAt == 0 {
				cfg.ReviveAt = 0
			}
			if err := cfg.Check(); err != nil {
				return err
			}
			cfg.Braid = labBraidCommand()
			return o.drive(cmd, func(ctx context.Context, progress io.Writer, _ string) (*report.Doc, func(io.Writer), error) {
				cfg.Progress = func(line string) { fmt.Fprintln(progress, line) }
				res, err := fleet.Run(ctx, cfg)
				if res == nil {
					return nil, nil, err
				}
				if err != nil {
					res.Errors = append(res.Errors, err.Error())
				}
				if errors.Is(err, context.Canceled) {
					err = errors.New("interrupted; the namespaces were removed")
				}
				return res.Document(), nil, err
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Servers, "servers", sc.servers, "braid servers (more than one: behind the nftables balancer)")
	f.IntVar(&cfg.Clients, "clients", sc.clients, "client daemons, each in its own namespace")
	f.IntVar(&cfg.Paths, "paths", sc.paths, "paths (veths, source addresses) per client")
	f.DurationVar(&cfg.Duration, "seconds", sc.seconds, "length of the measured window")
	f.DurationVar(&cfg.Warmup, "warmup", fleet.DefaultWarmup, "downloads run this long before the window")
	f.StringVar(&uplink, "uplink", sc.uplink, `shape each server's link toward the clients (tbf), e.g. "200mbit"; "" or 0: unshaped`)
	f.StringVar(&object, "object", "", `size of each download, repeated (e.g. "16MiB", the papers'); default one download for the whole run`)
	f.StringVar(&kill, "kill", sc.kill, `SERVER@TIME: SIGKILL that server's daemon TIME into the window, e.g. "1@15s"; SERVER "busiest": the one holding the most sessions then; "" or "none": no kill`)
	f.DurationVar(&cfg.ReviveAt, "revive", sc.revive, "start the killed server again this far into the window (0: never)")
	f.DurationVar(&cfg.RekeyAfter, "rekey-after", sc.rekey, "every daemon's security.rekey_after_time (0: braid's default)")
	f.DurationVar(&cfg.Sample, "sample", fleet.DefaultSample, "how often each client's received bytes are read")
	f.StringVar(&cfg.CC, "cc", fleet.DefaultCC, "TCP congestion control of the downloads")
	f.Uint64Var(&cfg.Seed, "seed", 1, "shuffles the order the client daemons start in")
	o.register(cmd, "results.json, report.md and samples.csv", true)
	return cmd
}

// parseKill reads --kill: "SERVER@TIME" (SERVER a number or "busiest"), or
// "" / "none" for no kill (a zero time).
func parseKill(s string) (server int, at time.Duration, err error) {
	if s == "" || s == "none" {
		return 0, 0, nil
	}
	id, t, ok := strings.Cut(s, "@")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not SERVER@TIME (e.g. 1@15s)", s)
	}
	if id == "busiest" {
		server = fleet.KillBusiest
	} else if server, err = strconv.Atoi(id); err != nil || server < 0 {
		return 0, 0, fmt.Errorf("%q: server %q is neither a server number nor \"busiest\"", s, id)
	}
	if at, err = time.ParseDuration(t); err != nil || at <= 0 {
		return 0, 0, fmt.Errorf("%q: %q is not a time after the window's start", s, t)
	}
	return server, at, nil
}
