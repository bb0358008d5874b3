package braidcmd

import (
	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/keys"
)

func newGenpskCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "genpsk",
		Short: "Print a new preshared key (base64) to stdout",
		Long: `Print 32 random bytes, base64-encoded, for preshared_key_file. Both ends of
a session must use the same preshared key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := keys.GeneratePreshared()
			if err != nil {
				return err
			}
			return printSecret(cmd, k)
		},
	}
}
