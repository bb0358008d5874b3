package main

import (
	"testing"
	"time"
)

// TestLabTraceSmoke runs trace-smoke.toml: two paths whose download
// capacity follows a generated trace. Every download must report the
// goodput its paths' traces offered, stay below it (the emulator cannot
// carry more than its opportunities) and use a fair part of it; braid, on
// both paths, must be offered about twice what direct is on one.
func TestLabTraceSmoke(t *testing.T) {
	labTestBraid(t, "needs root: builds the lab's network namespaces and starts braid daemons")
	res, _ := runCommitted(t, "trace-smoke.toml", 3*time.Minute, "--seed", "7")
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
