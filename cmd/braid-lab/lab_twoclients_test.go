package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

// twoClientsScenario is a tiny real-two-clients.toml: both paths on one
// 10 Mbit/s medium, one braid download against a competing braid client.
const twoClientsScenario = `name = "two-clients"
description = "two braid clients through one bottleneck"
[experiment]
size = "2MiB"
reps = 2
timeout = "1m"
competing = 1
competing_transport = "braid"
[[media]]
name = "bneck"
rate = "10Mbit"
queue_limit = 100
[[links]]
name = "primary"
rtt = "20ms"
medium = "bneck"
[[links]]
name = "secondary"
rtt = "20ms"
medium = "bneck"
[[transports]]
name = "braid"
`

// TestLabTwoBraidClients runs a second braid client of the same server
// alongside each braid download through one shared bottleneck: both
// clients get goodput, together no more than the bottleneck carries, and
// the Jain index is computed from the two, per download and per point, in
// results.json, samples.csv and the report. No competing daemon outlives
// the run.
func TestLabTwoBraidClients(t *testing.T) {
	labTestBraid(t, "needs root: builds the lab's network namespaces and starts two braid clients and a server")
	dir := t.TempDir()
	file, out := filepath.Join(dir, "two.toml"), filepath.Join(dir, "out")
	if err := os.WriteFile(file, []byte(twoClientsScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"lab", "run", file, "--json", "--out", out}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res results.Run
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not a results.Run: %v", err)
	}
	if res.CompetingTransport != "braid" || len(res.Points) != 1 {
		t.Fatalf("competing transport %q, %d points; want braid, 1", res.CompetingTransport, len(res.Points))
	}
	p := res.Points[0]
	if p.Error != "" || len(p.Samples) != 2 {
		t.Fatalf("%s: %d samples, error %q", p.Label, len(p.Samples), p.Error)
	}
	for _, s := range p.Samples {
		if s.CompetingMbps == nil || s.Jain == nil {
			t.Fatalf("rep %d: competing %v, jain %v; want both", s.Rep, s.CompetingMbps, s.Jain)
		}
		a, b := s.GoodputMbps, *s.CompetingMbps
		t.Logf("rep %d: measured client %.2f Mbit/s, competing client %.2f Mbit/s, Jain %.4f", s.Rep, a, b, *s.Jain)
		if !(a > 0) || !(b > 0) {
			t.Errorf("rep %d: goodputs %.2f and %.2f Mbit/s; want both > 0", s.Rep, a, b)
		}
		if a+b > 10.5 {
			t.Errorf("rep %d: %.2f + %.2f Mbit/s through one 10 Mbit/s bottleneck", s.Rep, a, b)
		}
		if want := stats.Jain(a, b); math.Abs(*s.Jain-want) > 1e-9 {
			t.Errorf("rep %d: Jain %v, want %v from the two goodputs", s.Rep, *s.Jain, want)
		}
	}
	if p.Jain == nil || p.Jain.N != 2 || p.Competing == nil || p.Competing.N != 2 {
		t.Errorf("point: jain %+v, competing %+v; want both over 2 downloads", p.Jain, p.Competing)
	} else {
		t.Logf("point: measured %.2f ± %.2f, competing %.2f ± %.2f Mbit/s, Jain %.4f ± %.4f",
			p.Goodput.Mean, p.Goodput.CI95, p.Competing.Mean, p.Competing.CI95, p.Jain.Mean, p.Jain.CI95)
	}
	checkBulkRecovery(t, p) // the server's status cut to the measured client
	for name, want := range map[string]string{"samples.csv": ",jain", "summary.csv": "jain_mean", "report.md": "Jain index"} {
		if data, err := os.ReadFile(filepath.Join(out, name)); err != nil || !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %q (%v)", name, want, err)
		}
	}
	if pids := daemonsWith(filepath.Join(os.TempDir(), "braid-lab-"), "competitor.toml"); len(pids) > 0 {
		t.Errorf("competing braid client(s) %v still running after the run", pids)
	}
}

// daemonsWith lists the processes whose command line has an argument
// starting with dir and ending with name.
func daemonsWith(dir, name string) (pids []string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		data, _ := os.ReadFile(f)
		for _, arg := range strings.Split(string(data), "\x00") {
			if strings.HasPrefix(arg, dir) && strings.HasSuffix(arg, name) {
				pids = append(pids, filepath.Base(filepath.Dir(f)))
			}
		}
	}
	return pids
}
