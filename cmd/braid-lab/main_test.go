package main

import (
	"context"
	"os"
	"testing"
)

// When the test binary is started with BRAID_TEST_MAIN=1 it is braid-lab
// itself: the lab tests start it as the braid daemons (up) and as the lab's
// web server (lab serve) inside the namespaces without building a binary.
func TestMain(m *testing.M) {
	if os.Getenv("BRAID_TEST_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
