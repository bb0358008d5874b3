package runner

import "testing"

// TestCompetingFlows runs a direct download over the primary path with one
// competing TCP download on the same 10 Mbit/s path: the two share it, so
// each gets a fraction and together they do not exceed the link.
func TestCompetingFlows(t *testing.T) {
	run := runInNamespaces(t, "competing.toml", "braid-rct", `
[experiment]
size = "2MiB"
reps = 1
competing = 1
[[transports]]
name = "direct"
`)
	p := run.Points[0]
	if p.Error != "" || p.Competing == nil || p.Competing.N != 1 {
		t.Fatalf("point: error %q, competing %+v", p.Error, p.Competing)
	}
	for _, smp := range p.Samples {
		own, other := smp.GoodputMbps, *smp.CompetingMbps
		t.Logf("rep %d: measured %.2f Mbit/s, competing %.2f Mbit/s", smp.Rep, own, other)
		if own > 8 || other < 1.5 || own+other > 10.2 || own+other < 7 {
			t.Errorf("rep %d: measured %.2f + competing %.2f Mbit/s; want them to share the 10 Mbit/s path", smp.Rep, own, other)
		}
	}
}
