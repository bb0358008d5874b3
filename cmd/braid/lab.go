package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/httpbench"
)

func init() { extraCommands = append(extraCommands, newLabCmd) }

// newLabCmd is the lab's command group. For now it holds the measuring workload
// (a real HTTP server and client, with the TCP congestion control chosen per
// socket); the testbed commands join it with the lab.
func newLabCmd() *cobra.Command {
	lab := &cobra.Command{
		Use:   "lab",
		Short: "The multipath testbed and its workload",
	}
	lab.AddCommand(newLabServeCmd(), newLabFetchCmd())
	return lab
}

func newLabServeCmd() *cobra.Command {
	var addr, cc string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve /bytes/N (N bytes) over HTTP until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := httpbench.Listen(addr, cc)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: httpbench.Handler(), ReadHeaderTimeout: 10 * time.Second}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				srv.Close()
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "0.0.0.0:8080", "listen address")
	cmd.Flags().StringVar(&cc, "cc", "cubic", `TCP congestion control of the served connections ("" = system default)`)
	return cmd
}

func newLabFetchCmd() *cobra.Command {
	var cc string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "fetch URL",
		Short: "Download URL, print the goodput in Mbit/s (size ÷ time, as wget reports)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := httpbench.Fetch(ctx, args[0], httpbench.Options{CC: cc})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%.2f Mbit/s (%d bytes in %.3f s, longest stall %v)\n",
				res.GoodputMbps(), res.Bytes, res.Duration.Seconds(), res.MaxStall.Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&cc, "cc", "cubic", `TCP congestion control ("" = system default)`)
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	return cmd
}
