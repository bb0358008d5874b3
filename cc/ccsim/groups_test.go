package ccsim

import (
	"testing"
	"time"
)

// disjointGroups: path A (10 Mbit/s, 20 ms) and path B (10 Mbit/s, 100 ms),
// each shared with one comp flow; the multipath flow (alg) has one subflow on
// each, in the given groups. It returns the mean goodput of each subflow, and
// what a single-path alg flow gets in its place on A and on B.
func disjointGroups(t testing.TB, alg, comp string, groups []uint32) (mpA, mpB, onA, onB float64) {
	build := func(seed uint64) (*Sim, *Link, *Link) {
		s := New(Config{Seed: seed, PaceTick: paceTick})
		a := s.AddLink(LinkConfig{Name: "A", Rate: 10e6, Delay: 10 * time.Millisecond, Buffer: bdp(10e6, 20*time.Millisecond)})
		b := s.AddLink(LinkConfig{Name: "B", Rate: 10e6, Delay: 50 * time.Millisecond, Buffer: bdp(10e6, 100*time.Millisecond)})
		mustFlow(t, s, FlowConfig{Name: "compA", CC: comp, Routes: routes(1, a), Start: start(s)})
		mustFlow(t, s, FlowConfig{Name: "compB", CC: comp, Routes: routes(1, b), Start: start(s)})
		return s, a, b
	}
	for _, seed := range seeds {
		s, a, b := build(seed)
		f := mustFlow(t, s, FlowConfig{Name: "mp", CC: alg, Routes: [][]*Link{{a}, {b}}, Groups: groups, Start: start(s)})
		s.Run(runFor)
		mpA += f.Goodput(0, warmup, runFor)
		mpB += f.Goodput(1, warmup, runFor)
		for i := range 2 {
			s, a, b = build(seed)
			l := []*Link{a, b}[i]
			f = mustFlow(t, s, FlowConfig{Name: "sp", CC: alg, Routes: routes(1, l), Start: start(s)})
			s.Run(runFor)
			if i == 0 {
				onA += f.Goodput(-1, warmup, runFor)
			} else {
				onB += f.Goodput(-1, warmup, runFor)
			}
		}
	}
	k := float64(len(seeds))
	return mpA / k, mpB / k, onA / k, onB / k
}

// Paths in different groups (Path.SetGroup) through different bottlenecks
// are not coupled: each subflow gets what one flow of the same algorithm gets
// in its place. In one group (the default) the coupled algorithms hold back
// on the disjoint paths, as TestDisjointPathsBeatBestPath shows; here LIA's
// group-0 total is the control that the groups change something.
func TestGroupsDecoupleDisjointBottlenecks(t *testing.T) {
	for _, tc := range []struct{ alg, comp string }{{"lia", "reno"}, {"olia", "reno"}, {"rate", "cubic"}} {
		a, b, onA, onB := disjointGroups(t, tc.alg, tc.comp, []uint32{0, 1})
		t.Logf("%-4s vs %-5s, groups 0/1: A %.2f (alone %.2f), B %.2f (alone %.2f) Mbit/s", tc.alg, tc.comp, a/1e6, onA/1e6, b/1e6, onB/1e6)
		if a < 0.85*onA || a > 1.15*onA || b < 0.85*onB || b > 1.15*onB {
			t.Errorf("%s: subflows %.2f, %.2f Mbit/s; single flows %.2f, %.2f: want each within 15 %%", tc.alg, a/1e6, b/1e6, onA/1e6, onB/1e6)
		}
		if tc.alg == "lia" {
			ca, cb, _, _ := disjointGroups(t, tc.alg, tc.comp, nil)
			t.Logf("lia  vs reno,  one group: A %.2f, B %.2f Mbit/s", ca/1e6, cb/1e6)
			if ca+cb > 0.9*(a+b) {
				t.Errorf("lia in one group %.2f Mbit/s, in two %.2f: the groups changed nothing", (ca+cb)/1e6, (a+b)/1e6)
			}
		}
	}
}

// Both subflows in one (explicit, non-zero) group through one bottleneck take
// about one flow's share beside a Reno or CUBIC flow, as in group 0.
func TestGroupSharedBottleneck(t *testing.T) {
	for _, tc := range []struct{ alg, comp string }{{"lia", "reno"}, {"rate", "reno"}, {"rate", "cubic"}} {
		var ratio float64
		for _, seed := range seeds {
			s := New(Config{Seed: seed, PaceTick: paceTick})
			rtt := 40 * time.Millisecond
			l := s.AddLink(LinkConfig{Name: "bn", Rate: 10e6, Delay: rtt / 2, Buffer: bdp(10e6, rtt)})
			mp := mustFlow(t, s, FlowConfig{Name: "mp", CC: tc.alg, Routes: routes(2, l), Groups: []uint32{5, 5}, Start: start(s)})
			tcp := mustFlow(t, s, FlowConfig{Name: "tcp", CC: tc.comp, Routes: routes(1, l), Start: start(s)})
			s.Run(runFor)
			ratio += mp.Goodput(-1, warmup, runFor) / tcp.Goodput(-1, warmup, runFor)
		}
		ratio /= float64(len(seeds))
		t.Logf("%-4s ×2 in group 5 vs %-5s: %.2f of the competitor's goodput", tc.alg, tc.comp, ratio)
		hi := 1.3
		if tc.alg == "rate" {
			hi = maxShare[tc.comp] // the paced window's advantage in the simulator
		}
		if ratio < 0.7 || ratio > hi {
			t.Errorf("%s vs %s: ratio %.2f, want 0.7–%.2f", tc.alg, tc.comp, ratio, hi)
		}
	}
}
