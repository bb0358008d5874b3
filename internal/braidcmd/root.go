// Package braidcmd is the command tree of the braid binary. It lives outside
// cmd/braid so that the release tool can generate the man page and the shell
// completions from the same tree the binary runs.
package braidcmd

import (
	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/internal/cli"
	"github.com/braid-vpn/braid/internal/upcmd"
)

// New builds a fresh command tree (tests build one per run so that flag
// values never leak from one invocation to the next); extra adds commands
// defined elsewhere.
func New(version string, extra ...func() *cobra.Command) *cobra.Command {
	root := cli.NewRoot("braid", "braid is a multipath VPN",
		`braid carries one VPN tunnel over several network paths at once and schedules
each packet onto the path that delivers it best.

Keys are base64, as with wg:  braid genkey > x.key;  braid pubkey < x.key
The configuration file is described in docs/config.md.
The testbed and the route tools are a separate binary, braid-lab; "braid lab ..."
and "braid routes ..." run it (see docs/lab.md).`, version)
	root.AddCommand(newGenkeyCmd(), newPubkeyCmd(), newGenpskCmd(), newStatusCmd(), upcmd.NewUpCmd(), newBalanceCmd())
	for _, f := range extra {
		root.AddCommand(f())
	}
	return root
}
