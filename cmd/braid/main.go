// Command braid runs and inspects braid multipath VPN endpoints.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code. It is
// main without the process: tests call it with their own streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "braid: %s\n", oneLine(err.Error()))
		return 1
	}
	return 0
}

// oneLine folds a multi-line message (cobra appends "Did you mean this?"
// suggestions on separate lines) into one line, so that every failure is a
// single "braid: ..." line on stderr that logs and scripts can grep.
func oneLine(msg string) string {
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
