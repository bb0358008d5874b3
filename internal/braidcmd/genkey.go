package braidcmd

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/keys"
)

func newGenkeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "genkey",
		Short: "Print a new private key (base64) to stdout",
		Long: `Print a new Curve25519 private key, base64-encoded, to stdout.

  umask 077; braid genkey > client.key; braid pubkey < client.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := keys.Generate()
			if err != nil {
				return err
			}
			return printSecret(cmd, k)
		},
	}
}

// printSecret writes a secret key to stdout, warning (as wg does) when stdout
// is a file other users can read.
func printSecret(cmd *cobra.Command, k keys.Key) error {
	out := cmd.OutOrStdout()
	warnWorldReadable(out, cmd.ErrOrStderr())
	_, err := fmt.Fprintln(out, k.String())
	return err
}

func warnWorldReadable(out, errOut io.Writer) {
	f, ok := out.(*os.File)
	if !ok {
		return
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	fmt.Fprintln(errOut, "braid: warning: writing a secret key to a file its group or other users can read; consider umask 077")
}
