package ccsim

import (
	"math"
	"testing"
	"time"
)

// Scenario helpers shared by the property tests. Every scenario runs `runFor`
// simulated seconds and measures after `warmup`, over several seeds with random
// start times in the first second, and reports the mean over seeds.

const (
	runFor = 100 * time.Second
	warmup = 20 * time.Second
)

var seeds = []uint64{1, 2, 3, 4, 5}

func mustFlow(t testing.TB, s *Sim, fc FlowConfig) *Flow {
	t.Helper()
	f, err := s.AddFlow(fc)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// start returns a random start time in [0, 1s).
func start(s *Sim) time.Duration { return time.Duration(s.Rand().Int64N(int64(time.Second))) }

// bdp returns the bandwidth-delay product in bytes of rate (bit/s) and rtt.
func bdp(rate float64, rtt time.Duration) int { return int(rate / 8 * rtt.Seconds()) }

func routes(n int, l ...*Link) [][]*Link {
	r := make([][]*Link, n)
	for i := range r {
		r[i] = l
	}
	return r
}

// sharedRatio: one multipath flow with n subflows (alg) and one single-path
// competitor (comp) through one 10 Mbit/s bottleneck, 40 ms RTT, buffer one
// BDP. It returns the mean over seeds of MP goodput / competitor goodput, and
// the mean link utilization.
func sharedRatio(t testing.TB, alg string, n int, comp string) (ratio, util float64) {
	for _, seed := range seeds {
		s := New(Config{Seed: seed})
		rtt := 40 * time.Millisecond
		l := s.AddLink(LinkConfig{Name: "bottleneck", Rate: 10e6, Delay: rtt / 2, Buffer: bdp(10e6, rtt)})
		mp := mustFlow(t, s, FlowConfig{Name: "mp", CC: alg, Routes: routes(n, l), Start: start(s)})
		tcp := mustFlow(t, s, FlowConfig{Name: "tcp", CC: comp, Routes: routes(1, l), Start: start(s)})
		s.Run(runFor)
		a, b := mp.Goodput(-1, warmup, runFor), tcp.Goodput(-1, warmup, runFor)
		ratio += a / b
		util += (a + b) / 10e6
	}
	return ratio / float64(len(seeds)), util / float64(len(seeds))
}

// disjoint: path A (10 Mbit/s, 20 ms) and path B (10 Mbit/s, 100 ms), each
// shared with one Reno flow; the multipath flow (alg) has one subflow on each.
// It returns the MP flow's mean goodput, and what a single Reno flow gets in
// its place on A and on B (the best single path is the larger).
func disjoint(t testing.TB, alg string) (mp, onA, onB float64) {
	type setup struct{ rttA, rttB time.Duration }
	st := setup{20 * time.Millisecond, 100 * time.Millisecond}
	build := func(seed uint64) (*Sim, *Link, *Link) {
		s := New(Config{Seed: seed})
		a := s.AddLink(LinkConfig{Name: "A", Rate: 10e6, Delay: st.rttA / 2, Buffer: bdp(10e6, st.rttA)})
		b := s.AddLink(LinkConfig{Name: "B", Rate: 10e6, Delay: st.rttB / 2, Buffer: bdp(10e6, st.rttB)})
		mustFlow(t, s, FlowConfig{Name: "tcpA", CC: "reno", Routes: routes(1, a), Start: start(s)})
		mustFlow(t, s, FlowConfig{Name: "tcpB", CC: "reno", Routes: routes(1, b), Start: start(s)})
		return s, a, b
	}
	for _, seed := range seeds {
		s, a, b := build(seed)
		f := mustFlow(t, s, FlowConfig{Name: "mp", CC: alg, Routes: [][]*Link{{a}, {b}}, Start: start(s)})
		s.Run(runFor)
		mp += f.Goodput(-1, warmup, runFor)

		s, a, _ = build(seed)
		f = mustFlow(t, s, FlowConfig{Name: "sp", CC: "reno", Routes: routes(1, a), Start: start(s)})
		s.Run(runFor)
		onA += f.Goodput(-1, warmup, runFor)

		s, _, b = build(seed)
		f = mustFlow(t, s, FlowConfig{Name: "sp", CC: "reno", Routes: routes(1, b), Start: start(s)})
		s.Run(runFor)
		onB += f.Goodput(-1, warmup, runFor)
	}
	k := float64(len(seeds))
	return mp / k, onA / k, onB / k
}

// congested: two equal disjoint paths (10 Mbit/s, 40 ms); path A carries kA
// background Reno flows, path B kB. It returns the mean fraction of the MP
// flow's goodput that went over A, and its total goodput.
func congested(t testing.TB, alg string, kA, kB int) (shareA, total float64) {
	for _, seed := range seeds {
		s := New(Config{Seed: seed})
		rtt := 40 * time.Millisecond
		a := s.AddLink(LinkConfig{Name: "A", Rate: 10e6, Delay: rtt / 2, Buffer: bdp(10e6, rtt)})
		b := s.AddLink(LinkConfig{Name: "B", Rate: 10e6, Delay: rtt / 2, Buffer: bdp(10e6, rtt)})
		for i := 0; i < kA; i++ {
			mustFlow(t, s, FlowConfig{CC: "reno", Routes: routes(1, a), Start: start(s)})
		}
		for i := 0; i < kB; i++ {
			mustFlow(t, s, FlowConfig{CC: "reno", Routes: routes(1, b), Start: start(s)})
		}
		f := mustFlow(t, s, FlowConfig{Name: "mp", CC: alg, Routes: [][]*Link{{a}, {b}}, Start: start(s)})
		s.Run(runFor)
		ga, gb := f.Goodput(0, warmup, runFor), f.Goodput(1, warmup, runFor)
		shareA += ga / (ga + gb)
		total += ga + gb
	}
	k := float64(len(seeds))
	return shareA / k, total / k
}

// flappiness: a multipath flow alone on two identical disjoint paths (10 Mbit/s,
// 40 ms, buffer one BDP, random loss p on each). From the window samples (every
// 100 ms after the warmup) it returns the fraction of time one subflow held less
// than 10 % of the total window, the mean share of subflow 0, and the number of
// times the dominant subflow changed (one holding > 90 % of the window, then the
// other).
func flappiness(t testing.TB, alg string, loss float64) (starved, share0, flips float64) {
	for _, seed := range seeds {
		s := New(Config{Seed: seed})
		rtt := 40 * time.Millisecond
		a := s.AddLink(LinkConfig{Name: "A", Rate: 10e6, Delay: rtt / 2, Buffer: bdp(10e6, rtt), Loss: loss})
		b := s.AddLink(LinkConfig{Name: "B", Rate: 10e6, Delay: rtt / 2, Buffer: bdp(10e6, rtt), Loss: loss})
		f := mustFlow(t, s, FlowConfig{Name: "mp", CC: alg, Routes: [][]*Link{{a}, {b}}, Start: start(s)})
		s.Run(runFor)
		st, sh, fl := windowBalance(s, f, warmup)
		starved += st
		share0 += sh
		flips += fl
	}
	k := float64(len(seeds))
	return starved / k, share0 / k, flips / k
}

// windowBalance evaluates the window samples of a two-subflow flow from `from` on.
func windowBalance(s *Sim, f *Flow, from time.Duration) (starved, share0, flips float64) {
	i0 := s.sampleIndex(from)
	n, low := 0, 0
	dominant := -1
	for _, w := range f.CwndSamples[i0:] {
		tot := w[0] + w[1]
		if tot <= 0 {
			continue
		}
		x := w[0] / tot
		n++
		share0 += x
		if math.Min(x, 1-x) < 0.1 {
			low++
		}
		d := -1
		if x > 0.9 {
			d = 0
		} else if x < 0.1 {
			d = 1
		}
		if d >= 0 {
			if dominant >= 0 && d != dominant {
				flips++
			}
			dominant = d
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return float64(low) / float64(n), share0 / float64(n), flips
}

// vegasQueue: one multipath flow (alg) with two subflows alone through one
// 10 Mbit/s bottleneck with a large buffer (200 packets, 40 ms RTT). It returns
// the mean standing queue in packets, the link utilization and the tail drops
// after the warmup.
func vegasQueue(t testing.TB, alg string) (queuePkts, util float64, drops uint64) {
	for _, seed := range seeds {
		s := New(Config{Seed: seed})
		rtt := 40 * time.Millisecond
		l := s.AddLink(LinkConfig{Name: "bn", Rate: 10e6, Delay: rtt / 2, Buffer: 200 * 1400})
		f := mustFlow(t, s, FlowConfig{Name: "mp", CC: alg, Routes: routes(2, l), Start: start(s)})
		var d0 uint64
		s.At(warmup, func() { d0 = l.QueueDrops })
		s.Run(runFor)
		queuePkts += l.MeanQueue(warmup, runFor) / 1400
		util += f.Goodput(-1, warmup, runFor) / 10e6
		drops += l.QueueDrops - d0
	}
	k := float64(len(seeds))
	return queuePkts / k, util / k, drops
}
