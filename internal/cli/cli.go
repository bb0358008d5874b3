// Package cli is the command-line plumbing shared by cmd/braid and
// cmd/braid-lab: running a cobra tree with one-line errors, the root command's
// common settings and the version string and command.
package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Run executes one command line on root and returns the process exit code.
// Every failure is printed once, as one "prog: message" line on stderr.
func Run(ctx context.Context, prog string, root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", prog, OneLine(err.Error()))
		return 1
	}
	return 0
}

// OneLine folds a multi-line message (cobra appends "Did you mean this?"
// suggestions on separate lines) into one line, so that every failure is a
// single "prog: ..." line on stderr that logs and scripts can grep.
func OneLine(msg string) string {
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return parts[0] + " (" + strings.Join(parts[1:], " ") + ")"
}

// NewRoot is a root command named prog with the settings both binaries share:
// errors printed once by Run (no usage after a runtime error), no completion
// command, and --version printing "prog VERSION".
func NewRoot(prog, short, long, version string) *cobra.Command {
	root := &cobra.Command{
		Use:               prog,
		Short:             short,
		Long:              long,
		Version:           VersionString(version),
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetVersionTemplate(prog + " {{.Version}}\n")
	root.AddCommand(newVersionCmd(prog, version))
	return root
}

// VersionString is version (set at build time with -ldflags "-X
// main.version=v0.1.0"; "devel" otherwise, then the module version recorded
// by `go install module@version` if any) with the Go version and platform.
func VersionString(version string) string {
	v := version
	if v == "devel" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("%s (%s, %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd(prog, version string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", prog, VersionString(version))
			return err
		},
	}
}
