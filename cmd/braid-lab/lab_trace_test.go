package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/scenarios"
)

// TestLabTraceSmoke runs trace-smoke.toml: two paths whose download
// capacity follows a generated trace. Every download must report the
// goodput its paths' traces offered, stay below it (the emulator cannot
// carry more than its opportunities) and use a fair part of it; braid, on
// both paths, must be offered about twice what direct is on one.
func TestLabTraceSmoke(t *testing.T) {
	labTestBraid(t, "needs root: builds the lab's network namespaces and starts braid daemons")
	dir := t.TempDir()
	data, err := scenarios.Read("trace-smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "trace-smoke.toml")
	os.WriteFile(file, data, 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"lab", "run", file, "--json", "--out", filepath.Join(dir, "out"), "--seed", "7"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res results.Run
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not a results.Run: %v", err)
	}
	offered := map[string]float64{}
	for _, p := range res.Points {
		if p.Error != "" || len(p.Samples) != 2 || p.Offered == nil || p.OfferedUse == nil {
			t.Fatalf("%s: %d samples, error %q, offered %v", p.Label, len(p.Samples), p.Error, p.Offered)
		}
		t.Logf("%-8s %5.2f Mbit/s of %5.2f offered (%.2f)", p.Label, p.Goodput.Mean, p.Offered.Mean, p.OfferedUse.Mean)
		for _, s := range p.Samples {
			if u := s.GoodputMbps / *s.OfferedMbps; u > 1.05 || u < 0.5 {
				t.Errorf("%s rep %d: goodput %.2f Mbit/s is %.2f× the offered %.2f", p.Label, s.Rep, s.GoodputMbps, u, *s.OfferedMbps)
			}
		}
		offered[p.Transport] = p.Offered.Mean
	}
	if r := offered["braid"] / offered["direct"]; r < 1.5 || r > 2.5 {
		t.Errorf("braid was offered %.2f× what direct was, want about 2 (two paths)", r)
	}
}
