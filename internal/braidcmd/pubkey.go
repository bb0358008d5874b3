package braidcmd

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/keys"
)

// maxKeyInput bounds what pubkey reads: a key is 44 characters, and a
// mistaken `braid pubkey < /dev/zero` must fail rather than eat memory.
const maxKeyInput = 1024

func newPubkeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pubkey",
		Short: "Read a private key on stdin, print its public key",
		Long: `Read a base64 private key from stdin and print the matching public key.

  braid pubkey < client.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxKeyInput+1))
			if err != nil {
				return fmt.Errorf("reading stdin: %w", err)
			}
			if len(b) > maxKeyInput {
				return errors.New("stdin holds more than a key; expected one base64 private key")
			}
			if strings.TrimSpace(string(b)) == "" {
				return errors.New("no private key on stdin (try: braid genkey | braid pubkey)")
			}
			k, err := keys.Parse(string(b))
			if err != nil {
				return fmt.Errorf("invalid private key on stdin: %w", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), k.Public().String())
			return err
		},
	}
}
