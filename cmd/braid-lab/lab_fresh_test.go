package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestLabDemoFreshMachine runs the README's `braid lab demo` (one 1 MiB
// download per transport) with a PATH that holds iproute2's ip and tc and
// nothing else, as on a fresh Debian with iproute2: no ethtool (offloads go
// through the kernel's interface), no git, no openvpn. Every point must
// finish; a lab that shells out to a program it does not find fails here.
func TestLabDemoFreshMachine(t *testing.T) {
	labTestBraid(t, "needs root: builds the lab's network namespaces and starts braid daemons")
	bin := t.TempDir()
	for _, prog := range []string{"ip", "tc"} {
		p, err := exec.LookPath(prog)
		if err != nil {
			t.Skipf("needs iproute2 (%s): apt-get install iproute2", prog)
		}
		if err := os.Symlink(p, filepath.Join(bin, prog)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	if p, err := exec.LookPath("ethtool"); err == nil {
		t.Fatalf("ethtool found at %s with PATH=%s: the test would prove nothing", p, bin)
	}
	start := time.Now()
	out := filepath.Join(t.TempDir(), "out")
	res := runLab(t, time.Minute, "lab", "demo", "--size", "1MiB", "--reps", "1", "--json", "--out", out)
	t.Logf("%d points in %v", len(res.Points), time.Since(start).Round(time.Second))
	if len(res.Points) != 4 {
		t.Errorf("%d points, want demo.toml's 4", len(res.Points))
	}
	for _, p := range res.Points {
		if p.Error != "" || len(p.Samples) != 1 {
			t.Errorf("%s: %d samples, error %q", p.Label, len(p.Samples), p.Error)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Errorf("no report: %v", err)
	}
}

// TestLabDemoWithoutIP: the lab's one external program is iproute2's ip,
// for the kernel MPTCP transport's path manager; a machine without it gets
// that point's error in one line naming the package, not exec's.
func TestLabDemoWithoutIP(t *testing.T) {
	labTestBraid(t, "needs root: builds the lab's network namespaces")
	t.Setenv("PATH", t.TempDir())
	out := filepath.Join(t.TempDir(), "out")
	res := runLab(t, time.Minute, "lab", "demo", "--only", "transport=mptcp-direct", "--size", "1MiB", "--reps", "1", "--json", "--out", out)
	const want = "mptcp-direct: MPTCP needs the ip program: apt-get install iproute2"
	if len(res.Points) != 1 {
		t.Fatalf("%d points, want 1", len(res.Points))
	}
	if got := res.Points[0].Error; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}
