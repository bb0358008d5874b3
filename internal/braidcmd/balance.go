package braidcmd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/balance"
)

func newBalanceCmd() *cobra.Command {
	var configFile string
	cmd := &cobra.Command{
		Use:                   "balance -c FILE",
		DisableFlagsInUseLine: true,
		Short:                 "Steer braid clients to several servers with nftables",
		Long: `Run the load balancer in front of several braid servers (docs/scale.md): install
a stateless nftables ruleset that steers every datagram by the server id in its
session index, health-check the servers, keep the clients' inner routes pointing
at the server of their session, and remove all of it on SIGINT or SIGTERM.
The configuration file is described in docs/config.md ("The balancer").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile == "" {
				return errors.New("balance: -c FILE is required")
			}
			cfg, err := balance.Load(configFile)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			b, err := balance.Install(cfg, balance.Options{Log: log})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log.Info("balancer installed", "vip", cfg.VIP, "port", cfg.Port, "servers", len(cfg.Servers))
			runErr := b.Run(ctx)
			if errors.Is(runErr, context.Canceled) {
				runErr = nil
			}
			closeErr := b.Close()
			if closeErr == nil {
				log.Info("balancer removed")
			}
			return errors.Join(runErr, closeErr)
		},
	}
	cmd.Flags().StringVarP(&configFile, "config", "c", "", "balancer config file")
	return cmd
}
