package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// When the test binary is started with BRAID_TEST_MAIN=1 it is braid-lab
// itself: the lab tests start it as the braid daemons (up) and as the lab's
// web server (lab serve) inside the namespaces without building a binary.
func TestMain(m *testing.M) {
	if os.Getenv("BRAID_TEST_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// The tests' lab runs take their own lock, not the machine's: a
	// campaign running on the machine must not fail them (nor they it).
	dir, err := os.MkdirTemp("", "braid-lab-test-lock-")
	if err != nil {
		panic(err)
	}
	labLockPath = func() string { return filepath.Join(dir, "braid-lab.lock") }
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
