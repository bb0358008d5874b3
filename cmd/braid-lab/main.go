// Command braid-lab is braid's testbed (braid-lab lab …) and route tools
// (braid-lab routes …). It is separate from the VPN binary braid because it
// links the plotting and statistics libraries; `braid lab …` and
// `braid routes …` run it. It also has braid's `up` command: the lab starts
// its own executable as the braid daemons it measures (see docs/lab.md).
package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/internal/cli"
	"github.com/braid-vpn/braid/internal/upcmd"
)

// version is set at build time: go build -ldflags "-X main.version=v0.1.0".
var version = "devel"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code. It is
// main without the process: tests call it with their own streams. Errors are
// "braid: ..." lines, as before the split: users type `braid lab …`.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(ctx, "braid", newRootCmd(), args, stdin, stdout, stderr)
}

// newRootCmd builds a fresh command tree; tests build one per run so that
// flag values never leak from one invocation to the next.
func newRootCmd() *cobra.Command {
	root := cli.NewRoot("braid-lab", "braid's multipath testbed and route tools",
		`braid-lab holds the commands of braid that the VPN does not need: the testbed
(lab run, lab demo, lab bench, lab mesh) and the route tools (routes). braid runs
it for "braid lab ..." and "braid routes ...".

Its up command is braid's: the lab starts this executable as the braid daemons
it measures.`, version)
	up := upcmd.NewUpCmd()
	up.Hidden = true
	root.AddCommand(up, newLabCmd(), newRoutesCmd())
	return root
}
