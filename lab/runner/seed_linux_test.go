package runner

import (
	"fmt"
	"testing"

	"github.com/braid-vpn/braid/lab/results"
)

// TestRunSameSeed runs one small campaign twice with one seed: every
// repetition must meet the same loss decisions in both runs (the emulators'
// loss marks agree), the two transports of a repetition the same ones
// (paired), and the two repetitions different ones.
func TestRunSameSeed(t *testing.T) {
	const text = `
[experiment]
size = "1MiB"
reps = 2
[[transports]]
name = "direct"
[[transports]]
name = "mptcp-direct"
[sweep]
loss = ["random 5%"]
`
	opt := Options{Prefix: "braid-rsd", Emulator: "userspace", Seed: 20261127}
	a := runWith(t, "same-seed.toml", text, opt)
	b := runWith(t, "same-seed.toml", text, opt)
	for _, run := range []*results.Run{a, b} {
		if len(run.Points) != 2 {
			t.Fatalf("%d points, want 2", len(run.Points))
		}
		for _, p := range run.Points {
			if p.Error != "" || len(p.Samples) != 2 {
				t.Fatalf("%s: error %q, %d samples", p.Transport, p.Error, len(p.Samples))
			}
		}
	}
	for pi := range a.Points {
		for rep := range 2 {
			x, y := &a.Points[pi].Samples[rep], &b.Points[pi].Samples[rep]
			sameLosses(t, fmt.Sprintf("run 1 and run 2, %s rep %d", a.Points[pi].Transport, rep), x, y)
		}
	}
	for rep := range 2 {
		sameLosses(t, fmt.Sprintf("direct and mptcp-direct, rep %d", rep), &a.Points[0].Samples[rep], &a.Points[1].Samples[rep])
	}
	r0, r1 := &a.Points[0].Samples[0], &a.Points[0].Samples[1]
	if r0.Seed == r1.Seed {
		t.Errorf("repetitions 0 and 1 were seeded alike (%d)", r0.Seed)
	}
	for k, m0 := range r0.FirstLosses {
		if n, same := commonPrefix(m0, r1.FirstLosses[k]); n >= 8 && same {
			t.Errorf("%s: repetitions 0 and 1 lost the same frames: %v", k, m0[:n])
		}
	}
}

// sameLosses checks that two samples were seeded alike and that every link
// direction both saw lose frames lost the same ones, at least 8 of them on
// one direction.
func sameLosses(t *testing.T, what string, x, y *results.Sample) {
	t.Helper()
	if x.Seed == 0 || x.Seed != y.Seed {
		t.Errorf("%s: seeds %d and %d", what, x.Seed, y.Seed)
	}
	most := 0
	for k, mx := range x.FirstLosses {
		n, same := commonPrefix(mx, y.FirstLosses[k])
		if !same {
			t.Errorf("%s: %s lost %v and %v", what, k, mx, y.FirstLosses[k])
		}
		most = max(most, n)
	}
	if most < 8 {
		t.Errorf("%s: at most %d losses to compare (%v, %v)", what, most, x.FirstLosses, y.FirstLosses)
	}
}

// commonPrefix returns the length of the shorter list and whether the other
// starts with it.
func commonPrefix(a, b []uint64) (int, bool) {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return n, false
		}
	}
	return n, true
}
