package main

import (
	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/internal/cli"
	"github.com/braid-vpn/braid/internal/upcmd"
)

// extraCommands holds constructors of subcommands defined elsewhere, so that
// root.go need not change whenever a command is added or moved (tests add
// their own).
var extraCommands []func() *cobra.Command

// newRootCmd builds a fresh command tree; tests build one per run so that
// flag values never leak from one invocation to the next.
func newRootCmd() *cobra.Command {
	root := cli.NewRoot("braid", "braid is a multipath VPN",
		`braid carries one VPN tunnel over several network paths at once and schedules
each packet onto the path that delivers it best.

Keys are base64, as with wg:  braid genkey > x.key;  braid pubkey < x.key
The configuration file is described in docs/config.md.
The testbed and the route tools are a separate binary, braid-lab; "braid lab ..."
and "braid routes ..." run it (see docs/lab.md).`, version)
	root.AddCommand(newGenkeyCmd(), newPubkeyCmd(), newGenpskCmd(), newStatusCmd(), upcmd.NewUpCmd())
	for _, f := range extraCommands {
		root.AddCommand(f())
	}
	return root
}
