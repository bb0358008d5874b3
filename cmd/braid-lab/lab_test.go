package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenarios"
)

// TestLabSmoke is the lab's CI run: `braid lab run smoke.toml --json --out
// DIR` on the paper's testbed with two equal 10 Mbit/s paths (10 ms RTT),
// 3 × 4 MiB per transport. Both multipath transports must beat one path by
// more than 1.5× (ideal: 2×).
func TestLabSmoke(t *testing.T) {
	labTestBraid(t, "needs root: builds the lab's network namespaces and starts braid daemons")
	start := time.Now()
	res, out := runCommitted(t, "smoke.toml", 2*time.Minute)
	took := time.Since(start)
	if saved, err := os.ReadFile(filepath.Join(out, "results.json")); err != nil || !json.Valid(saved) {
		t.Errorf("results.json: %v", err)
	}
	mean := map[string]float64{}
	for _, p := range res.Points {
		if p.Error != "" || len(p.Samples) != 3 {
			t.Errorf("%s: %d samples, error %q", p.Label, len(p.Samples), p.Error)
		}
		mean[p.Transport] = p.Goodput.Mean
		t.Logf("%-13s %6.2f ± %.2f Mbit/s, shares %v", p.Label, p.Goodput.Mean, p.Goodput.CI95, p.PathShares)
		checkBulkRecovery(t, p)
	}
	t.Logf("run took %v", took.Round(time.Second))
	if len(res.Points) != 3 {
		t.Fatalf("%d points, want 3", len(res.Points))
	}
	for _, tr := range []string{"mptcp-direct", "braid"} {
		if r := mean[tr] / mean["direct"]; !(r > 1.5) {
			t.Errorf("%s reached %.2f× direct (%.2f vs %.2f Mbit/s), want > 1.5×", tr, r, mean[tr], mean["direct"])
		}
	}
	if took > 2*time.Minute {
		t.Errorf("the smoke run took %v, over the 2-minute budget", took)
	}
}

// runCommitted runs `braid lab run FILE --json --out DIR` on the committed
// scenario name (copied to a temporary directory) with the extra arguments,
// within timeout, and returns the run's results from stdout and DIR.
func runCommitted(t *testing.T, name string, timeout time.Duration, extra ...string) (results.Run, string) {
	t.Helper()
	dir := t.TempDir()
	data, err := scenarios.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	file, out := filepath.Join(dir, name), filepath.Join(dir, "out")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return runLab(t, timeout, append([]string{"lab", "run", file, "--json", "--out", out}, extra...)...), out
}

// runLab runs braid-lab with args (which must include --json) within
// timeout and returns the run's results from stdout.
func runLab(t *testing.T, timeout time.Duration, args ...string) results.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, args, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res results.Run
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not a results.Run: %v\n%s", err, stdout.String())
	}
	return res
}

// labTestBraid skips t unless it runs as root with iproute2 (why says what
// the test builds) and makes the lab start this test binary as braid for
// the rest of t.
func labTestBraid(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip(why)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2 (ip): apt-get install iproute2")
	}
	saved := labBraidCommand
	t.Cleanup(func() { labBraidCommand = saved })
	labBraidCommand = func() runner.BraidCommand {
		return runner.BraidCommand{Exe: os.Args[0], Env: []string{"BRAID_TEST_MAIN=1"}}
	}
}

// checkBulkRecovery checks that a braid download (recovery on by default)
// has the bulk recovery figures, within sane bounds, and any other none.
func checkBulkRecovery(t *testing.T, p results.Point) {
	t.Helper()
	if p.Transport != "braid" {
		if p.BulkRecovery != nil {
			t.Errorf("%s: bulk recovery figures for a transport without braid's recovery", p.Label)
		}
		return
	}
	if p.BulkRecovery == nil || p.BulkRecovery.Overhead.N != len(p.Samples) {
		t.Errorf("%s: bulk recovery summary %+v for %d downloads", p.Label, p.BulkRecovery, len(p.Samples))
	}
	for _, s := range p.Samples {
		r := s.BulkRecovery
		if r == nil {
			t.Errorf("%s rep %d: no bulk recovery figures", p.Label, s.Rep)
			continue
		}
		t.Logf("%s rep %d: resent %d B, repair %d B of %d B: overhead %.4f, path loss %.4f (%d of %d), bound %.4f",
			p.Label, s.Rep, r.ResentBytes, r.RepairBytes, s.Bytes, r.Overhead, r.PathLossRate, r.LostPackets, r.TxPackets, r.Bound)
		if !(r.Overhead >= 0) || !(r.PathLossRate >= 0 && r.PathLossRate <= 1) || r.TxPackets == 0 ||
			math.Abs(r.Bound-(2*r.PathLossRate+runner.BulkOverheadSlack)) > 1e-12 {
			t.Errorf("%s rep %d: figures out of bounds: %+v", p.Label, s.Rep, *r)
		}
	}
}
