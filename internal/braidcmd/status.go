package braidcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
)

// defaultSocket is where a braid started with the default [tun] name listens.
var defaultSocket = filepath.Join(config.DefaultSocketDir, config.DefaultTunName+".sock")

func newStatusCmd() *cobra.Command {
	var (
		asJSON     bool
		configFile string
		socket     string
	)
	cmd := &cobra.Command{
		Use:                   "status [--json] [-c FILE | --socket PATH]",
		DisableFlagsInUseLine: true,
		Short:                 "Show peers and paths of a running braid",
		Long: `Show the sessions and per-path measurements (RTT, loss, delivery rate, share
of traffic) of a running braid, read from its control socket: the one named by
the config file given with -c, the one given with --socket, or ` + defaultSocket + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := defaultSocket
			switch {
			case configFile != "" && socket != "":
				return errors.New("status: use -c FILE or --socket PATH, not both")
			case socket != "":
				path = socket
			case configFile != "":
				p, err := config.SocketPath(configFile)
				if err != nil {
					return err
				}
				path = p
			}
			s, err := control.Query(path)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				b, err := json.MarshalIndent(s, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "%s\n", b)
				return err
			}
			return control.FormatStatus(out, s)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the raw status as JSON")
	f.StringVarP(&configFile, "config", "c", "", "read the socket path from this config file")
	f.StringVar(&socket, "socket", "", "control socket path")
	return cmd
}
