package main

import (
	"github.com/spf13/cobra"
)

// extraCommands holds constructors of subcommands defined elsewhere in this
// package (up.go appends newUpCmd from its init), so that root.go need not
// change whenever a command is added or moved.
var extraCommands []func() *cobra.Command

// newRootCmd builds a fresh command tree; tests build one per run so that
// flag values never leak from one invocation to the next.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "braid",
		Short: "braid is a multipath VPN",
		Long: `braid carries one VPN tunnel over several network paths at once and schedules
each packet onto the path that delivers it best.

Keys are base64, as with wg:  braid genkey > x.key;  braid pubkey < x.key
The configuration file is described in docs/config.md.`,
		Version: versionString(),
		// Errors are printed once by run, as "braid: <message>"; usage
		// after a runtime error only buries the message.
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetVersionTemplate("braid {{.Version}}\n")
	root.AddCommand(newGenkeyCmd(), newPubkeyCmd(), newGenpskCmd(), newStatusCmd(), newVersionCmd())
	for _, f := range extraCommands {
		root.AddCommand(f())
	}
	return root
}
