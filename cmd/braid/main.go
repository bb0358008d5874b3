// Command braid runs and inspects braid multipath VPN endpoints.
//
// The testbed (braid lab …) and the route tools (braid routes …) are the
// separate command braid-lab, which links the plotting and statistics
// libraries that this binary leaves out; braid runs it for those commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/internal/braidcmd"
	"github.com/braid-vpn/braid/internal/cli"
)

// extraCommands holds constructors of subcommands that tests add to the tree.
var extraCommands []func() *cobra.Command

func main() {
	args := os.Args[1:]
	if isLabCommand(args) {
		// Hand the process over to braid-lab: it gets the terminal's signals
		// (Ctrl-C tears the testbed down) and its exit code is ours.
		if exe, err := findLab(); err == nil {
			err = syscall.Exec(exe, append([]string{exe}, args...), os.Environ())
			fmt.Fprintf(os.Stderr, "braid: running %s: %v\n", exe, err)
			os.Exit(1)
		}
	}
	os.Exit(run(context.Background(), args, os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code. It is
// main without the process: tests call it with their own streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if isLabCommand(args) {
		return runLab(ctx, args, stdin, stdout, stderr)
	}
	return cli.Run(ctx, "braid", braidcmd.New(version, extraCommands...), args, stdin, stdout, stderr)
}

// labCommands are the commands of braid-lab that braid forwards to it.
var labCommands = map[string]bool{"lab": true, "routes": true}

func isLabCommand(args []string) bool { return len(args) > 0 && labCommands[args[0]] }

const labExe = "braid-lab"

// findLab is the braid-lab executable: the one next to this executable, else
// the one in PATH.
func findLab() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), labExe)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(labExe)
	if err != nil {
		return "", fmt.Errorf("the lab and routes commands are in the separate binary %s, which is neither next to braid nor in PATH; build it with: go build -o %s ./cmd/braid-lab", labExe, labExe)
	}
	return p, nil
}

// runLab runs `braid-lab args…` as a child with the given streams and returns
// its exit code (main execs it instead).
func runLab(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	exe, err := findLab()
	if err != nil {
		fmt.Fprintf(stderr, "braid: %s\n", err)
		return 1
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(stderr, "braid: running %s: %s\n", exe, cli.OneLine(err.Error()))
		return 1
	}
	return 0
}
