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

	"github.com/braid-vpn/braid/internal/notice"
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
// errors printed once by Run (no usage after a runtime error), a hidden
// completion command (the packages ship the completion files, generated from
// the same tree), and --version printing "prog VERSION".
func NewRoot(prog, short, long, version string) *cobra.Command {
	root := &cobra.Command{
		Use:               prog,
		Short:             short,
		Long:              long,
		Version:           VersionString(version),
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
	}
	root.SetVersionTemplate(prog + " {{.Version}}\n")
	root.AddCommand(newVersionCmd(prog, version), newLicensesCmd(prog))
	return root
}

// commit names the source a binary was built from when the build could not
// record it itself (a source tree without .git): go build -ldflags "-X
// github.com/braid-vpn/braid/internal/cli.commit=0123abcd".
var commit string

// VersionString is version (set at build time with -ldflags "-X
// main.version=v0.1.0"; "devel" otherwise, then the module version recorded
// by `go install module@version` if any) with the commit, the Go version and
// the platform.
func VersionString(version string) string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if v == "devel" && ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	c := commit
	if c == "" && ok {
		c = vcsCommit(bi.Settings)
	}
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, %s, %s/%s)", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// vcsCommit is the commit that go build stamped into the binary (it does so
// when building inside a git checkout), shortened as git does, with "-dirty"
// when the tree had uncommitted changes.
func vcsCommit(settings []debug.BuildSetting) string {
	var rev string
	var dirty bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
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

func newLicensesCmd(prog string) *cobra.Command {
	return &cobra.Command{
		Use:   "licenses",
		Short: "Print the licences of the software " + prog + " includes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), notice.For(prog))
			return err
		},
	}
}
